#pragma once
// marin report's downstream-task scores: the results JSON that `marin eval --tasks --json` and
// the trainer (RUN/tasks/step-N.json) write in lm-evaluation-harness's layout, as table rows.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace marin::report {

// One results file: {"file", "step" (config.step, null for marin eval), "rows": [[task alias,
// "metric,filter", value, stderr (number or "N/A"), items (sample_len), clean value, contaminated
// value (null without an audit)], …]}, tasks and groups in the file's order. marin::Error naming
// the file when it is not such a results JSON.
nlohmann::json task_scores(const std::string& file);

// The results of a run: every RUN/*.json in that layout (marin eval --json written into the run),
// the newest RUN/tasks/step-N.json, then `extra` (marin report --task-results).
nlohmann::json run_task_scores(const std::string& run, const std::vector<std::string>& extra);

}  // namespace marin::report
