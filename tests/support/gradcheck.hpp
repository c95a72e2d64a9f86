#pragma once
// The one generic gradient-check harness: central finite differences in double precision against
// the analytic gradients of any module (or the whole model). Each tensor is checked on all its
// elements, or on a seeded random subset when it is large; the error reported per tensor is
// ‖fd − analytic‖ / max(‖fd‖, ‖analytic‖) over the checked elements.
#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "core/rng.hpp"

namespace marin::testing {

// ---- whole-tensor helpers (the kernel tests compare full gradient tensors) ----

inline std::vector<double> randn(size_t n, uint64_t seed, double scale = 1.0) {
  std::mt19937_64 g(seed);
  std::normal_distribution<double> d(0.0, scale);
  std::vector<double> v(n);
  for (auto& x : v) x = d(g);
  return v;
}

// ‖a − b‖ / max(‖a‖, ‖b‖) (the absolute norm when both are zero).
inline double rel_err(const std::vector<double>& a, const std::vector<double>& b) {
  double num = 0, na = 0, nb = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    num += (a[i] - b[i]) * (a[i] - b[i]);
    na += a[i] * a[i];
    nb += b[i] * b[i];
  }
  const double den = std::sqrt(std::max(na, nb));
  return den == 0 ? std::sqrt(num) : std::sqrt(num) / den;
}

inline double dot(const std::vector<double>& a, const std::vector<double>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// Central difference of `loss` with respect to one element (restored afterwards).
inline double central_difference(double& x, const std::function<double()>& loss, double h) {
  const double x0 = x;
  x = x0 + h;
  const double lp = loss();
  x = x0 - h;
  const double lm = loss();
  x = x0;
  return (lp - lm) / (2 * h);
}

// The finite-difference gradient of `loss` with respect to every element of x.
inline std::vector<double> fd_grad(std::vector<double>& x, const std::function<double()>& loss,
                                   double h = 1e-6) {
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) g[i] = central_difference(x[i], loss, h);
  return g;
}

inline std::vector<float> to_f(const std::vector<double>& v) {
  return std::vector<float>(v.begin(), v.end());
}
inline std::vector<double> to_d(const std::vector<float>& v) {
  return std::vector<double>(v.begin(), v.end());
}

// ---- per-tensor checks over named parameters (modules and the whole model) ----

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
      const double fd = central_difference(t.value[i], loss, h), an = t.grad[i];
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
