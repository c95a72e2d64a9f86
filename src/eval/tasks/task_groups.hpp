// Groups of harness tasks (a YAML with `group:` and a `task:` list) and their aggregate scores as
// lm-evaluation-harness v0.4 computes and writes them (consolidate_group_results,
// prepare_print_tasks, get_subtask_list).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace marin::eval {

// One entry of a group's aggregate_metric_list (the harness's AggMetricConfig).
struct GroupMetric {
  std::string metric;
  bool weight_by_size = false;
  std::vector<std::string> filters{"none"};
};

struct TaskGroup {
  std::string name, alias, file;     // alias: group_alias, else the name
  std::vector<std::string> members;  // direct members: task names and subgroup names, in order
  std::vector<std::string> leaves;   // every task below it (subgroups flattened), in order
  bool aggregates = false;           // aggregate_metric_list given (else the harness's " ": " ")
  std::vector<GroupMetric> metrics;
  nlohmann::json version;  // metadata.version (null when absent)
};

// A group from the task index's record of its file (render_tasks.py index, "group_configs");
// members are filled by the caller. marin::Error naming the file, key and value for an
// aggregation other than "mean", a metric entry without `metric`, or a bad weight_by_size.
TaskGroup group_from_config(const std::string& name, const nlohmann::json& cfg);

// The harness's group aggregation over results in its layout (j["results"][task] with
// "metric,filter", "metric_stderr,filter" and "sample_len"), for groups ordered members before
// their groups: per aggregated metric the mean over the group's leaf tasks that report it,
// weighted by their sample counts when weight_by_size (aggregate_subtask_metrics), its stderr
// pooled (pooled_sample_stderr; "N/A" when a member's is); results[group] also gets "alias";
// "groups" (the aggregating groups), "group_subtasks" (each group's direct members; tasks under a
// group lose their own empty entry), versions and higher_is_better (the members', merged) follow.
// Tasks under a group get the harness's " - " alias prefix by depth.
void add_group_results(nlohmann::json& j, const std::vector<TaskGroup>& groups);

// The harness's pooled_sample_stderr: sqrt(Σ (n_i − 1) s_i² n_i / (Σ n_i − k) / Σ n_i).
double pooled_sample_stderr(const std::vector<double>& stderrs, const std::vector<double>& sizes);

}  // namespace marin::eval
