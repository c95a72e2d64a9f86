#include "report/task_scores.hpp"

#include <algorithm>
#include <filesystem>

#include "core/error.hpp"
#include "core/json_file.hpp"
#include "train/run_checkpoint.hpp"

namespace marin::report {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {
bool is_task_results(const json& j) {
  return j.is_object() && j.contains("results") && j["results"].is_object() &&
         j.contains("marin") && j["marin"].is_object() &&
         j["marin"].value("format", std::string()) == "marin-tasks-results/1";
}

json rows_of(const json& j, const std::string& file) {
  json rows = json::array();
  const json& tasks = j["marin"].value("tasks", json::object());
  for (const auto& [name, r] : j["results"].items()) {
    if (!r.is_object()) fail("{}: results.{}: expected an object, got {}", file, name, r.dump());
    const std::string alias =
        r.contains("alias") && r["alias"].is_string() ? r["alias"].get<std::string>() : name;
    for (const auto& [k, v] : r.items()) {
      const size_t comma = k.find(',');
      if (comma == std::string::npos || !v.is_number() || k.substr(0, comma).ends_with("_stderr"))
        continue;
      const std::string err = k.substr(0, comma) + "_stderr" + k.substr(comma);
      // The clean/contaminated subset's value (the lambda names `task` and `key`, not the
      // structured bindings: clang 14, the sanitizer build's compiler, cannot capture those).
      const json* task = tasks.contains(name) ? &tasks[name] : nullptr;
      const std::string& key = k;
      auto subset = [&](const char* which) {
        return task && task->contains(which) && (*task)[which].contains(key) ? (*task)[which][key]
                                                                             : json();
      };
      rows.push_back({alias, k, v, r.contains(err) ? r[err] : json(), r.value("sample_len", json()),
                      subset("clean"), subset("contaminated")});
    }
  }
  return rows;
}

// The step of checkpoint directory `dir` (RUN/checkpoints/step-N or its `latest` link): N.
json checkpoint_step(const std::string& dir) {
  if (dir.empty()) return json();
  fs::path p = fs::path(dir).lexically_normal();
  if (p.filename().empty()) p = p.parent_path();
  std::error_code ec;
  if (fs::is_symlink(p, ec)) p = fs::canonical(p, ec);
  const int64_t step = marin::checkpoint_step(p.string());
  return step < 0 ? json() : json(step);
}

// The step a marin eval result belongs to: the checkpoint it names, else the folder it is in.
json result_step(const std::string& file, const std::string& checkpoint) {
  const json s = checkpoint_step(checkpoint);
  return s.is_null() ? checkpoint_step(fs::path(file).parent_path().string()) : s;
}

std::string named_checkpoint(const json& cfg) {  // config.model_args "checkpoint=PATH"
  const std::string args = cfg.is_object() ? cfg.value("model_args", std::string()) : "";
  return args.starts_with("checkpoint=") ? args.substr(11) : "";
}

// One marin eval (per-domain) results JSON: per-domain rows and the macro loss.
json domain_eval(const std::string& file, const json& j) {
  json rows = json::array();
  auto mean = [](const json& d, const char* which) {
    return d.contains(which) && d[which].is_object() ? d[which].value("mean_ce", json()) : json();
  };
  if (j.contains("domains") && j["domains"].is_object())
    for (const auto& [name, d] : j["domains"].items()) {
      if (!d.is_object() || !d.contains("all") || !d["all"].is_object())
        fail("{}: domains.{}: expected an object with \"all\"", file, name);
      const json& a = d["all"];
      rows.push_back({name, a.value("mean_ce", json()), a.value("bpb", json()),
                      a.value("documents", json()), a.value("tokens", json()), mean(d, "clean"),
                      mean(d, "contaminated")});
    }
  auto macro = [&](const char* k) {
    return j.contains(k) && j[k].is_object() ? j[k].value("loss", json()) : json();
  };
  const std::string ckpt = j.value("checkpoint", std::string());
  return {
      {"file", file},
      {"checkpoint", ckpt},
      {"step", result_step(file, ckpt)},
      {"macro_loss", macro("macro")},
      {"macro_bpb",
       j.contains("macro") && j["macro"].is_object() ? j["macro"].value("bpb", json()) : json()},
      {"clean_macro_loss", macro("macro_clean")},
      {"contaminated_macro_loss", macro("macro_contaminated")},
      {"rows", rows}};
}
}  // namespace

json task_scores(const std::string& file) {
  const json j = load_json(file);
  if (!is_task_results(j))
    fail(
        "{}: not a results JSON of marin eval --tasks (expected \"results\" and "
        "\"marin\": {{\"format\": \"marin-tasks-results/1\"}})",
        file);
  const json& cfg = j.value("config", json::object());
  return {
      {"file", file},
      {"step", cfg.is_object() && cfg.contains("step") ? cfg["step"]
                                                       : result_step(file, named_checkpoint(cfg))},
      {"rows", rows_of(j, file)}};
}

std::vector<std::string> eval_result_files(const std::string& run) {
  std::vector<std::string> out;
  auto scan = [&](const fs::path& dir) {
    if (!fs::is_directory(dir)) return;
    std::vector<std::string> found;
    for (const auto& e : fs::directory_iterator(dir)) {
      const std::string name = e.path().filename().string();
      // A checkpoint's own files (and the run's) are not results: not even parsed.
      if (e.is_regular_file() && e.path().extension() == ".json" && name != "state.json" &&
          name != "config.json" && name != "tokenizer.json" && name != "run.json" &&
          name != "lineage.json")
        found.push_back(e.path().string());
    }
    std::sort(found.begin(), found.end());
    out.insert(out.end(), found.begin(), found.end());
  };
  scan(run);
  scan(fs::path(run) / "eval");
  scan(fs::path(run) / "checkpoints");
  const std::vector<std::string> steps = checkpoint_dirs(run);  // newest first
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) scan(*it);
  return out;
}

json run_task_scores(const std::string& run, const std::vector<std::string>& extra) {
  json out = json::array();
  for (const std::string& f : eval_result_files(run))  // other JSON files are not results
    if (is_task_results(load_json(f))) out.push_back(task_scores(f));
  std::vector<std::string> steps;
  if (fs::is_directory(fs::path(run) / "tasks"))
    for (const auto& e : fs::directory_iterator(fs::path(run) / "tasks"))
      if (e.is_regular_file() && e.path().filename().string().starts_with("step-") &&
          e.path().extension() == ".json")
        steps.push_back(e.path().string());
  std::sort(steps.begin(), steps.end());  // step-%08d: name order is step order
  if (!steps.empty()) out.push_back(task_scores(steps.back()));
  for (const std::string& f : extra) out.push_back(task_scores(f));
  return out;
}

json run_domain_evals(const std::string& run) {
  json out = json::array();
  for (const std::string& f : eval_result_files(run)) {
    const json j = load_json(f);
    if (j.is_object() && j.value("format", std::string()) == "marin-eval/1")
      out.push_back(domain_eval(f, j));
  }
  return out;
}

}  // namespace marin::report
