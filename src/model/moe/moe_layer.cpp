#include "model/moe/moe_layer.hpp"

#include <fmt/format.h>

#include "core/profile.hpp"
#include "parallel/comm.hpp"

namespace marin {

template <class T>
int ExpertPlacement<T>::ranks() const {
  return group ? group->size() : 1;
}

namespace {

// The per-source gradient sets of this layer's experts (empty: the bound gradients).
template <class T>
std::vector<ExpertGrads<T>> source_grads(const Binder<T>& bind, int64_t layer,
                                         const ExpertPlacement<T>& where) {
  std::vector<ExpertGrads<T>> out;
  if (where.ranks() == 1) return out;
  const std::string p = fmt::format("layers.{}.moe.experts.", layer);
  auto at = [&](T* base, const char* w) {
    return base + (bind.table.at(p + w).offset - where.region_begin);
  };
  for (T* base : where.source_grads)
    out.push_back({at(base, "w_gate"), at(base, "w_up"), at(base, "w_down")});
  return out;
}

}  // namespace

template <class T>
MoELayer<T>::MoELayer(const Binder<T>& bind, const ModelConfig& c, int64_t layer, i64 max_rows,
                      const ExpertPlacement<T>& where)
    : c_(c), router_(bind, c, layer, max_rows) {
  const int P = where.ranks();
  if (P > 1)
    dispatcher_ = std::make_unique<AllToAllDispatcher<T>>(c, max_rows, *where.group);
  else
    dispatcher_ = std::make_unique<LocalDispatcher<T>>(c, max_rows);
  experts_ =
      GroupedExperts<T>(bind, c, layer, max_rows * c.top_k * P, source_grads(bind, layer, where));
  const std::string p = fmt::format("layers.{}.moe.", layer);
  down_ = bind(p + "latent_down");
  norm_ = bind(p + "latent_norm");
  up_ = bind(p + "latent_up");
  const i64 l = c.latent_dim;
  z0_.resize(max_rows * l);
  z_.resize(max_rows * l);
  rstd_.resize(max_rows);
  r_.resize(max_rows * l);
}

template <class T>
i64 MoELayer<T>::scratch(const ModelConfig& c, i64 rows, int ranks) {
  const i64 l = c.latent_dim, A = rows * c.top_k, received = A * ranks;
  return 3 * rows * l + A * l + received * l + rows * c.top_k + 3 * received * c.expert_dim +
         rows * c.num_experts + 512;
}

template <class T>
template <class F>
void MoELayer<T>::over_blocks(F&& f) {
  for (;;) {
    i64 first = 0, last = 0;
    {
      const profile::Scope ps("moe.dispatch");  // the wait for the part to arrive
      if (!dispatcher_->next_part(first, last)) return;
    }
    f(first, last);  // while the next part is on its way
  }
}

template <class T>
void MoELayer<T>::forward(const T* x, T* out, i64 rows, const Dispatch& dispatch) {
  x_ = x;
  rows_ = rows;
  const i64 d = c_.hidden_dim, l = c_.latent_dim;
  router_.forward(x, rows);
  linear_fwd(x, down_.w, z0_.data(), rows, d, l);
  kernels::rmsnorm_fwd(z0_.data(), norm_.w, z_.data(), rstd_.data(), rows, l, 1e-5);

  const Routing<T>& r = router_.routing();
  {
    const profile::Scope ps("moe.dispatch");
    rows_at_experts_ = dispatcher_->dispatch(r, z_.data(), rows, dispatch, c_.capacity_factor);
  }
  {
    const profile::Scope ps("moe.experts.forward");
    const ExpertRows<T>& x = rows_at_experts_;
    over_blocks([&](i64 first, i64 last) {
      experts_.forward(x.offsets, x.blocks, x.input, x.output, first, last);
    });
  }
  T* R = r_.data();
  {
    const profile::Scope ps("moe.dispatch");
    dispatcher_->combine(r, R);
  }
  linear_fwd(R, up_.w, out, rows, l, d);
}

template <class T>
void MoELayer<T>::backward(const T* dout, T* dx, Arena<T>& arena) {
  ArenaScope<T> scope(arena);
  const i64 rows = rows_, d = c_.hidden_dim, l = c_.latent_dim, K = c_.top_k;
  const i64 n = rows_at_experts_.rows;
  T* dR = arena.take(rows * l);
  T* dxg = arena.take(n * l + 1);
  T* dw = arena.take(rows * K);
  T* dz = arena.take(rows * l);
  T* dz0 = arena.take(rows * l);
  T* scratch = arena.take(3 * n * c_.expert_dim + 1);

  linear_bwd(dout, r_.data(), up_.w, dR, up_.g, rows, l, d);
  const T* dyg = nullptr;
  {
    const profile::Scope ps("moe.dispatch");
    dyg = dispatcher_->combine_backward(router_.routing(), dR, dw, arena);
  }
  {
    const profile::Scope ps("moe.experts.backward");
    over_blocks([&](i64 first, i64 last) {
      experts_.backward(rows_at_experts_.offsets, dyg, dxg, scratch, first, last);
    });
  }
  {
    const profile::Scope ps("moe.dispatch");
    dispatcher_->dispatch_backward(dxg, dz);
  }
  kernels::rmsnorm_bwd(dz, z0_.data(), norm_.w, rstd_.data(), dz0, norm_.g, rows, l);
  linear_bwd(dz0, x_, down_.w, dx, down_.g, rows, d, l, /*accumulate_dx=*/true);
  router_.backward(dw, x_, dx, arena);
}

template struct ExpertPlacement<float>;
template struct ExpertPlacement<double>;
template class MoELayer<float>;
template class MoELayer<double>;

}  // namespace marin
