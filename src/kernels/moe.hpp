#pragma once
// MoE kernels (cpu/moe.cpp), beside kernels.hpp: the router's top-(K+1) selection with sigmoid
// combine weights (recipe §2 MoE steps 2–3) and its backward, and the token dispatcher's permute
// (latent rows into expert order) and weighted combine (expert outputs back to their tokens).
#include "kernels/kernels.hpp"

namespace marin::kernels {

struct RouterShape {
  i64 rows = 0, E = 1, K = 1;
  double combine_sum = 2.5;
};
// Per token, from s [rows, E] (unbiased logits) and the QB bias b [E]: the top K+1 of s + b
// (ties → lower index); expert [rows, K] the first K; alpha [rows] the (K+1)-th biased value;
// prob [rows, K] = σ(s_e); prob_sum [rows] = Σ prob + 1e-9; weight [rows, K] = prob·cs/prob_sum.
template <class T>
void router_topk(const RouterShape& r, const T* s, const T* b, int32_t* expert, T* alpha, T* prob,
                 T* weight, T* prob_sum);
// ds [rows, E] (accumulated) from dweight [rows, K], the gradient of the combine weights.
template <class T>
void router_topk_bwd(const RouterShape& r, const T* dweight, const T* weight, const T* prob,
                     const T* prob_sum, const int32_t* expert, T* ds);

// Permute: xg[row] = z[row_token[row]] for `kept` rows of width l.
template <class T>
void moe_permute(const T* z, const int32_t* row_token, T* xg, i64 kept, i64 l);
// Combine: out[t] = Σ_k w[t,k]·grouped[slot_row[t,k]] over the kept slots (slot_row ≥ 0), token
// by token (no write races); w null: weight 1 (the permute's dual: rows added back to tokens).
template <class T>
void moe_combine(const T* grouped, const T* w, const int64_t* slot_row, T* out, i64 tokens, i64 K,
                 i64 l);
// The combine's dual: dgrouped[row] = w[t,k]·dR[t], dw[t,k] = dR[t]·grouped[row] (0 when dropped).
template <class T>
void moe_combine_bwd(const T* dR, const T* grouped, const T* w, const int64_t* slot_row,
                     T* dgrouped, T* dw, i64 tokens, i64 K, i64 l);

// ---- QB balancing (recipe §4) and router health, over one batch's routing ----
// Margins μ[t, e] = s[t, e] − alpha[t]: their range, and per expert the histogram of `bins` equal
// bins on [lo, lo + bins/scale) with values clipped into the edge bins (a NaN lands in bin 0).
template <class T>
void qb_margin_range(const T* s, const T* alpha, i64 rows, i64 E, double* lo, double* hi);
template <class T>
void qb_histogram(const T* s, const T* alpha, i64 rows, i64 E, double lo, double scale, i64 bins,
                  int64_t* counts);
// Per expert, the threshold β_e where its count of margins from the top reaches n_star,
// interpolated inside the bin (w: bin width); lo when no bin reaches it.
void qb_thresholds(const int64_t* counts, i64 E, i64 bins, double lo, double w, double n_star,
                   double* beta);
// bias_e = −β_e + mean(β).
template <class T>
void qb_center(const double* beta, i64 E, T* bias);
// Router health sums over tokens (in token order, from zero): entropy = Σ H(softmax(s_t)),
// lse2 = Σ lse_t² (both overwritten), and per expert Σ_t softmax(s_t)_e, added to psum at the end.
// The loads: load[expert[i]] += 1 for n assignments.
template <class T>
void router_softmax_sums(const T* s, i64 rows, i64 E, double* entropy, double* lse2, double* psum);
void count_loads(const int32_t* expert, i64 n, double* load);
// From per-expert loads and probability sums: Σ f_e·p̄_e (Switch balance / E), the load entropy
// −Σ f log f, and the largest and smallest load (f_e = load_e / assignments, p̄_e = psum_e/tokens).
struct LoadStats {
  double balance = 0, entropy = 0, max = 0, min = 0;
};
LoadStats load_stats(const double* load, const double* psum, i64 E, double assignments,
                     double tokens);

}  // namespace marin::kernels
