#include "report/task_scores.hpp"

#include <algorithm>
#include <filesystem>

#include "core/error.hpp"
#include "core/json_file.hpp"

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
}  // namespace

json task_scores(const std::string& file) {
  const json j = load_json(file);
  if (!is_task_results(j))
    fail(
        "{}: not a results JSON of marin eval --tasks (expected \"results\" and "
        "\"marin\": {{\"format\": \"marin-tasks-results/1\"}})",
        file);
  const json& cfg = j.value("config", json::object());
  return {{"file", file},
          {"step", cfg.is_object() && cfg.contains("step") ? cfg["step"] : json()},
          {"rows", rows_of(j, file)}};
}

json run_task_scores(const std::string& run, const std::vector<std::string>& extra) {
  json out = json::array();
  std::vector<std::string> top;
  for (const auto& e : fs::directory_iterator(run))
    if (e.is_regular_file() && e.path().extension() == ".json") top.push_back(e.path().string());
  std::sort(top.begin(), top.end());
  for (const std::string& f : top)  // other JSON files of the run (run.json, …) are not results
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

}  // namespace marin::report
