#include "model/config.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <charconv>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/toml_file.hpp"

namespace marin {
namespace {

// One table drives set(), to_json(), from_json(), validate() and field_names(), so a field and
// its range are declared once. Ranges are generous (the 535B run is far inside each) and keep every
// product the model forms well inside 64 bits or caught by checked arithmetic (core/limits.hpp);
// real ranges also exclude NaN and ±inf.
struct Field {
  enum Kind { Int, Real, Sites } kind;
  std::function<void*(ModelConfig&)> ptr;
  double lo = 0, hi = 0;
  bool open_lo = false;  // (lo, hi] instead of [lo, hi]
};

const std::map<std::string, Field>& fields() {
  constexpr double M = 1 << 20;  // widths
#define F(name, kind, lo, hi, open)                                              \
  {                                                                              \
#name, {                                                                     \
      Field::kind, [](ModelConfig& c) -> void* { return &c.name; }, lo, hi, open \
    }                                                                            \
  }
  static const std::map<std::string, Field> f = {
      F(hidden_dim, Int, 1, M, false),
      F(num_layers, Int, 1, 4096, false),
      F(num_heads, Int, 1, 4096, false),
      F(head_dim, Int, 1, 16384, false),
      F(kv_heads_local, Int, 1, 4096, false),
      F(kv_heads_global, Int, 1, 4096, false),
      F(sliding_window, Int, 1, M, false),
      F(global_every, Int, 1, 4096, false),
      F(rope_theta, Real, 0, 1e12, true),
      F(rope_dim, Int, 0, 16384, false),
      F(qk_mult, Real, 0, 1e3, true),
      F(sconv_kernel, Int, 1, 1024, false),
      F(sconv_sites, Sites, 0, 0, false),
      F(num_experts, Int, 2, 65536, false),
      F(top_k, Int, 1, 1024, false),
      F(expert_dim, Int, 1, M, false),
      F(latent_dim, Int, 1, M, false),
      F(num_shared_experts, Int, 0, 1024, false),
      F(shared_dim, Int, 1, M, false),
      F(gated_norm_rank, Int, 1, M, false),
      F(combine_sum, Real, 0, 1e6, true),
      F(qb_bins, Int, 1, 1 << 24, false),
      // capacity = ceil(cf·T·K/E) with T = batch·seq_len < 2^31·2^20 and K < E: cf ≤ 1024 keeps
      // it below 2^61, so the transport's double → int64 conversion is always defined.
      F(capacity_factor, Real, 0, 1024, true),
      F(vocab_size, Int, 1, 1 << 24, false),
      F(seq_len, Int, 1, M, false),
      F(z_loss, Real, 0, 100, false),
      F(init_scale, Real, 0, 100, true),
  };
#undef F
  return f;
}

const Field& field(const std::string& key, const std::string& where) {
  auto it = fields().find(key);
  if (it == fields().end())
    fail("{}: unknown config field '{}' (known fields: {})", where, key,
         fmt::join(ModelConfig::field_names(), ", "));
  return it->second;
}

int64_t parse_int(const std::string& key, const std::string& v) {
  int64_t x = 0;
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
  if (ec != std::errc() || p != v.data() + v.size())
    fail("config field '{}': expected an integer, got '{}'", key, v);
  return x;
}

double parse_real(const std::string& key, const std::string& v) {
  try {
    size_t used = 0;
    double x = std::stod(v, &used);
    if (used == v.size()) return x;
  } catch (const std::exception&) {
  }
  fail("config field '{}': expected a number, got '{}'", key, v);
}

std::vector<std::string> split_sites(const std::string& v) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= v.size()) {
    size_t end = v.find(',', start);
    if (end == std::string::npos) end = v.size();
    if (end > start) out.push_back(v.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

ModelConfig base_preset() {
  return ModelConfig{};
}

}  // namespace

std::vector<std::string> ModelConfig::field_names() {
  std::vector<std::string> n;
  for (auto& [k, _] : fields()) n.push_back(k);
  return n;
}

int64_t ModelConfig::num_global_layers() const {
  int64_t g = 0;
  // seam: counts the global layers (integers)
  for (int64_t i = 0; i < num_layers; ++i) g += is_global(i);
  return g;
}

bool ModelConfig::has_sconv(const std::string& site) const {
  for (auto& s : sconv_sites)
    if (s == site) return true;
  return false;
}

void ModelConfig::set(const std::string& key, const std::string& value) {
  const Field& f = field(key, "--set");
  void* p = f.ptr(*this);
  switch (f.kind) {
    case Field::Int:
      *static_cast<int64_t*>(p) = parse_int(key, value);
      break;
    case Field::Real:
      *static_cast<double*>(p) = parse_real(key, value);
      break;
    case Field::Sites:
      *static_cast<std::vector<std::string>*>(p) = split_sites(value);
      break;
  }
}

std::vector<std::string> ModelConfig::overrides_from(const ModelConfig& base) const {
  const nlohmann::json mine = to_json(), theirs = base.to_json();
  std::vector<std::string> out;
  for (const std::string& key : field_names()) {  // seam: builds strings, no arithmetic
    const nlohmann::json& v = mine.at(key);
    if (theirs.contains(key) && theirs.at(key) == v) continue;
    std::string text;
    if (v.is_string()) {
      text = v.get<std::string>();
    } else if (v.is_array()) {   // sconv_sites: a comma-separated list, as set() reads it
      for (const auto& e : v) {  // seam: joins strings
        if (!text.empty()) text += ',';
        text += e.get<std::string>();
      }
    } else {
      text = v.dump();
    }
    out.push_back(key + "=" + text);
  }
  return out;
}

nlohmann::json ModelConfig::to_json() const {
  nlohmann::json j;
  ModelConfig copy = *this;
  for (auto& [k, f] : fields()) {
    void* p = f.ptr(copy);
    switch (f.kind) {
      case Field::Int:
        j[k] = *static_cast<int64_t*>(p);
        break;
      case Field::Real:
        j[k] = *static_cast<double*>(p);
        break;
      case Field::Sites:
        j[k] = *static_cast<std::vector<std::string>*>(p);
        break;
    }
  }
  return j;
}

ModelConfig ModelConfig::from_json(const nlohmann::json& j, const std::string& where,
                                   const ModelConfig* base) {
  if (!j.is_object()) fail("{}: expected a JSON object of config fields", where);
  // Unknown names first: a misspelt field also shows up as a missing one.
  for (auto& [k, v] : j.items()) field(k, where);
  if (!base)
    for (auto& [k, _] : fields())
      if (!j.contains(k))
        fail(
            "{}: missing config field '{}' (give every field, or name a preset with --preset to "
            "fill the ones not given)",
            where, k);
  ModelConfig c = base ? *base : ModelConfig{};
  for (auto& [k, v] : j.items()) {
    const Field& f = field(k, where);
    void* p = f.ptr(c);
    switch (f.kind) {
      case Field::Int:
        if (!v.is_number_integer())
          fail("{}: field '{}' must be an integer, got {}", where, k, v.dump());
        *static_cast<int64_t*>(p) = v.get<int64_t>();
        break;
      case Field::Real:
        if (!v.is_number()) fail("{}: field '{}' must be a number, got {}", where, k, v.dump());
        *static_cast<double*>(p) = v.get<double>();
        break;
      case Field::Sites:
        if (!v.is_array()) fail("{}: field '{}' must be a list of strings", where, k);
        {
          auto& sites = *static_cast<std::vector<std::string>*>(p);
          sites.clear();
          for (auto& s : v) {
            if (!s.is_string()) fail("{}: field '{}' must be a list of strings", where, k);
            sites.push_back(s.get<std::string>());
          }
        }
        break;
    }
  }
  return c;
}

ModelConfig ModelConfig::from_toml_file(const std::string& path, const ModelConfig* base) {
  const TomlFile f = TomlFile::load(path);
  // A [model] table if present, else the top level.
  const std::string table = f.kind("model") == TomlFile::Kind::Table ? "model" : "";
  nlohmann::json j = nlohmann::json::object();
  for (const std::string& key : f.keys(table)) {
    const std::string dotted = table.empty() ? key : table + "." + key;
    switch (f.kind(dotted)) {
      case TomlFile::Kind::Integer:
        j[key] = f.json(dotted);
        break;
      case TomlFile::Kind::Real:
        j[key] = f.real(dotted);  // inf and nan too: validate() names the field and its range
        break;
      case TomlFile::Kind::Array:
        j[key] = f.strings(dotted);
        break;
      case TomlFile::Kind::Table:
        break;  // other sections ([train], [data]) belong to other readers
      default:
        f.fail_field(dotted, "has an unsupported type (expected a number or a list of strings)");
    }
  }
  return from_json(j, path, base);
}

void ModelConfig::validate() const {
  ModelConfig copy = *this;
  for (auto& [k, f] : fields()) {
    const void* p = f.ptr(copy);
    const char* open = f.open_lo ? "(" : "[";
    if (f.kind == Field::Int) {
      const int64_t v = *static_cast<const int64_t*>(p);
      if ((f.open_lo ? double(v) <= f.lo : double(v) < f.lo) || double(v) > f.hi)
        fail("config field {} = {} is out of range {}{}, {}]", k, v, open, int64_t(f.lo),
             int64_t(f.hi));
    } else if (f.kind == Field::Real) {
      const double v = *static_cast<const double*>(p);
      if (!(f.open_lo ? v > f.lo : v >= f.lo) || !(v <= f.hi))
        fail("config field {} = {} is out of range {}{}, {}]", k, v, open, f.lo, f.hi);
    }
  }
  if (num_heads % kv_heads_local != 0)
    fail("kv_heads_local ({}) must divide num_heads ({})", kv_heads_local, num_heads);
  if (num_heads % kv_heads_global != 0)
    fail("kv_heads_global ({}) must divide num_heads ({})", kv_heads_global, num_heads);
  if (kv_heads_global > kv_heads_local)
    fail(
        "kv_heads_global ({}) must not exceed kv_heads_local ({}): global layers use the first "
        "kv_heads_global of the kv_heads_local stored heads",
        kv_heads_global, kv_heads_local);
  if (top_k + 1 > num_experts)
    fail("top_k + 1 ({}) must not exceed num_experts ({}): selection takes the top K+1", top_k + 1,
         num_experts);
  if (sliding_window > seq_len)
    fail("sliding_window ({}) must not exceed seq_len ({})", sliding_window, seq_len);
  if (rope_dim % 2 != 0) fail("rope_dim must be even (pairs are rotated), got {}", rope_dim);
  if (rope_dim > head_dim) fail("rope_dim ({}) must not exceed head_dim ({})", rope_dim, head_dim);
  for (auto& s : sconv_sites)
    if (s != "k" && s != "attn" && s != "mlp")
      fail("sconv_sites: unknown site '{}' (expected any of k, attn, mlp)", s);
}

ModelConfig ModelConfig::shape_rule(int64_t d, int64_t layers, int64_t hd) {
  ModelConfig c;
  c.hidden_dim = d;
  c.num_layers = layers;
  c.head_dim = hd;
  c.num_heads = d / hd;
  c.kv_heads_local = std::max<int64_t>(1, c.num_heads / 4);
  c.kv_heads_global = std::max<int64_t>(1, c.num_heads / 8);
  c.expert_dim = c.latent_dim = c.shared_dim = d / 2;
  c.num_experts = 384;
  c.top_k = 8;
  c.num_shared_experts = 2;
  c.rope_dim = hd / 2;
  c.gated_norm_rank = 128;
  c.seq_len = 4096;
  c.sliding_window = 2048;
  c.vocab_size = 128256;
  return c;
}

ModelConfig ModelConfig::preset(const std::string& name) {
  ModelConfig c = base_preset();
  if (name == "tiny") return c;  // the defaults above are the `tiny` preset
  if (name == "cpu-small") {
    c.hidden_dim = 256;
    c.num_layers = 8;
    c.num_heads = 8;
    c.head_dim = 32;
    c.kv_heads_local = 2;
    c.kv_heads_global = 1;
    c.num_experts = 32;
    c.top_k = 4;
    c.expert_dim = c.latent_dim = c.shared_dim = 128;
    c.gated_norm_rank = 32;
    c.seq_len = 512;
    c.sliding_window = 256;
    c.rope_dim = 16;
    c.vocab_size = 8192;
    return c;
  }
  if (name == "d512") return shape_rule(512, 6);
  if (name == "d768") return shape_rule(768, 8);
  if (name == "d1024") return shape_rule(1024, 12);
  if (name == "d1536") return shape_rule(1536, 16);
  if (name == "d2048") return shape_rule(2048, 22);
  if (name == "hero-535b") {
    c = shape_rule(6144, 48);
    // The 535B run keeps 12 stored KV heads (GQA 4:1 local) and 6 global (8:1): the shape rule.
    return c;
  }
  fail("unknown preset '{}' (known: {})", name, fmt::join(preset_names(), ", "));
}

std::vector<std::string> ModelConfig::preset_names() {
  return {"tiny", "cpu-small", "d512", "d768", "d1024", "d1536", "d2048", "hero-535b"};
}

PresetRun preset_run(const std::string& name) {
  PresetRun r;
  if (name == "hero-535b") r.batch = 11264;
  return r;
}

ModelConfig resolve_config(const std::string& preset, const std::string& config_path,
                           const std::vector<std::string>& overrides) {
  // A config file gives every field, unless a preset is named to fill the ones it leaves out.
  ModelConfig c;
  if (!config_path.empty()) {
    const ModelConfig base = preset.empty() ? ModelConfig{} : ModelConfig::preset(preset);
    c = ModelConfig::from_toml_file(config_path, preset.empty() ? nullptr : &base);
  } else {
    c = ModelConfig::preset(preset.empty() ? "tiny" : preset);
  }
  apply_overrides(c, overrides);
  c.validate();
  return c;
}

void apply_overrides(ModelConfig& c, const std::vector<std::string>& overrides) {
  for (auto& kv : overrides) {
    auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0) fail("--set expects key=value, got '{}'", kv);
    c.set(kv.substr(0, eq), kv.substr(eq + 1));
  }
}

}  // namespace marin
