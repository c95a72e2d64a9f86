#pragma once
// The finite check of a training step's update (docs/reliability.md, "Finite state"). A NaN or
// Inf that reaches the parameters or the optimizer state poisons every later step and every
// checkpoint written from them, so after each update the trainer checks both and, when anything
// is non-finite on any rank, restores the state from before the update and counts the step as
// bad (like a non-finite loss). The loaders use the same check to refuse non-finite weights.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/buffer.hpp"
#include "model/params.hpp"
#include "parallel/comm.hpp"

namespace marin {

// True when x[0..n) holds a NaN or Inf.
bool any_nonfinite(const float* x, int64_t n);

// The index (into table.params()) of the first tensor whose offset lies in `range` and which
// holds a NaN or Inf, or -1. Element i of tensor p is read at x[p.offset - base + i], so `x` may
// be a shard of the parameter layout that starts at `base` (an optimizer shard's m or v).
int64_t first_nonfinite_tensor(const ParamTable& table, const float* x, parallel::Range range,
                               int64_t base = 0);

// Refuses (marin::Error naming `what` and the tensor) a full parameter buffer holding a NaN or
// Inf, unless `allow` (the loaders' --allow-nonfinite, for forensics), which only warns.
void require_finite_params(const ParamTable& table, const float* params, const std::string& what,
                           bool allow = false);
// The same for one tensor's elements x[0..n) (a run of it, as a sharded load reads).
void require_finite_tensor(const std::string& name, const float* x, int64_t n,
                           const std::string& what, bool allow = false);

// What one update changes, kept so that a non-finite update can be undone: the full parameters
// (every rank holds them) and this rank's optimizer shard of m and v.
class UpdateGuard {
 public:
  // Memory the copy may live in instead of the guard's own: StepEngine lends the gradients of
  // the earlier micro-batches, dead from the gradient sum to the next backward, which is just
  // when the copy lives (save → update → check → restore). At the default four micro-batches
  // they hold all of it (3 × the parameters), so the rollback costs no memory of its own. What
  // does not fit goes into the guard's own buffer. The spans must outlive every save/restore.
  void lend(std::vector<std::span<float>> space) { lent_ = std::move(space); }

  // Keeps the parameters in `kept` (empty: all of them; --shard-params: the runs this rank
  // holds) and all of m and v.
  void save(const Buffer<float>& params, const Buffer<float>& m, const Buffer<float>& v,
            std::vector<parallel::Range> kept = {});
  void restore(Buffer<float>& params, Buffer<float>& m, Buffer<float>& v) const;
  // Values of the copy held in the guard's own buffer (the rest is in the lent space).
  int64_t own_size() const { return int64_t(own_.size()); }

  // This rank's shard of one region of the table, and where its m/v start in the shard buffers.
  struct Owned {
    parallel::Range range;
    int64_t state_at = 0;
  };
  // Collective over `comm`: checks the parameters this rank updated (tensors starting in its
  // shards `own`, one per region of the table) and its shards m, v of the optimizer state. Returns
  // "" when everything is finite on every rank, else what is not (the same text on every rank, so
  // all ranks decide alike), e.g. "parameter 'lm_head'" or "optimizer state v of
  // 'blocks.0.attn.q'".
  static std::string check(const ParamTable& table, const float* params, const float* m,
                           const float* v, std::span<const Owned> own, parallel::Comm& comm);

 private:
  // The copy's storage as one sequence: the lent spans, then the own buffer. put() writes n
  // values at position `at` of it, get() reads them back.
  void put(int64_t at, const float* x, int64_t n);
  void get(int64_t at, float* x, int64_t n) const;

  std::vector<std::span<float>> lent_;
  std::vector<parallel::Range> kept_;
  int64_t m_size_ = 0, v_size_ = 0;
  Buffer<float> own_;
};

}  // namespace marin
