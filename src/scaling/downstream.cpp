// The loss → downstream-metric link of a forecast (downstream.hpp, docs/scaling.md).
#include "scaling/downstream.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "core/error.hpp"
#include "core/rng.hpp"
#include "scaling/fit.hpp"

namespace marin::scaling {
using json = nlohmann::json;

namespace {

double sigmoid(double x) {
  return x >= 0 ? 1.0 / (1.0 + std::exp(-x)) : std::exp(x) / (1.0 + std::exp(x));
}

double sse_of(const std::vector<double>& L, const std::vector<double>& y, const LinkFit& f) {
  double s = 0;
  for (size_t i = 0; i < L.size(); ++i) {
    const double r = y[i] - f.predict(L[i]);
    s += r * r;
  }
  return s;
}

// Levenberg–Marquardt on (k, L0) from a start; returns the fit with its SSE.
LinkFit refine(const std::vector<double>& L, const std::vector<double>& y, LinkFit f) {
  const double span = f.ceiling - f.floor;
  double sse = sse_of(L, y, f), lambda = 1e-3;
  for (int it = 0; it < 500; ++it) {
    double a11 = 0, a12 = 0, a22 = 0, g1 = 0, g2 = 0;
    for (size_t i = 0; i < L.size(); ++i) {
      const double p = sigmoid(-f.k * (L[i] - f.l0)), d = span * p * (1 - p);
      const double jk = -d * (L[i] - f.l0), jl = d * f.k, r = y[i] - f.predict(L[i]);
      a11 += jk * jk, a12 += jk * jl, a22 += jl * jl, g1 += jk * r, g2 += jl * r;
    }
    bool improved = false;
    while (lambda < 1e12) {
      const double b11 = a11 * (1 + lambda) + 1e-300, b22 = a22 * (1 + lambda) + 1e-300;
      const double det = b11 * b22 - a12 * a12;
      if (!(std::abs(det) > 0)) {
        lambda *= 4;
        continue;
      }
      LinkFit t = f;
      t.k += (g1 * b22 - g2 * a12) / det;
      t.l0 += (b11 * g2 - a12 * g1) / det;
      const double s = sse_of(L, y, t);
      if (std::isfinite(s) && s < sse) {
        improved = sse - s > 1e-15 * std::max(sse, 1e-300);
        f = t, sse = s, lambda = std::max(lambda / 3, 1e-12);
        break;
      }
      lambda *= 4;
    }
    if (!improved) break;
  }
  f.sse = sse;
  return f;
}

// Φ⁻¹(p) by bisection on the normal CDF (only for the few levels of an interval).
double normal_quantile(double p) {
  double lo = -10, hi = 10;
  for (int i = 0; i < 100; ++i) {
    const double mid = 0.5 * (lo + hi);
    (0.5 * std::erfc(-mid / std::sqrt(2.0)) < p ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

}  // namespace

double LinkFit::predict(double loss) const {
  return floor + (ceiling - floor) * sigmoid(-k * (loss - l0));
}

json LinkFit::to_json() const {
  return {{"law", "logistic_in_loss"},
          {"formula", "floor + (ceiling - floor) / (1 + exp(k * (L - L0)))"},
          {"floor", floor},
          {"ceiling", ceiling},
          {"k", k},
          {"L0", l0},
          {"n", n},
          {"sse", sse},
          {"rmse", rmse},
          {"r2", std::isfinite(r2) ? json(r2) : json(nullptr)}};
}

LinkFit fit_loss_link(const std::vector<double>& L, const std::vector<double>& y, double floor,
                      double ceiling, const LinkFit* near) {
  MARIN_CHECK(L.size() == y.size(), "downstream fit: {} losses but {} metric values", L.size(),
              y.size());
  if (!(floor < ceiling))
    fail("downstream fit: the floor {} must be below the ceiling {}", floor, ceiling);
  if (L.size() < 3)
    fail("downstream fit: needs at least 3 (loss, metric) points, got {}", L.size());
  const double lmin = *std::min_element(L.begin(), L.end()),
               lmax = *std::max_element(L.begin(), L.end());
  if (!(lmax > lmin)) fail("downstream fit: every point has the same loss ({})", lmin);
  const size_t n = L.size();
  // The start: the line of logit(q) on L, q clipped into (0, 1).
  const double span = ceiling - floor, eps = 0.01;
  double sx = 0, sz = 0, sxx = 0, sxz = 0;
  for (size_t i = 0; i < n; ++i) {
    const double q = std::clamp((y[i] - floor) / span, eps, 1 - eps), z = std::log(q / (1 - q));
    sx += L[i], sz += z, sxx += L[i] * L[i], sxz += L[i] * z;
  }
  const double slope = (double(n) * sxz - sx * sz) / (double(n) * sxx - sx * sx);
  const double icept = (sz - slope * sx) / double(n), lmid = 0.5 * (lmin + lmax);
  std::vector<LinkFit> starts;
  LinkFit base;
  base.floor = floor, base.ceiling = ceiling;
  if (std::abs(slope) > 1e-12) {
    LinkFit s = base;
    s.k = -slope, s.l0 = icept / s.k;
    starts.push_back(s);
  }
  if (near) {
    LinkFit s = base;
    s.k = near->k, s.l0 = near->l0;
    starts.push_back(s);
  } else {
    for (double k : {0.5, 2.0, 8.0, -0.5, -2.0})  // further starts, scaled to the loss range
      for (double l0 : {lmin, lmid, lmax}) {
        LinkFit s = base;
        s.k = k * 4 / (lmax - lmin), s.l0 = l0;
        starts.push_back(s);
      }
  }
  LinkFit best;
  best.sse = std::numeric_limits<double>::infinity();
  for (const LinkFit& s : starts) {
    const LinkFit f = refine(L, y, s);
    if (f.sse < best.sse) best = f;
  }
  best.n = int64_t(n);
  best.rmse = std::sqrt(best.sse / double(n));
  double mean = 0, sst = 0;
  for (double v : y) mean += v / double(n);
  for (double v : y) sst += (v - mean) * (v - mean);
  best.r2 = sst > 0 ? 1 - best.sse / sst : std::numeric_limits<double>::quiet_NaN();
  return best;
}

DownstreamSpec parse_downstream_metric(const std::string& text) {
  DownstreamSpec s;
  s.text = text;
  std::vector<std::string> parts;
  for (size_t a = 0;;) {
    const size_t b = text.find('/', a);
    parts.push_back(text.substr(a, b == std::string::npos ? std::string::npos : b - a));
    if (b == std::string::npos) break;
    a = b + 1;
  }
  const bool ok = (parts.size() == 2 || (parts.size() == 3 && parts[1] == "clean")) &&
                  !parts.front().empty() && !parts.back().empty();
  if (!ok)
    fail("--metric {}: expected TASK/METRIC or TASK/clean/METRIC (e.g. cloze_definitions/acc)",
         text);
  s.task = parts.front();
  s.metric = parts.back();
  s.clean = parts.size() == 3;
  return s;
}

std::optional<double> downstream_value(const json& task_scores, const DownstreamSpec& spec,
                                       const std::string& where) {
  if (!task_scores.is_object() || !task_scores.contains(spec.task))
    fail("{}: no task '{}' (scored: {})", where, spec.task, task_scores.dump());
  const json& t =
      spec.clean ? task_scores[spec.task].value("clean", json()) : task_scores[spec.task];
  if (!t.is_object() || !t.contains(spec.metric))
    fail("{}: task '{}' has no {}metric '{}'", where, spec.task, spec.clean ? "clean-only " : "",
         spec.metric);
  if (!t[spec.metric].is_number()) return std::nullopt;
  return t[spec.metric].get<double>();
}

json downstream_forecast(const json& ladder, const json& forecast, const DownstreamSpec& spec) {
  return downstream_forecast(ladder, Forecast::from_json(forecast), spec);
}

namespace {

// One evaluation of a fitted rung: its loss and the metric's value.
struct LinkPoint {
  std::string rung;
  int64_t step;
  double loss, value;
};
struct LinkPoints {
  std::vector<LinkPoint> pts;
  std::vector<std::string> order;  // rung names in ladder order (smallest first)
  int64_t skipped = 0;             // evaluations whose subset was empty
  // The losses and metric values of the points `keep` selects: the link's inputs.
  template <class Keep>
  std::pair<std::vector<double>, std::vector<double>> select(Keep keep) const {
    std::pair<std::vector<double>, std::vector<double>> Ly;
    for (const LinkPoint& p : pts)
      if (keep(p)) Ly.first.push_back(p.loss), Ly.second.push_back(p.value);
    return Ly;
  }
};

// Every evaluation of every done, fitted rung (canaries left out).
LinkPoints link_points(const json& ladder, const DownstreamSpec& spec) {
  LinkPoints lp;
  for (const json& r : ladder.at("rungs")) {
    if (r.value("status", "") != "done" || r.value("canary", false)) continue;
    const std::string name = r.at("name").get<std::string>();
    if (lp.order.empty() || lp.order.back() != name) lp.order.push_back(name);
    for (const json& p : r.at("curve")) {
      const int64_t step = p.at("step").get<int64_t>();
      if (!p.contains("tasks"))
        fail(
            "ladder.json: rung {} has no downstream-task scores at step {} (name the tasks in "
            "the ladder file's [tasks] table and train the ladder)",
            r.value("run", name), step);
      const std::optional<double> v =
          downstream_value(p["tasks"], spec,
                           fmt::format("ladder.json: rung {} step {}", r.value("run", name), step));
      if (!v) {  // an empty subset (e.g. no clean items)
        ++lp.skipped;
        continue;
      }
      lp.pts.push_back({name, step, p.at("loss").get<double>(), *v});
    }
  }
  return lp;
}

// Forward holdout: the link without the largest rung predicts that rung from its own losses.
json link_holdout(const LinkPoints& lp, const DownstreamSpec& spec) {
  const std::string last = lp.order.back();
  json h = {{"rung", last}};
  try {
    const auto Ly = lp.select([&](const LinkPoint& p) { return p.rung != last; });
    const LinkFit f = fit_loss_link(Ly.first, Ly.second, spec.floor, spec.ceiling);
    double se = 0, sd = 0;
    int64_t n = 0;
    for (const LinkPoint& p : lp.pts)
      if (p.rung == last) {
        const double d = f.predict(p.loss) - p.value;
        se += d * d, sd += d, ++n;
      }
    h["n"] = n;
    h["rmse"] = n ? json(std::sqrt(se / double(n))) : json(nullptr);
    h["mean_diff"] = n ? json(sd / double(n)) : json(nullptr);
  } catch (const Error& e) {
    h["error"] = e.what();
  }
  return h;
}

// The metric at the target's final loss, with the loss's interval carried through the link and
// the whole interval by the bootstrap.
json final_prediction(const ForecastPrediction& pr, const LinkFit& link,
                      const std::vector<double>& L, const std::vector<double>& y,
                      const DownstreamSpec& spec) {
  const double fl = *pr.final_loss;
  json fin = {{"loss", fl}, {"predicted", link.predict(fl)}};
  const json& iv = pr.interval;
  const bool loss_interval =
      iv.is_object() && iv.value("lo", json()).is_number() && iv.value("hi", json()).is_number();
  double level = 0.9, loss_sd = 0;
  if (loss_interval) {
    const double a = link.predict(iv["lo"].get<double>()), b = link.predict(iv["hi"].get<double>());
    if (iv.value("level", json()).is_number()) level = iv["level"].get<double>();
    fin["interval_loss_only"] = {{"lo", std::min(a, b)},
                                 {"hi", std::max(a, b)},
                                 {"level", level},
                                 {"method", "the loss's prediction interval through the link"}};
    // The loss's interval as a normal of its width (its bootstrap draws are not kept).
    loss_sd =
        (iv["hi"].get<double>() - iv["lo"].get<double>()) / (2 * normal_quantile((1 + level) / 2));
  }
  // The whole interval, by the same parametric bootstrap as the loss's (fit.hpp): the link
  // refitted to metric values resampled around it with the residuals' variance (the link's
  // own uncertainty), evaluated at a target loss drawn from the loss's interval, plus one new
  // evaluation's scatter around the link (the task's item sampling and the rest). The points
  // of one rung are treated as independent, which they are not quite (one model, nearby steps).
  Rng target_loss{0x5eed10ad};
  const Refit refit = [&](const std::vector<double>& values) {
    const LinkFit f = fit_loss_link(L, values, spec.floor, spec.ceiling, &link);
    std::vector<double> at(L.size());
    for (size_t i = 0; i < L.size(); ++i) at[i] = f.predict(L[i]);
    return std::pair{at, f.predict(fl + loss_sd * target_loss.normal())};
  };
  const PointNoise residuals_only{std::vector<double>(L.size(), 0.0), std::vector<int>(L.size(), 1),
                                  0.0, 0};
  try {
    json whole = prediction_interval(y, refit, 2, residuals_only, level).to_json();
    whole["method"] = loss_interval ? "bootstrap: the link's fit, the target loss's interval, one "
                                      "evaluation's scatter"
                                    : "bootstrap: the link's fit and one evaluation's scatter (the "
                                      "forecast has no loss interval)";
    fin["interval"] = whole;
  } catch (const Error& e) {
    fin["interval"] = {{"error", e.what()}};
  }
  return fin;
}

}  // namespace

json downstream_forecast(const json& ladder, const Forecast& forecast, const DownstreamSpec& spec) {
  const LinkPoints lp = link_points(ladder, spec);
  // Every point: the link's fit and its bootstrap.
  const auto all = lp.select([](const LinkPoint&) { return true; });
  const std::vector<double>&L = all.first, &y = all.second;
  const LinkFit link = fit_loss_link(L, y, spec.floor, spec.ceiling);
  json points = json::array();
  for (const LinkPoint& p : lp.pts)
    points.push_back({{"rung", p.rung}, {"step", p.step}, {"loss", p.loss}, {"value", p.value}});
  json out = {{"metric", spec.text},
              {"task", spec.task},
              {"name", spec.metric},
              {"subset", spec.clean ? "clean" : "all"},
              {"against", ladder.value("metric", "valid_ce")},
              {"link", link.to_json()},
              {"points", points},
              {"skipped_points", lp.skipped}};
  if (lp.order.size() >= 2) out["holdout"] = link_holdout(lp, spec);
  json preds = json::array();
  for (const FractionFit& e : forecast.fits)
    if (e.all.predicted) {
      const double pl = *e.all.predicted;
      preds.push_back({{"fraction", e.fraction},
                       {"target_step", e.target_step},
                       {"predicted_loss", pl},
                       {"predicted", link.predict(pl)}});
    }
  out["predictions"] = preds;
  if (forecast.prediction.final_loss)
    out["final"] = final_prediction(forecast.prediction, link, L, y, spec);
  return out;
}

}  // namespace marin::scaling
