// marin report: a self-contained HTML picture of one or more runs (src/report/report.hpp).
#include <fmt/core.h>

#include "cli/options.hpp"
#include "report/report.hpp"

namespace marin::cli {
namespace {

struct ReportCliOptions {
  std::vector<std::string> runs;
  std::string out;
  report::ReportOptions report;
  bool no_peak = false;
};

int run_report(ReportCliOptions& o) {
  if (o.out.empty()) o.out = o.runs.front() + "/report.html";
  o.report.measure_peak = !o.no_peak;
  report::write_report(o.runs, o.out, o.report);
  fmt::print("wrote {} ({} run{}); open it in a browser (file://), it needs no network\n", o.out,
             o.runs.size(), o.runs.size() == 1 ? "" : "s");
  return 0;
}

}  // namespace

MARIN_COMMAND(report, "report", "Write a self-contained HTML report of one or more runs",
              [](CLI::App& app) -> Runner {
                auto o = std::make_shared<ReportCliOptions>();
                app.add_option("runs", o->runs,
                               "run directories (several: overlaid, e.g. an ablation)")
                    ->required();
                app.add_option("--out", o->out, "HTML file to write (default: RUN/report.html)");
                app.add_option("--forecast", o->report.forecast,
                               "forecast.json to draw against (default: each run's --forecast)");
                app.add_option("--max-points", o->report.max_points,
                               "thin each series to about this many steps (evaluations kept)")
                    ->capture_default_str()
                    ->check(in_range<int>(10, 10'000'000));
                app.add_option("--task-results", o->report.task_results,
                               "results JSON of marin eval --tasks to show (repeatable; the "
                               "run's own RUN/*.json and newest RUN/tasks/step-N.json are found)");
                app.add_flag("--no-peak", o->no_peak,
                             "skip measuring this machine's FMA peak (no fraction-of-peak chart)");
                return [o] { return run_report(*o); };
              });

}  // namespace marin::cli
