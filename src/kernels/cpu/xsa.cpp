// XSA (exclusive self-attention) and the 2σ head gate, forward and backward (recipe §2 attention
// steps 8–9). Tokens are independent, so the loops run parallel over tokens with a static split;
// each token's arithmetic is the same whatever the thread count.
#include <cmath>

#include "kernels/cpu/simd.hpp"
#include "kernels/kernels.hpp"

namespace marin::kernels {

using cpu::sigmoid;

template <class T>
void xsa_gate_fwd(const XsaShape& s, const T* y, const T* v, T* sig, T* yx, T* yg) {
  const i64 H = s.H, hd = s.hd, qd = H * hd;
  const T eps = T(s.eps);
  cpu::parallel_for(s.rows, s.rows > 1, [&](i64 t) {
    for (i64 h = 0; h < H; ++h) {
      const T* yh = y + t * qd + h * hd;
      const T* vh = v + t * s.v_stride + (h / s.group) * hd;
      T* oh = yx + t * qd + h * hd;
      // Remove the component of y along the head's own value vector.
      T yv = 0, vv = 0;
      for (i64 i = 0; i < hd; ++i) yv += yh[i] * vh[i], vv += vh[i] * vh[i];
      const T coef = yv / (vv + eps);
      const T g = sigmoid(sig[t * H + h]);
      sig[t * H + h] = g;
      T* gh = yg + t * qd + h * hd;
      for (i64 i = 0; i < hd; ++i) {
        oh[i] = yh[i] - coef * vh[i];
        gh[i] = T(2) * g * oh[i];
      }
    }
  });
}

template <class T>
void xsa_gate_bwd(const XsaShape& s, const T* dyg, const T* y, const T* v, const T* yx,
                  const T* sig, T* dy, T* dv, T* dgl) {
  const i64 H = s.H, hd = s.hd, qd = H * hd;
  const T eps = T(s.eps);
  // Heads of one token that share a KV head add into the same dv row, so a token's heads stay on
  // one thread (in head order) and tokens split statically.
  cpu::parallel_for(s.rows, s.rows > 1, [&](i64 t) {
    for (i64 h = 0; h < H; ++h) {
      const T* g = dyg + t * qd + h * hd;
      const T* oh = yx + t * qd + h * hd;
      const T* yh = y + t * qd + h * hd;
      const T* vh = v + t * s.v_stride + (h / s.group) * hd;
      T* dvh = dv + t * s.v_stride + (h / s.group) * hd;
      T* dyh = dy + t * qd + h * hd;
      const T sg = sig[t * H + h];
      // Gate: yg = 2 sg · yx.
      T gsum = 0;
      for (i64 i = 0; i < hd; ++i) gsum += g[i] * oh[i];
      dgl[t * H + h] = gsum * T(2) * sg * (T(1) - sg);
      // XSA: yx = y − c·v, c = (y·v)/n, n = |v|² + eps.
      T yv = 0, vv = 0, gv = 0;
      for (i64 i = 0; i < hd; ++i) {
        const T dyx = T(2) * sg * g[i];
        yv += yh[i] * vh[i];
        vv += vh[i] * vh[i];
        gv += dyx * vh[i];
      }
      const T n = vv + eps, c = yv / n;
      for (i64 i = 0; i < hd; ++i) {
        const T dyx = T(2) * sg * g[i];
        dyh[i] = dyx - gv / n * vh[i];
        dvh[i] += -c * dyx - gv * (yh[i] / n - T(2) * c * vh[i] / n);
      }
    }
  });
}

template void xsa_gate_fwd<float>(const XsaShape&, const float*, const float*, float*, float*,
                                  float*);
template void xsa_gate_fwd<double>(const XsaShape&, const double*, const double*, double*, double*,
                                   double*);
template void xsa_gate_bwd<float>(const XsaShape&, const float*, const float*, const float*,
                                  const float*, const float*, float*, float*, float*);
template void xsa_gate_bwd<double>(const XsaShape&, const double*, const double*, const double*,
                                   const double*, const double*, double*, double*, double*);

}  // namespace marin::kernels
