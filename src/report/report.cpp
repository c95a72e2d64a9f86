// marin report (see report.hpp): gathers what a run directory holds into one JSON object and
// pours it into src/report/report.html with uPlot inlined.
#include "report/report.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/json_file.hpp"
#include "embed/report_html.inc"
#include "embed/uplot_css.inc"
#include "embed/uplot_js.inc"
#include "kernels/kernels.hpp"
#include "model/accounting.hpp"
#include "model/config.hpp"
#include "report/task_scores.hpp"
#include "scaling/forecast.hpp"
#include "train/checkpoint.hpp"
#include "train/run_checkpoint.hpp"
#include "train/safetensors.hpp"
#include "train/sharded_checkpoint.hpp"

namespace marin::report {
namespace fs = std::filesystem;
using json = nlohmann::json;

bool charts_available() {
  return embed::uplot_js_found && embed::uplot_css_found;
}

namespace {

// Largest model.safetensors whose router biases the report reads (the whole file is parsed; of a
// sharded checkpoint, three times this over all its shards: parameters, m and v).
constexpr uintmax_t kMaxBiasFileBytes = 1ull << 30;

// Every numeric leaf of a metrics line, by its dotted path ("lr.adam", "router.3.entropy",
// "eval.domains.fortunes.ce"), so that a field the trainer adds later is drawn without a change
// here.
void flatten(const json& j, const std::string& prefix, std::map<std::string, double>& out) {
  if (j.is_number()) {
    const double v = j.get<double>();
    if (std::isfinite(v)) out[prefix] = v;
  } else if (j.is_boolean()) {
    out[prefix] = j.get<bool>() ? 1 : 0;
  } else if (j.is_object()) {
    for (auto& [k, v] : j.items()) flatten(v, prefix.empty() ? k : prefix + "." + k, out);
  } else if (j.is_array()) {
    for (size_t i = 0; i < j.size(); ++i)
      flatten(j[i], prefix.empty() ? std::to_string(i) : prefix + "." + std::to_string(i), out);
  }
}

// RUN/metrics.jsonl as columns (null where a line lacks the field); thinned to about max_points
// lines, always keeping the lines that carry an evaluation or a forecast record.
json metric_columns(const std::string& path, int max_points, json& last_eval, bool& zero_based) {
  std::vector<json> lines;
  if (fs::exists(path)) {
    const std::string text = read_file(path);
    int64_t no = 0;
    for (std::string_view line : split_lines(text)) {
      ++no;
      if (line.find_first_not_of(" \t\r") == std::string_view::npos) continue;
      if (auto j = try_parse_json(line)) {
        lines.push_back(std::move(*j));
      } else if (size_t(no) != split_lines(text).size()) {
        // A line being written while the report is read: only the last one may be partial.
        // Any other is an error saying why (parse_json names the file, line and reason).
        parse_json(line, fmt::format("{}:{}", path, no));
      }
    }
  }
  // A metrics.jsonl written before steps counted from 1 starts at "step": 0 (a fresh run; a
  // fork of such a run cannot be told apart): its steps are shifted onto the one convention.
  zero_based =
      !lines.empty() && lines.front().is_object() && lines.front().value("step", json()) == 0;
  if (zero_based)
    for (json& m : lines)
      if (m.is_object() && m.contains("step") && m["step"].is_number_integer())
        m["step"] = m["step"].get<int64_t>() + 1;
  const size_t stride = std::max<size_t>(1, lines.size() / size_t(std::max(1, max_points)));
  std::vector<std::map<std::string, double>> rows;
  std::map<std::string, int> names;
  double wall = 0;  // the run's training time so far: Σ step_seconds of every line, thinned or not
  // seam: bookkeeping over the lines of a file, not tensor math
  for (size_t i = 0; i < lines.size(); ++i) {
    const json& m = lines[i];
    if (m.contains("step_seconds") && m["step_seconds"].is_number())
      wall += m["step_seconds"].get<double>();
    if (m.contains("eval")) last_eval = {{"step", m.value("step", 0)}, {"eval", m["eval"]}};
    const bool keep = i % stride == 0 || i + 1 == lines.size() || m.contains("eval") ||
                      m.contains("valid_ce") || m.contains("forecast");
    if (!keep) continue;
    rows.emplace_back();
    flatten(m, "", rows.back());
    rows.back()["x.wall_seconds"] = wall;
    for (auto& [k, _] : rows.back()) names[k] = 1;
  }
  json cols = json::object();
  for (auto& [name, _] : names) {
    json c = json::array();
    for (auto& r : rows) {
      auto it = r.find(name);
      c.push_back(it == r.end() ? json(nullptr) : json(it->second));
    }
    cols[name] = std::move(c);
  }
  return cols;
}

// max − min of each layer's router biases (QB state), from `bias(l)` (null once a layer has none).
json bias_spread(int64_t layers, const std::function<const std::vector<float>*(int64_t)>& bias) {
  json spread = json::array();
  for (int64_t l = 0; l < layers; ++l) {
    const std::vector<float>* b = bias(l);
    if (!b) break;
    const auto [lo, hi] = std::minmax_element(b->begin(), b->end());
    spread.push_back(b->empty() ? 0.0 : double(*hi - *lo));
  }
  return spread;
}

std::string bias_name(int64_t layer) {
  return fmt::format("layers.{}.moe.router_bias", layer);
}

// A full checkpoint: its model.safetensors' size and bias spread.
void full_biases(const fs::path& model, int64_t layers, json& c) {
  if (!fs::exists(model)) return;
  c["bytes"] = fs::file_size(model);
  if (fs::file_size(model) > kMaxBiasFileBytes) return;
  const SafetensorsFile f = read_safetensors(model.string());
  c["bias_spread"] = bias_spread(layers, [&](int64_t l) -> const std::vector<float>* {
    return f.contains(bias_name(l)) ? &f.at(bias_name(l)).data : nullptr;
  });
}

// A sharded checkpoint: its shard files' size (parameters and optimizer state) and the bias
// spread, reading only the shards that hold the biases.
void sharded_biases(const std::string& dir, int64_t layers, json& c) {
  const json st = load_json(dir + "/state.json");
  uintmax_t bytes = 0;
  for (const std::string& f : sharded_files(st, dir)) bytes += fs::file_size(dir + "/" + f);
  c["bytes"] = bytes;
  if (bytes > 3 * kMaxBiasFileBytes) return;
  const ParamTable table(load_config(dir));
  std::vector<std::vector<float>> biases;
  std::vector<StateTarget> want;
  for (int64_t l = 0; l < layers && table.find(bias_name(l)); ++l)
    biases.emplace_back(size_t(table.at(bias_name(l)).size));
  for (size_t l = 0; l < biases.size(); ++l)
    want.push_back({bias_name(int64_t(l)), 0, int64_t(biases[l].size()), biases[l].data()});
  load_sharded_state(dir, table, want);
  c["bias_spread"] = bias_spread(
      layers, [&](int64_t l) { return size_t(l) < biases.size() ? &biases[size_t(l)] : nullptr; });
}

// The run's checkpoints, oldest first, with their step and the QB bias spread of every layer.
json checkpoints(const std::string& run, int64_t layers) {
  json out = json::array();
  std::vector<std::string> dirs = checkpoint_dirs(run);  // the complete ones, newest first
  std::reverse(dirs.begin(), dirs.end());
  for (const fs::path p : dirs) {
    json c = {{"name", p.filename().string()}};
    if (fs::exists(p / "state.json")) {
      const std::string path = (p / "state.json").string();
      const json st = load_json(path);
      c["step"] = json_value(st, "step", int64_t(-1), path);
      c["threads"] = json_value(st, "threads", 0, path);
      if (st.contains("lineage") && !st["lineage"].is_null()) c["lineage"] = st["lineage"];
    }
    if (is_sharded_checkpoint(p.string()))
      sharded_biases(p.string(), layers, c);
    else
      full_biases(p / "model.safetensors", layers, c);
    out.push_back(std::move(c));
  }
  return out;
}

// The forecast's band at each fraction (prediction ± the fit's leave-one-out RMSE).
json forecast_band(const std::string& path) {
  const json f = load_json(path);
  json band = json::array();
  if (!f.is_object() || !f.contains("fits") || !f["fits"].is_array())
    fail("{}: no \"fits\" array (a marin forecast.json?)", path);
  scaling::Forecast fc;
  try {
    fc = scaling::Forecast::from_json(f);
  } catch (const Error& e) {
    fail("{}: {}", path, e.what());
  }
  for (size_t i = 0; i < fc.fits.size(); ++i) {
    const scaling::FractionFit& e = fc.fits[i];
    if (!e.all.predicted) continue;
    const double p = *e.all.predicted;
    double r = 0;
    if (e.all.fit.is_object() && e.all.fit.contains("loo"))
      r = json_value(e.all.fit["loo"], "rmse", 0.0, fmt::format("{}: fits[{}].fit.loo", path, i));
    band.push_back({{"step", e.target_step},
                    {"fraction", e.fraction},
                    {"predicted", p},
                    {"lo", p - r},
                    {"hi", p + r}});
  }
  json out = {{"file", path}, {"band", band}};
  if (f.contains("prediction")) out["metric"] = fc.prediction.metric;
  return out;
}

json run_data(const std::string& run, const ReportOptions& o) {
  if (!fs::is_directory(run)) fail("run directory '{}' does not exist", run);
  const std::string metrics = run + "/metrics.jsonl";
  if (!is_run_dir(run)) fail("'{}' is not a run directory (no metrics.jsonl or run.json)", run);
  json r;
  r["dir"] = fs::absolute(run).lexically_normal().string();
  std::string name = fs::path(r["dir"].get<std::string>()).filename().string();
  r["name"] = name;
  json opts = json::object();
  if (fs::exists(run + "/run.json")) {
    const std::string path = run + "/run.json";
    const json rj = load_json(path);
    opts = json_value(rj, "options", json::object(), path);
    if (!opts.is_object()) json_type_error(path, "options", "an object", opts);
    r["lineage"] = rj.value("lineage", json());
    r["world_size"] = json_value(rj, "world_size", 1, path);
    r["dtype"] = json_value(rj, "dtype", std::string(), path);  // "": written before it was
    r["threads"] = json_value(rj, "threads", 0, path);          // 0: written before it was
  }
  int64_t layers = 0;
  if (opts.contains("model")) {
    const std::string where = run + "/run.json: options";
    const ModelConfig c = ModelConfig::from_json(opts["model"], run + "/run.json");
    // The validation train applies: the accounting below assumes a model that could run.
    try {
      c.validate();
    } catch (const Error& e) {
      fail("{}/run.json: options.model: {}", run, e.what());
    }
    layers = c.num_layers;
    const int64_t batch = json_value(opts, "batch", int64_t(1), where);
    const json optimizer = json_value(opts, "optimizer", json::object(), where);
    r["model"] = {{"preset", json_value(opts, "preset", std::string(), where)},
                  {"layers", c.num_layers},
                  {"experts", c.num_experts},
                  {"top_k", c.top_k},
                  {"active_params", account(c).active_params},
                  {"batch", batch},
                  {"seq_len", c.seq_len},
                  {"steps", json_value(opts, "steps", int64_t(0), where)},
                  {"transport", json_value(opts, "transport", std::string(), where)},
                  {"optimizer", json_value(optimizer, "kind", std::string(), where + ".optimizer")},
                  {"train_flops_per_token", 3.0 * double(forward_flops_per_token(c))}};
  }
  json last_eval;
  bool zero_based = false;
  r["columns"] = metric_columns(metrics, o.max_points, last_eval, zero_based);
  if (zero_based)
    r["note"] = metrics + " counts steps from 0 (written before marin counted from 1): shown + 1";
  r["last_eval"] = last_eval;
  r["checkpoints"] = checkpoints(run, layers);
  if (r.value("threads", 0) == 0)  // a run.json without it: the newest checkpoint's state.json
    for (const json& c : r["checkpoints"])
      if (c.value("threads", 0) > 0) r["threads"] = c["threads"];
  if (r.contains("model") && r["columns"].contains("step")) {
    // Tokens trained on so far: the step (1-based, the steps done) × batch × seq_len.
    const double per_step =
        double(r["model"]["batch"].get<int64_t>()) * double(r["model"]["seq_len"].get<int64_t>());
    json tokens = json::array();
    for (const json& step : r["columns"]["step"])
      tokens.push_back(step.is_number() ? json(step.get<double>() * per_step) : json());
    r["columns"]["x.tokens"] = std::move(tokens);
  }
  std::string fc = o.forecast.empty()
                       ? json_value(opts, "forecast", std::string(), run + "/run.json: options")
                       : o.forecast;
  if (!fc.empty()) {
    if (!fs::exists(fc) && fs::exists(fs::path(run) / fc)) fc = (fs::path(run) / fc).string();
    if (fs::exists(fc))
      r["forecast"] = forecast_band(fc);
    else
      r["forecast_missing"] = fc;
  }
  if (fs::exists(run + "/forecast_report.json"))
    r["forecast_report"] = load_json(run + "/forecast_report.json");
  r["task_scores"] = run_task_scores(run, o.task_results);
  r["domain_evals"] = run_domain_evals(run);
  return r;
}

// JSON inside <script>: "</script", "<!--" and "-->" would change how the HTML parser reads the
// element, and U+2028/U+2029 end a line inside a JavaScript string in older engines. All of them
// occur only inside JSON strings, where \uXXXX stands for the same character.
std::string script_safe(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    const char ch = s[i];
    if (ch == '<')
      out += "\\u003c";
    else if (ch == '>')
      out += "\\u003e";
    else if (ch == '&')
      out += "\\u0026";
    else if (ch == '\xe2' && i + 2 < s.size() && s[i + 1] == '\x80' &&
             (s[i + 2] == '\xa8' || s[i + 2] == '\xa9'))
      out += s[i + 2] == '\xa8' ? "\\u2028" : "\\u2029", i += 2;
    else
      out += ch;
  }
  return out;
}

void replace_once(std::string& s, const std::string& what, const std::string& with) {
  const size_t at = s.find(what);
  MARIN_CHECK(at != std::string::npos, "report template: placeholder {} is missing", what);
  s.replace(at, what.size(), with);
}

json peak_of(const json& run) {
  const std::string dtype = run.value("dtype", std::string());
  const int recorded = run.value("threads", 0), ranks = std::max(1, run.value("world_size", 1));
  const int threads = recorded > 0 ? recorded : omp_get_max_threads();
  // Measured once per process and (dtype, threads): a trainer refreshing its report every N
  // steps pays it once. The same functions as marin bench's peaks (kernels/cpu/peak.cpp).
  static std::map<std::pair<bool, int>, double> measured;
  auto peak = [&](bool bf16) {
    auto [it, fresh] = measured.try_emplace({bf16, threads}, 0.0);
    if (fresh)
      it->second = bf16 ? kernels::measure_bf16_peak(threads).gflops
                        : kernels::measure_fma_peak(threads).gflops;
    return it->second;
  };
  // A bf16 run is judged against the bf16 dot-product peak, as marin bench judges it; the
  // emulated bf16 runs fp32 FMAs, and a CPU without avx512_bf16 has no bf16 peak.
  const double bf16 = dtype == "bf16" ? peak(true) : 0;
  std::string what = bf16 > 0 ? "the bf16 peak" : "the fp32 FMA peak";
  if (dtype == "bf16" && bf16 == 0) what += " (this CPU has no bf16 dot product)";
  if (dtype == "bf16-emulated") what += " (bf16 emulated with fp32 FMAs)";
  what += fmt::format(" at {} thread{}", threads, threads == 1 ? "" : "s");
  if (recorded == 0) what += " (run.json records no thread count: this process's)";
  if (ranks > 1) what += fmt::format(" × {} ranks", ranks);
  if (dtype.empty()) what += " (run.json records no dtype: fp32 assumed)";
  const double gflops = (bf16 > 0 ? bf16 : peak(false)) * ranks;
  return {{"gflops", gflops}, {"dtype", bf16 > 0 ? "bf16" : "fp32"}, {"threads", threads},
          {"ranks", ranks},   {"isa", kernels::isa_name()},          {"label", what}};
}

}  // namespace

bool is_run_dir(const std::string& dir) {
  return fs::is_directory(dir) &&
         (fs::exists(fs::path(dir) / "metrics.jsonl") || fs::exists(fs::path(dir) / "run.json"));
}

std::vector<std::string> find_runs(const std::vector<std::string>& args,
                                   std::vector<std::string>& skipped) {
  std::vector<std::string> runs;
  for (const std::string& a : args) {
    if (is_run_dir(a)) {
      runs.push_back(a);
    } else if (!fs::is_directory(a)) {
      skipped.push_back(a + (fs::exists(a) ? ": not a run directory" : ": does not exist"));
    } else {
      std::vector<std::string> sub, other;
      for (const auto& e : fs::directory_iterator(a))
        (is_run_dir(e.path().string()) ? sub : other).push_back(e.path().string());
      std::sort(sub.begin(), sub.end());
      std::sort(other.begin(), other.end());
      if (sub.empty()) skipped.push_back(a + ": no metrics.jsonl or run.json, nor a run in it");
      for (const std::string& o : other) skipped.push_back(o + ": not a run directory");
      runs.insert(runs.end(), sub.begin(), sub.end());
    }
  }
  if (runs.empty())
    fail("marin report: no run directory (one with metrics.jsonl or run.json): {}",
         fmt::join(skipped, "; "));
  return runs;
}

std::string report_data(const std::vector<std::string>& runs, const ReportOptions& o) {
  if (runs.empty()) fail("marin report: give at least one run directory");
  json d;
  d["generated"] = scaling::utc_now();
  d["runs"] = json::array();
  for (const std::string& r : runs) d["runs"].push_back(run_data(r, o));
  if (o.measure_peak)
    for (json& r : d["runs"]) r["peak"] = peak_of(r);
  if (o.watch_seconds > 0) d["watch_seconds"] = o.watch_seconds;
  // Names and strings from the run's files that are not UTF-8 are shown with U+FFFD in place of
  // each bad byte rather than stopping the report.
  return d.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string render_report(const std::vector<std::string>& runs, const ReportOptions& o) {
  if (!charts_available())
    fail(
        "marin report: this binary was built without uPlot (run scripts/setup.sh, which "
        "installs it from npm into ~/.cache/marin/npm-report, then rebuild; or configure with "
        "-DMARIN_UPLOT_DIR=<uplot's dist folder>)");
  std::string html(embed::report_html, sizeof(embed::report_html) - 1);
  std::string title;
  for (const std::string& r : runs)
    title += (title.empty() ? "" : " vs ") + fs::absolute(r).lexically_normal().filename().string();
  replace_once(html, "/*MARIN_UPLOT_CSS*/",
               std::string(embed::uplot_css, sizeof(embed::uplot_css) - 1));
  const std::string js(embed::uplot_js, sizeof(embed::uplot_js) - 1);
  MARIN_CHECK(js.find("</script") == std::string::npos,
              "uPlot's script contains '</script' and cannot be inlined");
  replace_once(html, "/*MARIN_UPLOT_JS*/", js);
  std::string escaped;
  for (char ch : title) {
    if (ch == '<')
      escaped += "&lt;";
    else if (ch == '>')
      escaped += "&gt;";
    else if (ch == '&')
      escaped += "&amp;";
    else
      escaped += ch;
  }
  replace_once(html, "MARIN_TITLE", escaped);
  // --watch N: the page reloads itself (the file is replaced atomically); only then.
  replace_once(html, "/*MARIN_WATCH*/",
               o.watch_seconds > 0 ? fmt::format("watchReload({});", 1000 * o.watch_seconds)
                                   : std::string());
  replace_once(html, "/*MARIN_DATA*/null", script_safe(report_data(runs, o)));
  return html;
}

void write_report(const std::vector<std::string>& runs, const std::string& out,
                  const ReportOptions& o) {
  write_file_atomic(out, render_report(runs, o));
}

}  // namespace marin::report
