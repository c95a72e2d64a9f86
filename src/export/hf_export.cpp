// marin.cpp checkpoint ⇄ Hugging Face layout (see hf_export.hpp and docs/export.md).
#include "export/hf_export.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <bit>
#include <cstring>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "core/buffer.hpp"
#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/json_file.hpp"
#include "data/tokenizer/tokenizer.hpp"
#include "embed/modeling_marin.inc"
#include "model/params.hpp"
#include "train/checkpoint.hpp"
#include "train/finite_check.hpp"
#include "train/safetensors.hpp"

namespace marin::hf {
namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

const std::string& modeling_source() {
  static const std::string text(embed::modeling_marin, sizeof(embed::modeling_marin) - 1);
  return text;
}

TensorName hf_name(const std::string& n) {
  // Tensors outside the layers, then the per-layer ones under "layers.<i>.".
  static const std::map<std::string, TensorName> top = {
      {"embed.weight", {"model.embed_tokens.weight", false}},
      {"embed.norm.weight", {"model.embed_norm.weight", false}},
      {"embed.gnorm.down", {"model.embed_gnorm.down_proj.weight", true}},
      {"embed.gnorm.up", {"model.embed_gnorm.up_proj.weight", true}},
      {"final.norm.weight", {"model.norm.weight", false}},
      {"final.gnorm.down", {"model.final_gnorm.down_proj.weight", true}},
      {"final.gnorm.up", {"model.final_gnorm.up_proj.weight", true}},
      {"lm_head", {"lm_head.weight", true}},
  };
  static const std::map<std::string, TensorName> layer = {
      {"attn_norm.weight", {"attn_norm.weight", false}},
      {"attn_gnorm.down", {"attn_gnorm.down_proj.weight", true}},
      {"attn_gnorm.up", {"attn_gnorm.up_proj.weight", true}},
      {"attn.wq", {"self_attn.q_proj.weight", true}},
      {"attn.wk", {"self_attn.k_proj.weight", true}},
      {"attn.wv", {"self_attn.v_proj.weight", true}},
      {"attn.wo", {"self_attn.o_proj.weight", true}},
      {"attn.gate", {"self_attn.head_gate.weight", true}},
      {"attn.sconv_k", {"self_attn.sconv_k.weight", false}},
      {"sconv_attn", {"sconv_attn.weight", false}},
      {"mlp_norm.weight", {"mlp_norm.weight", false}},
      {"mlp_gnorm.down", {"mlp_gnorm.down_proj.weight", true}},
      {"mlp_gnorm.up", {"mlp_gnorm.up_proj.weight", true}},
      {"moe.router", {"moe.router.weight", true}},
      {"moe.router_bias", {"moe.router_bias", false}},
      {"moe.latent_down", {"moe.latent_down.weight", true}},
      {"moe.latent_norm", {"moe.latent_norm.weight", false}},
      {"moe.latent_up", {"moe.latent_up.weight", true}},
      // Routed experts stay stacked [E, in, out] (applied as x @ W_e), as fused-expert MoE
      // implementations store them.
      {"moe.experts.w_gate", {"moe.experts.gate_proj", false}},
      {"moe.experts.w_up", {"moe.experts.up_proj", false}},
      {"moe.experts.w_down", {"moe.experts.down_proj", false}},
      {"sconv_mlp", {"sconv_mlp.weight", false}},
  };
  static const std::map<std::string, std::string> shared = {
      {"w_gate", "gate_proj"}, {"w_up", "up_proj"}, {"w_down", "down_proj"}};
  if (auto it = top.find(n); it != top.end()) return it->second;
  // "<digits>." after a prefix: the index and the rest of the name.
  auto index = [](const std::string& s, size_t at, std::string& idx, std::string& rest) {
    const size_t dot = s.find('.', at);
    if (dot == std::string::npos || dot == at) return false;
    for (size_t i = at; i < dot; ++i)
      if (s[i] < '0' || s[i] > '9') return false;
    idx = s.substr(at, dot - at);
    rest = s.substr(dot + 1);
    return true;
  };
  std::string li, rest;
  if (n.rfind("layers.", 0) == 0 && index(n, 7, li, rest)) {
    const std::string p = "model.layers." + li + ".";
    if (auto it = layer.find(rest); it != layer.end())
      return {p + it->second.name, it->second.transpose};
    std::string j, w;
    if (rest.rfind("shared.", 0) == 0 && index(rest, 7, j, w))
      if (auto it = shared.find(w); it != shared.end())
        return {p + "shared_experts." + j + "." + it->second + ".weight", true};
  }
  fail("tensor '{}' has no Hugging Face name (hf_export.cpp's table is missing it)", n);
}

namespace {

std::vector<int64_t> stored_shape(const ParamInfo& p, bool transpose) {
  if (!transpose) return p.shape;
  MARIN_CHECK(p.shape.size() == 2, "tensor '{}': only matrices are transposed, shape is [{}]",
              p.name, fmt::join(p.shape, ", "));
  return {p.shape[1], p.shape[0]};
}

uint16_t to_bf16(float f) {  // round to nearest even (the values are finite: load_params checks)
  const uint32_t u = std::bit_cast<uint32_t>(f);
  return uint16_t((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

// One tensor of the export: its PyTorch name, shape and little-endian bytes.
struct Stored {
  std::string name;
  std::vector<int64_t> shape;
  std::string bytes;
};

Stored convert(const ParamInfo& p, const float* params, bool bf16, bool saturate) {
  const TensorName t = hf_name(p.name);
  Stored s{t.name, stored_shape(p, t.transpose), {}};
  const float* src = params + p.offset;
  std::vector<float> tmp;
  if (t.transpose) {
    const int64_t r = p.shape[0], c = p.shape[1];
    tmp.resize(size_t(p.size));
    for (int64_t i = 0; i < r; ++i)
      for (int64_t j = 0; j < c; ++j) tmp[size_t(j * r + i)] = src[i * c + j];
    src = tmp.data();
  }
  if (bf16) {
    s.bytes.resize(size_t(p.size) * 2);
    for (int64_t i = 0; i < p.size; ++i) {
      uint16_t h = to_bf16(src[i]);
      if ((h & 0x7fffu) == 0x7f80u) {  // rounded to ±inf (the values are finite)
        if (!saturate)
          fail(
              "tensor '{}': element {} is {}, beyond bf16's largest finite value (±3.3895e38): "
              "export it as fp32, or pass --bf16-overflow saturate",
              p.name, i, src[i]);
        h = uint16_t((h & 0x8000u) | 0x7f7fu);
      }
      std::memcpy(s.bytes.data() + 2 * i, &h, 2);
    }
  } else {
    s.bytes.assign(reinterpret_cast<const char*>(src), size_t(p.size) * 4);
  }
  return s;
}

// A safetensors file of the given tensors in order, with the metadata loaders expect ("pt").
void write_shard(const std::string& path, const std::vector<const Stored*>& ts, const char* dtype) {
  std::vector<TensorView> views;
  for (const Stored* t : ts) views.push_back({t->name, t->shape, nullptr, dtype, t->bytes});
  write_safetensors(path, views, {{"format", "pt"}});
}

void require_empty_dir(const std::string& dir, const char* what) {
  std::error_code ec;
  if (fs::exists(dir) && !(fs::is_directory(dir) && fs::is_empty(dir)))
    fail("{} '{}' exists and is not an empty directory (choose a new one)", what, dir);
  fs::create_directories(dir, ec);
  if (ec) fail("cannot create {} '{}': {}", what, dir, ec.message());
}

std::string dump(const ojson& j) {
  return j.dump(2) + "\n";
}

}  // namespace

ExportSummary export_hf(const std::string& ck, const std::string& out, const ExportOptions& o) {
  if (o.dtype != "fp32" && o.dtype != "bf16") fail("--dtype '{}': expected fp32 or bf16", o.dtype);
  if (o.bf16_overflow != "error" && o.bf16_overflow != "saturate")
    fail("--bf16-overflow '{}': expected error or saturate", o.bf16_overflow);
  if (o.max_shard_bytes <= 0) fail("max shard size {} must be positive", o.max_shard_bytes);
  const bool bf16 = o.dtype == "bf16";
  const ModelConfig c = load_config(ck);
  const ParamTable table(c);
  Buffer<float> params(table.total());
  load_params(ck, table, params.data());

  std::optional<Tokenizer> tok;
  std::string tok_path = o.tokenizer;
  if (tok_path.empty() && fs::exists(ck + "/tokenizer.json")) tok_path = ck + "/tokenizer.json";
  if (!tok_path.empty()) {
    tok = Tokenizer::load(tok_path);
    if (tok->vocab_size() > uint64_t(c.vocab_size))
      fail("{}: the tokenizer has {} ids but the model's vocab_size is {}", tok_path,
           tok->vocab_size(), c.vocab_size);
  }
  require_empty_dir(out, "export directory");

  ExportSummary sum;
  std::vector<Stored> stored;
  for (const ParamInfo& p : table.params())
    stored.push_back(convert(p, params.data(), bf16, o.bf16_overflow == "saturate"));
  // Shards: tensors in table order, a new shard when the next tensor would pass the limit.
  std::vector<std::vector<const Stored*>> shards(1);
  int64_t in_shard = 0;
  for (const Stored& s : stored) {
    const int64_t b = int64_t(s.bytes.size());
    if (!shards.back().empty() && in_shard + b > o.max_shard_bytes)
      shards.emplace_back(), in_shard = 0;
    shards.back().push_back(&s);
    in_shard += b;
    sum.bytes += b;
  }
  const char* dtype = bf16 ? "BF16" : "F32";
  const size_t n = shards.size();
  std::map<std::string, std::string> weight_map;
  for (size_t i = 0; i < n; ++i) {
    const std::string file =
        n == 1 ? "model.safetensors" : fmt::format("model-{:05d}-of-{:05d}.safetensors", i + 1, n);
    write_shard(out + "/" + file, shards[i], dtype);
    for (const Stored* s : shards[i]) weight_map[s->name] = file;
    sum.files.push_back(file);
  }
  if (n > 1) {
    ojson idx;
    idx["metadata"] = {{"total_size", sum.bytes}};
    idx["weight_map"] = ojson(weight_map);
    write_file_atomic(out + "/model.safetensors.index.json", dump(idx));
    sum.files.push_back("model.safetensors.index.json");
  }
  sum.tensors = int64_t(stored.size());
  sum.shards = int64_t(n);

  auto id = [&](std::optional<uint32_t> v) { return v ? ojson(*v) : ojson(nullptr); };
  ojson cfg;
  cfg["architectures"] = {"MarinForCausalLM"};
  cfg["model_type"] = "marin";
  cfg["auto_map"] = {{"AutoConfig", "modeling_marin.MarinConfig"},
                     {"AutoModelForCausalLM", "modeling_marin.MarinForCausalLM"}};
  const nlohmann::json fields = c.to_json();
  for (auto& [k, v] : fields.items()) cfg[k] = v;  // every recipe field (sorted by name)
  cfg["bos_token_id"] = id(tok ? tok->bos() : std::nullopt);
  cfg["eos_token_id"] = id(tok ? tok->eos() : std::nullopt);
  cfg["pad_token_id"] = id(tok ? tok->pad() : std::nullopt);
  cfg["tie_word_embeddings"] = false;
  cfg["torch_dtype"] = bf16 ? "bfloat16" : "float32";
  cfg["marin_export_version"] = 1;
  write_file_atomic(out + "/config.json", dump(cfg));

  ojson gen;
  gen["bos_token_id"] = cfg["bos_token_id"];
  gen["eos_token_id"] = cfg["eos_token_id"];
  gen["pad_token_id"] = cfg["pad_token_id"];
  gen["max_length"] = c.seq_len;
  gen["do_sample"] = false;
  write_file_atomic(out + "/generation_config.json", dump(gen));
  write_file_atomic(out + "/modeling_marin.py", modeling_source());
  sum.files.insert(sum.files.end(), {"config.json", "generation_config.json", "modeling_marin.py"});

  if (tok) {
    write_file_atomic(out + "/tokenizer.json", tok->to_json());
    auto text = [&](std::optional<uint32_t> v) {
      return v ? ojson(std::string(tok->token_bytes(*v))) : ojson(nullptr);
    };
    ojson tc;
    tc["tokenizer_class"] = "PreTrainedTokenizerFast";
    tc["bos_token"] = text(tok->bos());
    tc["eos_token"] = text(tok->eos());
    tc["pad_token"] = text(tok->pad());
    tc["add_bos_token"] = false;
    tc["add_eos_token"] = false;
    tc["clean_up_tokenization_spaces"] = false;
    tc["model_max_length"] = c.seq_len;
    write_file_atomic(out + "/tokenizer_config.json", dump(tc));
    sum.files.insert(sum.files.end(), {"tokenizer.json", "tokenizer_config.json"});
    sum.tokenizer = true;
  }
  return sum;
}

void import_hf(const std::string& dir, const std::string& out) {
  const std::string cfg_path = dir + "/config.json";
  if (!fs::exists(cfg_path)) fail("{}: missing (is '{}' a Hugging Face export?)", cfg_path, dir);
  const nlohmann::json j = load_json(cfg_path);
  if (!j.is_object() || j.value("model_type", "") != "marin")
    fail("{}: model_type is {}, expected \"marin\" (a marin export)", cfg_path,
         j.is_object() && j.contains("model_type") ? j["model_type"].dump() : "missing");
  nlohmann::json fields = nlohmann::json::object();
  for (const std::string& k : ModelConfig::field_names()) {
    if (!j.contains(k)) fail("{}: missing config field '{}'", cfg_path, k);
    fields[k] = j[k];
  }
  const ModelConfig c = ModelConfig::from_json(fields, cfg_path);
  try {
    c.validate();
  } catch (const Error& e) {
    fail("{}: {}", cfg_path, e.what());
  }
  const ParamTable table(c);

  // The shard files: the index's, or the one model.safetensors.
  std::map<std::string, std::string> weight_map;
  std::vector<std::string> files;
  const std::string index = dir + "/model.safetensors.index.json";
  if (fs::exists(index)) {
    const nlohmann::json idx = load_json(index);
    if (!idx.contains("weight_map") || !idx["weight_map"].is_object())
      fail("{}: weight_map is missing or not an object", index);
    std::set<std::string> seen;
    for (auto& [name, file] : idx["weight_map"].items()) {
      if (!file.is_string()) fail("{}: weight_map['{}'] is not a file name", index, name);
      weight_map[name] = file.get<std::string>();
      if (seen.insert(weight_map[name]).second) files.push_back(weight_map[name]);
    }
  } else {
    files.push_back("model.safetensors");
  }
  std::vector<SafetensorsFile> shards;
  std::map<std::string, std::pair<const Tensor*, std::string>> found;  // name → tensor, file
  shards.reserve(files.size());
  for (const std::string& f : files) {
    shards.push_back(read_safetensors(dir + "/" + f));
    const SafetensorsFile& s = shards.back();
    auto fmt_it = s.metadata.find("format");
    if (fmt_it == s.metadata.end() || fmt_it->second != "pt")
      fail("{}: __metadata__.format is '{}', expected 'pt' (a Hugging Face export)", s.path,
           fmt_it == s.metadata.end() ? "" : fmt_it->second);
    for (const std::string& name : s.names) {
      if (!found.emplace(name, std::make_pair(&s.tensors.at(name), f)).second)
        fail("{}: tensor '{}' is also in {}", s.path, name, found[name].second);
      if (!weight_map.empty() && weight_map[name] != f)
        fail("{}: tensor '{}' is in {} but the index names '{}'", index, name, f, weight_map[name]);
    }
  }
  Buffer<float> params(table.total());
  std::set<std::string> used;
  for (const ParamInfo& p : table.params()) {
    const TensorName t = hf_name(p.name);
    auto it = found.find(t.name);
    if (it == found.end()) fail("{}: no tensor '{}' (marin's '{}')", dir, t.name, p.name);
    const Tensor& src = *it->second.first;
    const std::vector<int64_t> want = stored_shape(p, t.transpose);
    if (src.shape != want)
      fail("{}/{}: tensor '{}' has shape [{}], expected [{}]", dir, it->second.second, t.name,
           fmt::join(src.shape, ", "), fmt::join(want, ", "));
    float* dst = params.data() + p.offset;
    if (t.transpose) {
      const int64_t r = p.shape[0], cc = p.shape[1];
      for (int64_t i = 0; i < r; ++i)
        for (int64_t k = 0; k < cc; ++k) dst[i * cc + k] = src.data[size_t(k * r + i)];
    } else {
      std::copy(src.data.begin(), src.data.end(), dst);
    }
    used.insert(t.name);
  }
  for (auto& [name, where] : found)
    if (!used.count(name))
      fail("{}/{}: unexpected tensor '{}' (not part of this config)", dir, where.second, name);
  require_finite_params(table, params.data(), dir, false);

  require_empty_dir(out, "checkpoint directory");
  save_model(out, c, table, params.data());
  const std::string tok = dir + "/tokenizer.json";
  if (fs::exists(tok)) {
    const std::string text = read_file(tok);
    (void)Tokenizer::from_json_text(text, tok);  // refuse a tokenizer marin cannot read
    write_file_atomic(out + "/tokenizer.json", text);
  }
}

}  // namespace marin::hf
