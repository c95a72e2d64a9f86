// marin report shows downstream-task scores and per-domain evaluations: marin eval (--tasks)
// results JSON written into the run directory, its eval/ folder, its checkpoints/ folder or a
// checkpoint's own folder after training, the trainer's newest RUN/tasks/step-N.json, and files
// given with --task-results.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "core/error.hpp"
#include "core/fileio.hpp"
#include "eval/domain_eval.hpp"
#include "eval/tasks/task_scorer.hpp"
#include "report/report.hpp"
#include "report/task_scores.hpp"

namespace marin {
namespace {
using json = nlohmann::json;
using testing::TempDir;

// A results JSON as marin eval writes it (TaskResults::to_json), with a clean/contaminated split
// and a group over the two tasks.
json results(double acc_a, double acc_b, int step) {
  eval::TaskResults rs;
  for (auto [name, acc, n] : {std::tuple{"task_a", acc_a, 10}, std::tuple{"task_b", acc_b, 30}}) {
    eval::TaskResult t;
    t.task = name;
    t.metrics = {"acc"};
    t.effective = t.original = n;
    t.all["acc"] = {acc, 0.1};
    t.audited = true;
    t.clean["acc"] = {acc + 0.25, std::nullopt};
    t.contaminated["acc"] = {acc - 0.25, std::nullopt};
    rs.tasks.push_back(t);
  }
  eval::TaskGroup g = eval::group_from_config("both", {{"file", "g.yaml"},
                                                       {"aggregate_metric_list",
                                                        {{{"metric", "acc"},
                                                          {"aggregation", "mean"},
                                                          {"weight_by_size", true},
                                                          {"filter_list", {"none"}}}}}});
  g.members = g.leaves = {"task_a", "task_b"};
  rs.groups = {g};
  return rs.to_json(step >= 0 ? json{{"step", step}} : json::object());
}

TEST(ReportTasks, ShowsEvalResultsOfTheRunAndGivenFiles) {
  TempDir d("report-tasks");
  std::filesystem::create_directories(d.str("run/tasks"));
  write_file_atomic(d.str("run/metrics.jsonl"), "{\"step\": 1, \"loss\": 2.5}\n");
  write_file_atomic(d.str("run/eval.json"), results(0.5, 0.75, -1).dump());
  write_file_atomic(d.str("run/tasks/step-00000004.json"), results(0.1, 0.1, 4).dump());
  write_file_atomic(d.str("run/tasks/step-00000008.json"), results(0.25, 0.5, 8).dump());
  write_file_atomic(d.str("other.json"), results(1.0, 0.0, -1).dump());
  report::ReportOptions o;
  o.measure_peak = false;
  o.task_results = {d.str("other.json")};
  const json data = json::parse(report::report_data({d.str("run")}, o));
  const json& s = data["runs"][0]["task_scores"];
  ASSERT_EQ(s.size(), 3u);  // run/eval.json, the newest step file, the given file
  EXPECT_EQ(s[0]["file"], d.str("run/eval.json"));
  EXPECT_TRUE(s[0]["step"].is_null());
  EXPECT_EQ(s[1]["file"], d.str("run/tasks/step-00000008.json"));
  EXPECT_EQ(s[1]["step"], 8);
  EXPECT_EQ(s[2]["file"], d.str("other.json"));
  // Rows: [alias, metric,filter, value, stderr, items, clean, contaminated]; the group's
  // aggregate (0.5·10 + 0.75·30) / 40 and its tasks (aliases with the harness's " - ").
  const json& rows = s[0]["rows"];
  ASSERT_EQ(rows.size(), 3u) << rows.dump();
  EXPECT_EQ(rows[0][0], "both");
  EXPECT_EQ(rows[0][1], "acc,none");
  EXPECT_DOUBLE_EQ(rows[0][2].get<double>(), (0.5 * 10 + 0.75 * 30) / 40);
  EXPECT_EQ(rows[0][4], 40);
  EXPECT_TRUE(rows[0][5].is_null());  // a group has no clean/contaminated split
  EXPECT_EQ(rows[1], json({" - task_a", "acc,none", 0.5, 0.1, 10, 0.75, 0.25}));
  EXPECT_EQ(rows[2], json({" - task_b", "acc,none", 0.75, 0.1, 30, 1.0, 0.5}));
  EXPECT_DOUBLE_EQ(s[1]["rows"][1][2].get<double>(), 0.25);
  // The page carries the section; a given file that is not such a results JSON is named.
  EXPECT_NE(report::render_report({d.str("run")}, o).find("Downstream tasks"), std::string::npos);
  o.task_results = {d.str("run/metrics.jsonl")};
  const std::string e = testing::error_of([&] { report::report_data({d.str("run")}, o); });
  EXPECT_NE(e.find(d.str("run/metrics.jsonl")), std::string::npos) << e;
  // The command line's option.
  const auto r = testing::run("report " + d.str("run") + " --no-peak --task-results " +
                              d.str("other.json") + " --out " + d.str("r.html"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(read_file(d.str("r.html")).find("other.json"), std::string::npos);
}

// Results written after training next to the checkpoints are found without being named: a
// --tasks result in a checkpoint's folder and in RUN/eval/, a per-domain `marin eval --json` in
// RUN/checkpoints/; each is placed at the step of the checkpoint it scored. The run's and the
// checkpoints' own JSON files are not taken for results.
TEST(ReportTasks, FindsMarinEvalResultsWrittenAfterTrainingNextToTheCheckpoints) {
  TempDir d("report-eval-found");
  const std::string ck8 = d.str("run/checkpoints/step-00000008");
  std::filesystem::create_directories(ck8);
  std::filesystem::create_directories(d.str("run/eval"));
  write_file_atomic(d.str("run/metrics.jsonl"), "{\"step\": 1, \"loss\": 2.5}\n");
  write_file_atomic(ck8 + "/state.json", R"({"step": 8, "threads": 2})");
  write_file_atomic(ck8 + "/config.json", "{}");
  json in_ckpt = results(0.5, 0.75, -1);  // config.model_args names no checkpoint: its folder
  write_file_atomic(ck8 + "/tasks.json", in_ckpt.dump());
  json named = results(0.25, 0.5, -1);
  named["config"]["model_args"] = "checkpoint=" + d.str("run/checkpoints/step-00000004");
  write_file_atomic(d.str("run/eval/tasks-4.json"), named.dump());
  // A per-domain result as marin eval --json writes it (EvalReport::to_json, with "checkpoint").
  eval::EvalReport rep;
  eval::DomainResult dom;
  dom.domain = "fortunes";
  dom.all.documents = 2;
  dom.all.tokens = dom.all.predictions = 10;
  dom.all.bytes = 40;
  dom.all.ce = 25;
  rep.domains = {dom};
  rep.macro.loss = 2.5;
  rep.macro.domains = 1;
  json domains = rep.to_json();
  domains["checkpoint"] = ck8;
  write_file_atomic(d.str("run/checkpoints/domains.json"), domains.dump());

  EXPECT_EQ(report::eval_result_files(d.str("run")),
            (std::vector<std::string>{d.str("run/eval/tasks-4.json"),
                                      d.str("run/checkpoints/domains.json"), ck8 + "/tasks.json"}));
  report::ReportOptions o;
  o.measure_peak = false;
  const json data = json::parse(report::report_data({d.str("run")}, o));
  const json& run = data["runs"][0];
  ASSERT_EQ(run["task_scores"].size(), 2u) << run["task_scores"].dump();
  EXPECT_EQ(run["task_scores"][0]["file"], d.str("run/eval/tasks-4.json"));
  EXPECT_EQ(run["task_scores"][0]["step"], 4);
  EXPECT_EQ(run["task_scores"][1]["file"], ck8 + "/tasks.json");
  EXPECT_EQ(run["task_scores"][1]["step"], 8);
  ASSERT_EQ(run["domain_evals"].size(), 1u);
  const json& e = run["domain_evals"][0];
  EXPECT_EQ(e["step"], 8);
  EXPECT_EQ(e["macro_loss"], 2.5);
  EXPECT_EQ(e["rows"][0],
            json({"fortunes", 2.5, 25 / (std::log(2.0) * 40), 2, 10, nullptr, nullptr}));
  EXPECT_EQ(run["threads"], 2);  // no run.json: the checkpoint's state.json says
  // The page's sections.
  const std::string html = report::render_report({d.str("run")}, o);
  EXPECT_NE(html.find("Evaluations of the checkpoints (marin eval, per domain)"),
            std::string::npos);
}

}  // namespace
}  // namespace marin
