// A harness task's own process_results and aggregations (issue 40, --trust-task-code): the
// task's Python gets each document and the model's (loglikelihood, is_greedy) per choice, as the
// harness passes them, returns the document's metric dict, and metric_list aggregates each metric
// by a registered aggregation (mean, median, …) or the task's own !function.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "core/fileio.hpp"

namespace marin {
namespace {
using json = nlohmann::json;
using testing::TempDir;

TEST(TaskProcessResults, TheTasksPythonScoresAndAggregates) {
  TempDir d("task-process-results");
  ASSERT_EQ(testing::tiny_checkpoint_with_tokenizer(d), "");
  testing::RunResult r;
  marin::testing::write_text(
      d.str("docs.jsonl"),
      "{\"q\": \"In the beginning\", \"choices\": [\"God\", \"the earth\", \"light\"], "
      "\"answer\": 0}\n"
      "{\"q\": \"And the earth was\", \"choices\": [\"without form\", \"dark\"], \"answer\": 0}\n"
      "{\"q\": \"And God said\", \"choices\": [\"Let there be light\", \"no\", \"yes\", "
      "\"maybe\"], \"answer\": 0}\n"
      "{\"q\": \"And God saw the light\", \"choices\": [\"that it was good\", \"bad\"], "
      "\"answer\": 1}\n"
      "{\"q\": \"And the evening\", \"choices\": [\"and the morning\", \"night\"], "
      "\"answer\": 0}\n");
  marin::testing::write_text(
      d.str("utils.py"),
      "def process_results(doc, results):\n"
      "    lls = [ll for ll, _ in results]\n"
      "    best = max(range(len(lls)), key=lambda i: lls[i])\n"
      "    return {'hit': 1.0 if best == doc['answer'] else 0.0, 'top_ll': lls[best],\n"
      "            'choices': float(len(results)), 'unused': 0}\n"
      "def biggest(items):\n"
      "    return max(items)\n");
  marin::testing::write_text(
      d.str("own.yaml"),
      "task: own\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: docs.jsonl\n"
      "test_split: test\noutput_type: multiple_choice\ndoc_to_text: '{{q}}'\n"
      "doc_to_choice: choices\ndoc_to_target: answer\n"
      "process_results: !function utils.process_results\nmetric_list:\n"
      "  - metric: hit\n    aggregation: mean\n"
      "  - metric: top_ll\n    aggregation: median\n    higher_is_better: false\n"
      "  - metric: choices\n    aggregation: !function utils.biggest\n");
  const std::string eval = "eval --checkpoint " + d.str("ck") + " --tasks " + d.str("own.yaml") +
                           " --quiet --log-samples --bootstrap-iters 100 --json " + d.str("r.json");
  // Without --trust-task-code both functions are refused, in one message naming each.
  r = testing::run(eval);
  ASSERT_NE(r.code, 0);
  EXPECT_NE(r.out.find("process_results: !function utils.process_results runs the task's own "
                       "Python"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("metric_list[2].aggregation: !function utils.biggest"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("--trust-task-code"), std::string::npos) << r.out;
  r = testing::run(eval + " --trust-task-code");
  ASSERT_EQ(r.code, 0) << r.out;
  const json j = json::parse(read_file(d.str("r.json")));
  const json& res = j["results"]["own"];
  const json& samples = j["samples"]["own"];
  ASSERT_EQ(samples.size(), 5u);
  // Recomputed here from the scorer's log-likelihoods.
  std::vector<double> hit, top;
  double most = 0;
  for (const json& s : samples) {
    const auto ll = s["loglikelihoods"].get<std::vector<double>>();
    size_t best = 0;
    for (size_t c = 1; c < ll.size(); ++c)
      if (ll[c] > ll[best]) best = c;
    hit.push_back(int(best) == s["target"].get<int>() ? 1.0 : 0.0);
    top.push_back(ll[best]);
    most = std::max(most, double(ll.size()));
    EXPECT_EQ(s["metrics"]["hit"], hit.back());
    EXPECT_FALSE(s["metrics"].contains("unused"));  // only metric_list's metrics
  }
  double mean = 0;
  for (double h : hit) mean += h / 5;
  double var = 0;
  for (double h : hit) var += (h - mean) * (h - mean) / 4;
  EXPECT_NEAR(res["hit,none"].get<double>(), mean, 1e-12);
  EXPECT_NEAR(res["hit_stderr,none"].get<double>(), std::sqrt(var / 5), 1e-12);
  EXPECT_NEAR(res["top_ll,none"].get<double>(), top[2], 1e-12);  // the harness's median: arr[n//2]
  EXPECT_TRUE(res["top_ll_stderr,none"].is_number());            // bootstrapped, as the harness
  EXPECT_EQ(res["choices,none"], 4.0);
  EXPECT_EQ(most, 4.0);
  EXPECT_EQ(res["choices_stderr,none"], "N/A");  // a task's own aggregation has none
  EXPECT_EQ(j["higher_is_better"]["own"]["top_ll"], false);
  EXPECT_TRUE(j["higher_is_better"]["own"]["hit"].is_null());  // unregistered, not given

  // A dict without a metric of metric_list is refused naming the document and the metric.
  marin::testing::write_text(d.str("utils.py"),
                             "def process_results(doc, results):\n    return {'hit': 1.0}\n"
                             "def biggest(items):\n    return max(items)\n");
  r = testing::run(eval + " --trust-task-code");
  ASSERT_NE(r.code, 0);
  EXPECT_NE(r.out.find("own.yaml: process_results: document 0: the dict lacks metric(s) "
                       "top_ll, choices"),
            std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace marin
