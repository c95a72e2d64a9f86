#pragma once
// Sharded training checkpoints (--ckpt-format sharded; docs/distributed.md, "Sharded
// checkpoints"): every rank writes the part of the state it updates — its ZeRO-1 run of the dense
// tensors and of its expert shard's slices — in parallel, and nothing is gathered on one rank.
//   RUN/checkpoints/step-N/{config.json, state.json, shard-RRRRR-of-NNNNN.safetensors, ...}
// Each piece is one contiguous run [begin, end) of a tensor's flattened elements in the full
// (one-process) layout, stored three times in its rank's file under "params/NAME[b:e]",
// "m/NAME[b:e]" and "v/NAME[b:e]" (1-D float32). state.json, the manifest, holds the mesh, every
// tensor's global shape, each shard file's pieces and xxh64, and (as in the full layout) the step,
// options, data position and lineage; the QB biases are parameters like any other.
//
// Loading reshards: the manifest's pieces must cover the full layout exactly once (a missing or
// doubled slice is an error naming the tensor and the slice), and a reader names the runs of the
// full tensors it wants (a resuming rank: what it holds; export and the other readers: everything)
// and gets the overlap of each stored piece, reading only the files that hold one — so a sharded
// checkpoint resumes at any rank count and --ep, bit-identically.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/config.hpp"
#include "model/params.hpp"
#include "parallel/comm.hpp"
#include "train/run_checkpoint.hpp"

namespace marin {

// A run of one tensor's elements that this rank writes, and its values there.
struct StatePiece {
  std::string tensor;          // the name in the full ParamTable
  int64_t begin = 0, end = 0;  // flattened element range in the full tensor
  const float* params = nullptr;
  const float* m = nullptr;
  const float* v = nullptr;
};

// How the ranks that wrote a checkpoint were arranged (recorded, not needed to load it).
struct Mesh {
  int ranks = 1, ep = 1;  // data-parallel replicas: ranks / ep
};

// Collective over `comm`: every rank writes its pieces (which must be finite) into its own shard
// file and reads it back for its checksum; rank 0 then writes the manifest and publishes the
// checkpoint (run_checkpoint.hpp: the directory appears only complete, and checkpoints/latest
// moves after every rank's file is verified). An error on any rank is an error on every rank,
// naming the rank; the previous checkpoint is untouched. Returns the checkpoint directory.
std::string save_sharded_checkpoint(const std::string& run_dir, const RunState& state,
                                    const ModelConfig& config, const ParamTable& full,
                                    const std::vector<StatePiece>& mine, const Mesh& mesh,
                                    parallel::Comm& comm);

// True when `state` (a parsed state.json) describes a sharded checkpoint.
bool is_sharded_state(const nlohmann::json& state);
// True when DIR is a sharded checkpoint (its state.json says so).
bool is_sharded_checkpoint(const std::string& dir);
// The shard files a sharded state.json names (marin::Error naming `dir` when the list is
// malformed).
std::vector<std::string> sharded_files(const nlohmann::json& state, const std::string& dir);

// Where a rank loading a checkpoint wants a run of one tensor's elements: elements [begin, end)
// of the full tensor `tensor` go to params, m and v (each may be null: not wanted).
struct StateTarget {
  std::string tensor;
  int64_t begin = 0, end = 0;
  float* params = nullptr;
  float* m = nullptr;
  float* v = nullptr;
};

// Reads from a sharded checkpoint the runs `want` names, and nothing else: only the shard files
// holding a piece of them are read, and their checksums verified (so each rank of a resumed run
// reads about its own part, not the whole state). The manifest must cover every tensor exactly
// once (a missing or doubled slice is an error naming the tensor and the slice), and non-finite
// values are refused by tensor (parameters allowed with a warning when `allow_nonfinite`).
void load_sharded_state(const std::string& dir, const ParamTable& full,
                        const std::vector<StateTarget>& want, bool allow_nonfinite = false);

// The whole of the full layout of `full`: `params` always, m and v when not null (each
// full.total() elements), by load_sharded_state.
void load_sharded_checkpoint(const std::string& dir, const ParamTable& full, float* params,
                             float* m, float* v, bool allow_nonfinite = false);

}  // namespace marin
