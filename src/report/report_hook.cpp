#include "report/report_hook.hpp"

#include <memory>

#include "report/report.hpp"

namespace marin::report {
namespace {

class ReportHook final : public TrainHook {
 public:
  void after_metrics(Trainer& t) override {
    const int64_t n = t.options().report_every;
    if (t.step() % n == 0 || t.step() == t.options().steps) write(t);
  }
  void at_end(Trainer& t, TrainResult&) override { write(t); }

 private:
  void write(Trainer& t) {
    if (!t.is_root() || written_at_ == t.step()) return;
    // The peak is measured once per process (report.cpp keeps it): every report has the chart.
    write_report({t.run_dir()}, t.run_dir() + "/report.html");
    written_at_ = t.step();
  }
  int64_t written_at_ = -1;
};

}  // namespace

void attach_report(Trainer& t) {
  if (t.options().report_every > 0) t.add_hook(std::make_unique<ReportHook>());
}

}  // namespace marin::report
