#include "eval/tasks/task_groups.hpp"

#include <fmt/format.h>

#include <cmath>
#include <map>

#include "core/error.hpp"

namespace marin::eval {

using json = nlohmann::json;

TaskGroup group_from_config(const std::string& name, const json& cfg) {
  TaskGroup g;
  g.name = name;
  g.file = cfg.value("file", std::string());
  g.alias = cfg.contains("group_alias") && cfg["group_alias"].is_string()
                ? cfg["group_alias"].get<std::string>()
                : name;
  g.version = cfg.contains("version") ? cfg["version"] : json(nullptr);
  const json& aml = cfg.contains("aggregate_metric_list") ? cfg["aggregate_metric_list"] : json();
  if (aml.is_null()) return g;
  g.aggregates = true;
  for (size_t i = 0; i < aml.size(); ++i) {
    const json& m = aml[i];
    const std::string where =
        fmt::format("{}: group '{}': aggregate_metric_list[{}]", g.file, name, i);
    MARIN_CHECK(m.is_object() && m.contains("metric") && m["metric"].is_string(),
                "{}: expected a mapping with a `metric` name, got {}", where, m.dump());
    GroupMetric gm;
    gm.metric = m["metric"].get<std::string>();
    const json& agg = m["aggregation"];
    // The harness aggregates groups with "mean" only (AggMetricConfig refuses any other name);
    // a !function aggregation is not run here.
    MARIN_CHECK(agg == "mean",
                "{}: aggregation {}: only \"mean\" is supported across a group's tasks", where,
                agg.dump());
    MARIN_CHECK(m["weight_by_size"].is_boolean(), "{}: weight_by_size {}: expected true or false",
                where, m["weight_by_size"].dump());
    gm.weight_by_size = m["weight_by_size"].get<bool>();
    gm.filters.clear();
    for (const json& f : m["filter_list"]) {
      MARIN_CHECK(f.is_string(), "{}: filter_list entry {}: expected a filter name", where,
                  f.dump());
      gm.filters.push_back(f.get<std::string>());
    }
    g.metrics.push_back(gm);
  }
  return g;
}

double pooled_sample_stderr(const std::vector<double>& stderrs, const std::vector<double>& sizes) {
  double num = 0, total = 0;
  for (size_t i = 0; i < stderrs.size(); ++i) {
    num += (sizes[i] - 1) * stderrs[i] * stderrs[i] * sizes[i];
    total += sizes[i];
  }
  const double dof = total - double(sizes.size());
  if (dof <= 0) return std::nan("");  // every member of one item: Python divides by zero
  return std::sqrt(num / dof / total);
}

namespace {

// The harness's aggregate_subtask_metrics.
double aggregate_mean(const std::vector<double>& metrics, const std::vector<double>& sizes,
                      bool weight_by_size) {
  double num = 0, den = 0;
  for (size_t i = 0; i < metrics.size(); ++i) {
    const double w = weight_by_size ? sizes[i] : 1.0;
    num += metrics[i] * w;
    den += w;
  }
  return num / den;
}

void aggregate_one(json& results, const TaskGroup& g) {
  json& out = results[g.name];
  out["alias"] = g.alias;
  out["name"] = g.name;
  if (!g.aggregates) {
    out[" "] = " ";  // the harness's marker of a group without aggregate scores
    return;
  }
  for (const GroupMetric& gm : g.metrics)
    for (const std::string& filter : gm.filters) {
      const std::string key = gm.metric + "," + filter, err = gm.metric + "_stderr," + filter;
      std::vector<double> metrics, sizes, stderrs;
      bool na = false;
      for (const std::string& t : g.leaves) {
        if (!results.contains(t) || !results[t].contains(key)) continue;
        const json& r = results[t];
        metrics.push_back(r[key].get<double>());
        sizes.push_back(r["sample_len"].get<double>());
        if (!r.contains(err)) continue;
        if (r[err].is_number())
          stderrs.push_back(r[err].get<double>());
        else
          na = true;
      }
      if (metrics.empty()) continue;  // no member reports it: the harness writes nothing
      out[key] = aggregate_mean(metrics, sizes, gm.weight_by_size);
      out[err] = na ? json("N/A") : json(pooled_sample_stderr(stderrs, sizes));
      double total = 0;
      for (double s : sizes) total += s;
      out["sample_len"] = uint64_t(total);
    }
}

}  // namespace

void add_group_results(json& j, const std::vector<TaskGroup>& groups) {
  if (groups.empty()) return;
  json& results = j["results"];
  std::map<std::string, const TaskGroup*> by_name;
  for (const TaskGroup& g : groups) by_name[g.name] = &g;
  json grouped = json::object();
  for (const TaskGroup& g : groups) {  // members before their groups
    aggregate_one(results, g);
    if (g.aggregates) grouped[g.name] = results[g.name];
    j["group_subtasks"][g.name] = g.members;
    for (const std::string& m : g.members)
      if (!by_name.count(m)) j["group_subtasks"].erase(m);  // a task under a group: no own entry
    if (g.aggregates) j["versions"][g.name] = g.version;
    // higher_is_better: the members' merged; a metric they disagree on is null (the harness's).
    json h = json::object();
    for (const std::string& m : g.members) {
      if (!j["higher_is_better"].contains(m)) continue;
      for (const auto& [k, v] : j["higher_is_better"][m].items())
        h[k] = h.contains(k) && h[k] != v ? json(nullptr) : v;
    }
    j["higher_is_better"][g.name] = h;
  }
  // The harness's alias prefix: a member at depth d > 0 is " " * d + "- " + alias.
  std::map<std::string, int> depth;
  auto mark = [&](auto&& self, const std::string& name, int d) -> void {
    if (depth.count(name)) return;
    depth[name] = d;
    if (auto it = by_name.find(name); it != by_name.end())
      for (const std::string& m : it->second->members) self(self, m, d + 1);
  };
  for (auto it = groups.rbegin(); it != groups.rend(); ++it) mark(mark, it->name, 0);
  for (const auto& [name, d] : depth) {
    if (d == 0 || !results.contains(name)) continue;
    const std::string prefix = std::string(size_t(d), ' ') + "- ";
    results[name]["alias"] = prefix + results[name]["alias"].get<std::string>();
    if (grouped.contains(name)) grouped[name]["alias"] = results[name]["alias"];
  }
  if (!grouped.empty()) j["groups"] = grouped;
}

}  // namespace marin::eval
