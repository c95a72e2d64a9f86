#pragma once
// marin report: one self-contained HTML file (opens offline from a file:// URL) that pictures one
// or more runs: loss/CE/z, validation and per-domain macro loss, learning rates, throughput and
// the fraction of the measured peak, gradient and parameter norms per optimizer group, router
// health per layer (entropy, max/min load heatmaps, drop fraction, QB bias spread per
// checkpoint), downstream/contamination columns, the forecast's band with the run's points, and
// the checkpoint list with lineage. uPlot (npm) is inlined, embedded at build time.
//
// A trainer refreshes it with write_report({run_dir}, run_dir + "/report.html") every N steps;
// the file is replaced atomically, so a browser reload never sees half of it.
#include <string>
#include <vector>

namespace marin::report {

struct ReportOptions {
  std::string forecast;  // forecast.json to draw (default: each run's own --forecast file)
  // Measure this machine's peak for each run's fraction-of-peak chart: the peak of the run's
  // compute dtype (bf16 dot product or fp32 FMA, the functions marin bench uses) at the run's
  // threads × its ranks, as run.json records them; once per process and (dtype, threads).
  bool measure_peak = true;
  int max_points = 2000;  // per series: longer runs are thinned (evaluated steps always kept)
  std::vector<std::string> task_results;  // marin eval --tasks results JSON files to show too
  int watch_seconds = 0;  // > 0: the page reloads itself this often (marin report --watch N)
};

// The run directories of `marin report`'s arguments, in order: an argument that is a run (it has
// metrics.jsonl or run.json) is itself; a directory that is not a run stands for its
// subdirectories that are (sorted by name); anything else — a file a shell glob matched, a folder
// with no run in it — is skipped with a note in `skipped` ("PATH: why"). marin::Error when no run
// is left, naming what was given.
std::vector<std::string> find_runs(const std::vector<std::string>& args,
                                   std::vector<std::string>& skipped);
bool is_run_dir(const std::string& dir);

// The data the page draws, as JSON text (exposed for tests).
std::string report_data(const std::vector<std::string>& runs, const ReportOptions& o = {});
// The whole HTML page.
std::string render_report(const std::vector<std::string>& runs, const ReportOptions& o = {});
// Writes render_report(runs) to `out` atomically.
void write_report(const std::vector<std::string>& runs, const std::string& out,
                  const ReportOptions& o = {});
// Whether this binary was built with uPlot (scripts/setup.sh installs it from npm).
bool charts_available();

}  // namespace marin::report
