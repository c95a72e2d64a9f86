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

// Where `marin eval --json` results of a run are looked for, in this order: RUN/*.json,
// RUN/eval/*.json, RUN/checkpoints/*.json and RUN/checkpoints/step-N/*.json (the run's and the
// checkpoints' own JSON files — run.json, state.json, config.json, … — are skipped unread).
std::vector<std::string> eval_result_files(const std::string& run);

// The downstream-task results of a run: those of eval_result_files(run) in that layout, the
// newest RUN/tasks/step-N.json, then `extra` (marin report --task-results). A file's "step" is
// config.step, else the step of the checkpoint named in config.model_args
// ("checkpoint=RUN/checkpoints/step-N"), else that of the step-N folder it is in, else null.
nlohmann::json run_task_scores(const std::string& run, const std::vector<std::string>& extra);

// The per-domain results (`marin eval CKPT --tokens … --json F`, format "marin-eval/1") among
// eval_result_files(run): {"file", "checkpoint", "step" (as above, from "checkpoint"),
// "macro_loss", "macro_bpb", "clean_macro_loss", "contaminated_macro_loss", "rows": [[domain,
// mean CE, BPB, documents, tokens, clean mean CE, contaminated mean CE], …]}.
nlohmann::json run_domain_evals(const std::string& run);

}  // namespace marin::report
