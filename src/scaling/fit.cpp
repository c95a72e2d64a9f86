#include "scaling/fit.hpp"

#include <algorithm>
#include <cmath>

#include "core/error.hpp"

namespace marin::scaling {

const char* law_name(LawFamily f) {
  return f == LawFamily::Sigmoid ? "sigmoid" : "power";
}

LawFamily parse_law(const std::string& name) {
  if (name == "power") return LawFamily::Power;
  if (name == "sigmoid") return LawFamily::Sigmoid;
  fail("unknown law '{}' (expected power, sigmoid or chinchilla)", name);
}

nlohmann::json LawSpec::to_json() const {
  nlohmann::json j = {{"family", law_name(family)},
                      {"l_inf",
                       {{"mode", l_inf ? "fixed" : "fitted"},
                        {"value", l_inf ? nlohmann::json(*l_inf) : nlohmann::json()}}}};
  j["formula"] = family == LawFamily::Power
                     ? "L = l_inf + A * C^(-alpha), C = compute without the LM head"
                     : "L = l_inf + (ceiling - l_inf) / (1 + exp(-(ln A - alpha * ln C))), "
                       "ceiling = ln V, C = compute without the LM head";
  if (family == LawFamily::Sigmoid) j["ceiling"] = ceiling;
  return j;
}

namespace {

double sigmoid(double z) {
  return 1.0 / (1.0 + std::exp(-z));
}

}  // namespace

double PowerLawFit::predict(double compute) const {
  const double z = std::log(A) - alpha * std::log(compute);
  if (family == LawFamily::Sigmoid) return l_inf + (ceiling - l_inf) * sigmoid(z);
  return l_inf + std::exp(z);
}

nlohmann::json PowerLawFit::to_json() const {
  nlohmann::json j = {{"law", law_name(family)},
                      {"A", A},
                      {"alpha", alpha},
                      {"l_inf", l_inf},
                      {"l_inf_fitted", l_inf_fitted},
                      {"l_inf_at_bound", l_inf_at_bound},
                      {"n", n},
                      {"sse", sse},
                      {"r2", r2},
                      {"r2_log", r2_log}};
  if (family == LawFamily::Sigmoid) j["ceiling"] = ceiling;
  if (!loo_errors.empty())
    j["loo"] = {{"errors", loo_errors}, {"rmse", loo_rmse}, {"max_abs", loo_max_abs}};
  else
    j["loo"] = nullptr;
  return j;
}

namespace {

void check_inputs(const std::vector<double>& c, const std::vector<double>& l,
                  const std::vector<double>& w, size_t need) {
  if (c.size() != l.size())
    fail("scaling-law fit: {} compute values but {} losses", c.size(), l.size());
  if (!w.empty() && w.size() != c.size())
    fail("scaling-law fit: {} weights for {} points", w.size(), c.size());
  if (c.size() < need) fail("scaling-law fit: needs at least {} points, got {}", need, c.size());
  for (size_t i = 0; i < c.size(); ++i) {
    if (!(c[i] > 0) || !std::isfinite(c[i]))
      fail("scaling-law fit: compute must be positive and finite, got {}", c[i]);
    if (!std::isfinite(l[i])) fail("scaling-law fit: loss must be finite, got {}", l[i]);
    if (!w.empty() && !(w[i] > 0 && std::isfinite(w[i])))
      fail("scaling-law fit: weights must be positive and finite, got {}", w[i]);
  }
}

}  // namespace

PowerLawFit fit_fixed(const std::vector<double>& compute, const std::vector<double>& loss,
                      double l_inf, const std::vector<double>& w, LawFamily family,
                      double ceiling) {
  check_inputs(compute, loss, w, 2);
  const bool sig = family == LawFamily::Sigmoid;
  if (sig && !(ceiling > l_inf))
    fail("sigmoid fit: the ceiling {} must be above L∞ = {}", ceiling, l_inf);
  const size_t n = compute.size();
  std::vector<double> x(n), y(n);
  auto wt = [&](size_t i) { return w.empty() ? 1.0 : w[i]; };
  double sw = 0, mx = 0, my = 0, ml = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!(loss[i] > l_inf))
      fail("scaling-law fit: L∞ = {} must be below every loss (got a loss of {})", l_inf, loss[i]);
    if (sig && !(loss[i] < ceiling))
      fail("sigmoid fit: every loss must be below the ceiling ln V = {} (got {})", ceiling,
           loss[i]);
    x[i] = std::log(compute[i]);
    if (sig) {
      const double p = (loss[i] - l_inf) / (ceiling - l_inf);
      y[i] = std::log(p / (1 - p));
    } else {
      y[i] = std::log(loss[i] - l_inf);
    }
    sw += wt(i), mx += wt(i) * x[i], my += wt(i) * y[i], ml += wt(i) * loss[i];
  }
  mx /= sw, my /= sw, ml /= sw;
  double sxx = 0, sxy = 0, syy = 0;
  for (size_t i = 0; i < n; ++i) {
    sxx += wt(i) * (x[i] - mx) * (x[i] - mx);
    sxy += wt(i) * (x[i] - mx) * (y[i] - my);
    syy += wt(i) * (y[i] - my) * (y[i] - my);
  }
  if (!(sxx > 0)) fail("scaling-law fit: every point has the same compute");
  const double b = sxy / sxx, a = my - b * mx;
  PowerLawFit f;
  f.family = family;
  f.ceiling = sig ? ceiling : 0;
  f.A = std::exp(a);
  f.alpha = -b;
  f.l_inf = l_inf;
  f.n = int(n);
  double sse_log = 0, sst = 0;
  for (size_t i = 0; i < n; ++i) {
    const double r = loss[i] - f.predict(compute[i]);
    f.sse += wt(i) * r * r;
    sst += wt(i) * (loss[i] - ml) * (loss[i] - ml);
    const double rl = y[i] - (a + b * x[i]);
    sse_log += wt(i) * rl * rl;
  }
  f.r2 = sst > 0 ? 1.0 - f.sse / sst : (f.sse == 0 ? 1.0 : 0.0);
  f.r2_log = syy > 0 ? 1.0 - sse_log / syy : 1.0;
  return f;
}

PowerLawFit fit_free(const std::vector<double>& compute, const std::vector<double>& loss,
                     double l_inf_min, const std::vector<double>& w, LawFamily family,
                     double ceiling) {
  check_inputs(compute, loss, w, 3);
  const double min_l = *std::min_element(loss.begin(), loss.end());
  const double max_l = *std::max_element(loss.begin(), loss.end());
  if (!(l_inf_min < min_l))
    fail("scaling-law fit: the lower bound of L∞ ({}) must be below the smallest loss ({})",
         l_inf_min, min_l);
  // Candidates by their gap u = min L − L∞ on a log scale from (a tiny fraction of the loss
  // spread) to min L − l_inf_min: the interesting region near min L gets as many points as the
  // far one.
  const double u_hi = min_l - l_inf_min;
  const double u_lo =
      std::min(u_hi, 1e-7 * std::max(max_l - min_l, 1e-6 * std::abs(min_l) + 1e-12));
  auto l_at = [&](double log_u) { return std::max(l_inf_min, min_l - std::exp(log_u)); };
  auto sse_at = [&](double log_u) {
    return fit_fixed(compute, loss, l_at(log_u), w, family, ceiling).sse;
  };
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
  PowerLawFit f = fit_fixed(compute, loss, l_at(log_u), w, family, ceiling);
  f.l_inf_fitted = true;
  // The best L∞ on the lower edge of the search: the losses show no curvature that pins it.
  f.l_inf_at_bound = log_u >= pts[grid - 1];
  return f;
}

namespace {

PowerLawFit fit_once(const std::vector<double>& c, const std::vector<double>& l,
                     const LawSpec& spec, const std::vector<double>& w) {
  return spec.l_inf ? fit_fixed(c, l, *spec.l_inf, w, spec.family, spec.ceiling)
                    : fit_free(c, l, 0.0, w, spec.family, spec.ceiling);
}

}  // namespace

PowerLawFit fit_law(const std::vector<double>& compute, const std::vector<double>& loss,
                    const LawSpec& spec, const std::vector<double>& w) {
  PowerLawFit f = fit_once(compute, loss, spec, w);
  const size_t n = compute.size(), need = size_t(spec.parameters());
  if (n - 1 >= need) {
    double sq = 0;
    for (size_t i = 0; i < n; ++i) {
      std::vector<double> c, l, ww;
      for (size_t j = 0; j < n; ++j)
        if (j != i) {
          c.push_back(compute[j]), l.push_back(loss[j]);
          if (!w.empty()) ww.push_back(w[j]);
        }
      const PowerLawFit g = fit_once(c, l, spec, ww);
      const double e = g.predict(compute[i]) - loss[i];
      f.loo_errors.push_back(e);
      sq += e * e;
      f.loo_max_abs = std::max(f.loo_max_abs, std::abs(e));
    }
    f.loo_rmse = std::sqrt(sq / double(n));
  }
  return f;
}

PowerLawFit fit_power_law(const std::vector<double>& compute, const std::vector<double>& loss,
                          std::optional<double> l_inf) {
  LawSpec s;
  s.l_inf = l_inf;
  return fit_law(compute, loss, s);
}

Fitter law_fitter(const LawSpec& spec) {
  return [spec](const std::vector<double>& c, const std::vector<double>& l,
                const std::vector<double>& w) -> Predictor {
    const PowerLawFit f = fit_once(c, l, spec, w);
    return [f](double x) { return f.predict(x); };
  };
}

// --- uncertainty ---------------------------------------------------------------------------------

nlohmann::json Interval::to_json() const {
  return {{"lo", lo},
          {"hi", hi},
          {"level", level},
          {"method",
           "parametric bootstrap over the rungs: the fitted law plus Gaussian noise of each "
           "rung's variance (its seeds pooled with the residuals, or the residuals), variance "
           "drawn from its "
           "chi-square, refitted; plus the target run's own noise"},
          {"noise_source", noise_source},
          {"noise_scale", noise_scale},
          {"dof", dof},
          {"replicates", replicates},
          {"failed", failed}};
}

namespace {

// A small deterministic generator (splitmix64 + Box–Muller): the same interval on every
// platform, which std::normal_distribution does not promise.
struct Rng {
  uint64_t s;
  uint64_t next() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  double uniform() { return (double(next() >> 11) + 0.5) / double(1ull << 53); }
  double normal() {
    return std::sqrt(-2.0 * std::log(uniform())) * std::cos(6.283185307179586 * uniform());
  }
  double chi2(int dof) {
    double s2 = 0;
    for (int i = 0; i < dof; ++i) {
      const double z = normal();
      s2 += z * z;
    }
    return s2;
  }
};

double quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * double(v.size() - 1);
  const size_t i = size_t(pos);
  const double t = pos - double(i);
  return i + 1 < v.size() ? v[i] * (1 - t) + v[i + 1] * t : v[i];
}

}  // namespace

Interval prediction_interval(const std::vector<double>& compute, const std::vector<double>& loss,
                             const std::vector<double>& w, const Fitter& fit, int parameters,
                             const PointNoise& noise, double target_compute, double level,
                             int replicates, uint64_t seed) {
  const size_t n = compute.size();
  if (noise.var_run.size() != n || noise.runs.size() != n)
    fail("prediction interval: noise for {} points, {} given", n, noise.var_run.size());
  const Predictor f = fit(compute, loss, w);
  const int resid_dof = int(n) - parameters;
  // Each point's variance relative to one unit σ² and the unit itself: from the seeds when they
  // vary, else from the residuals (every point one run of equal variance).
  std::vector<double> rel(n);
  double unit = 0, target_rel = 1;
  Interval iv;
  iv.level = level;
  iv.replicates = replicates;
  const bool seeds = noise.dof > 0 && noise.var_target > 0;
  double chi2 = 0;
  if (seeds) {
    // The unit variance pooled from the seeds (ν degrees) and the residuals around the law
    // (n − p): under the model both estimate it; rungs that scatter beyond their seeds raise it.
    const double seed_unit = noise.var_target;
    for (size_t i = 0; i < n; ++i) rel[i] = noise.var_run[i] / seed_unit / double(noise.runs[i]);
    for (size_t i = 0; i < n; ++i) {
      const double r = loss[i] - f(compute[i]);
      chi2 += r * r / (rel[i] * seed_unit);
    }
    const int extra = std::max(0, resid_dof);
    unit = (double(noise.dof) * seed_unit + (extra > 0 ? chi2 * seed_unit : 0.0)) /
           double(noise.dof + extra);
    iv.noise_scale = unit / seed_unit;
    iv.noise_source = "seeds and residuals";
    iv.dof = noise.dof + extra;
  } else {
    if (resid_dof < 1)
      fail(
          "prediction interval: {} points and {} parameters leave no residual to estimate the "
          "noise, and the rungs have one seed each",
          n, parameters);
    for (size_t i = 0; i < n; ++i) {
      const double r = loss[i] - f(compute[i]);
      chi2 += r * r;
      rel[i] = 1;
    }
    unit = chi2 / resid_dof;
    iv.noise_source = "residuals";
    iv.dof = resid_dof;
  }
  Rng rng{seed};
  std::vector<double> draws, y(n), fitted(n);
  for (size_t i = 0; i < n; ++i) fitted[i] = f(compute[i]);
  for (int b = 0; b < replicates; ++b) {
    const double var = unit * double(iv.dof) / std::max(rng.chi2(iv.dof), 1e-300);
    for (size_t i = 0; i < n; ++i) y[i] = fitted[i] + std::sqrt(var * rel[i]) * rng.normal();
    const double target_noise = std::sqrt(var * target_rel) * rng.normal();
    try {
      const Predictor g = fit(compute, y, w);
      const double p = g(target_compute) + target_noise;
      if (std::isfinite(p))
        draws.push_back(p);
      else
        ++iv.failed;
    } catch (const Error&) {
      ++iv.failed;  // e.g. a replicate with a loss below the fixed L∞
    }
  }
  if (draws.size() < size_t(replicates) / 2)
    fail("prediction interval: {} of {} bootstrap refits failed", iv.failed, replicates);
  iv.lo = quantile(draws, (1 - level) / 2);
  iv.hi = quantile(draws, (1 + level) / 2);
  return iv;
}

}  // namespace marin::scaling
