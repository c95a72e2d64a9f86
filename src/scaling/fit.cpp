#include "scaling/fit.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"

namespace marin::scaling {

double PowerLawFit::predict(double compute) const {
  return l_inf + A * std::pow(compute, -alpha);
}

nlohmann::json PowerLawFit::to_json() const {
  nlohmann::json j = {{"A", A},
                      {"alpha", alpha},
                      {"l_inf", l_inf},
                      {"l_inf_fitted", l_inf_fitted},
                      {"l_inf_at_bound", l_inf_at_bound},
                      {"n", n},
                      {"sse", sse},
                      {"r2", r2},
                      {"r2_log", r2_log}};
  if (!loo_errors.empty())
    j["loo"] = {{"errors", loo_errors}, {"rmse", loo_rmse}, {"max_abs", loo_max_abs}};
  else
    j["loo"] = nullptr;
  return j;
}

namespace {

void check_inputs(const std::vector<double>& c, const std::vector<double>& l, size_t need) {
  if (c.size() != l.size())
    fail("power-law fit: {} compute values but {} losses", c.size(), l.size());
  if (c.size() < need) fail("power-law fit: needs at least {} points, got {}", need, c.size());
  for (size_t i = 0; i < c.size(); ++i) {
    if (!(c[i] > 0) || !std::isfinite(c[i]))
      fail("power-law fit: compute must be positive and finite, got {}", c[i]);
    if (!std::isfinite(l[i])) fail("power-law fit: loss must be finite, got {}", l[i]);
  }
}

}  // namespace

PowerLawFit fit_fixed(const std::vector<double>& compute, const std::vector<double>& loss,
                      double l_inf) {
  check_inputs(compute, loss, 2);
  const size_t n = compute.size();
  std::vector<double> x(n), y(n);
  double mx = 0, my = 0, ml = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!(loss[i] > l_inf))
      fail("power-law fit: L∞ = {} must be below every loss (got a loss of {})", l_inf, loss[i]);
    x[i] = std::log(compute[i]);
    y[i] = std::log(loss[i] - l_inf);
    mx += x[i], my += y[i], ml += loss[i];
  }
  mx /= double(n), my /= double(n), ml /= double(n);
  double sxx = 0, sxy = 0, syy = 0;
  for (size_t i = 0; i < n; ++i) {
    sxx += (x[i] - mx) * (x[i] - mx);
    sxy += (x[i] - mx) * (y[i] - my);
    syy += (y[i] - my) * (y[i] - my);
  }
  if (!(sxx > 0)) fail("power-law fit: every point has the same compute");
  const double b = sxy / sxx, a = my - b * mx;
  PowerLawFit f;
  f.A = std::exp(a);
  f.alpha = -b;
  f.l_inf = l_inf;
  f.n = int(n);
  double sse_log = 0, sst = 0;
  for (size_t i = 0; i < n; ++i) {
    const double r = loss[i] - f.predict(compute[i]);
    f.sse += r * r;
    sst += (loss[i] - ml) * (loss[i] - ml);
    const double rl = y[i] - (a + b * x[i]);
    sse_log += rl * rl;
  }
  f.r2 = sst > 0 ? 1.0 - f.sse / sst : (f.sse == 0 ? 1.0 : 0.0);
  f.r2_log = syy > 0 ? 1.0 - sse_log / syy : 1.0;
  return f;
}

PowerLawFit fit_free(const std::vector<double>& compute, const std::vector<double>& loss,
                     double l_inf_min) {
  check_inputs(compute, loss, 3);
  const double min_l = *std::min_element(loss.begin(), loss.end());
  const double max_l = *std::max_element(loss.begin(), loss.end());
  if (!(l_inf_min < min_l))
    fail("power-law fit: the lower bound of L∞ ({}) must be below the smallest loss ({})",
         l_inf_min, min_l);
  // Candidates by their gap u = min L − L∞ on a log scale from (a tiny fraction of the loss
  // spread) to min L − l_inf_min: the interesting region near min L gets as many points as the
  // far one.
  const double u_hi = min_l - l_inf_min;
  const double u_lo =
      std::min(u_hi, 1e-7 * std::max(max_l - min_l, 1e-6 * std::abs(min_l) + 1e-12));
  auto l_at = [&](double log_u) { return std::max(l_inf_min, min_l - std::exp(log_u)); };
  auto sse_at = [&](double log_u) { return fit_fixed(compute, loss, l_at(log_u)).sse; };
  const int grid = 800;
  const double lo = std::log(u_lo), hi = std::log(u_hi);
  int best = 0;
  double best_sse = INFINITY;
  std::vector<double> pts(grid + 1);
  for (int i = 0; i <= grid; ++i) {
    pts[i] = lo + (hi - lo) * double(i) / grid;
    const double s = sse_at(pts[i]);
    if (s < best_sse) best_sse = s, best = i;
  }
  // Golden-section search on the bracket around the best grid point.
  double a = pts[std::max(0, best - 1)], b = pts[std::min(grid, best + 1)];
  const double phi = (std::sqrt(5.0) - 1) / 2;
  double c = b - phi * (b - a), d = a + phi * (b - a);
  double fc = sse_at(c), fd = sse_at(d);
  for (int it = 0; it < 100 && b - a > 1e-12 * (1 + std::abs(a)); ++it) {
    if (fc < fd) {
      b = d, d = c, fd = fc;
      c = b - phi * (b - a), fc = sse_at(c);
    } else {
      a = c, c = d, fc = fd;
      d = a + phi * (b - a), fd = sse_at(d);
    }
  }
  double log_u = fc < fd ? c : d;
  if (std::min(fc, fd) > best_sse) log_u = pts[best];
  PowerLawFit f = fit_fixed(compute, loss, l_at(log_u));
  f.l_inf_fitted = true;
  // The best L∞ on the lower edge of the search: the losses show no curvature that pins it.
  f.l_inf_at_bound = log_u >= pts[grid - 1];
  return f;
}

PowerLawFit fit_power_law(const std::vector<double>& compute, const std::vector<double>& loss,
                          std::optional<double> l_inf) {
  PowerLawFit f = l_inf ? fit_fixed(compute, loss, *l_inf) : fit_free(compute, loss);
  const size_t n = compute.size(), need = l_inf ? 2 : 3;
  if (n - 1 >= need) {
    double sq = 0;
    for (size_t i = 0; i < n; ++i) {
      std::vector<double> c, l;
      for (size_t j = 0; j < n; ++j)
        if (j != i) c.push_back(compute[j]), l.push_back(loss[j]);
      const PowerLawFit g = l_inf ? fit_fixed(c, l, *l_inf) : fit_free(c, l);
      const double e = g.predict(compute[i]) - loss[i];
      f.loo_errors.push_back(e);
      sq += e * e;
      f.loo_max_abs = std::max(f.loo_max_abs, std::abs(e));
    }
    f.loo_rmse = std::sqrt(sq / double(n));
  }
  return f;
}

}  // namespace marin::scaling
