#pragma once
// Training checkpoints inside a run directory, in the full layout (the default; the sharded one of
// --ckpt-format sharded is sharded_checkpoint.hpp, and both are read everywhere):
//   RUN/checkpoints/step-00000120/{config.json, model.safetensors, optimizer.safetensors,
//   state.json}
// The model files are the public format (formats.md); optimizer.safetensors holds the flat Adam /
// momentum buffers ("m", "v") in the parameter layout; state.json holds the step, the training
// options, the data position and the xxh64 of the two safetensors files. A checkpoint is written
// into "step-N.tmp", every file fsynced, then the directory is renamed: a crash at any point
// leaves either the complete checkpoint or none. Loading verifies the checksums.
#include <optional>
#include <string>
#include <vector>

#include "model/model.hpp"
#include "optim/optimizer.hpp"
#include "train/train_options.hpp"

namespace marin {

struct RunState {
  int64_t step = 0;  // completed steps
  TrainOptions options;
  nlohmann::json data_state;
  nlohmann::json lineage;  // where this run came from (fork), if anywhere
  // The compute threads of the process that wrote it (rank 0's); 0: not recorded (checkpoints
  // before it was). A resume runs at it unless told otherwise (kernels/threads.hpp).
  int threads = 0;
};

// Writes the checkpoint for `state.step` from the parameters and optimizer state m, v in the
// full layout of `table` (no expert parallelism; Optimizer::gather_state and gather_shards
// assemble them); returns its directory. One writer: under data parallelism rank 0 calls it.
std::string save_run_checkpoint(const std::string& run_dir, const RunState& state,
                                const ModelConfig& config, const ParamTable& table,
                                const float* params, const float* m, const float* v);
// The steps both layouts share (this one's, and sharded_checkpoint.hpp's). start_checkpoint_dir:
// RUN/checkpoints/step-N.tmp for `step`, emptied and created. publish_checkpoint: completes it
// with config.json, the run's tokenizer.json and state.json (the run state with `fields` — the
// files' checksums, the layout's own — merged in, and its own checksum), fsyncs it, renames it to
// step-N and points checkpoints/latest there; returns step-N.
std::string start_checkpoint_dir(const std::string& run_dir, int64_t step);
std::string publish_checkpoint(const std::string& tmp, const RunState& state,
                               const ModelConfig& config, const nlohmann::json& fields);
// The xxh64 (hex) of a file as state.json records it.
std::string checkpoint_file_hash(const std::string& path);
// Reads a checkpoint directory's state.json (checksums are verified by load_run_checkpoint).
RunState read_run_state(const std::string& ckpt_dir);
// Verifies a checkpoint's files against the checksums its state.json records (refusing a missing
// or mismatched one, naming the file). `hash_only`: every file must still be listed, but only these
// are read and hashed (a sharded load reads the shards it needs).
void verify_run_checkpoint(const std::string& ckpt_dir,
                           const std::vector<std::string>* hash_only = nullptr);
// Loads model parameters and optimizer state in the full layout of `table` from a checkpoint
// directory of either layout (a sharded one is assembled: sharded_checkpoint.hpp), verifying
// checksums and refusing non-finite values (naming the tensor). Every rank reads the same files
// (and takes its part).
void load_run_checkpoint(const std::string& ckpt_dir, const ParamTable& table,
                         Buffer<float>& params, Buffer<float>& m, Buffer<float>& v);
// N for a checkpoint directory whose last path component is step-N; -1 for any other name
// (step-N.tmp, latest, ...).
int64_t checkpoint_step(const std::string& dir);
// The complete checkpoints of a run (published step-N directories with a state.json), newest
// first; none is verified.
std::vector<std::string> checkpoint_dirs(const std::string& run_dir);
// The newest complete checkpoint of a run whose checksums verify (older ones are tried when the
// newest is damaged, with a warning on stderr); nullopt when there is none.
std::optional<std::string> latest_checkpoint(const std::string& run_dir);
// True when the checkpoint's state.json records that its parameters and optimizer state were
// checked finite when it was written ("finite": true; save_run_checkpoint writes only such).
bool checkpoint_known_finite(const std::string& ckpt_dir);
// Removes rolling checkpoints older than `keep` (permanent ones, multiples of keep_every, stay);
// nothing when `keep` is not known to be finite.
void prune_checkpoints(const std::string& run_dir, const std::string& keep, int64_t keep_every);

}  // namespace marin
