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
  // Keeps the parameters in `kept` (empty: all of them; --shard-params: the runs this rank
  // holds) and all of m and v.
  void save(const Buffer<float>& params, const Buffer<float>& m, const Buffer<float>& v,
            std::vector<parallel::Range> kept = {});
  void restore(Buffer<float>& params, Buffer<float>& m, Buffer<float>& v) const;

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
  std::vector<parallel::Range> kept_;
  Buffer<float> params_, m_, v_;
};

}  // namespace marin
