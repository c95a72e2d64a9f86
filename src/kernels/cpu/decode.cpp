// The two kernels that only incremental decoding needs: attention of one query token over a KV
// cache, and SConv of one token from its tap ring. The rest of a decoding step is the training
// forward at one token (model/ modules, Model::decode).
#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/cpu/simd.hpp"
#include "kernels/kernels.hpp"

namespace marin::kernels {

template <class T>
void attention_decode(const DecodeAttnShape& s, const T* q, const T* kc, const T* vc, i64 pos,
                      T* out) {
  const i64 hd = s.hd, row = i64(s.kv_used) * hd, group = s.H / s.kv_used;
  const i64 j0 = s.window > 0 ? std::max<i64>(0, pos - s.window + 1) : 0;
  const T scale = T(1) / std::sqrt(T(hd));
  T* sc = cpu::scratch<T>(0, size_t(pos - j0 + 1));
  for (i64 h = 0; h < s.H; ++h) {
    const i64 g = h / group;
    const T* qh = q + h * hd;
    T mx = -std::numeric_limits<T>::infinity();
    for (i64 j = j0; j <= pos; ++j) {
      const T* kj = kc + (j % s.cap) * row + g * hd;
      T dot = 0;
#pragma omp simd reduction(+ : dot)
      for (i64 i = 0; i < hd; ++i) dot += qh[i] * kj[i];
      dot *= scale;
      sc[j - j0] = dot;
      mx = std::max(mx, dot);
    }
    T sum = 0;
    for (i64 j = j0; j <= pos; ++j) sum += (sc[j - j0] = std::exp(sc[j - j0] - mx));
    T* yh = out + h * hd;
    std::fill(yh, yh + hd, T(0));
    for (i64 j = j0; j <= pos; ++j) {
      const T* vj = vc + (j % s.cap) * row + g * hd;
      const T pj = sc[j - j0] / sum;
#pragma omp simd
      for (i64 i = 0; i < hd; ++i) yh[i] += pj * vj[i];
    }
  }
}

template <class T>
void sconv_step(const T* x, const T* w, T* taps, T* y, i64 pos, int C, int k) {
  const i64 n = k - 1;
#pragma omp simd
  for (int c = 0; c < C; ++c) y[c] = w[c] * x[c];
  for (i64 j = 1; j <= n && j <= pos; ++j) {
    const T* xs = taps + ((pos - j) % n) * C;
    const T* wj = w + j * C;
#pragma omp simd
    for (int c = 0; c < C; ++c) y[c] += wj[c] * xs[c];
  }
  if (n > 0) std::copy(x, x + C, taps + (pos % n) * C);
}

template void attention_decode<float>(const DecodeAttnShape&, const float*, const float*,
                                      const float*, i64, float*);
template void attention_decode<double>(const DecodeAttnShape&, const double*, const double*,
                                       const double*, i64, double*);
template void sconv_step<float>(const float*, const float*, float*, float*, i64, int, int);
template void sconv_step<double>(const double*, const double*, double*, double*, i64, int, int);

}  // namespace marin::kernels
