#include "model/moe/experts.hpp"

#include <fmt/format.h>

#include "core/error.hpp"
#include "kernels/threads.hpp"

namespace marin {

template <class T>
GroupedExperts<T>::GroupedExperts(const Binder<T>& bind, const ModelConfig& c, int64_t layer,
                                  i64 max_rows, std::vector<ExpertGrads<T>> grads)
    : grads_(std::move(grads)), l_(c.latent_dim), ed_(c.expert_dim) {
  const std::string p = fmt::format("layers.{}.moe.experts.", layer);
  wg_ = bind(p + "w_gate");
  wu_ = bind(p + "w_up");
  wd_ = bind(p + "w_down");
  E_ = bind.table.at(p + "w_gate").num_mats;
  if (grads_.empty()) grads_.push_back({wg_.g, wu_.g, wd_.g});
  const i64 n = max_rows * ed_;
  a_.resize(n);
  b_.resize(n);
  h_.resize(n);
}

template <class T>
SwiGLUFFN<T> GroupedExperts<T>::expert(i64 e, const ExpertGrads<T>& g) const {
  const i64 m = l_ * ed_;
  // An inference model has no gradients: null stays null (null + offset is undefined).
  auto at = [&](T* p) { return p ? p + e * m : nullptr; };
  return {wg_.w + e * m, wu_.w + e * m, wd_.w + e * m, at(g.wg), at(g.wu), at(g.wd), l_, ed_};
}

template <class T>
void GroupedExperts<T>::forward(const int64_t* offsets, i64 blocks, const T* xg, T* y, i64 first,
                                i64 last) {
  MARIN_CHECK(blocks == E_ * i64(grads_.size()), "experts: {} blocks for {} experts × {} sources",
              blocks, E_, grads_.size());
  MARIN_CHECK(offsets[blocks] * ed_ <= i64(a_.size()), "experts: {} rows exceed the workspace",
              offsets[blocks]);
  xg_ = xg;
  // Blocks touch disjoint rows and (expert, source) gradients: independent tasks, each on one
  // thread (small products that do not scale inside one GEMM; the same bits at any thread count).
  kernels::parallel_tasks(last - first, [&](i64 i, int) {
    const i64 b = first + i, r0 = offsets[b], n = offsets[b + 1] - r0;
    if (n == 0) return;
    expert(b % E_, grads_[size_t(b / E_)])
        .forward(xg + r0 * l_, n, a_.data() + r0 * ed_, b_.data() + r0 * ed_, h_.data() + r0 * ed_,
                 y + r0 * l_, false);
  });
}

template <class T>
void GroupedExperts<T>::backward(const int64_t* offsets, const T* dy, T* dxg, T* scratch, i64 first,
                                 i64 last) {
  // As forward; a block's scratch is its rows' slice of the 3·rows·expert_dim.
  kernels::parallel_tasks(last - first, [&](i64 i, int) {
    const i64 b = first + i, r0 = offsets[b], n = offsets[b + 1] - r0;
    if (n == 0) return;
    expert(b % E_, grads_[size_t(b / E_)])
        .backward(dy + r0 * l_, xg_ + r0 * l_, n, a_.data() + r0 * ed_, b_.data() + r0 * ed_,
                  h_.data() + r0 * ed_, dxg + r0 * l_, false, scratch + 3 * r0 * ed_);
  });
}

template class GroupedExperts<float>;
template class GroupedExperts<double>;

}  // namespace marin
