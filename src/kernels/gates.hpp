#pragma once
// The element-wise halves of GatedNorm (recipe §2: GN(x) = x ⊙ σ(silu(x @ Wd) @ Wu)), beside
// kernels.hpp (cpu/gates.cpp). Every output may alias its like-sized input.
#include "kernels/kernels.hpp"

namespace marin::kernels {

// su = silu(u) = u·σ(u); backward: du = dsu·silu'(u), silu'(u) = σ(u)·(1 + u·(1 − σ(u))).
template <class T>
void silu_fwd(const T* u, T* su, i64 n);
template <class T>
void silu_bwd(const T* dsu, const T* u, T* du, i64 n);
// g ← σ(g) in place (saved for backward), out = r·g; backward: dr = dout·g,
// dg_logit = dout·r·g·(1 − g).
template <class T>
void sigmoid_gate_fwd(const T* r, T* g, T* out, i64 n);
template <class T>
void sigmoid_gate_bwd(const T* dout, const T* r, const T* g, T* dr, T* dg_logit, i64 n);

}  // namespace marin::kernels
