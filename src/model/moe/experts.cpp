#include "model/moe/experts.hpp"

#include <fmt/format.h>

namespace marin {

template <class T>
GroupedExperts<T>::GroupedExperts(const Binder<T>& bind, const ModelConfig& c, int64_t layer,
                                  i64 max_rows)
    : l_(c.latent_dim), ed_(c.expert_dim), E_(c.num_experts) {
  const std::string p = fmt::format("layers.{}.moe.experts.", layer);
  wg_ = bind(p + "w_gate");
  wu_ = bind(p + "w_up");
  wd_ = bind(p + "w_down");
  const i64 n = max_rows * c.top_k * ed_;
  a_.resize(n);
  b_.resize(n);
  h_.resize(n);
}

template <class T>
SwiGLUFFN<T> GroupedExperts<T>::expert(i64 e) const {
  const i64 m = l_ * ed_;
  return {wg_.w + e * m,
          wu_.w + e * m,
          wd_.w + e * m,
          wg_.g + e * m,
          wu_.g + e * m,
          wd_.g + e * m,
          l_,
          ed_};
}

template <class T>
void GroupedExperts<T>::forward(const int64_t* offsets, const T* xg, T* y) {
  xg_ = xg;
  for (i64 e = 0; e < E_; ++e) {
    const i64 r0 = offsets[e], n = offsets[e + 1] - r0;
    if (n == 0) continue;
    expert(e).forward(xg + r0 * l_, n, a_.data() + r0 * ed_, b_.data() + r0 * ed_,
                      h_.data() + r0 * ed_, y + r0 * l_, false);
  }
}

template <class T>
void GroupedExperts<T>::backward(const int64_t* offsets, const T* dy, T* dxg, T* scratch) {
  for (i64 e = 0; e < E_; ++e) {
    const i64 r0 = offsets[e], n = offsets[e + 1] - r0;
    if (n == 0) continue;
    expert(e).backward(dy + r0 * l_, xg_ + r0 * l_, n, a_.data() + r0 * ed_, b_.data() + r0 * ed_,
                       h_.data() + r0 * ed_, dxg + r0 * l_, false, scratch);
  }
}

template class GroupedExperts<float>;
template class GroupedExperts<double>;

}  // namespace marin
