#pragma once
// `marin train --report-every N`: a TrainHook that rewrites RUN/report.html (marin report) every
// N steps, once the step is in metrics.jsonl, and at the end, so a browser reload shows the run
// so far. Only the root rank writes; the page is replaced atomically.
#include "train/trainer.hpp"

namespace marin::report {

// Adds the hook when the run's options ask for it (report_every > 0).
void attach_report(Trainer& t);

}  // namespace marin::report
