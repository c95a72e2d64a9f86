#include "scaling/forecast_hook.hpp"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/json_file.hpp"
#include "data/tokenizer/tokenizer.hpp"
#include "kernels/kernels.hpp"

namespace marin::scaling {

namespace {

// The forecast of the run, refused when the run is not its target: every bound option and the
// tokenizer must be what the forecast recorded (a forecast predicts one run, not a family of
// them), each difference named.
ForecastTracker bound_tracker(const TrainOptions& o) {
  const nlohmann::json j = load_json(o.forecast);
  try {
    if (!j.is_object() || j.value("format", nlohmann::json()) != "marin-forecast-v1")
      fail("not a marin forecast (format)");
    Forecast f = Forecast::from_json(j);
    const ForecastTarget& target = f.inputs.target;
    const std::vector<std::string> d = target_differences(target, o);
    if (!d.empty())
      fail(
          "this run is not the forecast's target: {}. A forecast binds its target "
          "(docs/scaling.md): train with the forecast's options (inputs.target.train_flags: {}) or "
          "register a new forecast",
          fmt::join(d, "; "), target.train_flags.empty() ? "?" : target.train_flags);
    return ForecastTracker(std::move(f), o.steps);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: malformed forecast: {}", o.forecast, e.what());
  } catch (const Error& e) {
    fail("{}: {}", o.forecast, e.what());
  }
}

}  // namespace

ForecastHook::ForecastHook(Trainer& t) : tracker_(bound_tracker(t.options())) {
  const TrainOptions& o = t.options();
  // The dtype the rungs computed in, whatever --dtype asked ("auto" resolves per CPU).
  const std::string want = tracker_.forecast().inputs.target.computed_dtype.value_or("");
  if (!want.empty() && want != kernels::dtype_name(t.dtype()))
    fail(
        "this run is not the forecast's target: it computes in {} on this CPU, the ladder's "
        "rungs computed in {} (train with --dtype {})",
        kernels::dtype_name(t.dtype()), want, want);
  // The canaries first: their forecasts were registered with the target's, and their rungs are
  // trained before it; a canary that is not trained yet stops the run here.
  canaries_ = score_canaries(tracker_.forecast());
  if (t.is_root())
    for (auto& c : canaries_)
      fmt::print(stderr,
                 "forecast: canary {}: predicted {:.4f}, actual {:.4f}: {} by {:+.4f} nats "
                 "({:+.2f}%)\n",
                 c["name"].get<std::string>(), c["predicted"].get<double>(),
                 c["actual"].get<double>(), c["verdict"].get<std::string>(),
                 c["diff_nats"].get<double>(), c["diff_percent"].get<double>());
  for (int64_t s : tracker_.steps()) steps_.insert(s);
  std::vector<std::string> names;
  const nlohmann::json forecast_downstream =  // named: items() of a temporary would dangle
      tracker_.forecast().downstream.value_or(nlohmann::json::object());
  for (auto& [name, d] : forecast_downstream.items()) {
    Downstream ds;
    ds.name = name;
    ds.spec = parse_downstream_metric(d.value("metric", name));
    ds.forecast = d;
    downstream_.push_back(std::move(ds));
    names.push_back(name);
  }
  if (!names.empty() && o.tasks.empty() && t.is_root())
    fmt::print(stderr,
               "marin: warning: the forecast predicts {} but this run scores no task; train with "
               "--tasks (and --task-dir) to score them against it\n",
               fmt::join(names, ", "));
  macro_ = tracker_.metric() == "macro_loss";
  if (macro_) {
    // A macro-loss forecast carries its metric's definition: the run is scored with exactly it.
    if (tracker_.eval_spec().is_null())
      fail("{}: a macro_loss forecast without its metric (\"eval\")", o.forecast);
    const uint64_t hash = o.tokenizer.empty() ? 0 : Tokenizer::load(o.tokenizer).hash();
    evaluator_ = std::make_unique<eval::MacroEvaluator>(
        eval::MacroMetric::from_json(tracker_.eval_spec(), o.forecast + ":eval"), hash);
  } else if (o.valid.is_null()) {
    fail("--forecast needs validation data to measure the loss it predicts");
  }
}

void ForecastHook::after_step(Trainer& t, nlohmann::json& m) {
  const int64_t step = t.step();
  if (m.contains("tasks") && m["tasks"].is_object())
    observe_downstream(step, m["tasks"].value("tasks", nlohmann::json()), m);
  if (!steps_.count(step) && step != t.options().steps) return;
  if (macro_) {
    if (!steps_.count(step)) return;
    m["eval"] = t.evaluate_domains(evaluator_.get());
    last_loss_ = m["eval"]["macro_loss"].get<double>();
    const auto clean = m["eval"].value("clean_macro_loss", nlohmann::json());
    last_clean_ = clean.is_number() ? std::optional(clean.get<double>()) : std::nullopt;
  } else {
    if (!m.contains("valid_ce")) m["valid_ce"] = t.validate();
    last_loss_ = m["valid_ce"].get<double>();
    if (*last_loss_ < 0) last_loss_.reset();
  }
  if (last_loss_ && steps_.count(step))
    if (auto rec = tracker_.observe(step, *last_loss_, last_clean_)) m["forecast"] = *rec;
}

void ForecastHook::observe_downstream(int64_t step, const nlohmann::json& task_scores,
                                      nlohmann::json& m) {
  for (Downstream& d : downstream_) {
    std::optional<double> v;
    try {
      v = downstream_value(task_scores, d.spec, fmt::format("step {}'s task scores", step));
    } catch (const Error& e) {
      d.error = e.what();  // the run scores other tasks: reported, the run goes on
      continue;
    }
    d.last = v;  // nullopt when this evaluation's subset is empty: no stale value at the end
    if (!v) continue;
    for (const nlohmann::json& p : d.forecast.value("predictions", nlohmann::json::array()))
      if (p.value("target_step", int64_t(-1)) == step &&
          p.value("predicted", nlohmann::json()).is_number()) {
        const double predicted = p["predicted"].get<double>();
        const nlohmann::json rec = {
            {"step", step}, {"predicted", predicted}, {"actual", *v}, {"diff", *v - predicted}};
        d.observed.push_back(rec);
        m["forecast_downstream"][d.name] = rec;
      }
  }
}

// The end-of-run comparison of every downstream metric: the forecast's final prediction and its
// interval against the run's last task evaluation (the trainer scores --tasks at the end).
nlohmann::json ForecastHook::downstream_report() const {
  nlohmann::json out = nlohmann::json::object();
  for (const Downstream& d : downstream_) {
    nlohmann::json r = {{"observed", d.observed}};
    const nlohmann::json fin = d.forecast.value("final", nlohmann::json());
    if (!d.last || !fin.is_object() || !fin.value("predicted", nlohmann::json()).is_number()) {
      r["error"] = !d.error.empty() ? d.error
                   : !d.last        ? "the run did not score this metric (train with --tasks)"
                                    : "the forecast has no final prediction of it";
      out[d.name] = r;
      continue;
    }
    const double predicted = fin["predicted"].get<double>(), actual = *d.last;
    r["predicted"] = predicted;
    r["actual"] = actual;
    r["diff"] = actual - predicted;
    const nlohmann::json iv = fin.value("interval", nlohmann::json());
    if (iv.is_object() && iv.value("lo", nlohmann::json()).is_number()) {
      r["interval"] = iv;
      r["inside_interval"] = actual >= iv["lo"].get<double>() && actual <= iv["hi"].get<double>();
    }
    out[d.name] = r;
  }
  return out;
}

void ForecastHook::at_end(Trainer& t, TrainResult&) {
  if (t.step() != t.options().steps || !last_loss_ || !t.is_root()) return;
  nlohmann::json report = tracker_.final_report(*last_loss_, last_clean_);
  if (!canaries_.empty()) report["canaries"] = canaries_;
  const nlohmann::json& iv = tracker_.forecast().prediction.interval;
  if (iv.is_object()) {
    report["interval"] = iv;
    report["inside_interval"] =
        *last_loss_ >= iv["lo"].get<double>() && *last_loss_ <= iv["hi"].get<double>();
  }
  // The clean-only loss against the clean-only forecast's own interval.
  const nlohmann::json civ =
      tracker_.forecast().prediction.clean_interval.value_or(nlohmann::json());
  if (civ.is_object() && last_clean_ && report.contains("clean") &&
      report["clean"].value("against", std::string()) == "clean-only forecast") {
    report["clean"]["interval"] = civ;
    report["clean"]["inside_interval"] =
        *last_clean_ >= civ["lo"].get<double>() && *last_clean_ <= civ["hi"].get<double>();
  }
  if (!downstream_.empty()) report["downstream"] = downstream_report();
  write_file_atomic(t.run_dir() + "/forecast_report.json", report.dump(2) + "\n");
  fmt::print(stderr, "forecast: predicted {:.4f}, actual {:.4f}: {} by {:+.4f} nats ({:+.2f}%)\n",
             report.value("predicted", 0.0), report.value("actual", 0.0),
             report.value("verdict", std::string("?")), report.value("diff_nats", 0.0),
             report.value("diff_percent", 0.0));
  if (report.contains("clean"))
    fmt::print(stderr,
               "forecast (clean-only documents, {}): predicted {:.4f}, actual {:.4f}: {} by "
               "{:+.4f} nats ({:+.2f}%)\n",
               report["clean"].value("against", std::string()),
               report["clean"].value("predicted", 0.0), report["clean"].value("actual", 0.0),
               report["clean"].value("verdict", std::string("?")),
               report["clean"].value("diff_nats", 0.0), report["clean"].value("diff_percent", 0.0));
  const nlohmann::json downstream = report.value("downstream", nlohmann::json::object());
  for (auto& [name, d] : downstream.items()) {
    if (d.contains("error")) {
      fmt::print(stderr, "forecast {}: not scored: {}\n", name, d["error"].get<std::string>());
      continue;
    }
    fmt::print(
        stderr, "forecast {}: predicted {:.4f}, actual {:.4f} ({:+.4f}){}\n", name,
        d["predicted"].get<double>(), d["actual"].get<double>(), d["diff"].get<double>(),
        d.contains("inside_interval")
            ? fmt::format(", {} the {:.0f}% interval [{:.4f}, {:.4f}]",
                          d["inside_interval"].get<bool>() ? "inside" : "outside",
                          100 * d["interval"]["level"].get<double>(),
                          d["interval"]["lo"].get<double>(), d["interval"]["hi"].get<double>())
            : std::string());
  }
}

void attach_forecast(Trainer& t) {
  if (!t.options().forecast.empty()) t.add_hook(std::make_unique<ForecastHook>(t));
}

}  // namespace marin::scaling
