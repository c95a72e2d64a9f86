#include "scaling/ladder.hpp"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <sstream>

#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/json_file.hpp"
#include "core/limits.hpp"
#include "core/toml_file.hpp"
#include "data/mixture.hpp"
#include "data/shards.hpp"
#include "data/tokenizer/tokenizer.hpp"
#include "kernels/kernels.hpp"
#include "model/accounting.hpp"
#include "optim/hparams.hpp"
#include "parallel/comm.hpp"
#include "train/checkpoint.hpp"
#include "train/run_checkpoint.hpp"
#include "train/run_lock.hpp"
#include "train/trainer.hpp"

namespace marin::scaling {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// Fields the shape rule derives from (width, layers, head_dim): a ladder may not set them.
const std::set<std::string> kDerived = {"hidden_dim",     "num_layers",      "num_heads",
                                        "kv_heads_local", "kv_heads_global", "expert_dim",
                                        "latent_dim",     "shared_dim",      "rope_dim"};

void check_keys(const json& t, const std::string& where, const std::set<std::string>& known) {
  for (auto& [k, _] : t.items())
    if (!known.count(k)) fail("{}: unknown key '{}' (known: {})", where, k, fmt::join(known, ", "));
}

double get_number(const json& t, const char* key, double def, const std::string& where) {
  if (!t.contains(key)) return def;
  if (!t[key].is_number()) fail("{}: '{}' must be a number, got {}", where, key, t[key].dump());
  return t[key].get<double>();
}

int64_t get_int(const json& t, const char* key, int64_t def, const std::string& where) {
  if (!t.contains(key)) return def;
  if (!t[key].is_number_integer())
    fail("{}: '{}' must be an integer, got {}", where, key, t[key].dump());
  return t[key].get<int64_t>();
}

std::string get_string(const json& t, const char* key, const std::string& where,
                       bool required = false) {
  if (!t.contains(key)) {
    if (required) fail("{}: '{}' is required", where, key);
    return "";
  }
  if (!t[key].is_string()) fail("{}: '{}' must be a string, got {}", where, key, t[key].dump());
  return t[key].get<std::string>();
}

std::vector<int64_t> get_ints(const json& t, const char* key, const std::string& where) {
  std::vector<int64_t> v;
  if (!t.contains(key)) return v;
  if (!t[key].is_array()) fail("{}: '{}' must be a list of integers", where, key);
  for (auto& e : t[key]) {
    if (!e.is_number_integer())
      fail("{}: '{}' must be a list of integers, got {}", where, key, e.dump());
    v.push_back(e.get<int64_t>());
  }
  return v;
}

// Model fields of a [family] or [rung.NAME] table: checked against the derived set.
void check_model_fields(const json& t, const std::string& where) {
  for (auto& [k, _] : t.items())
    if (kDerived.count(k))
      fail(
          "{}: '{}' is derived by the shape rule from the rung's width, layers and head_dim; "
          "it cannot be set in a ladder file",
          where, k);
}

// tokens_per_param: one positive number or a non-empty list of distinct positive numbers.
std::vector<double> get_budgets(const json& t, const std::string& where) {
  const json& v = t["tokens_per_param"];
  std::vector<double> b;
  if (v.is_number()) {
    b.push_back(v.get<double>());
  } else if (v.is_array()) {
    for (auto& e : v) {
      if (!e.is_number())
        fail("{}: 'tokens_per_param' must be a number or a list of numbers, got {}", where,
             e.dump());
      b.push_back(e.get<double>());
    }
    if (b.empty()) fail("{}: 'tokens_per_param' must list at least one budget", where);
  } else {
    fail("{}: 'tokens_per_param' must be a number or a list of numbers, got {}", where, v.dump());
  }
  for (size_t i = 0; i < b.size(); ++i) {
    if (!(b[i] > 0) || !std::isfinite(b[i]))
      fail("{}: 'tokens_per_param' must be positive, got {}", where, b[i]);
    for (size_t j = 0; j < i; ++j)
      if (budget_label("", b[j]) == budget_label("", b[i]))
        fail("{}: the budget {} is listed twice in 'tokens_per_param'", where, b[i]);
  }
  return b;
}

int64_t percent_to_evals(int64_t pct, const char* key, const std::string& where) {
  if (pct < 0 || pct > 100 || pct % 5 != 0)
    fail("{}: '{}' must be a multiple of 5 in [0, 100], got {}", where, key, pct);
  return pct / 5;
}

}  // namespace

std::string budget_label(const std::string& rung, double tokens_per_param) {
  return fmt::format("{}-tpp{:g}", rung, tokens_per_param);
}

double BatchRule::rule_value(int64_t width) const {
  return base * std::pow(double(width) / base_width, exponent);
}

int64_t BatchRule::batch_for(int64_t width) const {
  return std::max<int64_t>(multiple, std::llround(rule_value(width) / double(multiple)) * multiple);
}

BatchRule BatchRule::from_json(const json& j) {
  BatchRule r;
  r.base = j.at("base").get<double>();
  r.base_width = j.at("base_width").get<double>();
  r.exponent = j.at("exponent").get<double>();
  r.multiple = j.at("multiple").get<int64_t>();
  r.sizes = j.value("sizes", std::vector<int64_t>{});
  return r;
}

json BatchRule::to_json() const {
  json j = {
      {"base", base}, {"base_width", base_width}, {"exponent", exponent}, {"multiple", multiple}};
  if (!sizes.empty()) j["sizes"] = sizes;
  return j;
}

json Rung::summary() const {
  const auto& op = options.optim;
  return {{"name", name},
          {"label", label},
          {"run", run},
          {"seed", seed},
          {"tokens_per_param", tokens_per_param},
          {"canary", canary},
          {"config", model.to_json()},
          {"width", model.hidden_dim},
          {"layers", model.num_layers},
          {"batch", batch},
          {"rule_batch", rule_batch},
          {"seq_len", model.seq_len},
          {"active_params", active_params},
          {"budget_steps", budget_steps},
          {"steps", steps},
          {"tokens", double(steps) * double(batch) * double(model.seq_len)},
          {"eval_every", eval_every},
          {"compute_per_step", compute_per_step},
          {"compute", compute_per_step * double(steps)},
          {"hparams",
           {{"muonh_lr", op.muonh_lr},
            {"adam_lr", op.adam_lr},
            {"beta1", op.beta1},
            {"beta2", op.beta2},
            {"eps", op.eps}}},
          {"dir", dir}};
}

LadderConfig LadderConfig::load(const std::string& path) {
  return from_toml_text(read_file(path), path);
}

namespace {

// Seeds: each is its own run of every rung; the fit uses each rung's mean over them.
std::vector<uint64_t> read_seeds(const json& t, const std::string& where) {
  std::vector<uint64_t> v;
  for (int64_t s : get_ints(t, "seeds", where)) {
    if (s < 0) fail("{}: 'seeds' must be >= 0, got {}", where, s);
    if (std::find(v.begin(), v.end(), uint64_t(s)) != v.end())
      fail("{}: seed {} is listed twice in 'seeds'", where, s);
    v.push_back(uint64_t(s));
  }
  if (t.contains("seeds") && v.empty()) fail("{}: 'seeds' must list at least one seed", where);
  return v;
}

// [ladder]'s scalars: name, budgets, seeds, learning-rate multiplier, dtype, periods.
void read_ladder_scalars(const json& L, const std::string& wl, LadderConfig& c) {
  c.name = L.contains("name") ? get_string(L, "name", wl) : c.name;
  // Budgets: each is its own run of every rung (with its own schedule), so that the chinchilla
  // law sees each rung at several token counts; [rung.NAME] may give its own.
  if (L.contains("tokens_per_param")) c.budgets = get_budgets(L, wl);
  c.tokens_per_param = c.budgets.front();
  if (L.contains("seed") && L.contains("seeds")) fail("{}: give 'seed' or 'seeds', not both", wl);
  const int64_t seed = get_int(L, "seed", 0, wl);
  if (seed < 0) fail("{}: 'seed' must be >= 0", wl);
  c.seeds = L.contains("seeds") ? read_seeds(L, wl) : std::vector<uint64_t>{uint64_t(seed)};
  c.seed = c.seeds.front();
  c.lr_multiplier = get_number(L, "lr_multiplier", c.lr_multiplier, wl);
  if (!(c.lr_multiplier > 0) || !std::isfinite(c.lr_multiplier))
    fail("{}: 'lr_multiplier' must be a positive number, got {}", wl, c.lr_multiplier);
  if (L.contains("dtype")) c.dtype = get_string(L, "dtype", wl);
  if (c.dtype != "auto") {
    try {
      kernels::parse_dtype(c.dtype);
    } catch (const Error&) {
      fail("{}: 'dtype' must be auto, fp32, bf16 or bf16-emulated, got '{}'", wl, c.dtype);
    }
  }
  c.eval_batches = get_int(L, "eval_batches", c.eval_batches, wl);
  if (c.eval_batches <= 0) fail("{}: 'eval_batches' must be positive", wl);
  c.ckpt_every_percent = get_int(L, "ckpt_every_percent", c.ckpt_every_percent, wl);
  c.keep_every_percent = get_int(L, "keep_every_percent", c.keep_every_percent, wl);
  percent_to_evals(c.ckpt_every_percent, "ckpt_every_percent", wl);
  percent_to_evals(c.keep_every_percent, "keep_every_percent", wl);
}

// [ladder]'s rung names (given, or d<width>), and its canaries, the last rungs.
std::vector<std::string> read_rung_names(const json& L, const std::string& wl,
                                         const std::vector<int64_t>& widths, LadderConfig& c) {
  std::vector<std::string> names;
  if (L.contains("names")) {
    if (!L["names"].is_array() || L["names"].size() != widths.size())
      fail("{}: 'names' must list one name per width", wl);
    for (auto& n : L["names"]) {
      if (!n.is_string() || n.get<std::string>().empty())
        fail("{}: 'names' must be non-empty strings", wl);
      names.push_back(n.get<std::string>());
    }
  } else {
    for (int64_t w : widths) names.push_back(fmt::format("d{}", w));
  }
  if (L.contains("canaries")) {
    if (!L["canaries"].is_array()) fail("{}: 'canaries' must be a list of rung names", wl);
    for (auto& n : L["canaries"]) {
      if (!n.is_string() ||
          std::find(names.begin(), names.end(), n.get<std::string>()) == names.end())
        fail("{}: canary {} names no rung (rungs: {})", wl, n.dump(), fmt::join(names, ", "));
      c.canaries.push_back(n.get<std::string>());
    }
    // Canaries are the largest rungs: the forecast fits the rungs before them and predicts them.
    for (size_t i = 0; i < names.size(); ++i) {
      const bool is_canary =
          std::find(c.canaries.begin(), c.canaries.end(), names[i]) != c.canaries.end();
      if (!is_canary && i + c.canaries.size() >= names.size())
        fail("{}: the canaries must be the last rungs ({} is after a canary)", wl, names[i]);
    }
  }
  for (size_t i = 0; i < names.size(); ++i) {
    for (char ch : names[i])
      if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.'))
        fail("{}: rung name '{}' may only contain letters, digits, '-', '_' and '.'", wl, names[i]);
    for (size_t j = 0; j < i; ++j)
      if (names[j] == names[i]) fail("{}: two rungs are named '{}'", wl, names[i]);
  }
  return names;
}

// The [batch] rule.
void read_batch(const json& B, const std::string& wb, size_t rungs, BatchRule& batch) {
  check_keys(B, wb, {"base", "base_width", "exponent", "multiple", "sizes"});
  batch.base = get_number(B, "base", batch.base, wb);
  batch.base_width = get_number(B, "base_width", batch.base_width, wb);
  batch.exponent = get_number(B, "exponent", batch.exponent, wb);
  batch.multiple = get_int(B, "multiple", batch.multiple, wb);
  batch.sizes = get_ints(B, "sizes", wb);
  if (!(batch.base > 0) || !(batch.base_width > 0) || batch.multiple <= 0)
    fail("{}: 'base', 'base_width' and 'multiple' must be positive", wb);
  if (!batch.sizes.empty() && batch.sizes.size() != rungs)
    fail("{}: 'sizes' must list one batch per rung ({} rungs, {} sizes)", wb, rungs,
         batch.sizes.size());
  for (int64_t s : batch.sizes)
    if (s <= 0) fail("{}: every batch in 'sizes' must be positive", wb);
}

// The model fields every rung shares ([family], applied after the shape rule) and each rung's
// own ([rung.NAME]).
struct ModelFields {
  json family;
  int64_t head_dim = 128;
  json per_rung;
};
ModelFields read_model_fields(const json& root, const std::string& origin,
                              const std::vector<std::string>& names) {
  ModelFields f;
  f.family = root.value("family", json::object());
  const std::string wf = origin + " [family]";
  if (!f.family.is_object()) fail("{}: [family] must be a table of model fields", origin);
  check_model_fields(f.family, wf);
  if (f.family.contains("head_dim")) {
    f.head_dim = get_int(f.family, "head_dim", 128, wf);
    f.family.erase("head_dim");
  }
  f.per_rung = root.value("rung", json::object());
  for (auto& [k, v] : f.per_rung.items()) {
    if (std::find(names.begin(), names.end(), k) == names.end())
      fail("{}: [rung.{}] names no rung (rungs: {})", origin, k, fmt::join(names, ", "));
    if (!v.is_object()) fail("{}: [rung.{}] must be a table of model fields", origin, k);
    check_model_fields(v, fmt::format("{} [rung.{}]", origin, k));
  }
  return f;
}

// Rung i's model and batch (its seeds and budgets are left in `over` for add_rung_runs).
Rung make_rung(const LadderConfig& c, const ModelFields& f, const std::string& origin,
               const std::string& name, size_t i, int64_t width, int64_t layers, json& over) {
  Rung r;
  r.name = name;
  const std::string wr =
      fmt::format("{}: rung {} (width {}, {} layers)", origin, r.name, width, layers);
  int64_t rhd = f.head_dim;
  if (over.contains("head_dim")) {
    rhd = get_int(over, "head_dim", f.head_dim, wr);
    over.erase("head_dim");
  }
  if (rhd <= 0 || width % rhd != 0) fail("{}: head_dim {} must divide the width", wr, rhd);
  if (width % 2 != 0) fail("{}: the width must be even (expert width d/2)", wr);
  json m = ModelConfig::shape_rule(width, layers, rhd).to_json();
  for (auto& [k, v] : f.family.items()) m[k] = v;
  for (auto& [k, v] : over.items()) m[k] = v;
  r.model = ModelConfig::from_json(m, wr);
  try {
    r.model.validate();
  } catch (const Error& e) {
    fail("{}: {}", wr, e.what());
  }
  r.batch = c.batch.sizes.empty() ? c.batch.batch_for(width) : c.batch.sizes[i];
  r.rule_batch = c.batch.sizes.empty() ? c.batch.rule_value(width) : double(r.batch);
  if (r.batch > std::numeric_limits<int>::max()) fail("{}: batch {} is too large", wr, r.batch);
  // Off the rule by more than rounding to a whole sequence: the rung's loss moves with it, and
  // the fit takes that for the law (the CPU experiment's residuals followed such rounding).
  if (c.batch.sizes.empty() && r.batch != std::max<int64_t>(1, std::llround(r.rule_batch)))
    fmt::print(stderr,
               "marin: warning: {}: rung {}: batch {} is off the batch rule's {:.3g} (rounded "
               "to a multiple of {}); multiple = 1 keeps every rung on the rule\n",
               origin, r.name, r.batch, r.rule_batch, c.batch.multiple);
  r.active_params = account(r.model).active_params;
  r.compute_per_step = forecast_flops_per_step(r.model, r.batch);
  r.canary = std::find(c.canaries.begin(), c.canaries.end(), r.name) != c.canaries.end();
  return r;
}

// One run per budget and seed: DIR/rung-<name>[-tpp<b>][-seed<k>]/, a suffix only where the rung
// has more than one of them.
void add_rung_runs(LadderConfig& c, const Rung& r, const std::vector<double>& budgets,
                   const std::vector<uint64_t>& seeds, const std::string& wr) {
  for (double b : budgets) {
    Rung rb = r;
    rb.tokens_per_param = b;
    rb.label = budgets.size() == 1 ? r.name : budget_label(r.name, b);
    try {
      rb.budget_steps = steps_for_budget(rb.model, rb.batch, b);
    } catch (const Error& e) {
      fail("{}: tokens_per_param {}: {}", wr, b, e.what());
    }
    rb.steps = c.steps_for(rb.model, rb.batch, b);
    rb.eval_every = rb.steps / kFractions;
    for (uint64_t s : seeds) {
      Rung rs = rb;
      rs.seed = s;
      rs.run = seeds.size() == 1 ? rb.label : fmt::format("{}-seed{}", rb.label, s);
      c.rungs.push_back(std::move(rs));
    }
  }
}

// Every rung × budget × seed, each run's name unique.
void build_rungs(LadderConfig& c, const ModelFields& f, const std::string& origin,
                 const std::string& wl, const std::vector<std::string>& names,
                 const std::vector<int64_t>& widths, const std::vector<int64_t>& layers) {
  for (size_t i = 0; i < widths.size(); ++i) {
    const std::string wr =
        fmt::format("{}: rung {} (width {}, {} layers)", origin, names[i], widths[i], layers[i]);
    if (widths[i] <= 0 || layers[i] <= 0) fail("{}: width and layers must be positive", wr);
    json over = f.per_rung.value(names[i], json::object());
    std::vector<uint64_t> seeds = c.seeds;
    if (over.contains("seeds")) {
      seeds = read_seeds(over, wr);
      over.erase("seeds");
    }
    std::vector<double> budgets = c.budgets;
    if (over.contains("tokens_per_param")) {
      budgets = get_budgets(over, fmt::format("{} [rung.{}]", origin, names[i]));
      over.erase("tokens_per_param");
    }
    const Rung r = make_rung(c, f, origin, names[i], i, widths[i], layers[i], over);
    add_rung_runs(c, r, budgets, seeds, wr);
  }
  for (size_t i = 0; i < c.rungs.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (c.rungs[j].run == c.rungs[i].run)
        fail("{}: two runs are named '{}' (rung names and their -tpp/-seed suffixes collide)", wl,
             c.rungs[i].run);
}

// [data]: rows or a mixture (resolved by finalize()).
void read_data(const json& D, const std::string& wd, LadderConfig& c) {
  const std::string kind = get_string(D, "kind", wd, true);
  if (kind == "rows") {
    check_keys(D, wd, {"kind", "path", "valid"});
    c.set_rows_data(get_string(D, "path", wd, true), get_string(D, "valid", wd, true));
  } else if (kind == "mixture") {
    check_keys(D, wd, {"kind", "mixture", "token_dir", "tokenizer"});
    c.set_mixture_data(get_string(D, "mixture", wd, true), get_string(D, "token_dir", wd, true),
                       get_string(D, "tokenizer", wd));
  } else {
    fail("{}: 'kind' must be \"rows\" or \"mixture\", got \"{}\"", wd, kind);
  }
}

// [tasks]: the downstream tasks every rung scores at its evaluations.
void read_tasks(const json& T, const std::string& origin, LadderConfig& c) {
  const std::string wt = origin + " [tasks]";
  if (!T.is_object()) fail("{}: [tasks] must be a table (names, dir)", origin);
  check_keys(T, wt, {"names", "dir"});
  if (!T.contains("names") || !T["names"].is_array() || T["names"].empty())
    fail("{}: 'names' (a list of task names, YAML or rendered JSONL files) is required", wt);
  for (auto& n : T["names"]) {
    if (!n.is_string() || n.get<std::string>().empty() ||
        n.get<std::string>().find(',') != std::string::npos)
      fail("{}: 'names' must be non-empty strings without commas, got {}", wt, n.dump());
    c.tasks.push_back(n.get<std::string>());
  }
  c.task_dir = get_string(T, "dir", wt);
}

// [eval]: the curves' metric (read by finalize()).
void read_eval(const json& E, const std::string& we, LadderConfig& c) {
  c.eval_source = E;
  check_keys(
      c.eval_source, we,
      {"metric", "corpus", "max_tokens", "domains", "stride", "audit", "ngram", "threshold"});
  const std::string metric = get_string(c.eval_source, "metric", we, true);
  if (metric != "macro_loss" && metric != "valid_ce")
    fail("{}: 'metric' must be \"macro_loss\" or \"valid_ce\", got \"{}\"", we, metric);
}

}  // namespace

LadderConfig LadderConfig::from_toml_text(const std::string& text, const std::string& origin) {
  const json root = TomlFile::parse(text, origin).json();
  check_keys(root, origin, {"ladder", "batch", "family", "rung", "data", "eval", "tasks"});
  LadderConfig c;
  c.path = origin;
  const std::string wl = origin + " [ladder]";
  if (!root.contains("ladder") || !root["ladder"].is_object())
    fail("{}: a [ladder] table is required (widths, layers, tokens_per_param)", origin);
  const json& L = root["ladder"];
  check_keys(
      L, wl,
      {"name", "widths", "layers", "names", "tokens_per_param", "seed", "seeds", "lr_multiplier",
       "canaries", "eval_batches", "ckpt_every_percent", "keep_every_percent", "dtype"});
  read_ladder_scalars(L, wl, c);
  const std::vector<int64_t> widths = get_ints(L, "widths", wl), layers = get_ints(L, "layers", wl);
  if (widths.empty()) fail("{}: 'widths' (a list of hidden widths, one per rung) is required", wl);
  if (layers.size() != widths.size())
    fail("{}: 'layers' must list one layer count per width ({} widths, {} layer counts)", wl,
         widths.size(), layers.size());
  // Checked before any rung is built: each costs a model validation, and rung and run names
  // are compared pairwise.
  if (const size_t runs = widths.size() * std::max<size_t>(1, c.budgets.size()) * c.seeds.size();
      runs > kMaxLadderRuns)
    fail("{}: {} runs (rungs × token budgets × seeds), more than the limit of {} for one ladder",
         wl, runs, kMaxLadderRuns);
  const std::vector<std::string> names = read_rung_names(L, wl, widths, c);
  if (root.contains("batch"))
    read_batch(root["batch"], origin + " [batch]", widths.size(), c.batch);
  build_rungs(c, read_model_fields(root, origin, names), origin, wl, names, widths, layers);
  if (root.contains("data")) read_data(root["data"], origin + " [data]", c);
  if (root.contains("tasks")) read_tasks(root["tasks"], origin, c);
  if (root.contains("eval")) read_eval(root["eval"], origin + " [eval]", c);
  return c;
}

void LadderConfig::set_rows_data(const std::string& rows, const std::string& valid_rows) {
  if (rows.empty()) fail("ladder {}: rows data needs a path", path);
  if (valid_rows.empty())
    fail("ladder {}: rows data needs validation rows (the rungs are scored on them)", path);
  data_source = {{"kind", "rows"}, {"path", rows}, {"valid", valid_rows}};
}

void LadderConfig::set_mixture_data(const std::string& mixture_file, const std::string& token_dir,
                                    const std::string& tokenizer_file) {
  if (mixture_file.empty()) fail("ladder {}: mixture data needs a mixture file", path);
  if (token_dir.empty()) fail("ladder {}: mixture data needs a token directory", path);
  data_source = {{"kind", "mixture"},
                 {"mixture", mixture_file},
                 {"token_dir", token_dir},
                 {"tokenizer", tokenizer_file}};
}

void LadderConfig::finalize() {
  if (data_source.is_null())
    fail(
        "ladder {}: no training data: add a [data] section or give --rows/--valid-rows or "
        "--data/--token-dir",
        path);
  if (data_source["kind"] == "rows") {
    data = {{"kind", "rows"}, {"path", data_source["path"]}};
    valid = {{"kind", "rows"}, {"path", data_source["valid"]}};
    tokenizer.clear();
  } else {
    // The mixture is embedded in the rungs' options (as `marin train --data` does), so a run
    // does not depend on the file; validation is the held-out split of the mixture's domains.
    const std::string token_dir = data_source["token_dir"];
    const MixtureConfig mix = MixtureConfig::load(data_source["mixture"].get<std::string>());
    data = {{"kind", "mixture"}, {"tokens", token_dir}, {"mixture", mix.to_json()}};
    json domains = json::array();
    for (auto& src : mix.sources) domains.push_back(src.domain);
    valid = {{"kind", "valid"}, {"tokens", token_dir}, {"domains", domains}};
    tokenizer = data_source["tokenizer"].get<std::string>();
  }
  macro.reset();
  if (eval_source.is_object() && eval_source.value("metric", "") == "macro_loss") {
    // The metric of the curves: a fixed subset of every validation domain, audited against the
    // mixture's training text; written into ladder.json and from there into the forecast.
    const std::string we = path + " [eval]";
    if (data_source["kind"] != "mixture")
      fail("{}: the macro loss needs mixture data (text domains), not rows", we);
    eval::MacroMetric m;
    try {
      m.token_dir = data_source["token_dir"].get<std::string>();
      m.corpus = eval_source.value("corpus", TokenManifest::load(m.token_dir).corpus);
      m.domains = eval_source.value("domains", std::vector<std::string>{});
      m.max_tokens = eval_source.value("max_tokens", uint64_t(0));
      m.stride = eval_source.value("stride", int64_t(0));
      m.ngram = eval_source.value("ngram", 13);
      m.threshold = eval_source.value("threshold", 0.0);
      if (eval_source.value("audit", true))
        m.train =
            eval::mixture_sources(MixtureConfig::load(data_source["mixture"].get<std::string>()));
    } catch (const json::exception& e) {
      fail("{}: a field has the wrong type: {}", we, e.what());
    }
    if (keep_every_percent != 5)
      fail("{}: the macro loss is scored on the kept checkpoints: set keep_every_percent = 5", we);
    macro = m;
  }
  if (!tasks.empty() && (data_source["kind"] != "mixture" || tokenizer.empty()))
    fail("{} [tasks]: downstream tasks need mixture data with its tokenizer ([data] tokenizer)",
         path);
  for (auto& r : rungs) r.options = run_options(r.model, r.batch, r.steps, r.seed);
}

int64_t LadderConfig::steps_for(const ModelConfig& m, int64_t batch, double tpp) const {
  const int64_t budget = steps_for_budget(m, batch, tpp > 0 ? tpp : tokens_per_param);
  return std::max<int64_t>(1, (budget + kFractions - 1) / kFractions) * kFractions;
}

TrainOptions LadderConfig::run_options(const ModelConfig& m, int64_t batch, int64_t steps,
                                       uint64_t run_seed) const {
  TrainOptions o;
  o.model = m;
  o.batch = int(batch);
  o.steps = steps;
  o.seed = run_seed;
  o.dtype = dtype;
  const int64_t eval_every = steps / kFractions;
  o.eval_every = eval_every;
  o.eval_batches = eval_batches;
  o.ckpt_every = eval_every * (ckpt_every_percent / 5);
  o.keep_every = eval_every * (keep_every_percent / 5);
  o.data = data;
  o.valid = valid;
  o.tokenizer = tokenizer;
  if (!tasks.empty()) {
    o.tasks = fmt::format("{}", fmt::join(tasks, ","));
    o.task_dir = task_dir;
    o.tasks_every = eval_every;
  }
  // The whole §5 rule for this width, batch, seq_len and steps (resolve_hparams() keeps
  // OptimConfig's nonzero beta2/eps defaults, so every field is set here); the multiplier scales
  // both peak rates alike, for every rung and the target.
  const HyperParams h = heuristic_hparams(m.hidden_dim, batch, m.seq_len, steps);
  o.optim.muonh_lr = h.muonh_lr * lr_multiplier;
  o.optim.adam_lr = h.adam_lr * lr_multiplier;
  o.optim.beta1 = h.beta1;
  o.optim.beta2 = h.beta2;
  o.optim.eps = h.eps;
  o.resolve_hparams();  // total_steps, micro-batch
  return o;
}

LadderConfig LadderConfig::recipe_from_json(const json& j, const std::string& where) {
  LadderConfig c;
  try {
    c.path = j.value("source", where);
    c.name = j.value("name", c.name);
    c.tokens_per_param = j.at("tokens_per_param").get<double>();
    c.budgets = j.value("budgets", std::vector<double>{c.tokens_per_param});
    c.seed = j.at("seed").get<uint64_t>();
    c.seeds = j.value("seeds", std::vector<uint64_t>{c.seed});
    c.lr_multiplier = j.value("lr_multiplier", 1.0);  // absent: a ladder.json from before it
    c.dtype = j.value("dtype", "auto");               // absent: from before it (auto)
    c.canaries = j.value("canaries", std::vector<std::string>{});
    c.eval_batches = j.at("eval_batches").get<int64_t>();
    c.ckpt_every_percent = j.at("ckpt_every_percent").get<int64_t>();
    c.keep_every_percent = j.at("keep_every_percent").get<int64_t>();
    c.batch = BatchRule::from_json(j.at("batch_rule"));
    c.data_source = j.at("data_source");
    c.data = j.at("data");
    c.valid = j.at("valid");
    c.tokenizer = j.at("tokenizer").get<std::string>();
    if (j.contains("tasks")) {  // absent: a ladder without tasks (or from before them)
      c.tasks = j["tasks"].at("names").get<std::vector<std::string>>();
      c.task_dir = j["tasks"].at("dir").get<std::string>();
    }
  } catch (const json::exception& e) {
    fail("{}: the ladder's recipe is incomplete: {}", where, e.what());
  }
  return c;
}

json LadderConfig::to_json() const {
  json j = {{"name", name},
            {"source", path},
            {"tokens_per_param", tokens_per_param},
            {"budgets", budgets},
            {"seed", seed},
            {"seeds", seeds},
            {"lr_multiplier", lr_multiplier},
            {"dtype", dtype},
            {"canaries", canaries},
            {"eval_batches", eval_batches},
            {"evaluations_per_rung", kFractions},
            {"ckpt_every_percent", ckpt_every_percent},
            {"keep_every_percent", keep_every_percent},
            {"batch_rule", batch.to_json()},
            {"data_source", data_source},
            {"data", data},
            {"valid", valid},
            {"tokenizer", tokenizer}};
  if (!tasks.empty()) j["tasks"] = {{"names", tasks}, {"dir", task_dir}};
  return j;
}

namespace {

// The step of a rung's metrics line: "step" counts the steps done (1-based). A rung trained
// before it did (another machine's, imported) starts at "step": 0; `shift` (-1 until the first
// line is read) makes its steps 1-based too.
int64_t line_step(const json& j, int64_t& shift) {
  const int64_t step = j.at("step").get<int64_t>();
  if (shift < 0) shift = step == 0 ? 1 : 0;
  return step + shift;
}

// The downstream-task records of a rung's evaluations (metrics.jsonl "tasks", by completed step;
// a resumed run's later line of a step wins).
std::map<int64_t, json> task_records(const Rung& rung) {
  const std::string file = rung.dir + "/metrics.jsonl";
  std::ifstream f(file);
  if (!f) fail("{}: cannot open (rung {} has not been trained)", file, rung.run);
  std::map<int64_t, json> out;
  std::string line;
  int64_t shift = -1;
  for (int64_t lineno = 1; std::getline(f, line); ++lineno) {
    if (line.empty()) continue;
    const json j = parse_json(line, fmt::format("{}:{}", file, lineno));
    const int64_t step = line_step(j, shift);
    if (j.contains("tasks") && j["tasks"].is_object())
      out[step] = j["tasks"].value("tasks", json::object());
  }
  return out;
}

}  // namespace

std::vector<CurvePoint> valid_ce_curve(const Rung& rung) {
  const std::string file = rung.dir + "/metrics.jsonl";
  std::ifstream f(file);
  if (!f) fail("{}: cannot open (rung {} has not been trained)", file, rung.run);
  // A resumed run appends the steps after its checkpoint again: the last line of a step wins.
  std::map<int64_t, double> ce;
  std::string line;
  int64_t lineno = 0, shift = -1;
  while (std::getline(f, line)) {
    ++lineno;
    if (line.empty()) continue;
    const json j = parse_json(line, fmt::format("{}:{}", file, lineno));
    const int64_t step = line_step(j, shift);  // valid_ce is measured after that step
    if (j.contains("valid_ce") && j["valid_ce"].is_number()) ce[step] = j["valid_ce"].get<double>();
  }
  std::vector<CurvePoint> curve;
  for (int64_t k = 1; k <= kFractions; ++k) {
    const int64_t step = k * rung.eval_every;
    auto it = ce.find(step);
    if (it == ce.end())
      fail("{}: rung {} has no valid_ce after step {} ({}% of {})", file, rung.run, step, 5 * k,
           rung.steps);
    curve.push_back({step, double(step) / double(rung.steps), rung.compute_per_step * double(step),
                     it->second, std::nullopt});
  }
  return curve;
}

CurveEvaluator macro_loss_curve(const eval::MacroMetric& metric, const std::string& tokenizer) {
  // Shared by the calls for every rung: the n-gram index is built once, when first needed.
  auto evaluator = std::make_shared<std::unique_ptr<eval::MacroEvaluator>>();
  return [metric, tokenizer, evaluator](const Rung& rung) {
    const json spec = metric.to_json();
    std::vector<CurvePoint> curve;
    for (int64_t k = 1; k <= kFractions; ++k) {
      const int64_t step = k * rung.eval_every;
      const std::string ckpt = fmt::format("{}/checkpoints/step-{:08d}", rung.dir, step);
      if (!fs::is_directory(ckpt))
        fail(
            "{}: missing: the macro loss is scored on every 5% checkpoint of rung {} "
            "(keep_every_percent = 5)",
            ckpt, rung.run);
      const std::string cache = ckpt + "/macro_eval.json";
      // Rank 0 reads the cache and tells the others, so all ranks agree on evaluating (which
      // is collective: the documents are split over them).
      parallel::Comm& world = parallel::world();
      std::string cached;
      if (world.is_root() && fs::exists(cache)) {
        const auto c = try_parse_json(read_file(cache));  // a stale or torn cache is recomputed
        if (c && c->is_object() && c->value("metric", json()) == spec)
          cached = (*c)["result"].dump();
      }
      world.broadcast(cached);
      json result = cached.empty() ? json() : json::parse(cached);
      if (result.is_null()) {
        if (!*evaluator) {
          const uint64_t hash = tokenizer.empty() ? 0 : Tokenizer::load(tokenizer).hash();
          *evaluator = std::make_unique<eval::MacroEvaluator>(metric, hash);
        }
        Model<float> m(load_config(ckpt), 8, ModelUse::Inference);
        load_params(ckpt, m.table(), m.params().data());
        result = eval::summary((*evaluator)->evaluate(m, &world));
        if (world.is_root()) {
          write_file_atomic(cache, json({{"metric", spec}, {"result", result}}).dump(2) + "\n");
          fmt::print(stderr, "ladder: rung {} step {}: macro loss {:.4f}\n", rung.run, step,
                     result["macro_loss"].get<double>());
        }
      }
      CurvePoint p{step, double(step) / double(rung.steps), rung.compute_per_step * double(step),
                   result.at("macro_loss").get<double>(), std::nullopt};
      if (result.value("clean_macro_loss", json()).is_number())
        p.clean_loss = result["clean_macro_loss"].get<double>();
      curve.push_back(p);
    }
    return curve;
  };
}

namespace {

// The rung's model config as TOML (for `marin plan --config`).
std::string model_toml(const ModelConfig& c) {
  std::string s = "# written by marin ladder: this rung's model (marin plan --config FILE)\n";
  const json fields = c.to_json();  // named: items() of a temporary would dangle
  for (auto& [k, v] : fields.items()) {
    if (v.is_array()) {
      std::vector<std::string> q;
      for (auto& e : v) q.push_back(e.dump());
      s += fmt::format("{} = [{}]\n", k, fmt::join(q, ", "));
    } else if (v.is_number_float()) {
      // Always with a decimal point or exponent so TOML reads a float.
      std::string x = v.dump();
      if (x.find_first_of(".eE") == std::string::npos) x += ".0";
      s += fmt::format("{} = {}\n", k, x);
    } else {
      s += fmt::format("{} = {}\n", k, v.dump());
    }
  }
  return s;
}

std::string describe_difference(const json& a, const json& b) {
  std::vector<std::string> keys;
  for (auto& [k, v] : a.items())
    if (!b.contains(k) || b[k] != v) keys.push_back(k);
  for (auto& [k, v] : b.items())
    if (!a.contains(k)) keys.push_back(k);
  return fmt::format("{}", fmt::join(keys, ", "));
}

// The run's compute dtype as its trainer resolved it on the machine that trained it (run.json);
// "" when unknown.
std::string computed_dtype(const Rung& r) {
  const std::string file = r.dir + "/run.json";
  if (!fs::exists(file)) return "";
  const auto j = try_parse_json(read_file(file));
  return j && j->is_object() ? j->value("dtype", "") : "";
}

// What a run's result depends on, from ladder.json: its recipe without the fields that change
// nothing a finished run computed (the file's path, the list of seeds and canaries, checkpoint
// periods), and its own record without where and how it ran.
json result_recipe(json recipe) {
  for (const char* k : {"source", "seeds", "canaries", "ckpt_every_percent", "keep_every_percent"})
    recipe.erase(k);
  return recipe;
}
json result_summary(json run) {
  for (const char* k : {"dir", "status", "curve", "final_loss", "imported", "dtype"}) run.erase(k);
  return run;
}

// Finished runs recorded in other ladder.json files (another machine's or session's ladder: a
// run directory does not outlive its machine, its record can be committed). A file must be of
// this ladder (the same recipe, metric and evaluation) and each of its runs the same run; a
// difference is an error naming the fields. `recorded_only`: only the runs the file records as
// imported (the ladder's own ladder.json, whose other runs are in its rung directories).
void read_imports(const std::string& file, bool recorded_only, const json& here,
                  const std::vector<json>& rung_json, std::map<std::string, json>& out) {
  const json j = load_json(file);
  if (!j.is_object() || j.value("format", json()) != "marin-ladder-v1" || !j.contains("rungs"))
    fail("{}: not a marin ladder.json (marin ladder --import takes one)", file);
  for (const char* k : {"metric", "eval"})
    if (j.value(k, json()) != here.value(k, json()))
      fail("{}: scored with another {} than this ladder ({} against {})", file, k,
           j.value(k, json()).dump(), here.value(k, json()).dump());
  const json a = result_recipe(j.at("ladder")), b = result_recipe(here.at("ladder"));
  if (a != b)
    fail("{}: not a result of this ladder: its recipe differs in {}", file,
         describe_difference(a, b));
  for (const json& r : j["rungs"]) {
    if (r.value("status", "") != "done" || !r.contains("curve")) continue;
    if (recorded_only && !r.contains("imported")) continue;
    const std::string run = r.value("run", "");
    auto mine = std::find_if(rung_json.begin(), rung_json.end(),
                             [&](const json& x) { return x.at("run") == run; });
    if (mine == rung_json.end()) fail("{}: run '{}' is not a run of this ladder", file, run);
    const json x = result_summary(r), y = result_summary(*mine);
    if (x != y)
      fail("{}: run {} differs from this ladder's in {}", file, run, describe_difference(x, y));
    json rec = r;
    rec["imported"] = r.value("imported", file);  // where it was first recorded
    out[run] = rec;
  }
}

// One call of train_ladder: the runs' records and statuses, written to DIR/ladder.json after
// each run (rank 0).
struct LadderState {
  LadderConfig& cfg;
  const LadderRunOptions& o;
  bool root = false;
  std::string metric;
  std::vector<json> rung_json;
  std::vector<std::string> status;

  json ladder_json() const {
    json rungs = json::array();
    for (size_t i = 0; i < cfg.rungs.size(); ++i) {
      json r = rung_json[i];
      r["status"] = status[i];
      rungs.push_back(r);
    }
    json j = {{"format", "marin-ladder-v1"},
              {"ladder", cfg.to_json()},
              {"metric", metric},
              {"rungs", rungs}};
    if (cfg.macro && !o.evaluator) j["eval"] = cfg.macro->to_json();
    return j;
  }
  void write_ladder() const {
    if (root) write_file_atomic(o.out + "/ladder.json", ladder_json().dump(2) + "\n");
  }
};

// --runs names runs of this ladder.
void check_named_runs(const LadderConfig& cfg, const LadderRunOptions& o) {
  for (auto& name : o.runs)
    if (std::none_of(cfg.rungs.begin(), cfg.rungs.end(), [&](auto& r) { return r.run == name; })) {
      std::vector<std::string> names;
      for (auto& r : cfg.rungs) names.push_back(r.run);
      fail("{}: --runs names {}, which is not a run of this ladder (runs: {})", cfg.path, name,
           fmt::join(names, ", "));
    }
}

bool selected(const LadderRunOptions& o, const Rung& r) {
  return o.runs.empty() || std::find(o.runs.begin(), o.runs.end(), r.run) != o.runs.end();
}

// Runs finished elsewhere: imported by an earlier call (recorded in DIR/ladder.json), then
// --import's files.
std::map<std::string, json> imported_runs(const LadderState& s) {
  std::map<std::string, json> imported;
  const json here = s.ladder_json();
  const std::string own = s.o.out + "/ladder.json";
  if (fs::exists(own)) {
    const json prev = load_json(own);
    const json runs = prev.value("rungs", json::array());
    if (std::any_of(runs.begin(), runs.end(), [](const json& r) { return r.contains("imported"); }))
      read_imports(own, true, here, s.rung_json, imported);
  }
  for (const std::string& file : s.o.imports)
    read_imports(file, false, here, s.rung_json, imported);
  return imported;
}

// The trainer of a run (every rank): a resumed one from its checkpoint, a new one without, or
// none when its checkpoint is at its last step.
std::unique_ptr<Trainer> rung_trainer(const Rung& r, bool root) {
  const auto ckpt = latest_checkpoint(r.dir);
  if (ckpt) {
    const RunState st = read_run_state(*ckpt);
    const json want = r.options.to_json(), have = st.options.to_json();
    if (want != have)
      fail(
          "{}: rung {} was trained with different options ({}); delete the rung directory or "
          "choose another --out",
          r.dir, r.run, describe_difference(want, have));
    if (st.step >= r.steps) {
      if (root)
        fmt::print(stderr, "ladder: rung {} is done ({} steps), not retrained\n", r.run, r.steps);
      return nullptr;
    }
    if (root)
      fmt::print(stderr, "ladder: rung {} resumes at step {} of {}\n", r.run, st.step, r.steps);
    return Trainer::resume(r.dir);
  }
  // No checkpoint: anything in the directory is from an attempt of this ladder that never
  // saved (the ladder's lock keeps any other writer out), so the rung starts anew.
  if (root) {
    std::error_code ec;
    fs::remove(r.dir + "/metrics.jsonl", ec);
    fs::remove(r.dir + "/run.json", ec);
    fmt::print(stderr,
               "ladder: rung {}: d={} L={} batch {} steps {} (muonh_lr {:.3e}, adam_lr {:.3e})\n",
               r.run, r.model.hidden_dim, r.model.num_layers, r.batch, r.steps,
               r.options.optim.muonh_lr, r.options.optim.adam_lr);
  }
  return std::make_unique<Trainer>(r.options, r.dir);
}

// A finished run's curve as ladder.json records it: its scored checkpoints, with the
// downstream tasks' scores when the ladder names tasks.
json curve_json(const LadderConfig& cfg, const Rung& r, const std::vector<CurvePoint>& curve) {
  const std::map<int64_t, json> tasks =
      cfg.tasks.empty() ? std::map<int64_t, json>() : task_records(r);
  json c = json::array();
  for (auto& p : curve) {
    c.push_back(
        {{"step", p.step}, {"fraction", p.fraction}, {"compute", p.compute}, {"loss", p.loss}});
    if (p.clean_loss) c.back()["clean_loss"] = *p.clean_loss;
    if (!cfg.tasks.empty()) {
      auto it = tasks.find(p.step);
      if (it == tasks.end())
        fail("{}/metrics.jsonl: rung {} has no downstream-task scores after step {}", r.dir, r.run,
             p.step);
      c.back()["tasks"] = it->second;
    }
  }
  return c;
}

// A run not trained by this call: imported (recorded as done), a canary without --canaries, or
// left out by --runs (recorded when already finished). Returns whether it was passed over, and
// clears `complete` for a left-out run that is not finished.
bool pass_over(LadderState& s, size_t i, const std::map<std::string, json>& imported,
               bool& complete) {
  const Rung& r = s.cfg.rungs[i];
  if (auto it = imported.find(r.run); it != imported.end()) {
    s.rung_json[i] = it->second;
    s.status[i] = "done";
    if (s.root)
      fmt::print(stderr, "ladder: run {} is done in {}, not retrained\n", r.run,
                 it->second["imported"].get<std::string>());
    s.write_ladder();
    return true;
  }
  if (r.canary && !s.o.canaries) {
    // A canary is trained after the forecast that predicts it (marin ladder --canaries).
    if (s.root && (i == 0 || s.cfg.rungs[i - 1].name != r.name))
      fmt::print(stderr,
                 "ladder: canary {} not trained: register the forecast first (marin "
                 "forecast), then run marin ladder --canaries\n",
                 r.name);
    return true;
  }
  if (!selected(s.o, r)) {
    const auto ckpt = latest_checkpoint(r.dir);
    if (!ckpt || read_run_state(*ckpt).step < r.steps) {
      complete = false;
      return true;
    }
  }
  return false;
}

// Trains (or resumes) run i and scores its curve; false when the training stopped early.
bool train_run(LadderState& s, size_t i, const CurveEvaluator& eval, parallel::Comm& world) {
  Rung& r = s.cfg.rungs[i];
  if (s.root) {
    std::error_code ec;
    fs::create_directories(r.dir, ec);
    if (ec) fail("{}: cannot create the rung directory: {}", r.dir, ec.message());
    write_file_atomic(r.dir + "/model.toml", model_toml(r.model));
  }
  world.barrier();
  std::unique_ptr<Trainer> t = rung_trainer(r, s.root);
  if (t) {
    const TrainResult res = t->run();
    if (res.interrupted || res.steps_done < r.steps) {
      s.status[i] = "interrupted";
      s.write_ladder();
      if (s.root)
        fmt::print(stderr, "ladder: stopped in rung {} at step {}; run again to continue\n", r.run,
                   res.steps_done);
      return false;
    }
  }
  const std::vector<CurvePoint> curve = eval(r);
  s.rung_json[i]["curve"] = curve_json(s.cfg, r, curve);
  if (const std::string d = t ? kernels::dtype_name(t->dtype()) : computed_dtype(r); !d.empty())
    s.rung_json[i]["dtype"] = d;
  s.rung_json[i]["final_loss"] = curve.empty() ? json() : json(curve.back().loss);
  s.status[i] = "done";
  s.write_ladder();
  return true;
}

}  // namespace

bool train_ladder(LadderConfig& cfg, const LadderRunOptions& o) {
  if (o.out.empty()) fail("marin ladder: no output directory");
  cfg.finalize();
  // Every rank trains every rung together (data parallel); rank 0 alone writes files and talks.
  parallel::Comm& world = parallel::world();
  LadderState s{cfg, o, world.is_root(), "", {}, {}};
  // One ladder at a time in a directory (a second one would train the same rungs at once); each
  // rung's trainer also locks its rung directory while it writes it.
  std::unique_ptr<RunLock> lock;
  if (s.root) lock = std::make_unique<RunLock>(o.out, "marin ladder");
  const CurveEvaluator eval = o.evaluator ? o.evaluator
                              : cfg.macro ? macro_loss_curve(*cfg.macro, cfg.tokenizer)
                                          : CurveEvaluator(valid_ce_curve);
  s.metric = o.evaluator ? o.metric : cfg.macro ? "macro_loss" : "valid_ce";
  check_named_runs(cfg, o);
  s.rung_json.resize(cfg.rungs.size());
  s.status.assign(cfg.rungs.size(), "pending");
  for (size_t i = 0; i < cfg.rungs.size(); ++i) {
    cfg.rungs[i].dir = (fs::path(o.out) / ("rung-" + cfg.rungs[i].run)).string();
    s.rung_json[i] = cfg.rungs[i].summary();
  }
  const std::map<std::string, json> imported = imported_runs(s);
  bool complete = true;
  for (size_t i = 0; i < cfg.rungs.size(); ++i) {
    if (pass_over(s, i, imported, complete)) continue;
    if (!train_run(s, i, eval, world)) return false;
  }
  s.write_ladder();  // also when every run was left out or is a canary
  return complete;
}

json read_ladder_json(const std::string& dir) {
  const std::string file = (fs::path(dir) / "ladder.json").string();
  if (!fs::exists(file)) fail("{}: not found (run `marin ladder --out {}` first)", file, dir);
  const json j = load_json(file);
  if (!j.is_object() || j.value("format", json()) != "marin-ladder-v1")
    fail("{}: not a marin ladder.json", file);
  // A forecast fits every run at every fraction and refits them for each holdout, so the count
  // is bounded here too, not only when a ladder file is read: a ladder.json written by hand (or
  // edited) lists at most the runs one ladder may have.
  if (j.contains("rungs") && j["rungs"].is_array() && j["rungs"].size() > kMaxLadderRuns)
    fail("{}: {} runs in \"rungs\", more than the limit of {} for one ladder (kMaxLadderRuns)",
         file, j["rungs"].size(), kMaxLadderRuns);
  return j;
}

}  // namespace marin::scaling
