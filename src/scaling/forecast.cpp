#include "scaling/forecast.hpp"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <ctime>
#include <filesystem>
#include <functional>
#include <set>

#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/json_file.hpp"
#include "data/tokenizer/tokenizer.hpp"
#include "model/accounting.hpp"
#include "scaling/fit.hpp"
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

namespace {

// The runs of one rung at one token budget (one per seed), in ladder order.
struct Group {
  std::string name;   // the rung
  std::string label;  // the rung at its budget: "d128-tpp5" (the name when it has one budget)
  double tpp = 0;     // tokens per active parameter
  int rung = 0;       // the rung's index (by name) in ladder order: smaller rungs first
  bool canary = false;
  std::vector<const json*> runs;
  double n_params() const { return runs.front()->at("active_params").get<double>(); }
  double tokens() const { return runs.front()->at("tokens").get<double>(); }  // at 100%
  int64_t steps() const { return runs.front()->at("steps").get<int64_t>(); }
  double compute_per_step() const { return runs.front()->at("compute_per_step").get<double>(); }
};

// Two budgets are the same when they print the same (budget_label's {:g}).
bool same_budget(double a, double b) {
  return budget_label("", a) == budget_label("", b);
}

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

// The fitted rungs at one fraction: compute, each rung's mean loss over its seeds, the weights
// (inverse variance of each mean; empty: equal) and the noise the interval draws from.
struct Series {
  std::vector<double> c, mean, w;
  PointNoise noise;
  bool complete = true;  // every run has the loss (a clean-only loss may be missing)
};

// The prior weight, in degrees of freedom, of the pooled single-run variance in each rung's own:
// with two or three seeds a rung's sample variance alone is too noisy to weight it by.
constexpr double kPoolPrior = 2.0;

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
  s.noise.runs = n;
  s.noise.dof = dof;
  s.noise.var_target = pooled;
  s.noise.var_run.assign(n.size(), 0.0);
  if (dof > 0 && pooled > 0) {
    // Each rung's single-run variance: its own, shrunk toward the pooled one; the weight of its
    // mean is the inverse of var/n (normalised to a mean of 1).
    double sum = 0;
    for (size_t i = 0; i < n.size(); ++i) {
      s.noise.var_run[i] = ((n[i] - 1) * var[i] + kPoolPrior * pooled) / ((n[i] - 1) + kPoolPrior);
      s.w.push_back(double(n[i]) / s.noise.var_run[i]);
      sum += s.w.back();
    }
    for (double& x : s.w) x *= double(s.w.size()) / sum;
  } else if (std::adjacent_find(n.begin(), n.end(), std::not_equal_to<>()) != n.end()) {
    // Seeds that agree exactly (or single seeds of unequal count): weight by the count.
    for (int x : n) s.w.push_back(double(x));
  }
  return s;
}

std::vector<double> head(const std::vector<double>& v, size_t j) {
  return v.empty() ? v : std::vector<double>(v.begin(), v.begin() + long(j));
}

// Forward holdouts at one fraction: every rung but the smallest two, predicted from the smaller
// rungs only (with data available before the registration, the sign of a miss shows here).
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

// The forward holdouts of every fraction summarised per held-out rung and over all: RMSE, mean
// error and how many fractions the rung beat its forecast (predicted > actual).
json summarise_forward(const json& fits, const char* key) {
  std::map<std::string, std::vector<double>> by_rung;
  std::vector<std::string> order;
  for (auto& e : fits)
    for (auto& h : e.value(key, json::array()))
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

struct LawRun {
  json fits = json::array();
  std::optional<double> final_loss, final_clean;
  json final_interval, final_clean_interval;
};

}  // namespace

const std::vector<std::string>& bound_option_keys() {
  static const std::vector<std::string> k = {"/model", "/batch",     "/steps",     "/seed",
                                             "/dtype", "/optimizer", "/transport", "/waves",
                                             "/qb",    "/data",      "/valid"};
  return k;
}

namespace {
json make_forecast_unchecked(const ForecastOptions& o) {
  const std::string file = (fs::path(o.ladder_dir) / "ladder.json").string();
  const json ladder = read_ladder_json(o.ladder_dir);
  const std::string hash = xxh64_hex(read_file(file));
  o.target.validate();

  // Runs by rung and budget (their seeds), canaries apart: every fitted run must be done; a
  // canary is trained after the forecast, which records its prediction.
  const std::vector<Group> groups = group_runs(ladder);
  for (auto& g : groups)
    for (const json* r : g.runs)
      if (!g.canary && (r->value("status", "") != "done" || !r->contains("curve")))
        fail("{}: rung {} is not done (status {}); finish the ladder first", file,
             r->value("run", g.label), r->value("status", "?"));
  // One dtype for every fitted run: "auto" resolves per CPU, and a ladder whose rungs computed in
  // different dtypes (a ladder spread over machines) fits a curve of neither.
  std::string computed_dtype, first_run;
  for (auto& g : groups)
    for (const json* r : g.runs) {
      const std::string d = r->value("dtype", "");
      if (g.canary || d.empty()) continue;
      if (computed_dtype.empty()) {
        computed_dtype = d, first_run = r->value("run", g.label);
      } else if (d != computed_dtype) {
        fail(
            "{}: run {} computed in {} and run {} in {}: the rungs of one ladder share a dtype "
            "([ladder] dtype = \"fp32\" pins it on every CPU)",
            file, first_run, computed_dtype, r->value("run", g.label), d);
      }
    }
  std::set<std::string> budget_set;
  for (auto& g : groups) {
    if (g.canary) continue;
    budget_set.insert(budget_label("", g.tpp));
    for (const json* r : g.runs) {
      const json& curve = r->at("curve");
      if (int64_t(curve.size()) != kFractions)
        fail("{}: rung {} has {} evaluations, expected {}", file, r->value("run", g.label),
             curve.size(), kFractions);
      for (int64_t k = 1; k <= kFractions; ++k) {
        const double g_k = double(k) / double(kFractions), at = curve[k - 1].at("fraction");
        if (std::abs(at - g_k) > 1e-9)
          fail("{}: rung {} evaluation {} is at fraction {}, expected {}", file,
               r->value("run", g.label), k, at, g_k);
      }
    }
  }
  const size_t budgets = budget_set.size();
  const bool several = budgets > 1;
  const bool chinchilla = o.law.family == LawFamily::Chinchilla;
  if (chinchilla && budgets < 2) fail("{}: {}", file, chinchilla_budget_error(budgets));

  const LadderConfig recipe = LadderConfig::recipe_from_json(ladder.at("ladder"), file);
  // The target: the batch from the ladder's rule (an override is recorded as one), the budget
  // as a rung's, the options exactly as a rung's at the ladder's first seed.
  const bool batch_override = o.target_batch > 0;
  if (!batch_override && !recipe.batch.sizes.empty())
    fail("{}: the ladder lists its batch sizes (no rule to extend): give --target-batch", file);
  const int64_t target_batch =
      batch_override ? o.target_batch : recipe.batch.batch_for(o.target.hidden_dim);
  if (o.target_steps < 0) fail("forecast: the target's steps must be positive");
  if (o.target_tokens_per_param < 0)
    fail("forecast: the target's tokens per parameter must be positive");
  const double target_tpp =
      o.target_tokens_per_param > 0 ? o.target_tokens_per_param : recipe.tokens_per_param;
  const int64_t target_steps =
      o.target_steps > 0 ? o.target_steps : recipe.steps_for(o.target, target_batch, target_tpp);
  // The laws in C fit one budget: the target's (every rung, when the ladder has one budget);
  // the chinchilla law fits every rung × budget.
  std::vector<Group> cgroups;
  for (auto& g : groups)
    if (!several || same_budget(g.tpp, target_tpp)) cgroups.push_back(g);
  std::vector<std::string> names;
  for (auto& g : cgroups)
    if (!g.canary) names.push_back(g.label);
  if (!chinchilla && several && names.empty())
    fail(
        "{}: no rung was trained at the target's budget of {} tokens per parameter (budgets: {}): "
        "the {} law fits the rungs at the target's budget (--target-tokens-per-param), the "
        "chinchilla law every budget",
        file, target_tpp, fmt::join(budget_set, ", "), law_name(o.law.family));
  if (!chinchilla && names.size() < size_t(o.law.parameters()))
    fail("{}: {} fitted rungs; a fit with L∞ {} needs at least {}", file, names.size(),
         o.law.l_inf ? "fixed" : "fitted", o.law.parameters());
  const TrainOptions topt = recipe.run_options(o.target, target_batch, target_steps, recipe.seed);
  json bound = json::object();
  const json all_opts = topt.to_json();
  for (auto& k : bound_option_keys())
    bound[json::json_pointer(k)] = all_opts.at(json::json_pointer(k));
  const std::string tok_hash =
      recipe.tokenizer.empty() ? ""
                               : fmt::format("{:016x}", Tokenizer::load(recipe.tokenizer).hash());

  const double target_per_step = forecast_flops_per_step(o.target, target_batch);
  const Accounting ta = account(o.target);
  const double target_n = double(ta.active_params);
  const double target_tokens =
      double(target_steps) * double(target_batch) * double(o.target.seq_len);
  json rung_inputs = json::array();
  for (auto& g : groups) {
    const json& r = *g.runs.front();
    json seeds = json::array();
    for (const json* x : g.runs) seeds.push_back(x->value("seed", recipe.seed));
    rung_inputs.push_back({{"name", g.name},
                           {"label", g.label},
                           {"tokens_per_param", g.tpp},
                           {"canary", g.canary},
                           {"seeds", seeds},
                           {"compute_per_step", r.at("compute_per_step")},
                           {"steps", r.at("steps")},
                           {"batch", r.at("batch")},
                           {"tokens", r.value("tokens", json())},
                           {"active_params", r.at("active_params")}});
  }
  // Every run's point at one fraction.
  auto points_at = [&](const std::vector<Group>& gs, size_t at) {
    json points = json::array();
    for (auto& gr : gs) {
      if (gr.canary) continue;
      for (const json* r : gr.runs) {
        const json& p = r->at("curve").at(at);
        points.push_back({{"rung", gr.label},
                          {"seed", r->value("seed", recipe.seed)},
                          {"step", p.at("step")},
                          {"compute", p.at("compute")},
                          {"loss", p.at("loss")}});
        if (several) points.back()["tokens_per_param"] = gr.tpp;
        if (p.contains("clean_loss")) points.back()["clean_loss"] = p["clean_loss"];
      }
    }
    return points;
  };

  // One law in C over every fraction: fits, target prediction and interval, forward holdouts and
  // the canaries' predictions.
  auto run_compute_law = [&](LawSpec spec, bool full) {
    if (spec.family == LawFamily::Sigmoid) spec.ceiling = std::log(double(o.target.vocab_size));
    const Fitter fitter = law_fitter(spec);
    LawRun out;
    for (int64_t k = 1; k <= kFractions; ++k) {
      const double g = double(k) / double(kFractions);
      const size_t at = size_t(k - 1);
      const Series s = series_at(cgroups, at, "loss"), sc = series_at(cgroups, at, "clean_loss");
      const double target_compute = target_per_step * g * double(target_steps);
      json e = {{"fraction", g},
                {"target_step", std::llround(g * double(target_steps))},
                {"target_compute", target_compute},
                {"points", points_at(cgroups, at)}};
      if (s.w.size() || s.noise.dof > 0) {
        e["means"] = s.mean;
        e["weights"] = s.w;
      }
      // One fit per loss series; `prefix` names its keys ("" or "clean_"). A fraction where the
      // fit fails carries the error instead of a prediction.
      auto fit_into = [&](const Series& ser, const std::string& prefix,
                          std::optional<double>& final_loss, json& final_interval) {
        std::optional<PowerLawFit> fitted;
        try {
          const PowerLawFit f = fit_law(ser.c, ser.mean, spec, ser.w);
          fitted = f;
          e[prefix + "fit"] = f.to_json();
          e["predicted_" + prefix + "loss"] = f.predict(target_compute);
          if (k == kFractions) final_loss = f.predict(target_compute);
        } catch (const Error& err) {
          e[prefix + "fit"] = nullptr;
          e["predicted_" + prefix + "loss"] = nullptr;
          e[prefix + "error"] = err.what();
        }
        e[prefix + "forward"] = forward_holdouts(ser, names, fitter);
        if (!full || !fitted) return;
        try {
          const Interval iv = prediction_interval(ser.c, ser.mean, ser.w, fitter, spec.parameters(),
                                                  ser.noise, target_compute, o.interval_level,
                                                  o.interval_replicates, 0x5eed + uint64_t(k));
          e[prefix + "interval"] = iv.to_json();
          if (k == kFractions) final_interval = iv.to_json();
        } catch (const Error& err) {
          e[prefix + "interval"] = nullptr;
          e[prefix + "interval_error"] = err.what();
        }
        if (!prefix.empty()) return;  // the canaries are scored on the all-document loss
        // The canaries at this fraction of their own steps.
        json can = json::array();
        for (auto& gr : cgroups) {
          if (!gr.canary) continue;
          const double cc = gr.compute_per_step() * g * double(gr.steps());
          can.push_back({{"rung", gr.label},
                         {"step", std::llround(g * double(gr.steps()))},
                         {"compute", cc},
                         {"predicted_loss", fitted->predict(cc)}});
        }
        if (!can.empty()) e[prefix + "canaries"] = can;
      };
      fit_into(s, "", out.final_loss, out.final_interval);
      // The same law fitted on the clean-only macro loss (contaminated documents left out), so
      // that the target's clean loss is compared with a forecast of the same quantity.
      if (sc.complete && !sc.c.empty())
        fit_into(sc, "clean_", out.final_clean, out.final_clean_interval);
      out.fits.push_back(e);
    }
    return out;
  };

  // The chinchilla law: one fit over the end-of-run points of every rung × budget (no prediction
  // at the earlier fractions), with the same diagnostics: leave-one-rung-out, forward holdouts
  // (every budget of a rung predicted from the smaller rungs), the interval and the canaries.
  auto run_chinchilla = [&](const LawSpec& spec, bool full) {
    LawRun out;
    std::vector<const Group*> fitted_groups;
    for (auto& g : groups)
      if (!g.canary) fitted_groups.push_back(&g);
    for (int64_t k = 1; k <= kFractions; ++k) {
      const double g = double(k) / double(kFractions);
      const size_t at = size_t(k - 1);
      json e = {{"fraction", g},
                {"target_step", std::llround(g * double(target_steps))},
                {"target_compute", target_per_step * g * double(target_steps)},
                {"points", points_at(groups, at)}};
      if (k < kFractions) {
        e["fit"] = nullptr;
        e["predicted_loss"] = nullptr;
        e["error"] = kChinchillaIntermediate;
        out.fits.push_back(e);
        continue;
      }
      const Series s = series_at(groups, at, "loss"), sc = series_at(groups, at, "clean_loss");
      if (s.w.size() || s.noise.dof > 0) {
        e["means"] = s.mean;
        e["weights"] = s.w;
      }
      e["target_active_params"] = target_n;
      e["target_tokens"] = target_tokens;
      auto fit_into = [&](const Series& ser, const std::string& prefix,
                          std::optional<double>& final_loss, json& final_interval) {
        NDPoints p;
        for (const Group* gr : fitted_groups) {
          p.n.push_back(gr->n_params());
          p.d.push_back(gr->tokens());
          p.rung.push_back(gr->rung);
          p.budget.push_back(gr->tpp);
        }
        p.loss = ser.mean;
        p.w = ser.w;
        std::optional<ChinchillaFit> fitted;
        try {
          fitted = fit_chinchilla_law(p, spec.l_inf);
          e[prefix + "fit"] = fitted->to_json();
          final_loss = fitted->predict(target_n, target_tokens);
          e["predicted_" + prefix + "loss"] = *final_loss;
        } catch (const Error& err) {
          e[prefix + "fit"] = nullptr;
          e["predicted_" + prefix + "loss"] = nullptr;
          e[prefix + "error"] = err.what();
        }
        // Forward holdouts: every budget of each rung but the smallest two, from the smaller.
        json fwd = json::array();
        std::vector<int> order;
        for (int r : p.rung)
          if (std::find(order.begin(), order.end(), r) == order.end()) order.push_back(r);
        for (size_t j = 2; j < order.size(); ++j) {
          std::vector<bool> keep(p.loss.size());
          for (size_t i = 0; i < keep.size(); ++i)
            keep[i] = std::find(order.begin(), order.begin() + long(j), p.rung[i]) !=
                      order.begin() + long(j);
          std::optional<ChinchillaFit> h;
          std::string why;
          try {
            h = fit_chinchilla(p.subset(keep), spec.l_inf);
          } catch (const Error& err) {
            why = err.what();
          }
          for (size_t i = 0; i < keep.size(); ++i) {
            if (p.rung[i] != order[j]) continue;
            json x = {{"rung", fitted_groups[i]->label}, {"from_rungs", j}, {"actual", p.loss[i]}};
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
        e[prefix + "forward"] = fwd;
        if (!full || !fitted) return;
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
              prediction_interval(ser.mean, refit, spec.parameters(), ser.noise, o.interval_level,
                                  o.interval_replicates, 0x5eed + uint64_t(k));
          e[prefix + "interval"] = iv.to_json();
          final_interval = iv.to_json();
        } catch (const Error& err) {
          e[prefix + "interval"] = nullptr;
          e[prefix + "interval_error"] = err.what();
        }
        if (!prefix.empty()) return;
        json can = json::array();
        for (auto& gr : groups) {
          if (!gr.canary) continue;
          can.push_back({{"rung", gr.label},
                         {"step", gr.steps()},
                         {"compute", gr.compute_per_step() * double(gr.steps())},
                         {"predicted_loss", fitted->predict(gr.n_params(), gr.tokens())}});
        }
        if (!can.empty()) e["canaries"] = can;
      };
      fit_into(s, "", out.final_loss, out.final_interval);
      if (sc.complete && !sc.c.empty())
        fit_into(sc, "clean_", out.final_clean, out.final_clean_interval);
      out.fits.push_back(e);
    }
    return out;
  };
  auto run_law = [&](const LawSpec& spec, bool full) {
    return spec.family == LawFamily::Chinchilla ? run_chinchilla(spec, full)
                                                : run_compute_law(spec, full);
  };

  // The law: as given, or chosen by the smallest forward-holdout RMSE: over every fraction, or,
  // with several budgets (where the chinchilla law predicts the end of each run only), over the
  // points every law predicts: the end-of-run forward holdouts at the target's budget.
  const std::set<std::string> target_labels(names.begin(), names.end());
  LawSpec spec = o.law;
  json comparison;
  if (o.compare) {
    comparison = json::object();
    std::optional<double> best;
    for (LawFamily fam : {LawFamily::Power, LawFamily::Sigmoid, LawFamily::Chinchilla}) {
      LawSpec cand = o.law;
      cand.family = fam;
      json sum;
      if (fam == LawFamily::Chinchilla && budgets < 2) {
        sum = {{"n", 0}, {"rmse", nullptr}, {"error", chinchilla_budget_error(budgets)}};
      } else {
        const LawRun r = run_law(cand, false);
        sum = summarise_forward(r.fits, "forward");
        json fin = json::array();
        for (auto& h : r.fits.back().value("forward", json::array()))
          if (target_labels.count(h.value("rung", ""))) fin.push_back(h);
        sum["final"] = summarise_forward(json::array({{{"forward", fin}}}), "forward");
        sum["final"].erase("rungs");
      }
      const json crit = several ? sum.value("final", json()) : sum;
      comparison[law_name(fam)] = sum;
      if (!o.law_given && crit.is_object() && crit["rmse"].is_number() &&
          (!best || crit["rmse"].get<double>() < *best)) {
        best = crit["rmse"].get<double>();
        spec.family = fam;
      }
    }
  }
  if (spec.family == LawFamily::Sigmoid) spec.ceiling = std::log(double(o.target.vocab_size));
  const LawRun main = run_law(spec, true);
  // Every curve is complete (checked above), so a law that cannot be fitted on the full curves
  // (all rungs at one compute, a zero or negative compute, values past a double) leaves nothing
  // to forecast: an error, never a forecast.json with a null prediction.
  if (!main.final_loss) {
    const json& last = main.fits.empty() ? json() : main.fits.back();
    fail("forecast: the law {} cannot be fitted on the ladder's complete curves: {}",
         spec.to_json().dump(), last.value("error", std::string("no prediction")));
  }
  json law_json = spec.to_json();
  law_json["chosen_by"] =
      !o.compare    ? "--law"
      : o.law_given ? "--law (the comparison is recorded)"
      : several     ? "smallest forward-holdout RMSE at 100% of the target's budget (the points "
                      "every law predicts)"
                    : "smallest forward-holdout RMSE over every fraction";
  if (o.compare) law_json["comparison"] = comparison;

  json canaries = json::array();
  for (auto& gr : groups) {
    if (!gr.canary) continue;
    json preds = json::array();
    for (auto& e : main.fits)
      for (auto& c : e.value("canaries", json::array()))
        if (c["rung"] == gr.label)
          preds.push_back({{"fraction", e["fraction"]},
                           {"step", c["step"]},
                           {"compute", c["compute"]},
                           {"predicted_loss", c["predicted_loss"]}});
    if (preds.empty()) continue;  // a canary at another budget than the law's
    canaries.push_back({{"name", gr.label},
                        {"steps", gr.steps()},
                        {"seeds", gr.runs.size()},
                        {"predictions", preds}});
  }

  std::string command =
      fmt::format("--batch {} --steps {} --seed {}", target_batch, target_steps, recipe.seed);
  if (recipe.lr_multiplier != 1.0)
    command += fmt::format(" --muonh-lr {} --adam-lr {}", topt.optim.muonh_lr, topt.optim.adam_lr);
  if (topt.dtype != "auto") command += " --dtype " + topt.dtype;

  json forecast = {
      {"format", "marin-forecast-v1"},
      {"created", utc_now()},
      {"ladder",
       {{"dir", o.ladder_dir},
        {"file", file},
        {"xxh64", hash},
        {"name", ladder.at("ladder").value("name", "")},
        {"metric", ladder.value("metric", "valid_ce")}}},
      {"inputs",
       {{"target",
         {{"name", o.target_name},
          {"config", o.target.to_json()},
          {"batch", target_batch},
          {"batch_source",
           batch_override ? "--target-batch (override)" : "the ladder's batch rule"},
          {"rule_batch", recipe.batch.sizes.empty()
                             ? json(recipe.batch.rule_value(o.target.hidden_dim))
                             : json(nullptr)},
          {"steps", target_steps},
          {"steps_source", o.target_steps > 0 ? "--target-steps" : "the ladder's budget"},
          {"tokens_per_param", target_tpp},
          {"seed", recipe.seed},
          {"lr_multiplier", recipe.lr_multiplier},
          {"seq_len", o.target.seq_len},
          {"active_params", ta.active_params},
          {"tokens", target_tokens},
          {"compute_per_step", target_per_step},
          {"compute", target_per_step * double(target_steps)},
          {"options", bound},
          {"bind", bound_option_keys()},
          {"tokenizer_xxh64", tok_hash},
          {"computed_dtype", computed_dtype.empty() ? json(nullptr) : json(computed_dtype)},
          {"train_flags", command}}},
        {"l_inf",
         {{"mode", spec.l_inf ? "fixed" : "fitted"},
          {"value", spec.l_inf ? json(*spec.l_inf) : json(nullptr)}}},
        {"law", law_json},
        {"fractions", kFractions},
        {"rungs", rung_inputs}}},
      {"fits", main.fits},
      {"forward_holdouts", summarise_forward(main.fits, "forward")},
      {"prediction",
       {{"final_loss", main.final_loss ? json(*main.final_loss) : json(nullptr)},
        {"interval", main.final_interval},
        {"metric", ladder.value("metric", "valid_ce")}}}};
  if (!canaries.empty()) forecast["canaries"] = canaries;
  if (main.final_clean) forecast["prediction"]["clean_final_loss"] = *main.final_clean;
  if (main.final_clean_interval.is_object())
    forecast["prediction"]["clean_interval"] = main.final_clean_interval;
  // The metric's definition (documents, budget, audit): the target is scored with exactly it.
  if (ladder.contains("eval")) forecast["eval"] = ladder["eval"];
  return forecast;
}
}  // namespace

json make_forecast(const ForecastOptions& o) {
  // A field of the wrong type or shape is a named error, not a JSON library exception.
  try {
    json f = make_forecast_unchecked(o);
    if (!o.downstream.empty()) {
      const json ladder = read_ladder_json(o.ladder_dir);
      json d = json::object();
      for (const DownstreamSpec& s : o.downstream) d[s.text] = downstream_forecast(ladder, f, s);
      f["downstream"] = d;
    }
    return f;
  } catch (const json::exception& e) {
    fail("{}/ladder.json: missing or malformed field: {}", o.ladder_dir, e.what());
  }
}

std::vector<std::string> target_differences(const json& target, const TrainOptions& o) {
  std::vector<std::string> d;
  auto show = [](const json& v) { return v.is_null() ? std::string("(absent)") : v.dump(); };
  if (!target.contains("options")) {
    // A forecast from before the binding: it knows the target's steps only.
    const int64_t steps = target.at("steps").get<int64_t>();
    if (steps != o.steps) d.push_back(fmt::format("steps: forecast {}, run {}", steps, o.steps));
    return d;
  }
  // Leaf by leaf under every bound key, through the options' own JSON (the option table).
  const json want = target.at("options").flatten(), have = o.to_json().flatten();
  const std::vector<std::string> keys =
      target.value("bind", std::vector<std::string>(bound_option_keys()));
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
  const std::string th = target.value("tokenizer_xxh64", "");
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

json score_canaries(const json& forecast, const std::string& ladder_dir) {
  json out = json::array();
  if (!forecast.contains("canaries")) return out;
  const std::string dir =
      ladder_dir.empty() ? forecast.at("ladder").at("dir").get<std::string>() : ladder_dir;
  const json ladder = read_ladder_json(dir);
  for (auto& c : forecast["canaries"]) {
    const std::string name = c.at("name");
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
    json per = json::array();
    double pred_final = 0, act_final = 0;
    for (auto& p : c.at("predictions")) {
      const size_t k = size_t(std::llround(p.at("fraction").get<double>() * kFractions)) - 1;
      double m = 0;
      for (const json* r : runs) m += r->at("curve").at(k).at("loss").get<double>();
      m /= double(runs.size());
      const double pr = p.at("predicted_loss").get<double>();
      per.push_back(
          {{"fraction", p["fraction"]}, {"predicted", pr}, {"actual", m}, {"diff_nats", m - pr}});
      if (k + 1 == size_t(kFractions)) pred_final = pr, act_final = m;
    }
    if (per.empty() || per.back()["fraction"].get<double>() < 1 - 1e-9)
      fail("the forecast has no prediction of canary {} at 100%", name);
    const double diff = act_final - pred_final;
    out.push_back({{"name", name},
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
  ForecastTracker t;
  try {
    const int64_t target_steps = f.at("inputs").at("target").at("steps").get<int64_t>();
    if (target_steps != total_steps)
      fail("the forecast is for a run of {} steps, this run has {}", target_steps, total_steps);
    t.total_steps_ = total_steps;
    for (auto& e : f.at("fits")) {
      if (!e.contains("predicted_loss") || !e["predicted_loss"].is_number()) continue;
      const double g = e.at("fraction").get<double>();
      const int64_t step = std::llround(g * double(total_steps));
      t.by_step_[step] = {g, e["predicted_loss"].get<double>()};
      if (std::abs(g - 1.0) < 1e-12) t.final_ = e["predicted_loss"].get<double>();
      if (e.contains("predicted_clean_loss") && e["predicted_clean_loss"].is_number()) {
        t.clean_by_step_[step] = e["predicted_clean_loss"].get<double>();
        if (std::abs(g - 1.0) < 1e-12) t.final_clean_ = t.clean_by_step_[step];
      }
    }
    t.metric_ = f.at("prediction").value("metric", "valid_ce");
    t.eval_ = f.value("eval", json());
    t.forecast_ = f;
    t.ladder_hash_ = f.at("ladder").value("xxh64", "");
    t.created_ = f.value("created", "");
  } catch (const json::exception& e) {
    fail("malformed forecast: {}", e.what());
  }
  return t;
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
  r["metric"] = metric_;
  r["forecast_created"] = created_;
  r["ladder_xxh64"] = ladder_hash_;
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
