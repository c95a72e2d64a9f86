#pragma once
// The checkpoints of a run directory: write, verify, list, prune, the checkpoints/latest link, and
// the state a run goes on from at --resume or --fork-from. The on-disk layouts of one checkpoint
// (the full, one-process one: run_checkpoint.hpp; per-rank shards: sharded_checkpoint.hpp) are
// written only from here, and read here and by the commands that read a finished checkpoint
// (through load_params / load_run_checkpoint, which take either).
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "model/model.hpp"
#include "train/run_checkpoint.hpp"
#include "train/sharded_checkpoint.hpp"
#include "train/train_options.hpp"

namespace marin {

// Where a run goes on from: a checkpoint and its state with the run's changes applied.
struct ResumePoint {
  std::string dir;           // the checkpoint
  RunState state;            // its step, options (changed), data position and lineage
  bool restore_data = true;  // the data position carries over (a fork with other data: false)
  std::string threads_note;  // resume: the compute threads, for the resume line
  // resume: a thread count that breaks bit-identity, an --ep re-derived for the ranks at hand
  std::vector<std::string> warnings;
};

// A resume refused for a setting — an option given with --resume, or one the ranks at hand
// cannot run (--batch over the rank count, an explicit --ep) — not for damage to the checkpoint:
// an older checkpoint would be refused the same way, or worse taken with steps silently lost, so
// CheckpointStore::resume stops at once instead of trying it.
struct SettingsError : Error {
  using Error::Error;
};

class CheckpointStore {
 public:
  explicit CheckpointStore(std::string run_dir) : run_dir_(std::move(run_dir)) {}
  const std::string& run_dir() const { return run_dir_; }

  // Writes the checkpoint of state.step from full-layout parameters and optimizer state (the one
  // writer: rank 0), points checkpoints/latest at it, then removes rolling checkpoints older than
  // it (those at multiples of keep_every stay); returns its directory. params, m and v hold
  // table.total() values each.
  std::string write(const RunState& state, const ParamTable& table, const float* params,
                    const float* m, const float* v, int64_t keep_every) const;
  // Collective: the sharded checkpoint of state.step (sharded_checkpoint.hpp), every rank writing
  // its `pieces`; then, as write, checkpoints/latest and pruning. Returns its directory (every
  // rank).
  std::string write_sharded(const RunState& state, const ParamTable& full,
                            const std::vector<StatePiece>& pieces, const Mesh& mesh,
                            parallel::Comm& comm, int64_t keep_every) const;
  // Loads a checkpoint's full-layout parameters and optimizer state (a sharded checkpoint
  // assembled), verifying its checksums and
  // refusing non-finite values (every rank reads the same files).
  static void load(const std::string& dir, const ParamTable& table, Buffer<float>& params,
                   Buffer<float>& m, Buffer<float>& v);
  // marin::Error naming the damage when a checkpoint's files do not match their checksums.
  static void verify(const std::string& dir) { verify_run_checkpoint(dir); }
  // The complete checkpoints, newest first (none verified).
  std::vector<std::string> list() const { return checkpoint_dirs(run_dir_); }
  // The newest checkpoint that verifies (a damaged newer one is skipped with a warning).
  std::optional<std::string> latest() const { return latest_checkpoint(run_dir_); }
  // What checkpoints/latest points at ("" when there is no link).
  std::string latest_link() const;
  // Removes rolling checkpoints older than `keep` (nothing unless `keep` is known finite).
  void prune(const std::string& keep, int64_t keep_every) const {
    prune_checkpoints(run_dir_, keep, keep_every);
  }

  // marin::Error ("no complete checkpoint to resume from") when the run has none.
  void require_checkpoint() const;
  // --resume: start(point) for the newest checkpoint whose state passes every check
  // (run_state_check.hpp) and from which start() does not throw; each one skipped for its
  // integrity (checksums, non-finite values, unreadable or missing files, a bad state file) is
  // named with its reason on stderr (when `root`), and none passing is an error naming the
  // newest's reason. A SettingsError (from resume_point or start) is never skipped: it is an
  // error at once naming the checkpoint and the option. The checks read the same files on every
  // rank, so every rank settles on the same checkpoint.
  void resume(const ResumeChanges& changes, bool root,
              const std::function<void(const ResumePoint&)>& start) const;
  // The state a resume from `ckpt` goes on with: checked, `changes` applied (those a forecast
  // binds refused, a switch of transport or expert split recorded in the lineage); sets the
  // compute threads to the checkpoint's unless chosen. With changes.ranks, the parallel layout
  // is re-derived for that rank count: a stored --ep that does not divide it falls back to the
  // largest divisor of gcd(ranks, num_experts) not above it (a warning says so), unless --ep is
  // among changes.given; a batch that cannot split over the ranks is a SettingsError.
  static ResumePoint resume_point(const std::string& ckpt, const ResumeChanges& changes);
  // The state a new run forked from `ckpt` with options `changed` starts with (a fork cannot
  // change the model's shape); its lineage names the parent.
  static ResumePoint fork_point(const std::string& ckpt, const TrainOptions& changed);

 private:
  std::string run_dir_;
};

}  // namespace marin
