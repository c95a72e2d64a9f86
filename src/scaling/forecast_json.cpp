// forecast.json ⇄ Forecast (forecast_types.hpp): the one place its keys are spelled.
#include <cmath>

#include "core/error.hpp"
#include "scaling/forecast_types.hpp"

namespace marin::scaling {
using json = nlohmann::json;

namespace {

// Reading is lenient (forecast_types.hpp): an absent key leaves the default.
template <class T>
void read(const json& j, const char* key, T& v) {
  if (j.contains(key)) v = j[key].get<T>();
}
// An optional: absent or null is nullopt.
template <class T>
void read(const json& j, const char* key, std::optional<T>& v) {
  if (j.contains(key) && !j[key].is_null()) v = j[key].get<T>();
}
template <class T>
json opt(const std::optional<T>& v) {
  return v ? json(*v) : json(nullptr);
}

json ladder_json(const ForecastLadder& l) {
  return {
      {"dir", l.dir}, {"file", l.file}, {"xxh64", l.xxh64}, {"name", l.name}, {"metric", l.metric}};
}
ForecastLadder ladder_from(const json& j) {
  ForecastLadder l;
  read(j, "dir", l.dir);
  read(j, "file", l.file);
  read(j, "xxh64", l.xxh64);
  read(j, "name", l.name);
  read(j, "metric", l.metric);
  return l;
}

json target_json(const ForecastTarget& t) {
  json j = {{"name", t.name},
            {"config", t.config},
            {"batch", t.batch},
            {"batch_source", t.batch_source},
            {"rule_batch", opt(t.rule_batch)},
            {"steps", t.steps},
            {"steps_source", t.steps_source},
            {"tokens_per_param", t.tokens_per_param},
            {"seed", t.seed},
            {"lr_multiplier", t.lr_multiplier},
            {"seq_len", t.seq_len},
            {"active_params", t.active_params},
            {"tokens", t.tokens},
            {"compute_per_step", t.compute_per_step},
            {"compute", t.compute},
            {"tokenizer_xxh64", t.tokenizer_xxh64},
            {"computed_dtype", opt(t.computed_dtype)},
            {"train_flags", t.train_flags}};
  if (t.options) j["options"] = *t.options;
  if (t.bind) j["bind"] = *t.bind;
  return j;
}
ForecastTarget target_from(const json& j) {
  ForecastTarget t;
  read(j, "name", t.name);
  read(j, "config", t.config);
  read(j, "batch", t.batch);
  read(j, "batch_source", t.batch_source);
  read(j, "rule_batch", t.rule_batch);
  read(j, "steps", t.steps);
  read(j, "steps_source", t.steps_source);
  read(j, "tokens_per_param", t.tokens_per_param);
  read(j, "seed", t.seed);
  read(j, "lr_multiplier", t.lr_multiplier);
  read(j, "seq_len", t.seq_len);
  read(j, "active_params", t.active_params);
  read(j, "tokens", t.tokens);
  read(j, "compute_per_step", t.compute_per_step);
  read(j, "compute", t.compute);
  if (j.contains("options")) t.options = j["options"];
  read(j, "bind", t.bind);
  read(j, "tokenizer_xxh64", t.tokenizer_xxh64);
  read(j, "computed_dtype", t.computed_dtype);
  read(j, "train_flags", t.train_flags);
  return t;
}

json law_json(const ForecastLaw& l) {
  json j = l.spec.to_json();
  j["chosen_by"] = l.chosen_by;
  if (!l.comparison.is_null()) j["comparison"] = l.comparison;
  return j;
}
// The spec back from LawSpec::to_json() (its formula follows from the family).
ForecastLaw law_from(const json& j) {
  ForecastLaw l;
  if (j.contains("family")) l.spec.family = parse_law(j["family"].get<std::string>());
  if (j.contains("l_inf")) {
    const json& li = j["l_inf"];
    l.spec.l_inf =
        li.value("mode", "fixed") == "fixed" && li.contains("value") && li["value"].is_number()
            ? std::optional<double>(li["value"].get<double>())
            : std::nullopt;
  }
  read(j, "ceiling", l.spec.ceiling);
  read(j, "chosen_by", l.chosen_by);
  if (j.contains("comparison")) l.comparison = j["comparison"];
  return l;
}

json rung_json(const ForecastRung& r) {
  return {{"name", r.name},
          {"label", r.label},
          {"tokens_per_param", r.tokens_per_param},
          {"canary", r.canary},
          {"seeds", r.seeds},
          {"compute_per_step", r.compute_per_step},
          {"steps", r.steps},
          {"batch", r.batch},
          {"tokens", opt(r.tokens)},
          {"active_params", r.active_params}};
}
ForecastRung rung_from(const json& j) {
  ForecastRung r;
  read(j, "name", r.name);
  read(j, "label", r.label);
  read(j, "tokens_per_param", r.tokens_per_param);
  read(j, "canary", r.canary);
  read(j, "seeds", r.seeds);
  read(j, "compute_per_step", r.compute_per_step);
  read(j, "steps", r.steps);
  read(j, "batch", r.batch);
  read(j, "tokens", r.tokens);
  read(j, "active_params", r.active_params);
  return r;
}

json inputs_json(const ForecastInputs& in) {
  json rungs = json::array();
  for (const ForecastRung& r : in.rungs) rungs.push_back(rung_json(r));
  return {{"target", target_json(in.target)},
          {"l_inf", in.law.spec.to_json()["l_inf"]},
          {"law", law_json(in.law)},
          {"fractions", in.fractions},
          {"rungs", rungs}};
}
ForecastInputs inputs_from(const json& j) {
  ForecastInputs in;
  if (j.contains("target")) in.target = target_from(j["target"]);
  if (j.contains("law")) in.law = law_from(j["law"]);
  read(j, "fractions", in.fractions);
  if (j.contains("rungs"))
    for (const json& r : j["rungs"]) in.rungs.push_back(rung_from(r));
  return in;
}

// One series' keys: "fit", "predicted_loss", … under `prefix` ("" or "clean_").
void series_into(const SeriesForecast& s, const std::string& prefix, json& e) {
  e[prefix + "fit"] = s.fit;
  e["predicted_" + prefix + "loss"] = opt(s.predicted);
  if (s.error) e[prefix + "error"] = *s.error;
  if (s.forward) e[prefix + "forward"] = *s.forward;
  if (s.interval) e[prefix + "interval"] = *s.interval;
  if (s.interval_error) e[prefix + "interval_error"] = *s.interval_error;
}
SeriesForecast series_from(const json& e, const std::string& prefix) {
  SeriesForecast s;
  if (e.contains(prefix + "fit")) s.fit = e[prefix + "fit"];
  const std::string p = "predicted_" + prefix + "loss";
  if (e.contains(p) && e[p].is_number()) s.predicted = e[p].get<double>();
  if (e.contains(prefix + "error")) s.error = e[prefix + "error"].get<std::string>();
  if (e.contains(prefix + "forward")) s.forward = e[prefix + "forward"];
  if (e.contains(prefix + "interval")) s.interval = e[prefix + "interval"];
  if (e.contains(prefix + "interval_error"))
    s.interval_error = e[prefix + "interval_error"].get<std::string>();
  return s;
}

json fraction_json(const FractionFit& f) {
  json e = {{"fraction", f.fraction},
            {"target_step", f.target_step},
            {"target_compute", f.target_compute},
            {"points", f.points}};
  if (f.means) e["means"] = *f.means;
  if (f.weights) e["weights"] = *f.weights;
  if (f.target_active_params) e["target_active_params"] = *f.target_active_params;
  if (f.target_tokens) e["target_tokens"] = *f.target_tokens;
  series_into(f.all, "", e);
  if (f.clean) series_into(*f.clean, "clean_", e);
  if (!f.canaries.empty()) {
    json can = json::array();
    for (const CanaryPoint& c : f.canaries)
      can.push_back({{"rung", c.rung},
                     {"step", c.step},
                     {"compute", c.compute},
                     {"predicted_loss", c.predicted_loss}});
    e["canaries"] = can;
  }
  return e;
}
FractionFit fraction_from(const json& e) {
  FractionFit f;
  f.fraction = e.at("fraction").get<double>();
  read(e, "target_step", f.target_step);
  read(e, "target_compute", f.target_compute);
  if (e.contains("points")) f.points = e["points"];
  read(e, "means", f.means);
  read(e, "weights", f.weights);
  read(e, "target_active_params", f.target_active_params);
  read(e, "target_tokens", f.target_tokens);
  f.all = series_from(e, "");
  if (e.contains("clean_fit") || e.contains("predicted_clean_loss"))
    f.clean = series_from(e, "clean_");
  if (e.contains("canaries"))
    for (const json& c : e["canaries"])
      f.canaries.push_back({c.at("rung").get<std::string>(), c.at("step").get<int64_t>(),
                            c.at("compute").get<double>(), c.at("predicted_loss").get<double>()});
  return f;
}

json prediction_json(const ForecastPrediction& p) {
  json j = {{"final_loss", opt(p.final_loss)}, {"interval", p.interval}, {"metric", p.metric}};
  if (p.clean_final_loss) j["clean_final_loss"] = *p.clean_final_loss;
  if (p.clean_interval) j["clean_interval"] = *p.clean_interval;
  return j;
}
ForecastPrediction prediction_from(const json& j) {
  ForecastPrediction p;
  if (j.contains("final_loss") && j["final_loss"].is_number())
    p.final_loss = j["final_loss"].get<double>();
  if (j.contains("interval")) p.interval = j["interval"];
  p.metric = j.value("metric", "valid_ce");
  read(j, "clean_final_loss", p.clean_final_loss);
  if (j.contains("clean_interval")) p.clean_interval = j["clean_interval"];
  return p;
}

json canary_json(const CanaryForecast& c) {
  json preds = json::array();
  for (const CanaryForecast::At& p : c.predictions)
    preds.push_back({{"fraction", p.fraction},
                     {"step", p.step},
                     {"compute", p.compute},
                     {"predicted_loss", p.predicted_loss}});
  return {{"name", c.name}, {"steps", c.steps}, {"seeds", c.seeds}, {"predictions", preds}};
}
CanaryForecast canary_from(const json& j) {
  CanaryForecast c;
  c.name = j.at("name").get<std::string>();
  read(j, "steps", c.steps);
  read(j, "seeds", c.seeds);
  for (const json& p : j.at("predictions"))
    c.predictions.push_back({p.at("fraction").get<double>(), p.value("step", int64_t(0)),
                             p.value("compute", 0.0), p.at("predicted_loss").get<double>()});
  return c;
}

}  // namespace

const FractionFit* Forecast::final_fit() const {
  for (const FractionFit& f : fits)
    if (std::abs(f.fraction - 1.0) < 1e-12) return &f;
  return nullptr;
}

json Forecast::to_json() const {
  json fj = json::array();
  for (const FractionFit& f : fits) fj.push_back(fraction_json(f));
  json j = {{"format", format},
            {"created", created},
            {"ladder", ladder_json(ladder)},
            {"inputs", inputs_json(inputs)},
            {"fits", fj},
            {"forward_holdouts", forward_holdouts},
            {"prediction", prediction_json(prediction)}};
  if (!canaries.empty()) {
    json c = json::array();
    for (const CanaryForecast& x : canaries) c.push_back(canary_json(x));
    j["canaries"] = c;
  }
  if (eval) j["eval"] = *eval;
  if (downstream) j["downstream"] = *downstream;
  return j;
}

Forecast Forecast::from_json(const json& j) {
  if (!j.is_object()) fail("not a marin forecast (not a JSON object)");
  try {
    Forecast f;
    read(j, "format", f.format);
    read(j, "created", f.created);
    if (j.contains("ladder")) f.ladder = ladder_from(j["ladder"]);
    if (j.contains("inputs")) f.inputs = inputs_from(j["inputs"]);
    for (const json& e : j.at("fits")) f.fits.push_back(fraction_from(e));
    if (j.contains("forward_holdouts")) f.forward_holdouts = j["forward_holdouts"];
    if (j.contains("prediction")) f.prediction = prediction_from(j["prediction"]);
    if (j.contains("canaries"))
      for (const json& c : j["canaries"]) f.canaries.push_back(canary_from(c));
    if (j.contains("eval")) f.eval = j["eval"];
    if (j.contains("downstream")) f.downstream = j["downstream"];
    return f;
  } catch (const json::exception& e) {
    fail("malformed forecast: {}", e.what());
  }
}

}  // namespace marin::scaling
