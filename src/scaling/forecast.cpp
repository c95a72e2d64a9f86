#include "scaling/forecast.hpp"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <functional>
#include <map>
#include <set>

#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/json_file.hpp"
#include "data/tokenizer/tokenizer.hpp"
#include "model/accounting.hpp"
#include "scaling/fit.hpp"
#include "scaling/forecast_parts.hpp"
#include "scaling/ladder.hpp"

namespace marin::scaling {
namespace fs = std::filesystem;
using json = nlohmann::json;

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

namespace forecast_parts {

double Group::n_params() const {
  return runs.front()->at("active_params").get<double>();
}
double Group::tokens() const {
  return runs.front()->at("tokens").get<double>();
}
int64_t Group::steps() const {
  return runs.front()->at("steps").get<int64_t>();
}
double Group::compute_per_step() const {
  return runs.front()->at("compute_per_step").get<double>();
}

namespace {
// Two budgets are the same when they print the same (budget_label's {:g}).
bool same_budget(double a, double b) {
  return budget_label("", a) == budget_label("", b);
}

// Why the chinchilla law needs several budgets (the refusal of --law chinchilla).
std::string chinchilla_budget_error(size_t budgets) {
  return fmt::format(
      "--law chinchilla needs rungs trained at 2 or more token budgets, and the ladder has {}: at "
      "one budget D is proportional to N, so A/N^alpha and B/D^beta cannot be told apart, and a "
      "run's intermediate checkpoints do not count (they are confounded by its decaying "
      "schedule). Give the rungs several budgets (tokens_per_param = [5, 10] in the ladder file)",
      budgets);
}

const char* kChinchillaIntermediate =
    "the chinchilla law is fitted on the end-of-run (100%) points only: a run's intermediate "
    "checkpoints are confounded by its decaying schedule";

// The prior weight, in degrees of freedom, of the pooled single-run variance in each rung's own:
// with two or three seeds a rung's sample variance alone is too noisy to weight it by.
constexpr double kPoolPrior = 2.0;

std::vector<double> head(const std::vector<double>& v, size_t j) {
  return v.empty() ? v : std::vector<double>(v.begin(), v.begin() + long(j));
}
}  // namespace

std::vector<Group> group_runs(const json& ladder) {
  const double def = ladder.at("ladder").at("tokens_per_param").get<double>();
  std::vector<Group> groups;
  std::vector<std::string> rungs;
  for (auto& r : ladder.at("rungs")) {
    const std::string name = r.at("name");
    const std::string label = r.value("label", name);  // absent: a ladder.json of one budget
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const Group& g) { return g.label == label; });
    if (it == groups.end()) {
      auto rn = std::find(rungs.begin(), rungs.end(), name);
      if (rn == rungs.end()) rn = rungs.insert(rungs.end(), name);
      groups.push_back({name,
                        label,
                        r.value("tokens_per_param", def),
                        int(rn - rungs.begin()),
                        r.value("canary", false),
                        {}});
      it = groups.end() - 1;
    }
    it->runs.push_back(&r);
  }
  return groups;
}

namespace {
// Each rung's single-run variance (its own, shrunk toward the pooled one) and the weight of its
// mean, the inverse of var/n normalised to a mean of 1. Seeds that agree exactly (or single seeds
// of unequal count): weights by the count.
void weigh_series(Series& s, const std::vector<double>& var, const std::vector<int>& n,
                  double pooled, int dof) {
  s.noise.runs = n;
  s.noise.dof = dof;
  s.noise.var_target = pooled;
  s.noise.var_run.assign(n.size(), 0.0);
  if (dof > 0 && pooled > 0) {
    double sum = 0;
    for (size_t i = 0; i < n.size(); ++i) {
      s.noise.var_run[i] = ((n[i] - 1) * var[i] + kPoolPrior * pooled) / ((n[i] - 1) + kPoolPrior);
      s.w.push_back(double(n[i]) / s.noise.var_run[i]);
      sum += s.w.back();
    }
    for (double& x : s.w) x *= double(s.w.size()) / sum;
  } else if (std::adjacent_find(n.begin(), n.end(), std::not_equal_to<>()) != n.end()) {
    for (int x : n) s.w.push_back(double(x));
  }
}
}  // namespace

Series series_at(const std::vector<Group>& groups, size_t k, const char* key) {
  Series s;
  std::vector<double> var;
  std::vector<int> n;
  double pooled = 0;
  int dof = 0;
  for (const Group& g : groups) {
    if (g.canary) continue;
    std::vector<double> ls;
    for (const json* r : g.runs) {
      const json& p = r->at("curve").at(k);
      if (!p.contains(key) || !p[key].is_number()) {
        s.complete = false;
        return s;
      }
      ls.push_back(p[key].get<double>());
    }
    s.c.push_back(g.runs.front()->at("curve").at(k).at("compute").get<double>());
    double m = 0;
    for (double x : ls) m += x;
    m /= double(ls.size());
    double v = 0;
    for (double x : ls) v += (x - m) * (x - m);
    if (ls.size() > 1) v /= double(ls.size() - 1);
    s.mean.push_back(m);
    var.push_back(v);
    n.push_back(int(ls.size()));
    pooled += v * double(ls.size() - 1);
    dof += int(ls.size()) - 1;
  }
  if (dof > 0) pooled /= double(dof);
  weigh_series(s, var, n, pooled, dof);
  return s;
}

// With data available before the registration, the sign of a miss shows here.
json forward_holdouts(const Series& s, const std::vector<std::string>& names, const Fitter& fit) {
  json out = json::array();
  for (size_t j = 2; j < s.c.size(); ++j) {
    json e = {{"rung", names[j]}, {"from_rungs", j}, {"actual", s.mean[j]}};
    try {
      const Predictor f = fit(head(s.c, j), head(s.mean, j), head(s.w, j));
      const double p = f(s.c[j]);
      e["predicted"] = p;
      e["diff_nats"] = p - s.mean[j];
    } catch (const Error& err) {
      e["predicted"] = nullptr;
      e["failed"] = err.what();
    }
    out.push_back(e);
  }
  return out;
}

// "rung_beat_forecast": how many fractions the rung beat its forecast (predicted > actual).
json summarise_forward(const std::vector<json>& forwards) {
  std::map<std::string, std::vector<double>> by_rung;
  std::vector<std::string> order;
  for (const json& fwd : forwards)
    for (auto& h : fwd)
      if (h.contains("diff_nats")) {
        const std::string r = h["rung"];
        if (!by_rung.count(r)) order.push_back(r);
        by_rung[r].push_back(h["diff_nats"].get<double>());
      }
  auto stats = [](const std::vector<double>& v) {
    double sq = 0, sum = 0;
    int beat = 0;
    for (double x : v) sq += x * x, sum += x, beat += x > 0;
    return json{{"n", v.size()},
                {"rmse", v.empty() ? json() : json(std::sqrt(sq / double(v.size())))},
                {"mean_diff_nats", v.empty() ? json() : json(sum / double(v.size()))},
                {"rung_beat_forecast", beat}};
  };
  json rungs = json::array();
  std::vector<double> all;
  for (auto& r : order) {
    json st = stats(by_rung[r]);
    st["rung"] = r;
    rungs.push_back(st);
    all.insert(all.end(), by_rung[r].begin(), by_rung[r].end());
  }
  json j = stats(all);
  j["rungs"] = rungs;
  return j;
}

// --- gather ----------------------------------------------------------------------------------

namespace {
// Every fitted run must be done; a canary is trained after the forecast, which records its
// prediction.
void check_done(const LadderData& d) {
  for (auto& g : d.groups)
    for (const json* r : g.runs)
      if (!g.canary && (r->value("status", "") != "done" || !r->contains("curve")))
        fail("{}: rung {} is not done (status {}); finish the ladder first", d.file,
             r->value("run", g.label), r->value("status", "?"));
}

// One dtype for every fitted run: "auto" resolves per CPU, and a ladder whose rungs computed in
// different dtypes (a ladder spread over machines) fits a curve of neither.
std::string common_dtype(const LadderData& d) {
  std::string computed_dtype, first_run;
  for (auto& g : d.groups)
    for (const json* r : g.runs) {
      const std::string dt = r->value("dtype", "");
      if (g.canary || dt.empty()) continue;
      if (computed_dtype.empty()) {
        computed_dtype = dt, first_run = r->value("run", g.label);
      } else if (dt != computed_dtype) {
        fail(
            "{}: run {} computed in {} and run {} in {}: the rungs of one ladder share a dtype "
            "([ladder] dtype = \"fp32\" pins it on every CPU)",
            d.file, first_run, computed_dtype, r->value("run", g.label), dt);
      }
    }
  return computed_dtype;
}

// Every fitted run evaluated at every fraction; returns the fitted runs' budgets.
std::set<std::string> check_curves(const LadderData& d) {
  std::set<std::string> budget_set;
  for (auto& g : d.groups) {
    if (g.canary) continue;
    budget_set.insert(budget_label("", g.tpp));
    for (const json* r : g.runs) {
      const json& curve = r->at("curve");
      if (int64_t(curve.size()) != kFractions)
        fail("{}: rung {} has {} evaluations, expected {}", d.file, r->value("run", g.label),
             curve.size(), kFractions);
      for (int64_t k = 1; k <= kFractions; ++k) {
        const double g_k = double(k) / double(kFractions), at = curve[k - 1].at("fraction");
        if (std::abs(at - g_k) > 1e-9)
          fail("{}: rung {} evaluation {} is at fraction {}, expected {}", d.file,
               r->value("run", g.label), k, at, g_k);
      }
    }
  }
  return budget_set;
}
}  // namespace

void gather_ladder(const ForecastOptions& o, LadderData& d) {
  d.file = (fs::path(o.ladder_dir) / "ladder.json").string();
  d.ladder = read_ladder_json(o.ladder_dir);
  d.hash = xxh64_file_hex(d.file);
  o.target.validate();
  d.groups = group_runs(d.ladder);
  check_done(d);
  d.computed_dtype = common_dtype(d);
  d.budget_set = check_curves(d);
  if (o.law.family == LawFamily::Chinchilla && d.budgets() < 2)
    fail("{}: {}", d.file, chinchilla_budget_error(d.budgets()));
  d.recipe = LadderConfig::recipe_from_json(d.ladder.at("ladder"), d.file);
}

// --- target ----------------------------------------------------------------------------------

// The batch from the ladder's rule (an override is recorded as one), the budget as a rung's, the
// options exactly as a rung's at the ladder's first seed.
TargetPlan plan_target(const ForecastOptions& o, const LadderData& d) {
  const LadderConfig& recipe = d.recipe;
  TargetPlan t;
  t.batch_override = o.target_batch > 0;
  if (!t.batch_override && !recipe.batch.sizes.empty())
    fail("{}: the ladder lists its batch sizes (no rule to extend): give --target-batch", d.file);
  t.batch = t.batch_override ? o.target_batch : recipe.batch.batch_for(o.target.hidden_dim);
  if (o.target_steps < 0) fail("forecast: the target's steps must be positive");
  if (o.target_tokens_per_param < 0)
    fail("forecast: the target's tokens per parameter must be positive");
  t.tpp = o.target_tokens_per_param > 0 ? o.target_tokens_per_param : recipe.tokens_per_param;
  t.steps = o.target_steps > 0 ? o.target_steps : recipe.steps_for(o.target, t.batch, t.tpp);
  return t;
}

namespace {
// The rest of the target, once the fitted rungs are known to suffice (the checks of fit_context
// come first, as they always did: a ladder that cannot be fitted fails before any tokenizer load).
void bind_target(const ForecastOptions& o, const LadderData& d, TargetPlan& t) {
  const LadderConfig& recipe = d.recipe;
  t.options = recipe.run_options(o.target, t.batch, t.steps, recipe.seed);
  t.bound = json::object();
  const json all_opts = t.options.to_json();
  for (auto& k : bound_option_keys())
    t.bound[json::json_pointer(k)] = all_opts.at(json::json_pointer(k));
  t.tokenizer_hash = recipe.tokenizer.empty()
                         ? ""
                         : fmt::format("{:016x}", Tokenizer::load(recipe.tokenizer).hash());
  t.per_step = forecast_flops_per_step(o.target, t.batch);
  t.active_params = account(o.target).active_params;
  t.tokens = double(t.steps) * double(t.batch) * double(o.target.seq_len);
}
}  // namespace

// The laws in C fit one budget: the target's (every rung, when the ladder has one budget); the
// chinchilla law fits every rung × budget.
FitContext fit_context(const ForecastOptions& o, const LadderData& d, const TargetPlan& t) {
  FitContext x{o, d, t, {}, {}};
  for (auto& g : d.groups)
    if (!d.several() || same_budget(g.tpp, t.tpp)) x.cgroups.push_back(g);
  for (auto& g : x.cgroups)
    if (!g.canary) x.names.push_back(g.label);
  const bool chinchilla = o.law.family == LawFamily::Chinchilla;
  if (!chinchilla && d.several() && x.names.empty())
    fail(
        "{}: no rung was trained at the target's budget of {} tokens per parameter (budgets: {}): "
        "the {} law fits the rungs at the target's budget (--target-tokens-per-param), the "
        "chinchilla law every budget",
        d.file, t.tpp, fmt::join(d.budget_set, ", "), law_name(o.law.family));
  if (!chinchilla && x.names.size() < size_t(o.law.parameters()))
    fail("{}: {} fitted rungs; a fit with L∞ {} needs at least {}", d.file, x.names.size(),
         o.law.l_inf ? "fixed" : "fitted", o.law.parameters());
  return x;
}

// --- fit -------------------------------------------------------------------------------------

namespace {
// Every run's point at one fraction.
json points_at(const FitContext& x, const std::vector<Group>& gs, size_t at) {
  json points = json::array();
  for (auto& gr : gs) {
    if (gr.canary) continue;
    for (const json* r : gr.runs) {
      const json& p = r->at("curve").at(at);
      points.push_back({{"rung", gr.label},
                        {"seed", r->value("seed", x.d.recipe.seed)},
                        {"step", p.at("step")},
                        {"compute", p.at("compute")},
                        {"loss", p.at("loss")}});
      if (x.d.several()) points.back()["tokens_per_param"] = gr.tpp;
      if (p.contains("clean_loss")) points.back()["clean_loss"] = p["clean_loss"];
    }
  }
  return points;
}

// One fraction's entry in "fits" before any fit: the target's step and compute, the points.
FractionFit fraction_entry(const FitContext& x, const std::vector<Group>& gs, int64_t k) {
  const double g = double(k) / double(kFractions);
  FractionFit e;
  e.fraction = g;
  e.target_step = std::llround(g * double(x.t.steps));
  e.target_compute = x.t.per_step * g * double(x.t.steps);
  e.points = points_at(x, gs, size_t(k - 1));
  return e;
}

// The means and weights are recorded when the seeds or their counts weigh the rungs.
void put_means(const Series& s, FractionFit& e) {
  if (s.w.size() || s.noise.dof > 0) {
    e.means = s.mean;
    e.weights = s.w;
  }
}

// The canaries of a law in C at fraction g of their own steps.
std::vector<CanaryPoint> compute_law_canaries(const FitContext& x, const PowerLawFit& fitted,
                                              double g) {
  std::vector<CanaryPoint> can;
  for (auto& gr : x.cgroups) {
    if (!gr.canary) continue;
    const double cc = gr.compute_per_step() * g * double(gr.steps());
    can.push_back({gr.label, std::llround(g * double(gr.steps())), cc, fitted.predict(cc)});
  }
  return can;
}

// One fit of a law in C on one loss series at fraction k (the all-document loss, or the
// clean-only one when `clean`). A fraction where the fit fails carries the error instead of a
// prediction.
SeriesForecast fit_compute_series(const FitContext& x, const LawSpec& spec, const Fitter& fitter,
                                  bool full, bool clean, const Series& ser, FractionFit& e,
                                  std::optional<double>& final_loss, json& final_interval) {
  const int64_t k = std::llround(e.fraction * double(kFractions));
  SeriesForecast out;
  std::optional<PowerLawFit> fitted;
  try {
    const PowerLawFit f = fit_law(ser.c, ser.mean, spec, ser.w);
    fitted = f;
    out.fit = f.to_json();
    out.predicted = f.predict(e.target_compute);
    if (k == kFractions) final_loss = out.predicted;
  } catch (const Error& err) {
    out.fit = nullptr;
    out.error = err.what();
  }
  out.forward = forward_holdouts(ser, x.names, fitter);
  if (!full || !fitted) return out;
  const std::optional<Interval> iv =
      compute_law_interval(ser, spec, fitter, e.target_compute, x.o.interval_level,
                           x.o.interval_replicates, 0x5eed + uint64_t(k), out);
  if (iv && k == kFractions) final_interval = iv->to_json();
  // The canaries are scored on the all-document loss.
  if (!clean) e.canaries = compute_law_canaries(x, *fitted, e.fraction);
  return out;
}

// One law in C over every fraction: fits, target prediction and interval, forward holdouts and
// the canaries' predictions; and the same law fitted on the clean-only macro loss (contaminated
// documents left out), so that the target's clean loss is compared with a forecast of the same
// quantity.
LawRun run_compute_law(const FitContext& x, LawSpec spec, bool full) {
  if (spec.family == LawFamily::Sigmoid) spec.ceiling = std::log(double(x.o.target.vocab_size));
  const Fitter fitter = law_fitter(spec);
  LawRun out;
  for (int64_t k = 1; k <= kFractions; ++k) {
    const size_t at = size_t(k - 1);
    const Series s = series_at(x.cgroups, at, "loss"), sc = series_at(x.cgroups, at, "clean_loss");
    FractionFit e = fraction_entry(x, x.cgroups, k);
    put_means(s, e);
    e.all =
        fit_compute_series(x, spec, fitter, full, false, s, e, out.final_loss, out.final_interval);
    if (sc.complete && !sc.c.empty())
      e.clean = fit_compute_series(x, spec, fitter, full, true, sc, e, out.final_clean,
                                   out.final_clean_interval);
    out.fits.push_back(std::move(e));
  }
  return out;
}
}  // namespace

// --- interval --------------------------------------------------------------------------------

std::optional<Interval> compute_law_interval(const Series& s, const LawSpec& spec,
                                             const Fitter& fitter, double target_compute,
                                             double level, int replicates, uint64_t seed,
                                             SeriesForecast& out) {
  try {
    const Interval iv = prediction_interval(s.c, s.mean, s.w, fitter, spec.parameters(), s.noise,
                                            target_compute, level, replicates, seed);
    out.interval = iv.to_json();
    return iv;
  } catch (const Error& err) {
    out.interval = json(nullptr);
    out.interval_error = err.what();
    return std::nullopt;
  }
}

// --- fit: the chinchilla law -----------------------------------------------------------------

namespace {
// The chinchilla law's view of the fitted groups: one end-of-run point per rung × budget.
struct ChinchillaData {
  std::vector<const Group*> groups;  // the fitted (non-canary) groups, in ladder order
  NDPoints points(const Series& ser) const {
    NDPoints p;
    for (const Group* gr : groups) {
      p.n.push_back(gr->n_params());
      p.d.push_back(gr->tokens());
      p.rung.push_back(gr->rung);
      p.budget.push_back(gr->tpp);
    }
    p.loss = ser.mean;
    p.w = ser.w;
    return p;
  }
};

// Forward holdouts: every budget of each rung but the smallest two, from the smaller rungs.
json chinchilla_forward(const ChinchillaData& cd, const NDPoints& p, const LawSpec& spec) {
  json fwd = json::array();
  std::vector<int> order;
  for (int r : p.rung)
    if (std::find(order.begin(), order.end(), r) == order.end()) order.push_back(r);
  for (size_t j = 2; j < order.size(); ++j) {
    std::vector<bool> keep(p.loss.size());
    for (size_t i = 0; i < keep.size(); ++i)
      keep[i] =
          std::find(order.begin(), order.begin() + long(j), p.rung[i]) != order.begin() + long(j);
    std::optional<ChinchillaFit> h;
    std::string why;
    try {
      h = fit_chinchilla(p.subset(keep), spec.l_inf);
    } catch (const Error& err) {
      why = err.what();
    }
    for (size_t i = 0; i < keep.size(); ++i) {
      if (p.rung[i] != order[j]) continue;
      json x = {{"rung", cd.groups[i]->label}, {"from_rungs", j}, {"actual", p.loss[i]}};
      if (h) {
        const double pr = h->predict(p.n[i], p.d[i]);
        x["predicted"] = pr;
        x["diff_nats"] = pr - p.loss[i];
      } else {
        x["predicted"] = nullptr;
        x["failed"] = why;
      }
      fwd.push_back(x);
    }
  }
  return fwd;
}

// The bootstrap interval of the chinchilla law at the target's N and D.
void chinchilla_interval(const FitContext& x, const NDPoints& p, const Series& ser,
                         const LawSpec& spec, SeriesForecast& out, json& final_interval) {
  const double target_n = double(x.t.active_params), target_tokens = x.t.tokens;
  try {
    const Refit refit = [&](const std::vector<double>& y) {
      NDPoints q = p;
      q.loss = y;
      const ChinchillaFit h = fit_chinchilla(q, spec.l_inf);
      std::vector<double> at_points(y.size());
      for (size_t i = 0; i < y.size(); ++i) at_points[i] = h.predict(p.n[i], p.d[i]);
      return std::pair{at_points, h.predict(target_n, target_tokens)};
    };
    const Interval iv =
        prediction_interval(ser.mean, refit, spec.parameters(), ser.noise, x.o.interval_level,
                            x.o.interval_replicates, 0x5eed + uint64_t(kFractions));
    out.interval = iv.to_json();
    final_interval = iv.to_json();
  } catch (const Error& err) {
    out.interval = json(nullptr);
    out.interval_error = err.what();
  }
}

// The canaries at the end of their own runs.
std::vector<CanaryPoint> chinchilla_canaries(const FitContext& x, const ChinchillaFit& fitted) {
  std::vector<CanaryPoint> can;
  for (auto& gr : x.d.groups) {
    if (!gr.canary) continue;
    can.push_back({gr.label, gr.steps(), gr.compute_per_step() * double(gr.steps()),
                   fitted.predict(gr.n_params(), gr.tokens())});
  }
  return can;
}

// One chinchilla fit on one loss series (end of run); `clean` as fit_compute_series'.
SeriesForecast fit_chinchilla_series(const FitContext& x, const ChinchillaData& cd,
                                     const LawSpec& spec, bool full, bool clean, const Series& ser,
                                     FractionFit& e, std::optional<double>& final_loss,
                                     json& final_interval) {
  const NDPoints p = cd.points(ser);
  SeriesForecast out;
  std::optional<ChinchillaFit> fitted;
  try {
    fitted = fit_chinchilla_law(p, spec.l_inf);
    out.fit = fitted->to_json();
    final_loss = fitted->predict(double(x.t.active_params), x.t.tokens);
    out.predicted = final_loss;
  } catch (const Error& err) {
    out.fit = nullptr;
    out.error = err.what();
  }
  out.forward = chinchilla_forward(cd, p, spec);
  if (!full || !fitted) return out;
  chinchilla_interval(x, p, ser, spec, out, final_interval);
  if (!clean) e.canaries = chinchilla_canaries(x, *fitted);
  return out;
}

// The chinchilla law: one fit over the end-of-run points of every rung × budget (no prediction
// at the earlier fractions), with the same diagnostics: leave-one-rung-out, forward holdouts
// (every budget of a rung predicted from the smaller rungs), the interval and the canaries.
LawRun run_chinchilla(const FitContext& x, const LawSpec& spec, bool full) {
  LawRun out;
  ChinchillaData cd;
  for (auto& g : x.d.groups)
    if (!g.canary) cd.groups.push_back(&g);
  for (int64_t k = 1; k <= kFractions; ++k) {
    FractionFit e = fraction_entry(x, x.d.groups, k);
    if (k < kFractions) {
      e.all.fit = nullptr;
      e.all.error = kChinchillaIntermediate;
      out.fits.push_back(std::move(e));
      continue;
    }
    const size_t at = size_t(k - 1);
    const Series s = series_at(x.d.groups, at, "loss"),
                 sc = series_at(x.d.groups, at, "clean_loss");
    put_means(s, e);
    e.target_active_params = double(x.t.active_params);
    e.target_tokens = x.t.tokens;
    e.all =
        fit_chinchilla_series(x, cd, spec, full, false, s, e, out.final_loss, out.final_interval);
    if (sc.complete && !sc.c.empty())
      e.clean = fit_chinchilla_series(x, cd, spec, full, true, sc, e, out.final_clean,
                                      out.final_clean_interval);
    out.fits.push_back(std::move(e));
  }
  return out;
}
}  // namespace

LawRun run_law(const FitContext& x, const LawSpec& spec, bool full) {
  return spec.family == LawFamily::Chinchilla ? run_chinchilla(x, spec, full)
                                              : run_compute_law(x, spec, full);
}

// --- choose ----------------------------------------------------------------------------------

std::vector<json> forwards_of(const std::vector<FractionFit>& fits) {
  std::vector<json> out;
  for (const FractionFit& e : fits)
    if (e.all.forward) out.push_back(*e.all.forward);
  return out;
}

std::optional<double> comparison_rmse(const json& summary, bool several_budgets) {
  const json crit = several_budgets ? summary.value("final", json()) : summary;
  if (crit.is_object() && crit["rmse"].is_number()) return crit["rmse"].get<double>();
  return std::nullopt;
}

namespace {
// One family's forward holdouts, summarised over every fraction and ("final") over the
// end-of-run holdouts at the target's budget.
json summarise_family(const FitContext& x, const LawSpec& cand) {
  if (cand.family == LawFamily::Chinchilla && x.d.budgets() < 2)
    return {{"n", 0}, {"rmse", nullptr}, {"error", chinchilla_budget_error(x.d.budgets())}};
  const std::set<std::string> target_labels(x.names.begin(), x.names.end());
  const LawRun r = run_law(x, cand, false);
  json sum = summarise_forward(forwards_of(r.fits));
  json fin = json::array();
  for (auto& h : r.fits.back().all.forward.value_or(json::array()))
    if (target_labels.count(h.value("rung", ""))) fin.push_back(h);
  sum["final"] = summarise_forward({fin});
  sum["final"].erase("rungs");
  return sum;
}
}  // namespace

// Over every fraction, or, with several budgets (where the chinchilla law predicts the end of
// each run only), over the points every law predicts: the end-of-run forward holdouts at the
// target's budget.
Choice choose_law(const FitContext& x) {
  Choice c{x.o.law, json()};
  if (x.o.compare) {
    c.comparison = json::object();
    std::optional<double> best;
    for (LawFamily fam : {LawFamily::Power, LawFamily::Sigmoid, LawFamily::Chinchilla}) {
      LawSpec cand = x.o.law;
      cand.family = fam;
      const json sum = summarise_family(x, cand);
      c.comparison[law_name(fam)] = sum;
      const std::optional<double> rmse = comparison_rmse(sum, x.d.several());
      if (!x.o.law_given && rmse && (!best || *rmse < *best)) {
        best = rmse;
        c.spec.family = fam;
      }
    }
  }
  if (c.spec.family == LawFamily::Sigmoid) c.spec.ceiling = std::log(double(x.o.target.vocab_size));
  return c;
}

// --- predict ---------------------------------------------------------------------------------

std::vector<CanaryForecast> canary_predictions(const std::vector<Group>& groups,
                                               const std::vector<FractionFit>& fits) {
  std::vector<CanaryForecast> canaries;
  for (auto& gr : groups) {
    if (!gr.canary) continue;
    CanaryForecast cf{gr.label, gr.steps(), gr.runs.size(), {}};
    for (const FractionFit& e : fits)
      for (const CanaryPoint& c : e.canaries)
        if (c.rung == gr.label)
          cf.predictions.push_back({e.fraction, c.step, c.compute, c.predicted_loss});
    if (cf.predictions.empty()) continue;  // a canary at another budget than the law's
    canaries.push_back(std::move(cf));
  }
  return canaries;
}

}  // namespace forecast_parts

const std::vector<std::string>& bound_option_keys() {
  static const std::vector<std::string> k = {"/model", "/batch",     "/steps",     "/seed",
                                             "/dtype", "/optimizer", "/transport", "/waves",
                                             "/qb",    "/data",      "/valid"};
  return k;
}

namespace {
using namespace forecast_parts;

// The flags that train the target as the forecast binds it.
std::string train_flags(const LadderData& d, const TargetPlan& t) {
  std::string command =
      fmt::format("--batch {} --steps {} --seed {}", t.batch, t.steps, d.recipe.seed);
  if (d.recipe.lr_multiplier != 1.0)
    command += fmt::format(" --muonh-lr {} --adam-lr {}", t.options.optim.muonh_lr,
                           t.options.optim.adam_lr);
  if (t.options.dtype != "auto") command += " --dtype " + t.options.dtype;
  return command;
}

std::vector<ForecastRung> rung_inputs(const LadderData& d) {
  std::vector<ForecastRung> out;
  for (auto& g : d.groups) {
    const json& r = *g.runs.front();
    ForecastRung x;
    x.name = g.name;
    x.label = g.label;
    x.tokens_per_param = g.tpp;
    x.canary = g.canary;
    for (const json* run : g.runs) x.seeds.push_back(run->value("seed", d.recipe.seed));
    x.compute_per_step = r.at("compute_per_step").get<double>();
    x.steps = r.at("steps").get<int64_t>();
    x.batch = r.at("batch").get<int64_t>();
    if (r.contains("tokens") && !r["tokens"].is_null()) x.tokens = r["tokens"].get<double>();
    x.active_params = r.at("active_params").get<int64_t>();
    out.push_back(std::move(x));
  }
  return out;
}

ForecastTarget target_inputs(const ForecastOptions& o, const LadderData& d, const TargetPlan& t) {
  const LadderConfig& recipe = d.recipe;
  ForecastTarget x;
  x.name = o.target_name;
  x.config = o.target.to_json();
  x.batch = t.batch;
  x.batch_source = t.batch_override ? "--target-batch (override)" : "the ladder's batch rule";
  if (recipe.batch.sizes.empty()) x.rule_batch = recipe.batch.rule_value(o.target.hidden_dim);
  x.steps = t.steps;
  x.steps_source = o.target_steps > 0 ? "--target-steps" : "the ladder's budget";
  x.tokens_per_param = t.tpp;
  x.seed = recipe.seed;
  x.lr_multiplier = recipe.lr_multiplier;
  x.seq_len = o.target.seq_len;
  x.active_params = t.active_params;
  x.tokens = t.tokens;
  x.compute_per_step = t.per_step;
  x.compute = t.per_step * double(t.steps);
  x.options = t.bound;
  x.bind = bound_option_keys();
  x.tokenizer_xxh64 = t.tokenizer_hash;
  if (!d.computed_dtype.empty()) x.computed_dtype = d.computed_dtype;
  x.train_flags = train_flags(d, t);
  return x;
}

// predict: the target's prediction with its inputs, as forecast.json records them.
Forecast assemble_forecast(const ForecastOptions& o, const LadderData& d, const TargetPlan& t,
                           const Choice& c, LawRun main) {
  Forecast f;
  f.created = utc_now();
  f.ladder = {o.ladder_dir, d.file, d.hash, d.ladder.at("ladder").value("name", ""),
              d.ladder.value("metric", "valid_ce")};
  f.inputs.target = target_inputs(o, d, t);
  f.inputs.law.spec = c.spec;
  f.inputs.law.chosen_by =
      !o.compare    ? "--law"
      : o.law_given ? "--law (the comparison is recorded)"
      : d.several() ? "smallest forward-holdout RMSE at 100% of the target's budget (the points "
                      "every law predicts)"
                    : "smallest forward-holdout RMSE over every fraction";
  if (o.compare) f.inputs.law.comparison = c.comparison;
  f.inputs.fractions = kFractions;
  f.inputs.rungs = rung_inputs(d);
  f.forward_holdouts = summarise_forward(forwards_of(main.fits));
  f.prediction = {main.final_loss, main.final_interval, f.ladder.metric, main.final_clean,
                  std::nullopt};
  if (main.final_clean_interval.is_object())
    f.prediction.clean_interval = main.final_clean_interval;
  f.canaries = canary_predictions(d.groups, main.fits);
  f.fits = std::move(main.fits);
  // The metric's definition (documents, budget, audit): the target is scored with exactly it.
  if (d.ladder.contains("eval")) f.eval = d.ladder["eval"];
  return f;
}

Forecast make_forecast_unchecked(const ForecastOptions& o) {
  LadderData d;
  gather_ladder(o, d);
  TargetPlan t = plan_target(o, d);
  const FitContext x = fit_context(o, d, t);
  bind_target(o, d, t);
  const Choice c = choose_law(x);
  LawRun main = run_law(x, c.spec, true);
  // Every curve is complete (checked above), so a law that cannot be fitted on the full curves
  // (all rungs at one compute, a zero or negative compute, values past a double) leaves nothing
  // to forecast: an error, never a forecast.json with a null prediction.
  if (!main.final_loss) {
    const std::optional<std::string> why =
        main.fits.empty() ? std::nullopt : main.fits.back().all.error;
    fail("forecast: the law {} cannot be fitted on the ladder's complete curves: {}",
         c.spec.to_json().dump(), why.value_or("no prediction"));
  }
  return assemble_forecast(o, d, t, c, std::move(main));
}
}  // namespace

Forecast build_forecast(const ForecastOptions& o) {
  // A field of the wrong type or shape is a named error, not a JSON library exception.
  try {
    Forecast f = make_forecast_unchecked(o);
    if (!o.downstream.empty()) {
      const json ladder = read_ladder_json(o.ladder_dir);
      json d = json::object();
      for (const DownstreamSpec& s : o.downstream) d[s.text] = downstream_forecast(ladder, f, s);
      f.downstream = d;
    }
    return f;
  } catch (const json::exception& e) {
    fail("{}/ladder.json: missing or malformed field: {}", o.ladder_dir, e.what());
  }
}

json make_forecast(const ForecastOptions& o) {
  return build_forecast(o).to_json();
}

std::vector<std::string> target_differences(const ForecastTarget& target, const TrainOptions& o) {
  std::vector<std::string> d;
  auto show = [](const json& v) { return v.is_null() ? std::string("(absent)") : v.dump(); };
  if (!target.options) {
    // A forecast from before the binding: it knows the target's steps only.
    if (target.steps != o.steps)
      d.push_back(fmt::format("steps: forecast {}, run {}", target.steps, o.steps));
    return d;
  }
  // Leaf by leaf under every bound key, through the options' own JSON (the option table).
  const json want = target.options->flatten(), have = o.to_json().flatten();
  const std::vector<std::string> keys = target.bind.value_or(bound_option_keys());
  auto bound = [&](const std::string& leaf) {
    for (auto& k : keys)
      if (leaf == k || leaf.rfind(k + "/", 0) == 0) return true;
    return false;
  };
  std::set<std::string> leaves;
  for (auto& [k, _] : want.items()) leaves.insert(k);
  for (auto& [k, _] : have.items())
    if (bound(k)) leaves.insert(k);
  for (auto& leaf : leaves) {
    const json a = want.value(leaf, json()), b = have.value(leaf, json());
    if (a == b) continue;
    std::string name = leaf.substr(1);
    std::replace(name.begin(), name.end(), '/', '.');
    d.push_back(fmt::format("{}: forecast {}, run {}", name, show(a), show(b)));
  }
  const std::string& th = target.tokenizer_xxh64;
  if (!th.empty()) {
    const std::string hh = o.tokenizer.empty()
                               ? "(none)"
                               : fmt::format("{:016x}", Tokenizer::load(o.tokenizer).hash());
    if (hh != th)
      d.push_back(fmt::format("tokenizer: forecast xxh64 {}, run {} ({})", th, hh,
                              o.tokenizer.empty() ? "no tokenizer" : o.tokenizer));
  }
  return d;
}

namespace {
// A canary's runs in the ladder, every one trained.
std::vector<const json*> canary_runs(const json& ladder, const std::string& dir,
                                     const std::string& name) {
  std::vector<const json*> runs;
  for (auto& r : ladder.at("rungs"))
    if (r.value("label", r.at("name").get<std::string>()) == name) runs.push_back(&r);
  if (runs.empty()) fail("{}/ladder.json: no rung {} (the forecast's canary)", dir, name);
  for (const json* r : runs)
    if (r->value("status", "") != "done" || !r->contains("curve"))
      fail(
          "canary {} is not trained yet ({}): train it before the target (marin ladder "
          "--canaries), so that its forecast is scored first",
          r->value("run", name), dir);
  return runs;
}
}  // namespace

json score_canaries(const Forecast& forecast, const std::string& ladder_dir) {
  json out = json::array();
  if (forecast.canaries.empty()) return out;
  const std::string dir = ladder_dir.empty() ? forecast.ladder.dir : ladder_dir;
  const json ladder = read_ladder_json(dir);
  for (const CanaryForecast& c : forecast.canaries) {
    const std::vector<const json*> runs = canary_runs(ladder, dir, c.name);
    json per = json::array();
    double pred_final = 0, act_final = 0;
    for (const CanaryForecast::At& p : c.predictions) {
      const size_t k = size_t(std::llround(p.fraction * kFractions)) - 1;
      double m = 0;
      for (const json* r : runs) m += r->at("curve").at(k).at("loss").get<double>();
      m /= double(runs.size());
      const double pr = p.predicted_loss;
      per.push_back(
          {{"fraction", p.fraction}, {"predicted", pr}, {"actual", m}, {"diff_nats", m - pr}});
      if (k + 1 == size_t(kFractions)) pred_final = pr, act_final = m;
    }
    if (per.empty() || per.back()["fraction"].get<double>() < 1 - 1e-9)
      fail("the forecast has no prediction of canary {} at 100%", c.name);
    const double diff = act_final - pred_final;
    out.push_back({{"name", c.name},
                   {"predicted", pred_final},
                   {"actual", act_final},
                   {"diff_nats", diff},
                   {"diff_percent", 100.0 * diff / pred_final},
                   {"verdict", diff < 0   ? "beat"
                               : diff > 0 ? "miss"
                                          : "exact"},
                   {"fractions", per}});
  }
  return out;
}

json score_canaries(const json& forecast, const std::string& ladder_dir) {
  return score_canaries(Forecast::from_json(forecast), ladder_dir);
}

ForecastTracker::ForecastTracker(const std::string& forecast_path, int64_t total_steps) {
  const json j = load_json(forecast_path);
  try {
    *this = from_json(j, total_steps);
  } catch (const Error& e) {
    fail("{}: {}", forecast_path, e.what());
  }
}

ForecastTracker ForecastTracker::from_json(const json& f, int64_t total_steps) {
  if (!f.is_object() || f.value("format", json()) != "marin-forecast-v1")
    fail("not a marin forecast (format)");
  return ForecastTracker(Forecast::from_json(f), total_steps);
}

ForecastTracker::ForecastTracker(Forecast f, int64_t total_steps) : forecast_(std::move(f)) {
  const int64_t target_steps = forecast_.inputs.target.steps;
  if (target_steps != total_steps)
    fail("the forecast is for a run of {} steps, this run has {}", target_steps, total_steps);
  total_steps_ = total_steps;
  for (const FractionFit& e : forecast_.fits) {
    if (!e.all.predicted) continue;
    const double g = e.fraction;
    const int64_t step = std::llround(g * double(total_steps));
    by_step_[step] = {g, *e.all.predicted};
    if (std::abs(g - 1.0) < 1e-12) final_ = *e.all.predicted;
    if (e.clean && e.clean->predicted) {
      clean_by_step_[step] = *e.clean->predicted;
      if (std::abs(g - 1.0) < 1e-12) final_clean_ = clean_by_step_[step];
    }
  }
}

std::optional<json> ForecastTracker::observe(int64_t step, double loss,
                                             std::optional<double> clean_loss) const {
  auto it = by_step_.find(step);
  if (it == by_step_.end()) return std::nullopt;
  const auto [g, pred] = it->second;
  const double diff = loss - pred;
  json r{{"step", step},    {"fraction", g},     {"predicted", pred},
         {"actual", loss},  {"diff_nats", diff}, {"diff_percent", 100.0 * diff / pred},
         {"beat", diff < 0}};
  auto c = clean_by_step_.find(step);
  if (clean_loss && c != clean_by_step_.end())
    r["clean"] = {{"predicted", c->second},
                  {"actual", *clean_loss},
                  {"diff_nats", *clean_loss - c->second},
                  {"beat", *clean_loss < c->second}};
  return r;
}

namespace {
json compare(double predicted, double actual) {
  const double diff = actual - predicted;
  return {{"predicted", predicted},
          {"actual", actual},
          {"diff_nats", diff},
          {"diff_percent", 100.0 * diff / predicted},
          {"verdict", diff < 0   ? "beat"
                      : diff > 0 ? "miss"
                                 : "exact"}};
}
}  // namespace

json ForecastTracker::final_report(double loss, std::optional<double> clean_loss) const {
  if (!final_) fail("the forecast has no prediction at 100% (its final fit failed)");
  json r = compare(*final_, loss);
  r["metric"] = metric();
  r["forecast_created"] = forecast_.created;
  r["ladder_xxh64"] = forecast_.ladder.xxh64;
  r["steps"] = total_steps_;
  if (clean_loss) {
    // Against the forecast of the clean-only loss when the ladder measured one; otherwise
    // against the all-document forecast (said so in "against").
    r["clean"] = compare(final_clean_ ? *final_clean_ : *final_, *clean_loss);
    r["clean"]["against"] = final_clean_ ? "clean-only forecast" : "all-document forecast";
    // The macro loss over all documents minus the clean-only one (contamination lowers it).
    r["all_minus_clean_nats"] = loss - *clean_loss;
  }
  return r;
}

std::vector<int64_t> ForecastTracker::steps() const {
  std::vector<int64_t> s;
  for (auto& [k, _] : by_step_) s.push_back(k);
  return s;
}

double ForecastTracker::predicted_final() const {
  if (!final_) fail("the forecast has no prediction at 100% (its final fit failed)");
  return *final_;
}

}  // namespace marin::scaling
