#pragma once
// The one generic gradient-check harness: central finite differences in double precision against
// the analytic gradients of any module (or the whole model). Each tensor is checked on all its
// elements, or on a seeded random subset when it is large; the error reported per tensor is
// ‖fd − analytic‖ / max(‖fd‖, ‖analytic‖) over the checked elements.
#include <algorithm>
#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "core/rng.hpp"

namespace marin::testing {

struct GradTensor {
  std::string name;
  double* value;       // perturbed in place (restored afterwards)
  const double* grad;  // analytic gradient, same size
  int64_t size;
};

struct GradResult {
  std::string name;
  double rel_err = 0;
  double grad_norm = 0;
  int64_t checked = 0;
};

// loss(): recomputes the scalar loss from the current values. The analytic gradients must have
// been computed (at the unperturbed point) before calling.
inline std::vector<GradResult> gradcheck(const std::function<double()>& loss,
                                         const std::vector<GradTensor>& tensors,
                                         int64_t max_per_tensor = 64, double h = 1e-5,
                                         uint64_t seed = 7) {
  std::vector<GradResult> out;
  Rng rng(seed);
  for (const auto& t : tensors) {
    std::vector<int64_t> idx;
    if (t.size <= max_per_tensor) {
      for (int64_t i = 0; i < t.size; ++i) idx.push_back(i);
    } else {
      for (int64_t i = 0; i < max_per_tensor; ++i) idx.push_back(int64_t(rng.next_u64() % t.size));
    }
    double diff2 = 0, fd2 = 0, an2 = 0;
    for (int64_t i : idx) {
      const double orig = t.value[i];
      t.value[i] = orig + h;
      const double lp = loss();
      t.value[i] = orig - h;
      const double lm = loss();
      t.value[i] = orig;
      const double fd = (lp - lm) / (2 * h), an = t.grad[i];
      diff2 += (fd - an) * (fd - an);
      fd2 += fd * fd;
      an2 += an * an;
    }
    GradResult r;
    r.name = t.name;
    r.checked = int64_t(idx.size());
    r.grad_norm = std::sqrt(an2);
    const double denom = std::max(std::sqrt(fd2), std::sqrt(an2));
    r.rel_err = denom > 1e-300 ? std::sqrt(diff2) / denom : 0.0;
    out.push_back(r);
  }
  return out;
}

}  // namespace marin::testing
