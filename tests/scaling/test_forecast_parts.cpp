// The steps of make_forecast (scaling/forecast_parts.hpp), each on small hand-made series held in
// memory (no ladder file, no training): gather (a rung's seeds averaged and weighted), fit (a law
// recovers the parameters it was drawn from), holdouts (by hand), choose (the law that drew the
// series), interval (around the prediction; refused without degrees of freedom), target (batch,
// steps and budget from the ladder's rules and the overrides) and the canaries' predictions.
// test_forecast_laws.cpp checks the same protocol end to end through make_forecast.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_util.hpp"
#include "core/error.hpp"
#include "core/fileio.hpp"
#include "model/accounting.hpp"
#include "scaling/fit.hpp"
#include "scaling/forecast.hpp"
#include "scaling/forecast_parts.hpp"
#include "scaling/ladder.hpp"

using nlohmann::json;
namespace sc = marin::scaling;
namespace fp = marin::scaling::forecast_parts;

namespace {

// A ladder.json held in memory: rung i at compute per step cps[i] over 20 steps, one run per
// seed with loss(C, i, seed) (and clean_loss when `clean`); the last rung a canary when asked.
json hand_ladder(const std::vector<double>& cps, int seeds,
                 const std::function<double(double, size_t, int)>& loss, bool canary = false,
                 bool clean = false) {
  json rungs = json::array();
  for (size_t i = 0; i < cps.size(); ++i)
    for (int s = 0; s < seeds; ++s) {
      json curve = json::array();
      for (int k = 1; k <= 20; ++k) {
        curve.push_back({{"step", k},
                         {"fraction", k / 20.0},
                         {"compute", cps[i] * k},
                         {"loss", loss(cps[i] * k, i, s)}});
        if (clean) curve.back()["clean_loss"] = loss(cps[i] * k, i, s) + 0.1;
      }
      const std::string name = "r" + std::to_string(i);
      rungs.push_back({{"name", name},
                       {"run", name + "-seed" + std::to_string(s)},
                       {"seed", s},
                       {"canary", canary && i + 1 == cps.size()},
                       {"status", "done"},
                       {"compute_per_step", cps[i]},
                       {"steps", 20},
                       {"batch", 4},
                       {"tokens", 20.0 * 4 * 64},
                       {"active_params", 1000.0 * double(i + 1)},
                       {"curve", curve}});
    }
  return {{"ladder", {{"tokens_per_param", 20}}}, {"rungs", rungs}};
}

// The forecast's view of a hand-made ladder: one budget, the `tiny` target at 40 steps.
struct Hand {
  sc::ForecastOptions o;
  fp::LadderData d;
  fp::TargetPlan t;
  explicit Hand(const json& ladder) {
    o.target_name = "tiny";
    o.target = marin::ModelConfig::preset("tiny");
    o.target_steps = 40;
    d.ladder = ladder;
    d.groups = fp::group_runs(d.ladder);
    d.budget_set = {sc::budget_label("", 20)};
    t.batch = 4;
    t.steps = 40;
    t.tpp = 20;
    t.per_step = marin::forecast_flops_per_step(o.target, t.batch);
  }
  double target_compute() const { return t.per_step * double(t.steps); }
};

}  // namespace

// --- gather ------------------------------------------------------------------------------------

TEST(ForecastParts, GatherAveragesEachRungsSeedsAndWeighsByTheirSpread) {
  // Rung 0's seeds are 3.0 and 3.2 (variance 0.02), rung 1's 2.0 and 2.0 (0): the pooled
  // single-run variance is 0.01 over 2 degrees of freedom, each rung's own shrunk toward it
  // with the prior weight 2: (1·0.02 + 2·0.01)/3 and (0 + 2·0.01)/3. The canary is left out.
  const json ladder = hand_ladder(
      {1, 10, 100}, 2,
      [](double, size_t i, int s) { return i == 0   ? 3.0 + 0.2 * s
                                           : i == 1 ? 2.0
                                                    : 1.5; },
      /*canary=*/true);
  const std::vector<fp::Group> groups = fp::group_runs(ladder);
  ASSERT_EQ(groups.size(), 3u);
  EXPECT_TRUE(groups[2].canary);
  EXPECT_EQ(groups[1].runs.size(), 2u);
  const fp::Series s = fp::series_at(groups, 19, "loss");
  ASSERT_EQ(s.mean.size(), 2u);
  EXPECT_DOUBLE_EQ(s.mean[0], 3.1);
  EXPECT_DOUBLE_EQ(s.mean[1], 2.0);
  EXPECT_DOUBLE_EQ(s.c[0], 20.0);
  EXPECT_DOUBLE_EQ(s.c[1], 200.0);
  EXPECT_EQ(s.noise.dof, 2);
  EXPECT_NEAR(s.noise.var_target, 0.01, 1e-12);
  EXPECT_NEAR(s.noise.var_run[0], 0.04 / 3, 1e-12);
  EXPECT_NEAR(s.noise.var_run[1], 0.02 / 3, 1e-12);
  // Weights n/var, normalised to a mean of 1: 1/0.04 : 1/0.02 → 2/3 and 4/3.
  ASSERT_EQ(s.w.size(), 2u);
  EXPECT_NEAR(s.w[0], 2.0 / 3, 1e-12);
  EXPECT_NEAR(s.w[1], 4.0 / 3, 1e-12);
  // No clean-only loss: the series is incomplete (a clean fit is not attempted).
  EXPECT_FALSE(fp::series_at(groups, 19, "clean_loss").complete);
}

TEST(ForecastParts, GatherLeavesSeedsThatAgreeUnweighted) {
  const json ladder = hand_ladder({1, 10}, 3, [](double, size_t i, int) { return 3.0 - i; });
  const fp::Series s = fp::series_at(fp::group_runs(ladder), 0, "loss");
  EXPECT_EQ(s.noise.dof, 4);
  EXPECT_TRUE(s.w.empty());  // no spread, equal counts: every rung weighs 1
}

// --- fit ---------------------------------------------------------------------------------------

TEST(ForecastParts, FitRecoversTheLawTheSeriesWasDrawnFrom) {
  // L = 1.5 + 4·C^(−0.3) exactly, four rungs: every fraction's fit has A = 4, α = 0.3, and
  // predicts the target's compute at that fraction on the law.
  sc::PowerLawFit law;
  law.A = 4, law.alpha = 0.3, law.l_inf = 1.5;
  Hand h(
      hand_ladder({1e3, 1e4, 1e5, 1e6}, 1, [&](double C, size_t, int) { return law.predict(C); }));
  h.o.law.l_inf = 1.5;
  const fp::FitContext x = fp::fit_context(h.o, h.d, h.t);
  EXPECT_EQ(x.names, (std::vector<std::string>{"r0", "r1", "r2", "r3"}));
  const fp::LawRun r = fp::run_law(x, h.o.law, false);
  ASSERT_EQ(r.fits.size(), 20u);
  for (const sc::FractionFit& e : r.fits) {
    EXPECT_NEAR(e.all.fit["A"].get<double>(), 4.0, 1e-9) << e.all.fit.dump();
    EXPECT_NEAR(e.all.fit["alpha"].get<double>(), 0.3, 1e-12);
    const double g = e.fraction;
    ASSERT_TRUE(e.all.predicted);
    EXPECT_NEAR(*e.all.predicted, law.predict(h.target_compute() * g), 1e-9);
    EXPECT_EQ(e.target_step, std::llround(40 * g));
    EXPECT_FALSE(e.all.interval);  // not `full`: no interval, no canaries
    EXPECT_FALSE(e.clean);         // no clean-only loss in the ladder
  }
  ASSERT_TRUE(r.final_loss);
  EXPECT_NEAR(*r.final_loss, law.predict(h.target_compute()), 1e-9);
  EXPECT_FALSE(r.final_clean);
}

TEST(ForecastParts, FitNeedsAsManyRungsAsParameters) {
  Hand h(hand_ladder({1, 10}, 1, [](double, size_t i, int) { return 3.0 - i; }));
  h.o.law.l_inf = std::nullopt;  // A, α and L∞: three rungs at least
  EXPECT_THROW(fp::fit_context(h.o, h.d, h.t), marin::Error);
}

// --- holdouts ----------------------------------------------------------------------------------

TEST(ForecastParts, HoldoutsPredictEachRungFromTheSmallerOnesByHand) {
  // L∞ = 1, L − 1 = 1, 0.5, 0.2 at C = 1, 10, 100: the smallest two fit (L − 1) = 0.5^log10 C,
  // which at the third gives 0.25: predicted 1.25 against 1.2, +0.05 nats.
  fp::Series s;
  s.c = {1, 10, 100};
  s.mean = {2.0, 1.5, 1.2};
  sc::LawSpec spec;
  spec.l_inf = 1.0;
  const json h = fp::forward_holdouts(s, {"a", "b", "c"}, sc::law_fitter(spec));
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0]["rung"], "c");
  EXPECT_EQ(h[0]["from_rungs"], 2);
  EXPECT_NEAR(h[0]["predicted"].get<double>(), 1.25, 1e-12);
  EXPECT_NEAR(h[0]["diff_nats"].get<double>(), 0.05, 1e-12);
  // Summarised over two fractions: RMSE 0.05, beaten twice.
  const json sum = fp::summarise_forward({h, h});
  EXPECT_EQ(sum["n"], 2);
  EXPECT_NEAR(sum["rmse"].get<double>(), 0.05, 1e-12);
  EXPECT_EQ(sum["rungs"][0]["rung_beat_forecast"], 2);
  // With L∞ fitted two rungs cannot determine the law: the failure is recorded, not invented.
  spec.l_inf = std::nullopt;
  const json f = fp::forward_holdouts(s, {"a", "b", "c"}, sc::law_fitter(spec));
  EXPECT_TRUE(f[0]["predicted"].is_null());
  EXPECT_TRUE(f[0].contains("failed"));
}

// --- choose ------------------------------------------------------------------------------------

TEST(ForecastParts, ChooseTakesTheLawThatDrewTheSeries) {
  const double lnV = std::log(512.0);  // the tiny preset's vocabulary: the sigmoid's ceiling
  for (auto [truth, want] : {std::pair{sc::LawFamily::Sigmoid, sc::LawFamily::Sigmoid},
                             std::pair{sc::LawFamily::Power, sc::LawFamily::Power}}) {
    sc::PowerLawFit law;
    law.family = truth;
    law.ceiling = lnV;
    law.l_inf = 2.0;
    law.alpha = truth == sc::LawFamily::Sigmoid ? 0.8 : 0.3;
    const double mid = 1e6;
    law.A = std::pow(mid, law.alpha);
    Hand h(hand_ladder({mid / 4096, mid / 1024, mid / 256, mid / 64, mid / 16}, 1,
                       [&](double C, size_t, int) { return law.predict(C); }));
    h.o.law.l_inf = 2.0;
    h.o.compare = true;
    const fp::FitContext x = fp::fit_context(h.o, h.d, h.t);
    const fp::Choice c = fp::choose_law(x);
    EXPECT_EQ(c.spec.family, want) << c.comparison.dump();
    EXPECT_LT(c.comparison[sc::law_name(want)]["rmse"].get<double>(), 1e-6);
    // One budget: the chinchilla law is compared as unfittable, with why.
    EXPECT_TRUE(c.comparison["chinchilla"]["rmse"].is_null());
    EXPECT_TRUE(c.comparison["chinchilla"].contains("error"));
    if (want == sc::LawFamily::Sigmoid) {
      EXPECT_DOUBLE_EQ(c.spec.ceiling, lnV);
    }
    // A law given is kept; the comparison is still made.
    h.o.law_given = true;
    h.o.law.family = want == sc::LawFamily::Power ? sc::LawFamily::Sigmoid : sc::LawFamily::Power;
    const fp::Choice g = fp::choose_law(fp::fit_context(h.o, h.d, h.t));
    EXPECT_EQ(g.spec.family, h.o.law.family);
    EXPECT_TRUE(g.comparison.is_object());
  }
  // Without --compare the law is the one given and nothing is compared.
  Hand h(hand_ladder({1, 10, 100}, 1, [](double, size_t i, int) { return 3.0 - 0.5 * i; }));
  const fp::Choice c = fp::choose_law(fp::fit_context(h.o, h.d, h.t));
  EXPECT_EQ(c.spec.family, sc::LawFamily::Power);
  EXPECT_TRUE(c.comparison.is_null());
}

TEST(ForecastParts, ChooseRanksSeveralBudgetsByTheirEndOfRunHoldouts) {
  const json sum = {{"rmse", 0.1}, {"final", {{"rmse", 0.3}}}};
  EXPECT_DOUBLE_EQ(*fp::comparison_rmse(sum, false), 0.1);
  EXPECT_DOUBLE_EQ(*fp::comparison_rmse(sum, true), 0.3);
  EXPECT_FALSE(fp::comparison_rmse({{"n", 0}, {"rmse", nullptr}}, false));
  EXPECT_FALSE(fp::comparison_rmse({{"n", 0}, {"rmse", nullptr}}, true));  // no "final"
}

// --- interval ----------------------------------------------------------------------------------

TEST(ForecastParts, IntervalSurroundsThePredictionAndIsRefusedWithoutDegreesOfFreedom) {
  // Two seeds per rung scattered ±0.01 around L = 1.5 + 4·C^(−0.3): the 90% interval at the
  // target holds the law's prediction, and the same seed draws the same interval.
  sc::PowerLawFit law;
  law.A = 4, law.alpha = 0.3, law.l_inf = 1.5;
  const json ladder = hand_ladder({1e3, 1e4, 1e5, 1e6}, 2, [&](double C, size_t i, int s) {
    return law.predict(C) + (s ? 0.01 : -0.01) * (i % 2 ? 1 : 0.5);
  });
  const fp::Series s = fp::series_at(fp::group_runs(ladder), 19, "loss");
  sc::LawSpec spec;
  spec.l_inf = 1.5;
  const double target = 1e8;
  sc::SeriesForecast e;
  const auto iv = fp::compute_law_interval(s, spec, sc::law_fitter(spec), target, 0.9, 200, 7, e);
  ASSERT_TRUE(iv) << e.interval_error.value_or("");
  EXPECT_LT(iv->lo, law.predict(target));
  EXPECT_GT(iv->hi, law.predict(target));
  EXPECT_EQ(e.interval, iv->to_json());
  EXPECT_FALSE(e.interval_error);
  sc::SeriesForecast e2;
  const auto again =
      fp::compute_law_interval(s, spec, sc::law_fitter(spec), target, 0.9, 200, 7, e2);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->lo, iv->lo);
  EXPECT_EQ(again->hi, iv->hi);
  // One seed per rung and as many rungs as parameters: no noise to draw from.
  fp::Series bare;
  bare.c = {1e3, 1e4};
  bare.mean = {law.predict(1e3), law.predict(1e4)};
  bare.noise.runs = {1, 1};
  bare.noise.var_run = {0, 0};
  sc::SeriesForecast e3;
  EXPECT_FALSE(fp::compute_law_interval(bare, spec, sc::law_fitter(spec), target, 0.9, 50, 7, e3));
  ASSERT_TRUE(e3.interval);
  EXPECT_TRUE(e3.interval->is_null());  // recorded as null, with why
  EXPECT_TRUE(e3.interval_error);
}

// --- target ------------------------------------------------------------------------------------

TEST(ForecastParts, TargetTakesTheLaddersRulesUnlessOverridden) {
  Hand h(hand_ladder({1, 10, 100}, 1, [](double, size_t i, int) { return 3.0 - 0.5 * i; }));
  h.o.target_steps = 0;
  const sc::LadderConfig& r = h.d.recipe;  // the default recipe: batch 8·(d/256), 20 tokens/param
  fp::TargetPlan t = fp::plan_target(h.o, h.d);
  EXPECT_FALSE(t.batch_override);
  EXPECT_EQ(t.batch, r.batch.batch_for(h.o.target.hidden_dim));
  EXPECT_DOUBLE_EQ(t.tpp, 20);
  EXPECT_EQ(t.steps, r.steps_for(h.o.target, t.batch, 20));
  EXPECT_EQ(t.steps % sc::kFractions, 0);
  // A budget given: the steps follow it; steps given: they win.
  h.o.target_tokens_per_param = 40;
  EXPECT_EQ(fp::plan_target(h.o, h.d).steps, r.steps_for(h.o.target, t.batch, 40));
  h.o.target_steps = 60;
  h.o.target_batch = 3;
  t = fp::plan_target(h.o, h.d);
  EXPECT_EQ(t.steps, 60);
  EXPECT_EQ(t.batch, 3);
  EXPECT_TRUE(t.batch_override);
  // Refused: negative steps or budget, and a ladder of listed batch sizes without an override.
  h.o.target_steps = -1;
  EXPECT_THROW(fp::plan_target(h.o, h.d), marin::Error);
  h.o.target_steps = 0;
  h.o.target_tokens_per_param = -1;
  EXPECT_THROW(fp::plan_target(h.o, h.d), marin::Error);
  h.o.target_tokens_per_param = 0;
  h.o.target_batch = 0;
  h.d.recipe.batch.sizes = {4, 8};
  EXPECT_THROW(fp::plan_target(h.o, h.d), marin::Error);
}

// --- predict -----------------------------------------------------------------------------------

TEST(ForecastParts, CanaryPredictionsCollectEachFractionOfTheChosenLaw) {
  const json ladder = hand_ladder(
      {1, 10, 100}, 2, [](double, size_t i, int) { return 3.0 - 0.5 * i; }, true);
  const std::vector<fp::Group> groups = fp::group_runs(ladder);
  std::vector<sc::FractionFit> fits(3);
  fits[0].fraction = 0.05;
  fits[0].canaries = {{"r2", 1, 100.0, 2.5}};
  fits[1].fraction = 0.1;
  fits[2].fraction = 1.0;
  fits[2].canaries = {{"r2", 20, 2000.0, 2.1}};
  const std::vector<sc::CanaryForecast> c = fp::canary_predictions(groups, fits);
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].name, "r2");
  EXPECT_EQ(c[0].steps, 20);
  EXPECT_EQ(c[0].seeds, 2u);
  ASSERT_EQ(c[0].predictions.size(), 2u);
  EXPECT_EQ(c[0].predictions[1], (sc::CanaryForecast::At{1.0, 20, 2000.0, 2.1}));
  // A canary the law made no prediction for (another budget) is left out.
  EXPECT_TRUE(fp::canary_predictions(groups, {fits[1]}).empty());
}

// --- forecast.json ⇄ Forecast ------------------------------------------------------------------

TEST(ForecastJson, TheRegisteredForecastRoundTripsByteForByte) {
  // docs/forecast_cpu5.json, written by `marin forecast --compare` (canaries, clean-only fits,
  // intervals, the comparison, the macro-loss metric's definition): read and written again, the
  // same bytes; and the type read back from its JSON is the same type.
  const json j = json::parse(marin::read_file(MARIN_SOURCE_DIR "/docs/forecast_cpu5.json"));
  const sc::Forecast f = sc::Forecast::from_json(j);
  EXPECT_EQ(f.to_json().dump(2), j.dump(2));
  EXPECT_EQ(sc::Forecast::from_json(f.to_json()), f);
  // Typed fields read what the keys held.
  EXPECT_EQ(f.inputs.law.spec.family, sc::LawFamily::Sigmoid);
  EXPECT_EQ(f.fits.size(), 20u);
  ASSERT_NE(f.final_fit(), nullptr);
  EXPECT_EQ(f.final_fit()->all.predicted, f.prediction.final_loss);
  EXPECT_EQ(f.prediction.metric, "macro_loss");
  ASSERT_EQ(f.canaries.size(), 1u);
  EXPECT_EQ(f.canaries[0].name, "d192");
  EXPECT_TRUE(f.inputs.target.options);
  EXPECT_TRUE(f.final_fit()->clean);
}

TEST(ForecastJson, AForecastOfAHandMadeLadderRoundTrips) {
  // The real path: make_forecast on a small ladder (two seeds per rung, a clean-only loss, a
  // canary, --compare), its JSON through the type and back.
  marin::testing::TempDir dir("forecast-parts-json");
  sc::LadderConfig l = sc::LadderConfig::load(MARIN_SOURCE_DIR "/configs/ladder_tiny.toml");
  l.set_rows_data(dir.str("train.bin"), dir.str("valid.bin"));
  l.finalize();
  sc::PowerLawFit law;
  law.A = 4, law.alpha = 0.3, law.l_inf = 1.5;
  json ladder = hand_ladder(
      {1e2, 1e3, 1e4, 1e5}, 2,
      [&](double C, size_t i, int s) { return law.predict(C) + 0.003 * (s ? 1 : -1) * (1 + i); },
      /*canary=*/true, /*clean=*/true);
  ladder["ladder"] = l.to_json();
  ladder["ladder"]["canaries"] = {"r3"};
  ladder["format"] = "marin-ladder-v1";
  ladder["metric"] = "valid_ce";
  std::ofstream(dir.str("ladder.json")) << ladder.dump(2) << "\n";
  sc::ForecastOptions o;
  o.ladder_dir = dir.str();
  o.target_name = "tiny";
  o.target = marin::ModelConfig::preset("tiny");
  o.target_steps = 40;
  o.compare = true;
  const sc::Forecast f = sc::build_forecast(o);
  const json j = f.to_json();
  EXPECT_EQ(sc::Forecast::from_json(j), f);
  EXPECT_EQ(sc::Forecast::from_json(j).to_json().dump(), j.dump());
  // What it holds: canaries predicted at every fraction, the clean-only forecast, intervals.
  ASSERT_EQ(f.canaries.size(), 1u);
  EXPECT_EQ(f.canaries[0].predictions.size(), 20u);
  EXPECT_TRUE(f.prediction.clean_final_loss);
  EXPECT_TRUE(f.prediction.interval.is_object());
  EXPECT_TRUE(f.inputs.law.comparison.is_object());
  // make_forecast writes exactly this JSON (but for its creation time).
  json m = sc::make_forecast(o);
  m["created"] = j["created"];
  EXPECT_EQ(m.dump(), j.dump());
}
