// marin report: a self-contained HTML picture of one or more runs (src/report/report.hpp).
#include <fmt/core.h>

#include <chrono>
#include <thread>

#include "cli/options.hpp"
#include "report/report.hpp"

namespace marin::cli {
namespace {

struct ReportCliOptions {
  std::vector<std::string> runs;
  std::string out;
  report::ReportOptions report;
  bool no_peak = false;
  int watch = 0;
};

// The runs the arguments stand for, now (a --watch finds runs started since), with a note on
// stderr for each argument or entry skipped.
std::vector<std::string> runs_of(const ReportCliOptions& o) {
  std::vector<std::string> skipped;
  std::vector<std::string> runs = report::find_runs(o.runs, skipped);
  for (const std::string& s : skipped) fmt::print(stderr, "marin report: skipped {}\n", s);
  return runs;
}

int run_report(ReportCliOptions& o) {
  std::vector<std::string> runs = runs_of(o);
  if (o.out.empty())  // a folder of runs: its report.html; else the first run's
    o.out = (o.runs.size() == 1 && runs.front() != o.runs.front() ? o.runs.front() : runs.front()) +
            "/report.html";
  o.report.measure_peak = !o.no_peak;
  o.report.watch_seconds = o.watch;
  report::write_report(runs, o.out, o.report);
  fmt::print("wrote {} ({} run{}); open it in a browser (file://), it needs no network\n", o.out,
             runs.size(), runs.size() == 1 ? "" : "s");
  if (o.watch <= 0) return 0;
  fmt::print("rewriting it every {} s (the page reloads itself); Ctrl-C stops\n", o.watch);
  std::fflush(stdout);
  for (;;) {  // until interrupted: SIGINT/SIGTERM end the process; the file is always whole
    std::this_thread::sleep_for(std::chrono::seconds(o.watch));
    report::write_report(runs_of(o), o.out, o.report);
  }
}

}  // namespace

MARIN_COMMAND(report, "report", "Write a self-contained HTML report of one or more runs",
              [](CLI::App& app) -> Runner {
                auto o = std::make_shared<ReportCliOptions>();
                app.add_option("runs", o->runs,
                               "run directories, overlaid (e.g. runs/*), or a directory whose "
                               "subdirectories are runs; other entries are skipped with a note")
                    ->required();
                app.add_option("--out", o->out,
                               "HTML file to write (default: RUN/report.html of the first run, "
                               "or DIR/report.html for one directory of runs)");
                app.add_option("--forecast", o->report.forecast,
                               "forecast.json to draw against (default: each run's --forecast)");
                app.add_option("--max-points", o->report.max_points,
                               "thin each series to about this many steps (evaluations kept)")
                    ->capture_default_str()
                    ->check(in_range<int>(10, 10'000'000));
                app.add_option("--task-results", o->report.task_results,
                               "results JSON of marin eval --tasks to show (repeatable; the "
                               "run's own are found: RUN/*.json, RUN/eval/*.json, "
                               "RUN/checkpoints/[step-N/]*.json, newest RUN/tasks/step-N.json)");
                app.add_flag("--no-peak", o->no_peak,
                             "skip measuring this machine's peak (no fraction-of-peak chart)");
                app.add_option("--watch", o->watch,
                               "rewrite the report every N seconds until interrupted; the page "
                               "reloads itself as often")
                    ->check(in_range<int>(1, 86400));
                return [o] { return run_report(*o); };
              });

}  // namespace marin::cli
