#pragma once
// The latent MoE layer (recipe §2 MoE): router → latent down-projection + RMSNorm → token
// dispatcher (drop rule, rows to the experts) → grouped SwiGLU experts in latent space →
// dispatcher's weighted combine → latent up-projection. The three MoE pieces are separate, as in
// Megatron-Core: Router, TokenDispatcher (model/moe/token_dispatcher.hpp), GroupedExperts.
// The shared experts are separate (model/block) since they run on the full-width input.
#include <memory>
#include "core/arena.hpp"

#include "model/moe/experts.hpp"
#include "model/moe/router.hpp"
#include "model/moe/token_dispatcher.hpp"

namespace marin {

// Where this process's experts are. By default every expert is here and their gradients are the
// bound ones; under expert parallelism this rank holds its shard of the experts (ParamTable's
// expert region), rows come and go through an AllToAllDispatcher over `group`, and the weight
// gradient of the rows from each source rank goes to that source's buffer (laid out like the
// table's expert region, which starts at `region_begin`).
template <class T>
struct ExpertPlacement {
  parallel::Comm* group = nullptr;
  std::vector<T*> source_grads;
  int64_t region_begin = 0;
  int ranks() const;
};

template <class T>
class MoELayer {
 public:
  MoELayer() = default;
  MoELayer(const Binder<T>& bind, const ModelConfig& c, int64_t layer, i64 max_rows,
           const ExpertPlacement<T>& where = {});
  // x: [rows, d] kept alive by the caller; out: [rows, d] (overwritten).
  void forward(const T* x, T* out, i64 rows, const Dispatch& dispatch);
  // Accumulates into dx.
  void backward(const T* dout, T* dx, Arena<T>& arena);
  // ranks: of the expert-parallel group (rows received from all of them).
  static i64 scratch(const ModelConfig& c, i64 rows, int ranks = 1);

  Router<T>& router() { return router_; }
  const Router<T>& router() const { return router_; }
  const DispatchPlan& plan() const { return dispatcher_->plan(); }
  // A training step of `tokens` tokens computed as several forwards (DispatchPlan::begin_step).
  void begin_step(i64 tokens) { dispatcher_->begin_step(tokens); }
  // The all-to-all traffic since the last call (expert parallelism; zero otherwise).
  DispatchTraffic take_traffic() { return dispatcher_->take_traffic(); }

 private:
  ModelConfig c_;
  Weight<T> down_, norm_, up_;
  Router<T> router_;
  std::unique_ptr<TokenDispatcher<T>> dispatcher_;
  // Runs f(first, last) over the blocks at the experts, part by part as the dispatcher's
  // exchange brings them (TokenDispatcher::next_part; docs/distributed.md, "Overlap").
  template <class F>
  void over_blocks(F&& f);
  GroupedExperts<T> experts_;
  ExpertRows<T> rows_at_experts_;
  const T* x_ = nullptr;
  i64 rows_ = 0;
  Buffer<T> z0_, rstd_, z_, r_;
};

}  // namespace marin
