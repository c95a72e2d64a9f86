#include "scaling/forecast.hpp"

#include <fmt/core.h>

#include <cmath>
#include <ctime>
#include <filesystem>

#include "core/error.hpp"
#include "core/fileio.hpp"
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

json make_forecast(const ForecastOptions& o) {
  const std::string file = (fs::path(o.ladder_dir) / "ladder.json").string();
  const json ladder = read_ladder_json(o.ladder_dir);
  const std::string hash = xxh64_hex(read_file(file));
  // A field of the wrong type or shape is a named error, not a JSON library exception.
  try {
    const json& rungs = ladder.at("rungs");
    const size_t need = o.l_inf ? 2 : 3;
    if (rungs.size() < need)
      fail("{}: {} rungs; a fit with L∞ {} needs at least {}", file, rungs.size(),
           o.l_inf ? "fixed" : "fitted", need);
    for (auto& r : rungs)
      if (r.value("status", "") != "done" || !r.contains("curve"))
        fail("{}: rung {} is not done (status {}); finish the ladder first", file,
             r.value("name", "?"), r.value("status", "?"));
    if (o.target_steps <= 0 || o.target_batch <= 0)
      fail("forecast: the target needs positive steps and batch (got {} and {})", o.target_steps,
           o.target_batch);
    o.target.validate();

    const double target_per_step = forecast_flops_per_step(o.target, o.target_batch);
    const Accounting ta = account(o.target);
    json rung_inputs = json::array();
    for (auto& r : rungs)
      rung_inputs.push_back({{"name", r.at("name")},
                             {"compute_per_step", r.at("compute_per_step")},
                             {"steps", r.at("steps")},
                             {"batch", r.at("batch")},
                             {"active_params", r.at("active_params")}});

    json fits = json::array();
    std::optional<double> final_prediction, final_clean;
    for (int64_t k = 1; k <= kFractions; ++k) {
      const double g = double(k) / double(kFractions);
      std::vector<double> c, l, lc;  // compute, loss, clean-only loss (when every rung has one)
      json points = json::array();
      for (auto& r : rungs) {
        const json& curve = r.at("curve");
        if (int64_t(curve.size()) != kFractions)
          fail("{}: rung {} has {} evaluations, expected {}", file, r.at("name").get<std::string>(),
               curve.size(), kFractions);
        const json& p = curve.at(size_t(k - 1));
        if (std::abs(p.at("fraction").get<double>() - g) > 1e-9)
          fail("{}: rung {} evaluation {} is at fraction {}, expected {}", file,
               r.at("name").get<std::string>(), k, p.at("fraction").get<double>(), g);
        c.push_back(p.at("compute").get<double>());
        l.push_back(p.at("loss").get<double>());
        points.push_back({{"rung", r.at("name")},
                          {"step", p.at("step")},
                          {"compute", c.back()},
                          {"loss", l.back()}});
        if (p.contains("clean_loss") && p["clean_loss"].is_number()) {
          lc.push_back(p["clean_loss"].get<double>());
          points.back()["clean_loss"] = lc.back();
        }
      }
      const double target_compute = target_per_step * g * double(o.target_steps);
      json e = {{"fraction", g},
                {"target_step", std::llround(g * double(o.target_steps))},
                {"target_compute", target_compute},
                {"points", points}};
      // One fit of the law per loss series; `prefix` names its keys ("" or "clean_"). A fraction
      // where the fit fails carries the error instead of a prediction.
      auto fit_into = [&](const std::vector<double>& losses, const std::string& prefix,
                          std::optional<double>& final_loss) {
        try {
          const PowerLawFit f = fit_power_law(c, losses, o.l_inf);
          e[prefix + "fit"] = f.to_json();
          e["predicted_" + prefix + "loss"] = f.predict(target_compute);
          if (k == kFractions) final_loss = f.predict(target_compute);
        } catch (const Error& err) {
          e[prefix + "fit"] = nullptr;
          e["predicted_" + prefix + "loss"] = nullptr;
          e[prefix + "error"] = err.what();
        }
      };
      fit_into(l, "", final_prediction);
      // The same law fitted on the clean-only macro loss (contaminated documents left out), so
      // that the target's clean loss is compared with a forecast of the same quantity.
      if (lc.size() == l.size()) fit_into(lc, "clean_", final_clean);
      fits.push_back(e);
    }

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
            {"batch", o.target_batch},
            {"steps", o.target_steps},
            {"seq_len", o.target.seq_len},
            {"active_params", ta.active_params},
            {"tokens", double(o.target_steps) * double(o.target_batch) * double(o.target.seq_len)},
            {"compute_per_step", target_per_step},
            {"compute", target_per_step * double(o.target_steps)}}},
          {"l_inf",
           {{"mode", o.l_inf ? "fixed" : "fitted"},
            {"value", o.l_inf ? json(*o.l_inf) : json(nullptr)}}},
          {"law", "L = l_inf + A * C^(-alpha), C = compute without the LM head"},
          {"fractions", kFractions},
          {"rungs", rung_inputs}}},
        {"fits", fits},
        {"prediction",
         {{"final_loss", final_prediction ? json(*final_prediction) : json(nullptr)},
          {"metric", ladder.value("metric", "valid_ce")}}}};
    if (final_clean) forecast["prediction"]["clean_final_loss"] = *final_clean;
    // The metric's definition (documents, budget, audit): the target is scored with exactly it.
    if (ladder.contains("eval")) forecast["eval"] = ladder["eval"];
    return forecast;
  } catch (const json::exception& e) {
    fail("{}: missing or malformed field: {}", file, e.what());
  }
}

ForecastTracker::ForecastTracker(const std::string& forecast_path, int64_t total_steps) {
  json j;
  try {
    j = json::parse(read_file(forecast_path));
  } catch (const json::exception& e) {
    fail("{}: not valid JSON: {}", forecast_path, e.what());
  }
  try {
    *this = from_json(j, total_steps);
  } catch (const Error& e) {
    fail("{}: {}", forecast_path, e.what());
  }
}

ForecastTracker ForecastTracker::from_json(const json& f, int64_t total_steps) {
  if (!f.is_object() || f.value("format", "") != "marin-forecast-v1")
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
