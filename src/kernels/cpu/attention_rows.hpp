#pragma once
// Per-row visibility of the attention mask, shared by the generic path and every SIMD target
// of cpu/attention.cpp and cpu/attention_bf16.cpp, and the bf16 kernels' entry points.
#include <algorithm>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "kernels/kernels.hpp"

namespace marin::kernels::cpu {

//  lo[t]: smallest key index that can be visible from t (window and first occurrence of seg[t]).
//  run[t]: start of the run of equal segment ids that contains t.
struct RowInfo {
  std::vector<int> lo, run;
};

inline RowInfo row_info(const AttnShape& s, const int32_t* seg) {
  RowInfo ri;
  ri.lo.resize(size_t(s.B) * s.S);
  ri.run.resize(size_t(s.B) * s.S);
  std::unordered_map<int32_t, int> first;
  for (int b = 0; b < s.B; ++b) {
    first.clear();
    const int32_t* sg = seg + size_t(b) * s.S;
    int* lo = ri.lo.data() + size_t(b) * s.S;
    int* run = ri.run.data() + size_t(b) * s.S;
    for (int t = 0; t < s.S; ++t) {
      const int f = first.emplace(sg[t], t).first->second;
      lo[t] = s.window > 0 ? std::max(f, t - s.window + 1) : f;
      run[t] = (t > 0 && sg[t - 1] == sg[t]) ? run[t - 1] : t;
    }
  }
  return ri;
}

inline bool visible(const AttnShape& s, const int32_t* sg, int t, int j) {
  return j <= t && sg[j] == sg[t] && (s.window == 0 || t - s.window < j);
}

// Attention with bf16 products (cpu/attention_bf16.cpp): false, computing nothing, unless
// attention_bf16_supported() and the head dimension is one the kernels cover (16, 32, 64, 128).
bool attention_fwd_bf16(const AttnShape& s, const float* q, const float* k, const float* v,
                        const int32_t* seg, float* out, float* lse, const RowInfo& ri);
bool attention_bwd_bf16(const AttnShape& s, const float* q, const float* k, const float* v,
                        const int32_t* seg, const float* out, const float* lse, const float* dout,
                        float* dq, float* dk, float* dv, const RowInfo& ri);

}  // namespace marin::kernels::cpu
