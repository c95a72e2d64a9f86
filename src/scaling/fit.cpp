#include "scaling/fit.hpp"

#include <algorithm>
#include <cmath>
#include <set>
#include <utility>

#include "core/error.hpp"

namespace marin::scaling {

const char* law_name(LawFamily f) {
  switch (f) {
    case LawFamily::Sigmoid:
      return "sigmoid";
    case LawFamily::Chinchilla:
      return "chinchilla";
    default:
      return "power";
  }
}

LawFamily parse_law(const std::string& name) {
  if (name == "power") return LawFamily::Power;
  if (name == "sigmoid") return LawFamily::Sigmoid;
  if (name == "chinchilla") return LawFamily::Chinchilla;
  fail("unknown law '{}' (expected power, sigmoid or chinchilla)", name);
}

nlohmann::json LawSpec::to_json() const {
  nlohmann::json j = {{"family", law_name(family)},
                      {"l_inf",
                       {{"mode", l_inf ? "fixed" : "fitted"},
                        {"value", l_inf ? nlohmann::json(*l_inf) : nlohmann::json()}}}};
  j["formula"] = family == LawFamily::Power
                     ? "L = l_inf + A * C^(-alpha), C = compute without the LM head"
                 : family == LawFamily::Sigmoid
                     ? "L = l_inf + (ceiling - l_inf) / (1 + exp(-(ln A - alpha * ln C))), "
                       "ceiling = ln V, C = compute without the LM head"
                     : "L = E + A / N^alpha + B / D^beta, E = l_inf, N = active parameters, D = "
                       "training tokens; fitted on the end-of-run (100%) points of every rung x "
                       "budget";
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

LeaveOneOut LeaveOneOut::of(std::vector<double> errors) {
  LeaveOneOut l;
  double sq = 0;
  for (double e : errors) sq += e * e, l.max_abs = std::max(l.max_abs, std::abs(e));
  if (!errors.empty()) l.rmse = std::sqrt(sq / double(errors.size()));
  l.errors = std::move(errors);
  return l;
}

nlohmann::json LeaveOneOut::to_json() const {
  if (errors.empty()) return nullptr;
  return {{"errors", errors}, {"rmse", rmse}, {"max_abs", max_abs}};
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
  j["loo"] = loo.to_json();
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
    std::vector<double> err;
    for (size_t i = 0; i < n; ++i) {
      std::vector<double> c, l, ww;
      for (size_t j = 0; j < n; ++j)
        if (j != i) {
          c.push_back(compute[j]), l.push_back(loss[j]);
          if (!w.empty()) ww.push_back(w[j]);
        }
      const PowerLawFit g = fit_once(c, l, spec, ww);
      err.push_back(g.predict(compute[i]) - loss[i]);
    }
    f.loo = LeaveOneOut::of(std::move(err));
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
  if (spec.family == LawFamily::Chinchilla)
    fail("the chinchilla law is a law of N and D, not of the compute alone (fit_chinchilla)");
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
  if (loss.size() != n) fail("prediction interval: {} points but {} losses", n, loss.size());
  const Refit refit = [&](const std::vector<double>& y) {
    const Predictor g = fit(compute, y, w);
    std::vector<double> at(n);
    for (size_t i = 0; i < n; ++i) at[i] = g(compute[i]);
    return std::pair{at, g(target_compute)};
  };
  return prediction_interval(loss, refit, parameters, noise, level, replicates, seed);
}

Interval prediction_interval(const std::vector<double>& loss, const Refit& refit, int parameters,
                             const PointNoise& noise, double level, int replicates, uint64_t seed) {
  const size_t n = loss.size();
  if (noise.var_run.size() != n || noise.runs.size() != n)
    fail("prediction interval: noise for {} points, {} given", n, noise.var_run.size());
  const std::vector<double> fitted = refit(loss).first;
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
      const double r = loss[i] - fitted[i];
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
      const double r = loss[i] - fitted[i];
      chi2 += r * r;
      rel[i] = 1;
    }
    unit = chi2 / resid_dof;
    iv.noise_source = "residuals";
    iv.dof = resid_dof;
  }
  Rng rng{seed};
  std::vector<double> draws, y(n);
  for (int b = 0; b < replicates; ++b) {
    const double var = unit * double(iv.dof) / std::max(rng.chi2(iv.dof), 1e-300);
    for (size_t i = 0; i < n; ++i) y[i] = fitted[i] + std::sqrt(var * rel[i]) * rng.normal();
    const double target_noise = std::sqrt(var * target_rel) * rng.normal();
    try {
      const double p = refit(y).second + target_noise;
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

// --- the chinchilla law
// ---------------------------------------------------------------------------

NDPoints NDPoints::subset(const std::vector<bool>& keep) const {
  NDPoints o;
  for (size_t i = 0; i < loss.size(); ++i) {
    if (!keep[i]) continue;
    o.n.push_back(n[i]), o.d.push_back(d[i]), o.loss.push_back(loss[i]);
    if (!w.empty()) o.w.push_back(w[i]);
    if (!rung.empty()) o.rung.push_back(rung[i]);
    if (!budget.empty()) o.budget.push_back(budget[i]);
  }
  return o;
}

double ChinchillaFit::predict(double n_params, double tokens) const {
  return E + A * std::pow(n_params, -alpha) + B * std::pow(tokens, -beta);
}

nlohmann::json ChinchillaFit::to_json() const {
  nlohmann::json j = {{"law", "chinchilla"},
                      {"E", E},
                      {"A", A},
                      {"alpha", alpha},
                      {"B", B},
                      {"beta", beta},
                      {"l_inf", E},
                      {"l_inf_fitted", e_fitted},
                      {"n", n},
                      {"sse", sse},
                      {"r2", r2}};
  j["loo"] = loo.to_json();
  return j;
}

namespace {

// For fixed exponents the law is linear: L − E₀ = [E] + A·N^−α + B·D^−β. Weighted least squares
// over the active sets of A, B ≥ 0 (E free or fixed); the feasible set of smallest SSE is the
// constrained optimum (a convex problem whose solution is the unconstrained one of some face).
struct Linear {
  double E = 0, A = 0, B = 0, sse = INFINITY;
};

Linear solve_linear(const NDPoints& p, const std::vector<double>& ln_n,
                    const std::vector<double>& ln_d, double alpha, double beta,
                    std::optional<double> e_fixed) {
  const size_t n = p.loss.size();
  std::vector<double> x1(n), x2(n), y(n);
  for (size_t i = 0; i < n; ++i) {
    x1[i] = std::exp(-alpha * ln_n[i]);
    x2[i] = std::exp(-beta * ln_d[i]);
    y[i] = p.loss[i] - (e_fixed ? *e_fixed : 0.0);
  }
  auto wt = [&](size_t i) { return p.w.empty() ? 1.0 : p.w[i]; };
  Linear best;
  for (int mask = 0; mask < 4; ++mask) {
    // The columns of this face: the constant (E free), A's, B's.
    std::vector<const std::vector<double>*> cols;
    static const std::vector<double> kOne;
    if (!e_fixed) cols.push_back(&kOne);
    if (mask & 1) cols.push_back(&x1);
    if (mask & 2) cols.push_back(&x2);
    const size_t k = cols.size();
    auto col = [&](size_t c, size_t i) { return cols[c] == &kOne ? 1.0 : (*cols[c])[i]; };
    double m[3][4] = {};
    for (size_t i = 0; i < n; ++i)
      for (size_t a = 0; a < k; ++a) {
        for (size_t b = 0; b < k; ++b) m[a][b] += wt(i) * col(a, i) * col(b, i);
        m[a][k] += wt(i) * col(a, i) * y[i];
      }
    // Gaussian elimination with partial pivoting on the (column-scaled) normal equations.
    double scale[3];
    for (size_t a = 0; a < k; ++a) scale[a] = m[a][a] > 0 ? 1.0 / std::sqrt(m[a][a]) : 0.0;
    bool singular = false;
    for (size_t a = 0; a < k; ++a) {
      if (scale[a] == 0) singular = true;
      for (size_t b = 0; b < k; ++b) m[a][b] *= scale[a] * scale[b];
      m[a][k] *= scale[a];
    }
    for (size_t a = 0; a < k && !singular; ++a) {
      size_t piv = a;
      for (size_t r = a + 1; r < k; ++r)
        if (std::abs(m[r][a]) > std::abs(m[piv][a])) piv = r;
      if (std::abs(m[piv][a]) < 1e-12) {
        singular = true;
        break;
      }
      for (size_t c = 0; c <= k; ++c) std::swap(m[a][c], m[piv][c]);
      for (size_t r = 0; r < k; ++r) {
        if (r == a) continue;
        const double f = m[r][a] / m[a][a];
        for (size_t c = a; c <= k; ++c) m[r][c] -= f * m[a][c];
      }
    }
    if (singular) continue;
    double coef[3];
    for (size_t a = 0; a < k; ++a) coef[a] = m[a][k] / m[a][a] * scale[a];
    Linear s;
    size_t c = 0;
    s.E = e_fixed ? *e_fixed : coef[c++];
    if (mask & 1) s.A = coef[c++];
    if (mask & 2) s.B = coef[c++];
    if (s.A < 0 || s.B < 0) continue;
    s.sse = 0;
    for (size_t i = 0; i < n; ++i) {
      const double r = p.loss[i] - (s.E + s.A * x1[i] + s.B * x2[i]);
      s.sse += wt(i) * r * r;
    }
    if (s.sse < best.sse) best = s;
  }
  return best;
}

int distinct(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  int k = 0;
  for (size_t i = 0; i < v.size(); ++i)
    if (i == 0 || v[i] > v[i - 1] * (1 + 1e-9)) ++k;
  return k;
}

}  // namespace

ChinchillaFit fit_chinchilla(const NDPoints& p, std::optional<double> e_fixed) {
  const size_t n = p.loss.size();
  if (p.n.size() != n || p.d.size() != n)
    fail("chinchilla fit: {} losses, {} parameter counts, {} token counts", n, p.n.size(),
         p.d.size());
  if (!p.w.empty() && p.w.size() != n)
    fail("chinchilla fit: {} weights for {} points", p.w.size(), n);
  if (p.budget.size() != n) fail("chinchilla fit: {} budgets for {} points", p.budget.size(), n);
  for (size_t i = 0; i < n; ++i) {
    if (!(p.n[i] > 0 && std::isfinite(p.n[i]) && p.d[i] > 0 && std::isfinite(p.d[i])))
      fail("chinchilla fit: N and D must be positive and finite, got N = {}, D = {}", p.n[i],
           p.d[i]);
    if (!std::isfinite(p.loss[i])) fail("chinchilla fit: loss must be finite, got {}", p.loss[i]);
    if (!p.w.empty() && !(p.w[i] > 0 && std::isfinite(p.w[i])))
      fail("chinchilla fit: weights must be positive and finite, got {}", p.w[i]);
  }
  const int budgets = distinct(p.budget);
  if (budgets < 2)
    fail(
        "the chinchilla law L = E + A/N^alpha + B/D^beta needs rungs trained at 2 or more token "
        "budgets, got {}: at one budget D is proportional to N and the N and D terms cannot be "
        "told apart, and a run's intermediate checkpoints do not count (they are confounded by "
        "its decaying schedule). List several: tokens_per_param = [5, 10] in the ladder file",
        budgets);
  // With E fitted, two sizes leave E and A/N^α confounded (E + A/N^α is known at two N only).
  const int sizes = distinct(p.n), need_sizes = e_fixed ? 2 : 3;
  if (sizes < need_sizes)
    fail(
        "chinchilla fit: {} rung sizes N; the law with E {} needs at least {} (with E fitted and "
        "two "
        "sizes, E and A/N^alpha cannot be told apart)",
        sizes, e_fixed ? "fixed" : "fitted", need_sizes);
  const int params = 4 + (e_fixed ? 0 : 1);
  if (int(n) < params)
    fail("chinchilla fit: {} points (rungs x budgets) for {} parameters (E {})", n, params,
         e_fixed ? "fixed" : "fitted");
  std::vector<double> ln_n(n), ln_d(n);
  for (size_t i = 0; i < n; ++i) ln_n[i] = std::log(p.n[i]), ln_d[i] = std::log(p.d[i]);
  // The exponents on a log scale in [kLo, kHi]: a grid, then Nelder–Mead from its best point.
  const double kLo = std::log(0.02), kHi = std::log(2.0);
  auto sse = [&](double la, double lb) -> double {
    if (!(la >= kLo - 1 && la <= kHi + 0.5 && lb >= kLo - 1 && lb <= kHi + 0.5)) return INFINITY;
    return solve_linear(p, ln_n, ln_d, std::exp(la), std::exp(lb), e_fixed).sse;
  };
  const int grid = 12;
  const double step = (kHi - kLo) / (grid - 1);
  double bx = kLo, by = kLo, bf = INFINITY;
  for (int i = 0; i < grid; ++i)
    for (int j = 0; j < grid; ++j) {
      const double la = kLo + step * i, lb = kLo + step * j, f = sse(la, lb);
      if (f < bf) bf = f, bx = la, by = lb;
    }
  if (!std::isfinite(bf)) fail("chinchilla fit: no exponents fit the points (degenerate N, D)");
  // Nelder–Mead (reflection 1, expansion 2, contraction ½, shrink ½).
  double sx[3] = {bx, bx + step, bx}, sy[3] = {by, by, by + step}, sf[3];
  for (int v = 0; v < 3; ++v) sf[v] = sse(sx[v], sy[v]);
  for (int it = 0; it < 300; ++it) {
    int o[3] = {0, 1, 2};
    std::sort(o, o + 3, [&](int a, int b) { return sf[a] < sf[b]; });
    const int lo = o[0], mid = o[1], hi = o[2];
    if (std::abs(sx[hi] - sx[lo]) + std::abs(sy[hi] - sy[lo]) < 1e-10 &&
        sf[hi] - sf[lo] <= 1e-15 * (1 + sf[lo]))
      break;
    const double cx = (sx[lo] + sx[mid]) / 2, cy = (sy[lo] + sy[mid]) / 2;
    const double rx = 2 * cx - sx[hi], ry = 2 * cy - sy[hi], rf = sse(rx, ry);
    if (rf < sf[lo]) {
      const double ex = 3 * cx - 2 * sx[hi], ey = 3 * cy - 2 * sy[hi], ef = sse(ex, ey);
      if (ef < rf)
        sx[hi] = ex, sy[hi] = ey, sf[hi] = ef;
      else
        sx[hi] = rx, sy[hi] = ry, sf[hi] = rf;
    } else if (rf < sf[mid]) {
      sx[hi] = rx, sy[hi] = ry, sf[hi] = rf;
    } else {
      const double kx = (cx + sx[hi]) / 2, ky = (cy + sy[hi]) / 2, kf = sse(kx, ky);
      if (kf < sf[hi]) {
        sx[hi] = kx, sy[hi] = ky, sf[hi] = kf;
      } else {
        for (int v : {mid, hi}) {
          sx[v] = (sx[v] + sx[lo]) / 2, sy[v] = (sy[v] + sy[lo]) / 2;
          sf[v] = sse(sx[v], sy[v]);
        }
      }
    }
  }
  int best = 0;
  for (int v = 1; v < 3; ++v)
    if (sf[v] < sf[best]) best = v;
  if (sf[best] > bf) sx[best] = bx, sy[best] = by;
  const double alpha = std::exp(sx[best]), beta = std::exp(sy[best]);
  const Linear lin = solve_linear(p, ln_n, ln_d, alpha, beta, e_fixed);
  ChinchillaFit f;
  f.E = lin.E, f.A = lin.A, f.B = lin.B, f.alpha = alpha, f.beta = beta;
  f.e_fitted = !e_fixed;
  f.n = int(n);
  f.sse = lin.sse;
  double sw = 0, ml = 0, sst = 0;
  for (size_t i = 0; i < n; ++i) {
    const double w = p.w.empty() ? 1.0 : p.w[i];
    sw += w, ml += w * p.loss[i];
  }
  ml /= sw;
  for (size_t i = 0; i < n; ++i)
    sst += (p.w.empty() ? 1.0 : p.w[i]) * (p.loss[i] - ml) * (p.loss[i] - ml);
  f.r2 = sst > 0 ? 1.0 - f.sse / sst : (f.sse == 0 ? 1.0 : 0.0);
  return f;
}

ChinchillaFit fit_chinchilla_law(const NDPoints& p, std::optional<double> e_fixed) {
  ChinchillaFit f = fit_chinchilla(p, e_fixed);
  const size_t n = p.loss.size();
  std::vector<int> rung = p.rung;
  if (rung.empty())
    for (size_t i = 0; i < n; ++i) rung.push_back(int(i));
  std::vector<double> err(n);
  try {
    for (int r : std::set<int>(rung.begin(), rung.end())) {
      std::vector<bool> keep(n);
      for (size_t i = 0; i < n; ++i) keep[i] = rung[i] != r;
      const ChinchillaFit g = fit_chinchilla(p.subset(keep), e_fixed);
      for (size_t i = 0; i < n; ++i)
        if (!keep[i]) err[i] = g.predict(p.n[i], p.d[i]) - p.loss[i];
    }
  } catch (const Error&) {
    return f;  // too few rungs or budgets left without one: no leave-one-out
  }
  f.loo = LeaveOneOut::of(std::move(err));
  return f;
}

}  // namespace marin::scaling
