#pragma once
// What a resume trusts in a checkpoint's state.json (docs/reliability.md, "Resume"). state.json
// carries its own xxh64 ("state_xxh64", over the rest of the object) next to the checksums of the
// safetensors files, and every field is checked against the others, the checkpoint's
// config.json and the data: a damaged or inconsistent checkpoint is then skipped for the previous
// one (with a warning naming the file and field) instead of being resumed from.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "train/run_checkpoint.hpp"

namespace marin {

// The xxh64 (16 hex digits) of a state.json object without its "state_xxh64" field.
std::string state_checksum(const nlohmann::json& state);

// The parsed DIR/state.json after its own checksum (when it has one: checkpoints from before it
// do not) is verified; marin::Error naming the file otherwise (empty, truncated, not JSON, a
// checksum mismatch).
nlohmann::json read_state_json(const std::string& ckpt_dir);

// Checks the fields of a parsed state against each other and the checkpoint's config.json: step
// in [0, steps], batch and micro-batch, finite rates in range, and a data position consistent
// with step × batch (data.row of a mixture; data.next_row of rows, when the file's row count is
// recorded) unless the run was forked. marin::Error naming the file, the field and its value.
void check_run_state(const std::string& ckpt_dir, const RunState& st);

}  // namespace marin
