#pragma once
// Per-row visibility of the attention mask, shared by the generic path and every SIMD target
// of cpu/attention.cpp.
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

}  // namespace marin::kernels::cpu
