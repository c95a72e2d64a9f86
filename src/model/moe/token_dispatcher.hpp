#pragma once
// The token dispatcher, in the manner of Megatron-Core's MoETokenDispatcher: between the router
// (which decided each token's K experts and combine weights) and the experts (which compute over
// rows grouped by local expert). dispatch() applies the transport's drop rule (DispatchPlan) and
// moves every kept (token, slot) assignment's latent row to the experts; combine() brings the
// expert outputs back to their tokens, weighted: R_t = Σ_k keep·w_k·y(t, k). backward runs the
// duals in the reverse order: combine_backward (dR → the experts' output gradient and dw), then,
// after the experts' backward, dispatch_backward (the experts' input gradient → dz).
//
// LocalDispatcher: every expert lives in this process, so moving rows is a gather and a
// scatter-add. AllToAllDispatcher: the experts are split over an expert-parallel group of ranks
// (docs/distributed.md); on top of the local gather it exchanges the per-expert counts (an
// all-to-all), sends each row to the rank of its expert and receives the rows for its own experts
// (all-to-all-v), and sends the outputs back by the reverse exchange; backward reuses the same
// counts in the opposite directions. The experts see only their local rows either way.
//
// Overlap (docs/distributed.md, "Overlap"): given a communication thread (Dispatch::thread), the
// exchanges towards the experts (dispatch's rows, combine_backward's output gradients) are a
// pipeline of parts, one source rank each: this rank's own rows, copied at once, then the rows of
// the other ranks in up to three steps (exchanges on the thread), each arriving while the experts
// compute the parts before it. next_part() hands the experts each part as it arrives. Every block
// is one independent product either way, so the bits do not change.
#include <functional>
#include <memory>

#include "core/arena.hpp"
#include "core/buffer.hpp"
#include "model/config.hpp"
#include "model/moe/drop_rule.hpp"
#include "model/moe/router.hpp"

namespace marin {

// The experts' view of a dispatch: block b (local expert b mod E_loc, from source b div E_loc)
// computes rows offsets[b] .. offsets[b+1] of input; it writes its outputs to the same rows of
// output. The blocks arrive in parts (TokenDispatcher::next_part).
template <class T>
struct ExpertRows {
  const int64_t* offsets = nullptr;  // [blocks + 1]
  int64_t blocks = 0;
  int64_t rows = 0;
  const T* input = nullptr;
  T* output = nullptr;
};

// Time in and bytes sent by this rank's exchanges with other ranks.
struct DispatchTraffic {
  double seconds = 0;
  int64_t bytes = 0;
};

template <class T>
class TokenDispatcher {
 public:
  virtual ~TokenDispatcher() = default;
  // z: [rows, ℓ] latent rows of the tokens (kept alive until backward).
  virtual ExpertRows<T> dispatch(const Routing<T>& r, const T* z, i64 rows, const Dispatch& d,
                                 double capacity_factor) = 0;
  // R: [rows, ℓ] (overwritten) from the experts' outputs.
  virtual void combine(const Routing<T>& r, T* R) = 0;
  // dR: [rows, ℓ] → dw [rows, K] (overwritten) and the experts' output gradient (returned,
  // [expert rows, ℓ], in expert-row order), with scratch from `arena`.
  virtual const T* combine_backward(const Routing<T>& r, const T* dR, T* dw, Arena<T>& arena) = 0;
  // The gradient of the experts' input rows → dz: [rows, ℓ] (overwritten).
  virtual void dispatch_backward(const T* dinput, T* dz) = 0;
  // After dispatch() (and again after combine_backward()), each call waits for the next part of
  // the experts' rows (or output gradients) to arrive and gives its blocks [first, last), until it
  // returns false. Without an exchange still running, the one part is every block.
  virtual bool next_part(i64& first, i64& last) = 0;
  // Which assignments were kept, and the drop counts (health metrics).
  virtual const DispatchPlan& plan() const = 0;
  // A training step of `tokens` tokens begins (capacity over the step: DispatchPlan::begin_step).
  virtual void begin_step(i64 tokens) = 0;
  // What the exchanges between ranks cost since the last call (zero for a local dispatcher).
  virtual DispatchTraffic take_traffic() { return {}; }
};

template <class T>
class LocalDispatcher final : public TokenDispatcher<T> {
 public:
  LocalDispatcher() = default;
  LocalDispatcher(const ModelConfig& c, i64 max_rows);
  ExpertRows<T> dispatch(const Routing<T>& r, const T* z, i64 rows, const Dispatch& d,
                         double capacity_factor) override;
  void combine(const Routing<T>& r, T* R) override;
  const T* combine_backward(const Routing<T>& r, const T* dR, T* dw, Arena<T>& arena) override;
  void dispatch_backward(const T* dinput, T* dz) override;
  bool next_part(i64& first, i64& last) override;
  const DispatchPlan& plan() const override { return plan_; }
  void begin_step(i64 tokens) override { plan_.begin_step(tokens); }

 private:
  // out [rows, ℓ] = per token, the sum over its kept slots of w·grouped[row] (w null: 1).
  void sum_slots(const T* grouped, const T* w, T* out) const;
  i64 l_ = 0, K_ = 0, rows_ = 0;
  DispatchPlan plan_;
  Buffer<T> xg_, yg_;   // [assignments, ℓ]: expert inputs and outputs, grouped by expert
  bool handed_ = true;  // next_part has given the one part
};

template <class T>
class AllToAllDispatcher final : public TokenDispatcher<T> {
 public:
  // ep: the expert-parallel group (rank j holds experts j·E/P … (j+1)·E/P − 1).
  AllToAllDispatcher(const ModelConfig& c, i64 max_rows, parallel::Comm& ep);
  ExpertRows<T> dispatch(const Routing<T>& r, const T* z, i64 rows, const Dispatch& d,
                         double capacity_factor) override;
  void combine(const Routing<T>& r, T* R) override;
  const T* combine_backward(const Routing<T>& r, const T* dR, T* dw, Arena<T>& arena) override;
  void dispatch_backward(const T* dinput, T* dz) override;
  bool next_part(i64& first, i64& last) override;
  const DispatchPlan& plan() const override { return local_.plan(); }
  void begin_step(i64 tokens) override { local_.begin_step(tokens); }
  // seconds: what the compute waited for the exchanges (all of their time without a thread).
  DispatchTraffic take_traffic() override;
  // The most rows one rank's experts can receive in a forward: every assignment of every rank.
  static i64 max_received(const ModelConfig& c, i64 max_rows, int ranks) {
    return max_rows * c.top_k * ranks;
  }

 private:
  // Rows (ℓ each) from the sender's expert order to the owners (forward) or back (reverse), on
  // the communication thread when there is one. Towards the owners with a thread, the exchange
  // is left running as the pipeline of parts next_part() waits for.
  void exchange(const T* send, T* recv, bool forward);
  void run(std::function<void()> job);  // on the thread, waiting for it; or here
  parallel::Comm& ep_;
  parallel::CommThread* thread_ = nullptr;  // the forward's Dispatch::thread
  // The pipeline: part o (0 … P−1) is the rows of source r − o (mod P); after part 0 (this
  // rank's own) they come in at most kMaxSteps exchanges (each an all-to-all whose calls cost
  // about P messages even when empty), step g bringing offsets first_offset(g) …
  // first_offset(g+1)−1.
  static constexpr int kMaxSteps = 3;
  int first_offset(int g) const;
  int part_ = 0, parts_ = 0, steps_ = 0;  // next_part's position, the parts, the steps
  std::vector<uint64_t> tickets_;         // [kMaxSteps]: the thread's job of each step
  // [kMaxSteps][P]: each step's counts, non-zero for its offsets only.
  std::vector<std::vector<int64_t>> step_send_, step_recv_;
  i64 l_ = 0, E_loc_ = 0;
  LocalDispatcher<T> local_;  // the plan, the gather into expert order and the weighted sums
  ExpertRows<T> sent_;        // the local dispatch: rows in the order of their (global) expert
  std::vector<int64_t> send_counts_, recv_counts_;  // [P·E_loc]: rows per (peer, local expert)
  // Per peer, in elements: what MPI_Alltoallv calls sendcounts, sdispls, recvcounts, rdispls.
  std::vector<int64_t> send_elems_, send_displs_, recv_elems_, recv_displs_;
  std::vector<int64_t> count_n_, count_at_;  // per peer: the counts exchange's layout
  std::vector<int64_t> blocks_;              // [P·E_loc + 1] received block offsets
  Buffer<T> received_x_;                     // the rows this rank's experts received (their inputs)
  Buffer<T> received_y_;  // the experts' outputs for them (and, backward, their gradients)
  Buffer<T> returned_;    // backward: input gradients returned to the rows' sender
  DispatchTraffic traffic_;
};

}  // namespace marin
