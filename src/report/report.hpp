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
  std::string forecast;      // forecast.json to draw (default: each run's own --forecast file)
  bool measure_peak = true;  // measure this machine's fp32 FMA peak for the fraction-of-peak chart
  int max_points = 2000;     // per series: longer runs are thinned (evaluated steps always kept)
  std::vector<std::string> task_results;  // marin eval --tasks results JSON files to show too
};

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
