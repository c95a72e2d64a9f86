#pragma once
// The scaling-law fit of recipe.md §9: L(C) = L∞ + A·C^(−α), fitted as the least-squares line of
// log(L − L∞) on log C across rungs. L∞ is either fixed (the hero used 1.5) or fitted by variable
// projection: for every candidate L∞ below the smallest loss the line is solved in closed form,
// and the L∞ whose curve has the smallest squared error *in loss space* wins (the log-space error
// is not comparable across L∞: it shrinks to 0 as L∞ → −∞). See docs/scaling.md.
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

namespace marin::scaling {

struct PowerLawFit {
  double A = 0, alpha = 0, l_inf = 0;
  bool l_inf_fitted = false;
  bool l_inf_at_bound = false;  // fitted L∞ at the search's lower bound (not pinned by the data)
  int n = 0;                    // points fitted
  double sse = 0;               // Σ (L − L̂)² in nats²
  double r2 = 0;                // 1 − SSE/SST in loss space
  double r2_log = 0;            // R² of the log-space line
  // Leave-one-rung-out: for point i, the fit on the others predicts L_i; error = L̂_i − L_i (nats).
  // Empty when too few points remain to fit (2 with L∞ fixed, 3 with L∞ fitted).
  std::vector<double> loo_errors;
  double loo_rmse = 0, loo_max_abs = 0;

  double predict(double compute) const;
  nlohmann::json to_json() const;
};

// The line of log(L − l_inf) on log C (closed form). Needs ≥ 2 points with distinct C and every
// L > l_inf (else marin::Error). No leave-one-out.
PowerLawFit fit_fixed(const std::vector<double>& compute, const std::vector<double>& loss,
                      double l_inf);
// L∞ fitted in [l_inf_min, min L): a grid of candidates then golden-section refinement of the
// best bracket. Needs ≥ 3 points. No leave-one-out.
PowerLawFit fit_free(const std::vector<double>& compute, const std::vector<double>& loss,
                     double l_inf_min = 0.0);
// fit_fixed (l_inf given) or fit_free (nullopt), plus the leave-one-rung-out errors.
PowerLawFit fit_power_law(const std::vector<double>& compute, const std::vector<double>& loss,
                          std::optional<double> l_inf);

}  // namespace marin::scaling
