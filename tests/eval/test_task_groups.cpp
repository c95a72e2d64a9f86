// Groups of harness tasks (issue 40): a `group:` YAML's tasks are scored and its aggregate is the
// harness's (consolidate_group_results): the mean over its leaf tasks, weighted by their sample
// counts with weight_by_size, and pooled_sample_stderr; the results JSON has `groups`,
// `group_subtasks` and the " - " aliases as the harness writes them.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "core/error.hpp"
#include "core/fileio.hpp"
#include "eval/tasks/task_groups.hpp"
#include "eval/tasks/task_items.hpp"

namespace marin {
namespace {
namespace fs = std::filesystem;
using json = nlohmann::json;
using testing::TempDir;

const std::string kFixture = std::string(MARIN_SOURCE_DIR) + "/data/fixture";

json task_result(double acc, double stderr_, int n) {
  return {{"acc,none", acc}, {"acc_stderr,none", stderr_}, {"alias", "t"}, {"sample_len", n}};
}

// Hand-computed: sizes 10 and 30, acc 0.5 and 0.7: weighted (5 + 21) / 40 = 0.65, plain 0.6;
// pooled stderr sqrt((9·0.01·10 + 29·0.04·30) / (40 − 2) / 40) = sqrt(35.7 / 1520).
TEST(TaskGroups, AggregateIsTheHarnessesWeightedMeanAndPooledStderr) {
  json j = {{"results", {{"a", task_result(0.5, 0.1, 10)}, {"b", task_result(0.7, 0.2, 30)}}},
            {"group_subtasks", {{"a", json::array()}, {"b", json::array()}}},
            {"versions", {{"a", 1.0}, {"b", 1.0}}},
            {"higher_is_better", {{"a", {{"acc", true}}}, {"b", {{"acc", true}}}}}};
  auto group = [](const std::string& name, bool weight) {
    return eval::group_from_config(name, {{"file", "g.yaml"},
                                          {"group_alias", "G " + name},
                                          {"aggregate_metric_list",
                                           {{{"metric", "acc"},
                                             {"aggregation", "mean"},
                                             {"weight_by_size", weight},
                                             {"filter_list", {"none"}}}}},
                                          {"version", 2}});
  };
  eval::TaskGroup w = group("w", true), u = group("u", false);
  w.members = w.leaves = u.members = u.leaves = {"a", "b"};
  eval::add_group_results(j, {w, u});
  EXPECT_DOUBLE_EQ(j["results"]["w"]["acc,none"].get<double>(), 0.65);
  EXPECT_DOUBLE_EQ(j["results"]["u"]["acc,none"].get<double>(), 0.6);
  const double pooled = std::sqrt(35.7 / 1520.0);
  EXPECT_NEAR(j["results"]["w"]["acc_stderr,none"].get<double>(), pooled, 1e-15);
  EXPECT_NEAR(j["results"]["u"]["acc_stderr,none"].get<double>(), pooled, 1e-15);
  EXPECT_EQ(j["results"]["w"]["sample_len"], 40);
  EXPECT_EQ(j["results"]["w"]["alias"], "G w");
  EXPECT_EQ(j["groups"]["w"]["acc,none"], j["results"]["w"]["acc,none"]);
  EXPECT_EQ(j["group_subtasks"]["w"], json({"a", "b"}));
  EXPECT_FALSE(j["group_subtasks"].contains("a"));  // a task under a group has no own entry
  EXPECT_EQ(j["versions"]["w"], 2);
  EXPECT_EQ(j["higher_is_better"]["w"], json({{"acc", true}}));
  EXPECT_EQ(j["results"]["a"]["alias"], " - t");
  // A member without a number for its stderr makes the group's "N/A", as the harness.
  j["results"]["b"]["acc_stderr,none"] = "N/A";
  eval::add_group_results(j, {w});
  EXPECT_EQ(j["results"]["w"]["acc_stderr,none"], "N/A");
  // Other aggregations are refused naming the file, the entry and the value.
  const std::string e = testing::error_of([] {
    eval::group_from_config("g", {{"file", "g.yaml"},
                                  {"aggregate_metric_list",
                                   {{{"metric", "acc"},
                                     {"aggregation", "median"},
                                     {"weight_by_size", false},
                                     {"filter_list", {"none"}}}}}});
  });
  EXPECT_NE(e.find("g.yaml: group 'g': aggregate_metric_list[0]: aggregation \"median\""),
            std::string::npos)
      << e;
}

double weighted(const json& r, const std::vector<std::string>& tasks, bool by_size) {
  double num = 0, den = 0;
  for (const std::string& t : tasks) {
    const double w = by_size ? r[t]["sample_len"].get<double>() : 1.0;
    num += r[t]["acc,none"].get<double>() * w;
    den += w;
  }
  return num / den;
}

// marin's own task files (marin tasks build) in two task directories of different sizes, a group
// of a group: `--tasks outer` scores the three tasks once each, and the aggregates equal the
// weighted means computed here from the tasks' own results (the nested group flattened to its
// leaf tasks, as the harness does).
TEST(TaskGroups, CliScoresAGroupOfTheProjectsTasksAndNestedGroups) {
  TempDir d("task-groups");
  ASSERT_EQ(testing::tiny_checkpoint_with_tokenizer(d), "");
  testing::RunResult r;
  r = testing::run("tasks build --corpus " + kFixture + " --out " + d.str("a") +
                   " --tasks cloze_definitions,verse_completion --max-items 9");
  ASSERT_EQ(r.code, 0) << r.out;
  r = testing::run("tasks build --corpus " + kFixture + " --out " + d.str("b") +
                   " --tasks code_completion --max-items 4");
  ASSERT_EQ(r.code, 0) << r.out;
  marin::testing::write_text(
      d.str("b/inner.yaml"),
      "group: inner\ngroup_alias: Inner\ntask: [cloze_definitions, verse_completion]\n"
      "aggregate_metric_list:\n  - metric: acc\n    weight_by_size: false\n"
      "metadata:\n  version: 3.0\n");
  marin::testing::write_text(
      d.str("b/outer.yaml"),
      "group: outer\ntask: [inner, code_completion]\naggregate_metric_list:\n"
      "  - metric: acc\n    aggregation: mean\n    weight_by_size: true\n"
      "  - metric: acc_norm\n    weight_by_size: true\n");
  marin::testing::write_text(d.str("b/plain.yaml"), "group: plain\ntask: [code_completion]\n");
  r = testing::run("eval --checkpoint " + d.str("ck") + " --tasks outer,plain --task-dir " +
                   d.str("a") + " --task-dir " + d.str("b") + " --quiet --json " + d.str("r.json"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("group outer: acc,none"), std::string::npos) << r.out;
  const json j = json::parse(read_file(d.str("r.json")));
  const json& res = j["results"];
  EXPECT_EQ(j["n-samples"].size(), 3u);  // each task once
  EXPECT_EQ(res["code_completion"]["sample_len"], 4);
  EXPECT_EQ(res["cloze_definitions"]["sample_len"], 9);
  const std::vector<std::string> leaves{"cloze_definitions", "verse_completion", "code_completion"};
  EXPECT_NEAR(res["outer"]["acc,none"].get<double>(), weighted(res, leaves, true), 1e-12);
  EXPECT_NEAR(res["inner"]["acc,none"].get<double>(),
              weighted(res, {"cloze_definitions", "verse_completion"}, false), 1e-12);
  std::vector<double> se, n;
  for (const std::string& t : leaves)
    se.push_back(res[t]["acc_stderr,none"].get<double>()),
        n.push_back(res[t]["sample_len"].get<double>());
  EXPECT_NEAR(res["outer"]["acc_stderr,none"].get<double>(), eval::pooled_sample_stderr(se, n),
              1e-12);
  EXPECT_TRUE(res["outer"]["acc_norm,none"].is_number());
  EXPECT_EQ(res["outer"]["sample_len"], res["cloze_definitions"]["sample_len"].get<int>() +
                                            res["verse_completion"]["sample_len"].get<int>() + 4);
  EXPECT_EQ(res["inner"]["alias"], " - Inner");
  EXPECT_EQ(res["cloze_definitions"]["alias"], "  - cloze_definitions");
  EXPECT_EQ(res["plain"][" "], " ");  // no aggregate_metric_list: the harness's marker
  EXPECT_FALSE(j["groups"].contains("plain"));
  EXPECT_TRUE(j["groups"].contains("inner"));
  EXPECT_EQ(j["group_subtasks"]["outer"], json({"inner", "code_completion"}));
  EXPECT_EQ(j["group_subtasks"]["inner"], json({"cloze_definitions", "verse_completion"}));
  EXPECT_EQ(j["versions"]["inner"], 3.0);
  EXPECT_EQ(j["higher_is_better"]["outer"]["acc"], true);

  // Inline task configs, as the harness reads them: one over a registered task (its keys win:
  // a task_alias), one on its own (data relative to the group file).
  marin::testing::write_text(
      d.str("b/docs.jsonl"),
      "{\"q\": \"In the beginning\", \"choices\": [\"God\", \"light\"], \"answer\": 0}\n"
      "{\"q\": \"And God said\", \"choices\": [\"no\", \"Let there be light\"], "
      "\"answer\": 1}\n");
  marin::testing::write_text(
      d.str("b/inline.yaml"),
      "group: inl\ntask:\n  - task: verse_completion\n    task_alias: Verses\n"
      "  - task: fresh\n    dataset_path: json\n    dataset_kwargs:\n      data_files:\n"
      "        test: docs.jsonl\n    test_split: test\n    output_type: multiple_choice\n"
      "    doc_to_text: '{{q}}'\n    doc_to_choice: choices\n    doc_to_target: answer\n"
      "aggregate_metric_list:\n  - metric: acc\n    weight_by_size: true\n");
  r = testing::run("eval --checkpoint " + d.str("ck") + " --tasks inl --task-dir " + d.str("a") +
                   " --task-dir " + d.str("b") + " --quiet --json " + d.str("i.json"));
  ASSERT_EQ(r.code, 0) << r.out;
  const json k = json::parse(read_file(d.str("i.json")));
  EXPECT_EQ(k["results"]["verse_completion"]["alias"], " - Verses");
  EXPECT_EQ(k["n-samples"]["verse_completion"]["effective"],
            j["n-samples"]["verse_completion"]["effective"]);
  EXPECT_EQ(k["n-samples"]["fresh"]["effective"], 2);
  EXPECT_EQ(k["group_subtasks"]["inl"], json({"verse_completion", "fresh"}));
  EXPECT_NEAR(k["results"]["inl"]["acc,none"].get<double>(),
              weighted(k["results"], {"verse_completion", "fresh"}, true), 1e-12);

  // Refusals: an inline group config and a cycle, each naming the file and the entry.
  marin::testing::write_text(d.str("b/inline2.yaml"),
                             "group: inl2\ntask:\n  - group: x\n    task: [fresh]\n");
  marin::testing::write_text(d.str("b/cyc.yaml"), "group: cyc\ntask: [cyc2]\n");
  marin::testing::write_text(d.str("b/cyc2.yaml"), "group: cyc2\ntask: [cyc]\n");
  const std::vector<std::string> dirs{d.str("a"), d.str("b")};
  std::string e = testing::error_of([&] { eval::resolve_task_files({"inl2"}, dirs); });
  EXPECT_NE(e.find(d.str("b/inline2.yaml") + ": group 'inl2': task[0]: an inline group config"),
            std::string::npos)
      << e;
  e = testing::error_of([&] { eval::resolve_task_files({"cyc"}, dirs); });
  EXPECT_NE(e.find("group 'cyc' contains itself"), std::string::npos) << e;
  e = testing::error_of([&] { eval::resolve_task_files({"outer", "nosuch"}, dirs); });
  EXPECT_NE(e.find("no task, tag or group 'nosuch'"), std::string::npos) << e;
}

}  // namespace
}  // namespace marin
