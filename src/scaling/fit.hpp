#pragma once
// The scaling-law fits of recipe.md §9 (docs/scaling.md, "The laws"). Two families are a straight
// line z = log A − α·ln C in a transform z of the loss, fitted in closed form (weighted least
// squares), with L∞ fixed or fitted by variable projection:
//   power:    z = ln(L − L∞)                     L = L∞ + A·C^(−α)
//   sigmoid:  z = logit((L − L∞)/(U − L∞))       L = L∞ + (U − L∞)·σ(log A − α·ln C)
// with the ceiling U = ln V (the loss of a uniform guess over the vocabulary): small models leave
// the ln V plateau and the loss falls faster per unit of ln C as compute grows, which no
// L∞ + A·C^(−α) can follow. When L∞ is fitted, the candidate whose curve has the smallest
// weighted squared error *in loss space* wins (the transformed error is not comparable across
// L∞).
//
// Weights: one per point, the inverse variance of the point's loss (a rung's mean over its seeds;
// docs/scaling.md "Seeds"), applied to the transformed line and the loss-space error alike. Empty:
// every point weighs 1 (a ladder of one seed per rung).
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace marin::scaling {

// Chinchilla's law (docs/scaling.md "The chinchilla law") is not a curve in C but a surface in
// the active parameters N and the training tokens D, L = E + A/N^α + B/D^β, fitted on the
// end-of-run points of rungs trained at several token budgets (fit_chinchilla below).
enum class LawFamily { Power, Sigmoid, Chinchilla };
const char* law_name(LawFamily f);
// "power" | "sigmoid" | "chinchilla" (marin::Error otherwise)
LawFamily parse_law(const std::string& name);

// Which law: the family, L∞ fixed (a value) or fitted (nullopt), and the sigmoid's ceiling.
struct LawSpec {
  LawFamily family = LawFamily::Power;
  std::optional<double> l_inf = 1.5;
  double ceiling = 0;  // sigmoid: U = ln V
  // Free parameters: A, α (and L∞); chinchilla: A, α, B, β (and E = L∞).
  int parameters() const { return (family == LawFamily::Chinchilla ? 4 : 2) + (l_inf ? 0 : 1); }
  nlohmann::json to_json() const;
};

// Leave-one-rung-out errors of a fit: for each point, the fit on the other rungs predicts it;
// error = L̂ − L (nats). Empty when too few rungs remain to determine the law.
struct LeaveOneOut {
  std::vector<double> errors;
  double rmse = 0, max_abs = 0;
  static LeaveOneOut of(std::vector<double> errors);
  nlohmann::json to_json() const;  // null when empty
};

struct PowerLawFit {
  LawFamily family = LawFamily::Power;
  double ceiling = 0;  // sigmoid only
  double A = 0, alpha = 0, l_inf = 0;
  bool l_inf_fitted = false;
  bool l_inf_at_bound = false;  // fitted L∞ at the search's lower bound (not pinned by the data)
  int n = 0;                    // points fitted
  double sse = 0;               // Σ w·(L − L̂)² in nats² (w = 1 without weights)
  double r2 = 0;                // 1 − SSE/SST in loss space
  double r2_log = 0;            // R² of the transformed line
  LeaveOneOut loo;  // each point its own rung; empty when the others are fewer than the parameters

  double predict(double compute) const;
  nlohmann::json to_json() const;
};

// The line of the transform on ln C (closed form) for one L∞. Needs ≥ 2 points with distinct C
// and every L > l_inf (and < the ceiling for the sigmoid), else marin::Error. No leave-one-out.
PowerLawFit fit_fixed(const std::vector<double>& compute, const std::vector<double>& loss,
                      double l_inf, const std::vector<double>& w = {},
                      LawFamily family = LawFamily::Power, double ceiling = 0);
// L∞ fitted in [l_inf_min, min L): a grid of candidates then golden-section refinement of the
// best bracket. Needs ≥ 3 points. No leave-one-out.
PowerLawFit fit_free(const std::vector<double>& compute, const std::vector<double>& loss,
                     double l_inf_min = 0.0, const std::vector<double>& w = {},
                     LawFamily family = LawFamily::Power, double ceiling = 0);
// The law of `spec` (fit_fixed or fit_free), plus the leave-one-rung-out errors.
PowerLawFit fit_law(const std::vector<double>& compute, const std::vector<double>& loss,
                    const LawSpec& spec, const std::vector<double>& w = {});
// fit_law for the power family (L∞ fixed, or fitted when nullopt).
PowerLawFit fit_power_law(const std::vector<double>& compute, const std::vector<double>& loss,
                          std::optional<double> l_inf);

// --- uncertainty ---------------------------------------------------------------------------------

// A fitted law as a predictor of the loss at a compute; a fitter makes one from points and weights
// (marin::Error when the points do not determine it). The forward holdouts and the interval refit
// through it, so every law gets the same diagnostics.
using Predictor = std::function<double(double compute)>;
using Fitter =
    std::function<Predictor(const std::vector<double>& compute, const std::vector<double>& loss,
                            const std::vector<double>& w)>;
Fitter law_fitter(const LawSpec& spec);

// The noise of each point: a point is the mean of `runs` seeds whose single-run variance is
// `var_run` (estimated with `dof` degrees of freedom, 0: unknown, then the fit's residuals stand in
// for it). The target is one run.
struct PointNoise {
  std::vector<double> var_run;  // per point
  std::vector<int> runs;        // per point
  double var_target = 0;        // one run of the target (the pooled single-run variance)
  int dof = 0;
};

struct Interval {
  double lo = 0, hi = 0, level = 0.9;
  double noise_scale = 1;  // pooled unit variance / the seeds' (> 1: scatter beyond the seeds)
  int replicates = 0, failed = 0, dof = 0;
  std::string noise_source;  // "seeds and residuals" or "residuals"
  nlohmann::json to_json() const;
};

// The prediction interval of one new run at `target_compute`, by a parametric bootstrap over the
// points: the fitted law plus Gaussian noise of each point's variance is refitted `replicates`
// times and predicts the target, plus the target run's own noise. The unit variance pools the
// seeds' spread (ν degrees of freedom) with the residuals around the law (n − p), so rungs that
// scatter beyond their seeds widen it; without seeds it is the residuals' alone. It is itself
// drawn per replicate (σ*² = σ̂²·dof/χ²_dof), so that a noise estimated from few degrees widens
// the interval as a Student t would. Deterministic (`seed`). marin::Error when there are no
// seeds and no residual degree of freedom (n ≤ p).
Interval prediction_interval(const std::vector<double>& compute, const std::vector<double>& loss,
                             const std::vector<double>& w, const Fitter& fit, int parameters,
                             const PointNoise& noise, double target_compute, double level = 0.9,
                             int replicates = 400, uint64_t seed = 0x5eed);
// The same bootstrap for any law: `refit(y)` fits the law to losses y at the fixed points and
// returns its values at those points and its prediction of the target (marin::Error when it
// cannot fit them).
using Refit = std::function<std::pair<std::vector<double>, double>(const std::vector<double>& y)>;
Interval prediction_interval(const std::vector<double>& loss, const Refit& refit, int parameters,
                             const PointNoise& noise, double level = 0.9, int replicates = 400,
                             uint64_t seed = 0x5eed);

// --- the chinchilla law
// ---------------------------------------------------------------------------

// The end-of-run points of a ladder: one per rung × budget (the mean over its seeds), with the
// active parameters N, the training tokens D, the rung it belongs to (leave-one-rung-out) and its
// nominal budget (tokens per parameter: identifiability).
struct NDPoints {
  std::vector<double> n, d, loss, w;  // w empty: every point weighs 1
  std::vector<int> rung;              // empty: each point is its own rung
  std::vector<double> budget;         // nominal tokens per parameter of each point
  NDPoints subset(const std::vector<bool>& keep) const;
};

struct ChinchillaFit {
  double E = 0, A = 0, alpha = 0, B = 0, beta = 0;
  bool e_fitted = false;
  int n = 0;
  double sse = 0, r2 = 0;  // Σ w·(L − L̂)², 1 − SSE/SST in loss space
  LeaveOneOut loo;         // every budget of a rung left out together and predicted by the others
  double predict(double n_params, double tokens) const;
  nlohmann::json to_json() const;
};

// L = E + A/N^α + B/D^β by variable projection: for fixed (α, β) the law is linear in (E, A, B)
// (E given: in (A, B)), solved by weighted least squares with A, B ≥ 0 (the best feasible of the
// four active sets); (α, β) minimise the loss-space SSE, by a grid in [0.02, 2]² then
// Nelder–Mead. Refuses (marin::Error) points at fewer than 2 budgets — with one budget D ∝ N and
// the N and D terms cannot be told apart — fewer than 3 distinct N with E fitted (2 with E
// fixed), or fewer points than parameters. No leave-one-out.
ChinchillaFit fit_chinchilla(const NDPoints& p, std::optional<double> e_fixed);
// fit_chinchilla plus the leave-one-rung-out errors.
ChinchillaFit fit_chinchilla_law(const NDPoints& p, std::optional<double> e_fixed);

}  // namespace marin::scaling
