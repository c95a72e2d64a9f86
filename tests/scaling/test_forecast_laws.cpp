// Forecasts worth pre-registering (docs/scaling.md; issue 17): every law family recovers a known
// law from a synthetic ladder with seeded noise; the prediction interval covers a new run at its
// nominal rate; forward holdouts by hand; seeds, canaries and the law comparison through
// make_forecast on synthetic ladder.json files (no training); and a target that differs from its
// forecast (batch, learning rate) refused by `marin train --forecast`, naming the field.
#include <fmt/core.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/hash.hpp"
#include "model/accounting.hpp"
#include "optim/hparams.hpp"
#include "scaling/fit.hpp"
#include "scaling/forecast.hpp"
#include "scaling/ladder.hpp"

using marin::testing::run;
using marin::testing::TempDir;
using nlohmann::json;
namespace sc = marin::scaling;

namespace {

// Deterministic standard normals (splitmix64 + Box–Muller), one stream per synthetic seed.
struct Gauss {
  uint64_t s;
  double u() {
    uint64_t z = (s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (double((z ^ (z >> 31)) >> 11) + 0.5) / double(1ull << 53);
  }
  double next() { return std::sqrt(-2 * std::log(u())) * std::cos(6.283185307179586 * u()); }
};

const std::string kTiny = MARIN_SOURCE_DIR "/configs/ladder_tiny.toml";

// ladder.json for configs/ladder_tiny.toml's recipe (rows data in `dir`) with synthetic curves:
// rung i has compute per step cps[i] over 20 steps and run (rung i, seed s) has loss
// loss(C, i, s) at compute C. `canary` marks the last rung a canary; `canary_done` trains it.
json synthetic_ladder(const TempDir& dir, const std::vector<double>& cps, int seeds,
                      const std::function<double(double, size_t, int)>& loss, bool canary = false,
                      bool canary_done = false) {
  // Loaded once per directory (the 200-ladder coverage test writes one file 200 times).
  static std::map<std::string, sc::LadderConfig> loaded;
  if (!loaded.count(dir.str())) {
    sc::LadderConfig l = sc::LadderConfig::load(kTiny);
    l.set_rows_data(dir.str("train.bin"), dir.str("valid.bin"));
    l.finalize();
    loaded.emplace(dir.str(), l);
  }
  const sc::LadderConfig& c = loaded.at(dir.str());
  json rungs = json::array();
  for (size_t i = 0; i < cps.size(); ++i) {
    const sc::Rung& base = c.rungs.at(std::min(i, c.rungs.size() - 1));
    const bool is_canary = canary && i + 1 == cps.size();
    for (int s = 0; s < seeds; ++s) {
      json r = base.summary();
      r["name"] = fmt::format("r{}", i);
      r["label"] = r["name"];
      r["run"] = seeds == 1 ? r["name"].get<std::string>() : fmt::format("r{}-seed{}", i, s);
      r["seed"] = s;
      r["canary"] = is_canary;
      r["compute_per_step"] = cps[i];
      r["steps"] = 20;
      r["status"] = is_canary && !canary_done ? "pending" : "done";
      if (r["status"] == "done") {
        json curve = json::array();
        for (int k = 1; k <= 20; ++k)
          curve.push_back({{"step", k},
                           {"fraction", k / 20.0},
                           {"compute", cps[i] * k},
                           {"loss", loss(cps[i] * k, i, s)}});
        r["curve"] = curve;
      }
      rungs.push_back(r);
    }
  }
  json ladder = c.to_json();
  if (canary) ladder["canaries"] = {fmt::format("r{}", cps.size() - 1)};
  const json j = {
      {"format", "marin-ladder-v1"}, {"ladder", ladder}, {"metric", "valid_ce"}, {"rungs", rungs}};
  // A plain write: write_file_atomic's fsync would dominate the 200-ladder coverage test.
  std::ofstream(dir.str("ladder.json")) << j.dump(2) << "\n";
  return j;
}

// The target of these tests: the `tiny` preset at the ladder's rule batch (width 64: 8) and
// 20 steps; its compute at 100% is what the synthetic rungs are placed against.
sc::ForecastOptions tiny_target(const TempDir& dir) {
  sc::ForecastOptions o;
  o.ladder_dir = dir.str();
  o.target_name = "tiny";
  o.target = marin::ModelConfig::preset("tiny");
  o.target_steps = 20;
  return o;
}
double tiny_target_compute() {
  return marin::forecast_flops_per_step(marin::ModelConfig::preset("tiny"), 8) * 20;
}

}  // namespace

// --- the law families ---------------------------------------------------------------------------

TEST(Laws, EachFamilyRecoversItsLawFromANoisyLadder) {
  // Six rungs over three decades, 0.2% noise on the loss; each family fitted to data drawn from
  // itself predicts the law 10× past the largest rung, and its parameters.
  const double lnV = std::log(512.0);
  struct Case {
    sc::LawFamily family;
    std::optional<double> l_inf;  // fitted when nullopt
    double A, alpha, truth_l_inf;
  };
  for (const Case& k : {Case{sc::LawFamily::Power, 1.5, 30.0, 0.1, 1.5},
                        Case{sc::LawFamily::Power, std::nullopt, 30.0, 0.1, 2.0},
                        Case{sc::LawFamily::Sigmoid, 1.0, std::exp(4.0), 0.3, 1.0},
                        Case{sc::LawFamily::Sigmoid, std::nullopt, std::exp(4.0), 0.3, 2.0}}) {
    sc::PowerLawFit truth;
    truth.family = k.family;
    truth.ceiling = lnV;
    truth.A = k.A, truth.alpha = k.alpha, truth.l_inf = k.truth_l_inf;
    Gauss g{42};
    std::vector<double> c, l;
    for (int i = 0; i < 6; ++i) {
      c.push_back(std::pow(10.0, 10 + 0.6 * i));
      l.push_back(truth.predict(c.back()) * (1 + 0.002 * g.next()));
    }
    sc::LawSpec spec;
    spec.family = k.family;
    spec.l_inf = k.l_inf;
    spec.ceiling = lnV;
    const sc::PowerLawFit f = sc::fit_law(c, l, spec);
    const std::string what =
        fmt::format("{} L∞ {}", sc::law_name(k.family), k.l_inf ? "fixed" : "fitted");
    EXPECT_EQ(f.family, k.family) << what;
    EXPECT_NEAR(f.alpha, k.alpha, 0.25 * k.alpha) << what;
    if (!k.l_inf) {
      EXPECT_NEAR(f.l_inf, k.truth_l_inf, 0.3) << what;
    }
    const double far = c.back() * 10;
    EXPECT_NEAR(f.predict(far), truth.predict(far), 0.02 * truth.predict(far)) << what;
    EXPECT_GT(f.r2, 0.99) << what;
    ASSERT_EQ(f.loo.errors.size(), 6u) << what;
    // Exact data: exactly recovered.
    std::vector<double> exact;
    for (double x : c) exact.push_back(truth.predict(x));
    const sc::PowerLawFit e = sc::fit_law(c, exact, spec);
    EXPECT_NEAR(e.predict(far), truth.predict(far), 1e-6) << what;
  }
  // The sigmoid needs every loss under its ceiling.
  sc::LawSpec s;
  s.family = sc::LawFamily::Sigmoid;
  s.l_inf = 1.0;
  s.ceiling = 3.0;
  EXPECT_THROW(sc::fit_law({1, 10, 100}, {3.5, 2.5, 2.0}, s), marin::Error);
  EXPECT_THROW(sc::parse_law("chinchila"), marin::Error);
}

TEST(Laws, WeightsFollowTheSeedSpread) {
  // One rung far off the law but with a tiny weight barely moves the fit; with equal weights it
  // does.
  const std::vector<double> c = {1e10, 1e11, 1e12, 1e13};
  std::vector<double> l;
  for (double x : c) l.push_back(1.5 + 30 * std::pow(x, -0.1));
  l[1] += 0.2;
  const sc::PowerLawFit eq = sc::fit_fixed(c, l, 1.5);
  const sc::PowerLawFit w = sc::fit_fixed(c, l, 1.5, {1, 1e-6, 1, 1});
  EXPECT_NEAR(w.alpha, 0.1, 1e-4);
  EXPECT_GT(std::abs(eq.alpha - 0.1), 10 * std::abs(w.alpha - 0.1));
  EXPECT_THROW(sc::fit_fixed(c, l, 1.5, {1, 1}), marin::Error);
}

// --- the prediction interval
// ----------------------------------------------------------------------

TEST(Interval, NinetyPercentCoversANewRunIn85To95PercentOf200Ladders) {
  // 200 synthetic ladders (4 rungs × 3 seeds, σ = 0.02 nats per run, from L = 1.5 + (C/C_T)^−¼)
  // through make_forecast: its 90% interval at 100% must contain a new run of the target (the
  // law plus its own seed noise) 85–95% of the time.
  TempDir dir("forecast-coverage");
  const double ct = tiny_target_compute(), sigma = 0.02;
  const std::vector<double> cps = {ct / 64 / 20, ct / 32 / 20, ct / 16 / 20, ct / 8 / 20};
  auto law = [&](double C) { return 1.5 + std::pow(C / ct, -0.25); };
  int covered = 0, total = 0;
  double width = 0;
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    Gauss g{seed * 7919};
    synthetic_ladder(dir, cps, 3, [&](double C, size_t, int) { return law(C) + sigma * g.next(); });
    sc::ForecastOptions o = tiny_target(dir);
    o.law.l_inf = 1.5;
    o.interval_replicates = 200;
    const json f = sc::make_forecast(o);
    const json& iv = f["prediction"]["interval"];
    ASSERT_TRUE(iv.is_object()) << f["fits"][19].dump();
    ASSERT_EQ(f["inputs"]["target"]["compute"].get<double>(), ct);
    const double actual = law(ct) + sigma * g.next();
    covered += actual >= iv["lo"].get<double>() && actual <= iv["hi"].get<double>();
    width += iv["hi"].get<double>() - iv["lo"].get<double>();
    ++total;
  }
  const double rate = double(covered) / total;
  std::cout << "coverage " << rate << ", mean width " << width / total << "\n";
  EXPECT_GE(rate, 0.85) << "mean width " << width / total;
  EXPECT_LE(rate, 0.95) << "mean width " << width / total;
  // Wider than the target's own noise alone (±1.645σ), as the fit's own uncertainty adds to it.
  EXPECT_GT(width / total, 2 * 1.645 * sigma);
}

// --- forward holdouts ---------------------------------------------------------------------------

TEST(ForwardHoldout, ThreeRungsByHand) {
  // L∞ = 1 and L − 1 = 1, 0.5, 0.2 at compute 1, 10, 100 (× the step) at every fraction. The
  // smallest two rungs fit (L − 1) = 0.5^log10(C/step): at the third, 0.25, so predicted 1.25
  // against an actual 1.2: +0.05 nats (it beat its forecast), at each of the 20 fractions; the
  // smallest two are not held out.
  TempDir dir("forecast-forward");
  const double base[] = {2.0, 1.5, 1.2};
  synthetic_ladder(dir, {1, 10, 100}, 1, [&](double, size_t i, int) { return base[i]; });
  sc::ForecastOptions o = tiny_target(dir);
  o.law.l_inf = 1.0;
  const json f = sc::make_forecast(o);
  for (auto& e : f["fits"]) {
    ASSERT_EQ(e["forward"].size(), 1u) << e["forward"].dump();
    const json& h = e["forward"][0];
    EXPECT_EQ(h["rung"], "r2");
    EXPECT_EQ(h["from_rungs"], 2);
    EXPECT_NEAR(h["predicted"].get<double>(), 1.25, 1e-12);
    EXPECT_NEAR(h["diff_nats"].get<double>(), 0.05, 1e-12);
  }
  const json& s = f["forward_holdouts"];
  EXPECT_NEAR(s["rmse"].get<double>(), 0.05, 1e-12);
  EXPECT_EQ(s["rungs"][0]["rung_beat_forecast"], 20);
  EXPECT_EQ(s["n"], 20);
  // With L∞ fitted (3 parameters) two rungs cannot predict the third: recorded, not invented.
  o.law.l_inf = std::nullopt;
  const json ff = sc::make_forecast(o);
  EXPECT_TRUE(ff["fits"][19]["forward"][0]["predicted"].is_null());
  EXPECT_TRUE(ff["fits"][19]["forward"][0].contains("failed"));
}

TEST(Compare, ChoosesTheLawOfSmallestForwardError) {
  // Rungs drawn from a sigmoid in ln C (leaving the ln V plateau): the comparison picks the
  // sigmoid; drawn from a power law, the power law. The choice and both errors are recorded.
  TempDir dir("forecast-compare");
  const double ct = tiny_target_compute(), lnV = std::log(512.0);
  const std::vector<double> cps = {ct / 256 / 20, ct / 64 / 20, ct / 16 / 20, ct / 4 / 20,
                                   ct / 2 / 20};
  for (auto [truth, want] :
       {std::pair{sc::LawFamily::Sigmoid, "sigmoid"}, std::pair{sc::LawFamily::Power, "power"}}) {
    sc::PowerLawFit law;
    law.family = truth;
    law.ceiling = lnV;
    law.l_inf = 2.0;
    law.alpha = truth == sc::LawFamily::Sigmoid ? 0.8 : 0.3;
    // The same size of drop over the rungs: centred at the largest rung's compute.
    law.A = truth == sc::LawFamily::Sigmoid ? std::pow(ct / 8, 0.8) : std::pow(ct / 8, 0.3);
    synthetic_ladder(dir, cps, 1, [&](double C, size_t, int) { return law.predict(C); });
    sc::ForecastOptions o = tiny_target(dir);
    o.law.l_inf = 2.0;
    o.compare = true;
    const json f = sc::make_forecast(o);
    const json& l = f["inputs"]["law"];
    EXPECT_EQ(l["family"], want) << l.dump();
    EXPECT_EQ(l["chosen_by"], "smallest forward-holdout RMSE over every fraction");
    ASSERT_TRUE(l["comparison"]["power"]["rmse"].is_number()) << l.dump();
    ASSERT_TRUE(l["comparison"]["sigmoid"]["rmse"].is_number()) << l.dump();
    EXPECT_LT(l["comparison"][want]["rmse"].get<double>(), 1e-6);
    // --law given: kept, the comparison still recorded.
    o.law_given = true;
    o.law.family = truth == sc::LawFamily::Sigmoid ? sc::LawFamily::Power : sc::LawFamily::Sigmoid;
    const json g = sc::make_forecast(o);
    EXPECT_NE(g["inputs"]["law"]["family"], want);
    EXPECT_TRUE(g["inputs"]["law"]["comparison"].is_object());
  }
}

// --- seeds and canaries
// ---------------------------------------------------------------------------

TEST(Seeds, EachSeedIsARunAndTheFitUsesTheMeans) {
  auto c = sc::LadderConfig::from_toml_text(R"([ladder]
widths = [32, 64]
layers = [2, 2]
tokens_per_param = 0.25
seeds = [0, 1]
lr_multiplier = 2.0
[rung.d64]
seeds = [5, 6, 7]
)" + marin::testing::kTinyFamily,
                                            "s");
  c.set_rows_data("t.bin", "v.bin");
  c.finalize();
  ASSERT_EQ(c.rungs.size(), 5u);
  const char* runs[] = {"d32-seed0", "d32-seed1", "d64-seed5", "d64-seed6", "d64-seed7"};
  const uint64_t seeds[] = {0, 1, 5, 6, 7};
  for (size_t i = 0; i < 5; ++i) {
    EXPECT_EQ(c.rungs[i].run, runs[i]);
    EXPECT_EQ(c.rungs[i].options.seed, seeds[i]);
    const sc::Rung& r = c.rungs[i];
    const marin::HyperParams h =
        marin::heuristic_hparams(r.model.hidden_dim, r.batch, r.model.seq_len, r.steps);
    EXPECT_DOUBLE_EQ(r.options.optim.muonh_lr, 2.0 * h.muonh_lr) << r.run;
    EXPECT_DOUBLE_EQ(r.options.optim.adam_lr, 2.0 * h.adam_lr) << r.run;
  }
  EXPECT_EQ(c.to_json()["lr_multiplier"], 2.0);
  EXPECT_THROW(sc::LadderConfig::from_toml_text(
                   "[ladder]\nwidths = [32]\nlayers = [2]\nseed = 1\nseeds = [1]\n", "x"),
               marin::Error);
  EXPECT_THROW(sc::LadderConfig::from_toml_text(
                   "[ladder]\nwidths = [32]\nlayers = [2]\nlr_multiplier = 0\n", "x"),
               marin::Error);

  // make_forecast fits each rung's mean over its seeds, weighted by the inverse of its
  // variance: a rung whose seeds disagree weighs less.
  TempDir dir("forecast-seeds");
  const double ct = tiny_target_compute();
  const std::vector<double> cps = {ct / 64 / 20, ct / 32 / 20, ct / 16 / 20, ct / 8 / 20};
  synthetic_ladder(dir, cps, 2, [&](double C, size_t i, int s) {
    return 1.5 + std::pow(C / ct, -0.25) + (i == 1 ? 0.05 : 0.005) * (s == 0 ? 1 : -1);
  });
  sc::ForecastOptions o = tiny_target(dir);
  o.law.l_inf = 1.5;
  const json f = sc::make_forecast(o);
  const json& e = f["fits"][19];
  ASSERT_EQ(e["points"].size(), 8u);
  ASSERT_EQ(e["means"].size(), 4u);
  for (size_t i = 0; i < 4; ++i)
    EXPECT_NEAR(e["means"][i].get<double>(), 1.5 + std::pow(cps[i] * 20 / ct, -0.25), 1e-12);
  EXPECT_LT(e["weights"][1].get<double>(), 0.5 * e["weights"][0].get<double>());
  EXPECT_NEAR(e["predicted_loss"].get<double>(), 2.5, 1e-9);  // the means lie on the law
  EXPECT_EQ(e["interval"]["noise_source"], "seeds and residuals");
  EXPECT_EQ(f["inputs"]["rungs"][0]["seeds"].size(), 2u);
}

TEST(Canary, RegisteredWithTheTargetAndScoredOnceTrained) {
  TempDir dir("forecast-canary");
  const double ct = tiny_target_compute();
  const std::vector<double> cps = {ct / 64 / 20, ct / 32 / 20, ct / 16 / 20, ct / 8 / 20};
  auto law = [&](double C) { return 1.5 + std::pow(C / ct, -0.25); };
  // The canary (r3) is pending: the forecast fits r0–r2 and predicts it.
  synthetic_ladder(
      dir, cps, 1, [&](double C, size_t, int) { return law(C); }, true, false);
  sc::ForecastOptions o = tiny_target(dir);
  o.law.l_inf = 1.5;
  const json f = sc::make_forecast(o);
  ASSERT_EQ(f["canaries"].size(), 1u);
  EXPECT_EQ(f["fits"][19]["points"].size(), 3u);
  const json& pred = f["canaries"][0]["predictions"];
  ASSERT_EQ(pred.size(), 20u);
  EXPECT_NEAR(pred[19]["predicted_loss"].get<double>(), law(cps[3] * 20), 1e-9);
  EXPECT_THROW(sc::score_canaries(f), marin::Error);  // not trained yet
  // Trained 0.01 nats above its law: scored as a miss by exactly that.
  synthetic_ladder(
      dir, cps, 1, [&](double C, size_t i, int) { return law(C) + (i == 3 ? 0.01 : 0.0); }, true,
      true);
  const json s = sc::score_canaries(f);
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0]["name"], "r3");
  EXPECT_NEAR(s[0]["diff_nats"].get<double>(), 0.01, 1e-9);
  EXPECT_EQ(s[0]["verdict"], "miss");
  EXPECT_EQ(s[0]["fractions"].size(), 20u);
  // The same by hand from the command line.
  std::ofstream(dir.str("f.json")) << f.dump();
  auto r = run("forecast --score-canaries " + dir.str("f.json") + " --ladder " + dir.str());
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("canary r3: predicted"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(": miss by +0.0100 nats"), std::string::npos) << r.out;
}

// --- a forecast binds its target
// ------------------------------------------------------------------

TEST(Binding, BatchRuleNotRoundedOffSilently) {
  // base 3 at width 32, multiple 2: the rule says 3, 6, 9 for widths 32, 64, 96; rounding to
  // multiples of 2 pushes 32 and 96 off it, and the ladder names them.
  ::testing::internal::CaptureStderr();
  auto c = sc::LadderConfig::from_toml_text(
      "[ladder]\nwidths = [32, 64, 96]\nlayers = [2, 2, 2]\n[batch]\nbase = 3\nbase_width = "
      "32\nmultiple = 2\n[family]\nhead_dim = 8\nnum_experts = 8\ntop_k = 2\n",
      "b.toml");
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("rung d32: batch 4 is off the batch rule's 3"), std::string::npos) << err;
  EXPECT_NE(err.find("rung d96: batch 10 is off the batch rule's 9"), std::string::npos) << err;
  EXPECT_EQ(err.find("rung d64"), std::string::npos) << err;
  // multiple = 1 (the default): every rung on the rule, no warning.
  ::testing::internal::CaptureStderr();
  auto d = sc::LadderConfig::from_toml_text(
      "[ladder]\nwidths = [32, 64, 96]\nlayers = [2, 2, 2]\n[batch]\nbase = 3\nbase_width = "
      "32\n[family]\nhead_dim = 8\nnum_experts = 8\ntop_k = 2\n",
      "b.toml");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  EXPECT_EQ(d.rungs[0].batch, 3);
  EXPECT_EQ(d.rungs[2].batch, 9);
}

TEST(Binding, TrainForecastRefusesATargetThatDiffers) {
  // A forecast on configs/ladder_tiny.toml's recipe (synthetic curves: no ladder training), its
  // target `tiny` at the rule's batch, then `marin train --forecast` with the forecast's options
  // (accepted) and with a changed batch or learning rate (refused, naming the field).
  TempDir dir("forecast-binding");
  marin::testing::write_rows(dir.str("train.bin"), 64, 64, 512, 7);
  marin::testing::write_rows(dir.str("valid.bin"), 8, 64, 512, 99);
  const double ct = tiny_target_compute();
  synthetic_ladder(dir, {ct / 64 / 20, ct / 32 / 20, ct / 16 / 20}, 1,
                   [&](double C, size_t, int) { return 1.5 + std::pow(C / ct, -0.25); });
  auto r = run("forecast --ladder " + dir.str() +
               " --preset tiny --target-steps 20 --l-inf 1 --out " + dir.str("f.json"));
  ASSERT_EQ(r.code, 0) << r.out;
  const json f = json::parse(marin::read_file(dir.str("f.json")));
  const json& tg = f["inputs"]["target"];
  // The batch rule of ladder_tiny (base 4 at width 32, multiple 2) at width 64: 8.
  EXPECT_EQ(tg["batch"], 8);
  EXPECT_EQ(tg["batch_source"], "the ladder's batch rule");
  EXPECT_EQ(tg["seed"], 1);  // ladder_tiny's seed
  EXPECT_EQ(tg["options"]["batch"], 8);
  EXPECT_EQ(tg["options"]["model"], marin::ModelConfig::preset("tiny").to_json());
  const std::string base = "train --preset tiny --rows " + dir.str("train.bin") + " --valid-rows " +
                           dir.str("valid.bin") + " --forecast " + dir.str("f.json") +
                           " --steps 20";
  r = run(base + " --batch 6 --seed 1 --out " + dir.str("t-batch"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("not the forecast's target: batch: forecast 8, run 6"), std::string::npos)
      << r.out;
  r = run(base + " --batch 8 --seed 1 --muonh-lr 0.03 --out " + dir.str("t-lr"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("optimizer.muonh_lr: forecast"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("batch: forecast"), std::string::npos) << r.out;
  r = run(base + " --batch 8 --seed 2 --out " + dir.str("t-seed"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("seed: forecast 1, run 2"), std::string::npos) << r.out;
  r = run(base + " --batch 8 --seed 1 --out " + dir.str("t-ok"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("forecast: predicted"), std::string::npos) << r.out;
  const json rep = json::parse(marin::read_file(dir.str("t-ok/forecast_report.json")));
  EXPECT_TRUE(rep["interval"].is_object()) << rep.dump();

  // A ladder with lr_multiplier = 2: the target's rates are twice the rule, so a target run at
  // the rule's rates is refused, and the forecast says which flags to give.
  json lj = json::parse(marin::read_file(dir.str("ladder.json")));
  lj["ladder"]["lr_multiplier"] = 2.0;
  marin::write_file_atomic(dir.str("ladder.json"), lj.dump(2));
  r = run("forecast --ladder " + dir.str() + " --preset tiny --target-steps 20 --l-inf 1 --out " +
          dir.str("f2.json"));
  ASSERT_EQ(r.code, 0) << r.out;
  // issue 42: the forecast prints the whole command that trains its target (model, bound
  // options, the ladder's data, --forecast): run as printed, it is accepted.
  const std::string printed = "train the target:\n  marin ";
  const size_t at = r.out.find(printed);
  ASSERT_NE(at, std::string::npos) << r.out;
  std::string command = r.out.substr(at + printed.size());
  command = command.substr(0, command.find('\n'));
  const std::string out_flag = " --out runs/tiny";
  ASSERT_EQ(command.substr(command.size() - out_flag.size()), out_flag) << command;
  EXPECT_NE(command.find("train --preset tiny --batch 8 --steps 20 --seed 1 --muonh-lr"),
            std::string::npos)
      << command;
  EXPECT_NE(command.find("--rows " + dir.str("train.bin")), std::string::npos) << command;
  command.resize(command.size() - out_flag.size());
  const auto printed_run = run(command + " --out " + dir.str("t2-printed"));
  ASSERT_EQ(printed_run.code, 0) << command << "\n" << printed_run.out;
  EXPECT_NE(printed_run.out.find("forecast: predicted"), std::string::npos) << printed_run.out;
  const json f2 = json::parse(marin::read_file(dir.str("f2.json")));
  const marin::HyperParams h = marin::heuristic_hparams(64, 4, 64, 20);
  EXPECT_DOUBLE_EQ(f2["inputs"]["target"]["options"]["optimizer"]["muonh_lr"].get<double>(),
                   2 * h.muonh_lr);
  EXPECT_EQ(f2["inputs"]["target"]["lr_multiplier"], 2.0);
  const std::string base2 = "train --preset tiny --rows " + dir.str("train.bin") +
                            " --valid-rows " + dir.str("valid.bin") + " --forecast " +
                            dir.str("f2.json") + " --steps 20 --batch 4 --seed 1";
  r = run(base2 + " --out " + dir.str("t2-rule"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("optimizer.adam_lr: forecast"), std::string::npos) << r.out;
  r = run("train --preset tiny --rows " + dir.str("train.bin") + " --valid-rows " +
          dir.str("valid.bin") + " --forecast " + dir.str("f2.json") + " " +
          f2["inputs"]["target"]["train_flags"].get<std::string>() + " --out " + dir.str("t2-ok"));
  ASSERT_EQ(r.code, 0) << r.out;
}

TEST(Degenerate, CurvesWhoseComputeCannotBeFittedAreRefusedNotForecastAsNull) {
  // The hostile probe of issue 37: curves whose compute is all equal, zero, negative or 1e308
  // gave exit 0 and a forecast.json with "final_loss": null. Now `marin forecast` exits 1 naming
  // the law and why it cannot be fitted, and writes no forecast.
  TempDir dir("forecast-degenerate");
  const double ct = tiny_target_compute();
  const std::vector<double> cps = {ct / 64 / 20, ct / 32 / 20, ct / 16 / 20};
  const struct {
    const char* name;
    std::function<double(size_t, int)> compute;  // of rung i at step k (1 … 20)
  } cases[] = {
      {"equal", [&](size_t, int) { return ct; }},
      {"zero", [](size_t, int) { return 0.0; }},
      {"negative", [&](size_t i, int k) { return -cps[i] * k; }},
      {"huge", [](size_t, int) { return 1e308; }},
  };
  for (const auto& c : cases) {
    json lj = synthetic_ladder(
        dir, cps, 1, [&](double C, size_t, int) { return 1.5 + std::pow(C / ct, -0.25); });
    for (size_t i = 0; i < cps.size(); ++i)
      for (int k = 1; k <= 20; ++k) lj["rungs"][i]["curve"][k - 1]["compute"] = c.compute(i, k);
    marin::write_file_atomic(dir.str("ladder.json"), lj.dump(2));
    const std::string out = dir.str(std::string(c.name) + ".json");
    const auto r = run("forecast --ladder " + dir.str() +
                       " --preset tiny --target-steps 20 --l-inf 1 --out " + out);
    EXPECT_EQ(r.code, 1) << c.name << ": " << r.out;
    EXPECT_NE(r.out.find("forecast: the law"), std::string::npos) << c.name << ": " << r.out;
    EXPECT_NE(r.out.find("cannot be fitted on the ladder's complete curves: "), std::string::npos)
        << c.name << ": " << r.out;
    EXPECT_FALSE(std::filesystem::exists(out)) << c.name;
  }
}

// --- token budgets and the chinchilla law -------------------------------------------------------

TEST(Budgets, EachBudgetIsARunWithItsOwnSchedule) {
  const std::string& family = marin::testing::kTinyFamily;
  auto c = sc::LadderConfig::from_toml_text(R"([ladder]
widths = [32, 64]
layers = [2, 2]
tokens_per_param = [0.25, 0.5]
seeds = [0, 1]
[rung.d64]
tokens_per_param = 1.0
seeds = [3]
)" + family,
                                            "b");
  c.set_rows_data("t.bin", "v.bin");
  c.finalize();
  ASSERT_EQ(c.rungs.size(), 5u);
  const char* runs[] = {"d32-tpp0.25-seed0", "d32-tpp0.25-seed1", "d32-tpp0.5-seed0",
                        "d32-tpp0.5-seed1", "d64"};
  const double tpp[] = {0.25, 0.25, 0.5, 0.5, 1.0};
  for (size_t i = 0; i < 5; ++i) {
    const sc::Rung& r = c.rungs[i];
    EXPECT_EQ(r.run, runs[i]);
    EXPECT_EQ(r.tokens_per_param, tpp[i]) << r.run;
    // Each budget its own schedule: steps from its own budget, rates from its own steps.
    EXPECT_EQ(r.steps, c.steps_for(r.model, r.batch, tpp[i])) << r.run;
    EXPECT_EQ(r.options.steps, r.steps) << r.run;
    EXPECT_EQ(r.eval_every * sc::kFractions, r.steps) << r.run;
    const marin::HyperParams h =
        marin::heuristic_hparams(r.model.hidden_dim, r.batch, r.model.seq_len, r.steps);
    EXPECT_DOUBLE_EQ(r.options.optim.eps, h.eps) << r.run;
    EXPECT_EQ(r.summary()["tokens_per_param"], tpp[i]) << r.run;
    EXPECT_EQ(r.summary()["label"], i < 2 ? "d32-tpp0.25" : i < 4 ? "d32-tpp0.5" : "d64");
  }
  EXPECT_EQ(c.rungs[0].name, "d32");
  EXPECT_EQ(c.rungs[0].budget_steps,
            marin::steps_for_budget(c.rungs[0].model, c.rungs[0].batch, 0.25));
  EXPECT_GT(c.rungs[2].budget_steps, c.rungs[0].budget_steps);
  EXPECT_NE(c.rungs[0].options.to_json(), c.rungs[2].options.to_json());
  // Recorded in ladder.json's recipe: the first budget is the target's default.
  const json j = c.to_json();
  EXPECT_EQ(j["tokens_per_param"], 0.25);
  EXPECT_EQ(j["budgets"], json::array({0.25, 0.5}));
  const sc::LadderConfig back = sc::LadderConfig::recipe_from_json(j, "j");
  EXPECT_EQ(back.budgets, (std::vector<double>{0.25, 0.5}));

  // Clear errors naming the key.
  auto error_of = [&](const std::string& ladder) {
    try {
      sc::LadderConfig::from_toml_text(ladder + family, "e.toml");
    } catch (const marin::Error& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  const std::string head = "[ladder]\nwidths = [32]\nlayers = [2]\n";
  for (const char* bad :
       {"tokens_per_param = []", "tokens_per_param = [1, 1]", "tokens_per_param = [1, -2]",
        "tokens_per_param = \"5\"", "tokens_per_param = [1, \"x\"]"}) {
    const std::string e = error_of(head + bad + "\n");
    EXPECT_NE(e.find("'tokens_per_param'"), std::string::npos) << bad << ": " << e;
    EXPECT_NE(e.find("e.toml [ladder]"), std::string::npos) << bad << ": " << e;
  }
  const std::string e =
      error_of(head + "tokens_per_param = [1, 2]\n[rung.d32]\ntokens_per_param = 0\n");
  EXPECT_NE(e.find("[rung.d32]: 'tokens_per_param' must be positive"), std::string::npos) << e;

  // The dry run lists every run with its budget.
  TempDir dir("budgets-dry");
  std::ofstream(dir.str("l.toml")) << "[ladder]\nwidths = [32, 48]\nlayers = [2, 2]\n"
                                      "tokens_per_param = [0.25, 1]\n"
                                   << family;
  auto r = run("ladder --config " + dir.str("l.toml") + " --dry-run");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("0.25, 1 tokens per active parameter"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("d48-tpp1 "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("4 runs, C = "), std::string::npos) << r.out;
}

namespace {

// A known chinchilla law around the `tiny` target (N_T active parameters, D_T = 20 × 8 × 64
// tokens): E + A/N^α + B/D^β with A/N_T^α = 0.8 and B/D_T^β = 0.4 (every rung's loss under the
// sigmoid's ceiling ln 512).
struct ChinchillaTruth {
  double E = 1.5, alpha = 0.34, beta = 0.28, A = 0, B = 0, nt = 0, dt = 0;
  ChinchillaTruth() {
    nt = double(marin::account(marin::ModelConfig::preset("tiny")).active_params);
    dt = 20.0 * 8 * 64;
    A = 0.8 * std::pow(nt, alpha);
    B = 0.4 * std::pow(dt, beta);
  }
  double operator()(double n, double d) const {
    return E + A * std::pow(n, -alpha) + B * std::pow(d, -beta);
  }
  double ratio() const { return dt / nt; }  // the target's tokens per parameter
};

// ladder.json of rungs at N_T/32, /16, /8, /4 (and a canary at N_T/2 when asked), each at the
// budgets `budgets` (× the target's tokens per parameter) and `seeds` seeds; run (rung i, budget
// b, seed s) has loss(N, D·g, i, s) at fraction g.
json nd_ladder(const TempDir& dir, const std::vector<double>& budgets, int seeds,
               const std::function<double(double, double, size_t, int)>& loss,
               bool canary = false) {
  const ChinchillaTruth t;
  json base = synthetic_ladder(dir, {1}, 1, [](double, size_t, int) { return 3.0; });
  const json proto = base["rungs"][0];
  json rungs = json::array();
  const size_t n_rungs = canary ? 5 : 4;
  for (size_t i = 0; i < n_rungs; ++i) {
    const double n = std::round(t.nt / std::pow(2.0, 5 - double(i)));
    for (double bm : budgets) {
      const double tpp = bm * t.ratio(), d = tpp * n;
      for (int s = 0; s < seeds; ++s) {
        json r = proto;
        r["name"] = fmt::format("r{}", i);
        r["label"] =
            budgets.size() == 1 ? r["name"].get<std::string>() : sc::budget_label(r["name"], tpp);
        r["run"] = fmt::format("{}-seed{}", r["label"].get<std::string>(), s);
        r["seed"] = s;
        r["tokens_per_param"] = tpp;
        r["active_params"] = n;
        r["tokens"] = d;
        r["steps"] = 20;
        r["compute_per_step"] = 6 * n * d / 20;
        r["canary"] = canary && i + 1 == n_rungs;
        json curve = json::array();
        for (int k = 1; k <= 20; ++k)
          curve.push_back({{"step", k},
                           {"fraction", k / 20.0},
                           {"compute", 6 * n * d * k / 20},
                           {"loss", loss(n, d * k / 20, i, s)}});
        r["curve"] = curve;
        rungs.push_back(r);
      }
    }
  }
  base["rungs"] = rungs;
  base["ladder"]["tokens_per_param"] = budgets[0] * t.ratio();
  std::vector<double> b;
  for (double x : budgets) b.push_back(x * t.ratio());
  base["ladder"]["budgets"] = b;
  if (canary) base["ladder"]["canaries"] = {"r4"};
  std::ofstream(dir.str("ladder.json")) << base.dump(2) << "\n";
  return base;
}

sc::NDPoints nd_points(const ChinchillaTruth& t, double noise, uint64_t seed) {
  sc::NDPoints p;
  Gauss g{seed};
  for (int i = 0; i < 5; ++i)
    for (double bm : {0.5, 1.0, 2.0, 4.0}) {
      const double n = t.nt / std::pow(2.0, 5 - i), d = bm * t.ratio() * n;
      p.n.push_back(n), p.d.push_back(d), p.rung.push_back(i), p.budget.push_back(bm);
      p.loss.push_back(t(n, d) * (1 + noise * g.next()));
    }
  return p;
}

}  // namespace

TEST(Chinchilla, RecoversAKnownLawByVariableProjection) {
  const ChinchillaTruth t;
  // Exact points: exactly recovered, E fitted or fixed.
  for (std::optional<double> e : {std::optional<double>(), std::optional<double>(1.5)}) {
    const sc::ChinchillaFit f = sc::fit_chinchilla_law(nd_points(t, 0, 1), e);
    const std::string what = e ? "E fixed" : "E fitted";
    EXPECT_NEAR(f.alpha, t.alpha, 1e-4) << what;
    EXPECT_NEAR(f.beta, t.beta, 1e-4) << what;
    EXPECT_NEAR(f.E, t.E, 1e-4) << what;
    EXPECT_NEAR(f.A / t.A, 1, 1e-3) << what;
    EXPECT_NEAR(f.B / t.B, 1, 1e-3) << what;
    EXPECT_NEAR(f.predict(t.nt, t.dt), t(t.nt, t.dt), 1e-6) << what;
    EXPECT_EQ(f.e_fitted, !e) << what;
    ASSERT_EQ(f.loo.errors.size(), 20u) << what;  // every budget of a rung left out together
    EXPECT_LT(f.loo.rmse, 1e-5) << what;
    EXPECT_GT(f.r2, 1 - 1e-9) << what;
  }
  // 0.3% noise: the parameters within tolerance and the target (2× the largest rung) within 1%.
  for (uint64_t seed : {3, 4, 5}) {
    const sc::ChinchillaFit f = sc::fit_chinchilla_law(nd_points(t, 0.003, seed), std::nullopt);
    EXPECT_NEAR(f.alpha, t.alpha, 0.1) << seed;
    EXPECT_NEAR(f.beta, t.beta, 0.1) << seed;
    EXPECT_NEAR(f.predict(t.nt, t.dt), t(t.nt, t.dt), 0.01 * t(t.nt, t.dt)) << seed;
    EXPECT_GT(f.r2, 0.99) << seed;
  }
  EXPECT_EQ(sc::parse_law("chinchilla"), sc::LawFamily::Chinchilla);
  sc::LawSpec spec;
  spec.family = sc::LawFamily::Chinchilla;
  EXPECT_EQ(spec.parameters(), 4);  // E fixed
  spec.l_inf = std::nullopt;
  EXPECT_EQ(spec.parameters(), 5);
}

TEST(Chinchilla, RefusesOneBudgetNamingWhy) {
  const ChinchillaTruth t;
  sc::NDPoints p = nd_points(t, 0, 1), one;
  std::vector<bool> keep;
  for (double b : p.budget) keep.push_back(b == 1.0);
  one = p.subset(keep);
  ASSERT_EQ(one.loss.size(), 5u);
  try {
    sc::fit_chinchilla(one, std::nullopt);
    FAIL() << "one budget was fitted";
  } catch (const marin::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("2 or more token budgets"), std::string::npos) << m;
    EXPECT_NE(m.find("decaying schedule"), std::string::npos) << m;
  }
  // Through make_forecast: a ladder of one budget is refused for --law chinchilla, and --compare
  // records why the chinchilla law is absent.
  TempDir dir("chinchilla-one");
  nd_ladder(dir, {1.0}, 1, [&](double n, double d, size_t, int) { return t(n, d); });
  sc::ForecastOptions o = tiny_target(dir);
  o.law.family = sc::LawFamily::Chinchilla;
  try {
    sc::make_forecast(o);
    FAIL() << "a forecast of one budget used the chinchilla law";
  } catch (const marin::Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("--law chinchilla needs rungs trained at 2 or more token budgets, and the "
                     "ladder has 1"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("decaying schedule"), std::string::npos) << m;
  }
  o.law.family = sc::LawFamily::Power;
  o.law.l_inf = 1.5;
  o.compare = true;
  const json f = sc::make_forecast(o);
  const json& ch = f["inputs"]["law"]["comparison"]["chinchilla"];
  EXPECT_TRUE(ch["rmse"].is_null()) << ch.dump();
  EXPECT_NE(ch["error"].get<std::string>().find("2 or more token budgets"), std::string::npos);
  EXPECT_NE(f["inputs"]["law"]["family"], "chinchilla");
}

TEST(Chinchilla, ForecastWithItsDiagnosticsAndComparison) {
  // Four rungs × three budgets (½, 1, 2 × the target's tokens per parameter) from a known law,
  // exact, and a canary: the forecast recovers the target's loss; leave-one-rung-out, forward
  // holdouts, the interval and the canary are there; --compare picks the chinchilla law over the
  // laws in C, which fit the target's budget only.
  TempDir dir("chinchilla-forecast");
  const ChinchillaTruth t;
  nd_ladder(
      dir, {0.5, 1.0, 2.0}, 2,
      [&](double n, double d, size_t, int s) { return t(n, d) + (s ? 0.002 : -0.002); }, true);
  sc::ForecastOptions o = tiny_target(dir);
  o.target_tokens_per_param = t.ratio();
  o.law.family = sc::LawFamily::Chinchilla;
  o.law.l_inf = std::nullopt;
  const json f = sc::make_forecast(o);
  EXPECT_EQ(f["inputs"]["law"]["family"], "chinchilla");
  EXPECT_EQ(f["inputs"]["target"]["tokens"].get<double>(), t.dt);
  ASSERT_EQ(f["fits"].size(), 20u);
  EXPECT_TRUE(f["fits"][0]["predicted_loss"].is_null());
  EXPECT_NE(f["fits"][0]["error"].get<std::string>().find("end-of-run (100%) points only"),
            std::string::npos);
  const json& e = f["fits"][19];
  ASSERT_TRUE(e["fit"].is_object()) << e.dump();
  EXPECT_EQ(e["fit"]["law"], "chinchilla");
  EXPECT_EQ(e["fit"]["n"], 12);
  EXPECT_NEAR(e["fit"]["alpha"].get<double>(), t.alpha, 1e-3);
  EXPECT_NEAR(e["predicted_loss"].get<double>(), t(t.nt, t.dt), 1e-4);
  EXPECT_NEAR(f["prediction"]["final_loss"].get<double>(), t(t.nt, t.dt), 1e-4);
  ASSERT_EQ(e["fit"]["loo"]["errors"].size(), 12u);
  // Forward holdouts: every budget of r2 (from r0, r1) and r3 (from r0–r2). With E fitted two
  // sizes cannot separate E from A/N^α: r2's holdouts are recorded as failed, not invented.
  ASSERT_EQ(e["forward"].size(), 6u) << e["forward"].dump();
  EXPECT_EQ(e["forward"][0]["from_rungs"], 2);
  EXPECT_TRUE(e["forward"][0]["predicted"].is_null());
  EXPECT_NE(e["forward"][0]["failed"].get<std::string>().find("cannot be told apart"),
            std::string::npos);
  EXPECT_EQ(e["forward"][5]["rung"], sc::budget_label("r3", 2.0 * t.ratio()));
  EXPECT_EQ(e["forward"][5]["from_rungs"], 3);
  for (size_t i = 3; i < 6; ++i)
    EXPECT_LT(std::abs(e["forward"][i]["diff_nats"].get<double>()), 1e-6) << e["forward"][i];
  EXPECT_EQ(f["forward_holdouts"]["n"], 3);
  // The interval (the seeds' ±0.002) holds the target's law.
  const json& iv = f["prediction"]["interval"];
  ASSERT_TRUE(iv.is_object()) << e.dump();
  EXPECT_EQ(iv["noise_source"], "seeds and residuals");
  EXPECT_LT(iv["lo"].get<double>(), t(t.nt, t.dt));
  EXPECT_GT(iv["hi"].get<double>(), t(t.nt, t.dt));
  EXPECT_LT(iv["hi"].get<double>() - iv["lo"].get<double>(), 0.05);
  // The canary r4 at each of its budgets, at the end of its run.
  ASSERT_EQ(f["canaries"].size(), 3u);
  const double n4 = std::round(t.nt / 2);
  EXPECT_NEAR(f["canaries"][1]["predictions"][0]["predicted_loss"].get<double>(),
              t(n4, t.ratio() * n4), 1e-3);
  EXPECT_EQ(f["canaries"][1]["predictions"].size(), 1u);

  // --compare: the laws in C fit the target's budget; chinchilla's forward error is smallest.
  o.compare = true;
  o.law.l_inf = 1.5;
  o.law.family = sc::LawFamily::Power;
  const json c = sc::make_forecast(o);
  const json& law = c["inputs"]["law"];
  EXPECT_EQ(law["family"], "chinchilla") << law.dump();
  EXPECT_NE(law["chosen_by"].get<std::string>().find("100% of the target's budget"),
            std::string::npos);
  for (const char* name : {"power", "sigmoid", "chinchilla"})
    ASSERT_TRUE(law["comparison"][name]["final"]["rmse"].is_number()) << name << law.dump();
  EXPECT_EQ(law["comparison"]["chinchilla"]["final"]["n"], 2);  // r2, r3 at the target's budget
  EXPECT_EQ(law["comparison"]["power"]["final"]["n"], 2);
  EXPECT_LT(law["comparison"]["chinchilla"]["final"]["rmse"].get<double>(),
            law["comparison"]["power"]["final"]["rmse"].get<double>());
  // The power law of that forecast fitted the four rungs at the target's budget only.
  o.compare = false;
  const json p = sc::make_forecast(o);
  EXPECT_EQ(p["fits"][19]["fit"]["n"], 4);
  EXPECT_EQ(p["fits"][19]["points"].size(), 8u);
  // A budget no rung was trained at: the laws in C refuse it, naming the budgets.
  o.target_tokens_per_param = 3 * t.ratio();
  EXPECT_THROW(sc::make_forecast(o), marin::Error);
}

TEST(Chinchilla, NinetyPercentIntervalCoversANewRunIn85To95PercentOf200Ladders) {
  // 200 synthetic ladders (4 rungs × 3 budgets × 3 seeds, σ = 0.02 nats per run, as the power
  // law's test) from the known law, E fixed as that test fixes L∞: the 90% interval at the end of
  // the target's run (4× the largest rung's N) holds a new run of the target 85–95% of the time.
  // (Measured: 87.5%; with 2 seeds per run 84.5%, the fit's own bias of +0.006 nats showing.)
  TempDir dir("chinchilla-coverage");
  const ChinchillaTruth t;
  const double sigma = 0.02, truth = t(t.nt, t.dt);
  int covered = 0, total = 0, below = 0;
  double width = 0, bias = 0;
  for (uint64_t seed = 1; seed <= 200; ++seed) {
    Gauss g{seed * 104729};
    nd_ladder(dir, {0.5, 1.0, 2.0}, 3,
              [&](double n, double d, size_t, int) { return t(n, d) + sigma * g.next(); });
    sc::ForecastOptions o = tiny_target(dir);
    o.target_tokens_per_param = t.ratio();
    o.law.family = sc::LawFamily::Chinchilla;
    o.law.l_inf = t.E;
    o.interval_replicates = 200;
    const json f = sc::make_forecast(o);
    const json& iv = f["prediction"]["interval"];
    ASSERT_TRUE(iv.is_object()) << f["fits"][19].dump();
    const double actual = truth + sigma * g.next();
    covered += actual >= iv["lo"].get<double>() && actual <= iv["hi"].get<double>();
    below += actual < iv["lo"].get<double>();
    width += iv["hi"].get<double>() - iv["lo"].get<double>();
    bias += f["prediction"]["final_loss"].get<double>() - truth;
    ++total;
  }
  const double rate = double(covered) / total;
  std::cout << "chinchilla coverage " << rate << " (new run below the interval " << below
            << " times), mean width " << width / total << ", mean error of the forecast "
            << bias / total << "\n";
  EXPECT_GE(rate, 0.85) << "mean width " << width / total;
  EXPECT_LE(rate, 0.95) << "mean width " << width / total;
  EXPECT_GT(width / total, 2 * 1.645 * sigma);
}

// --- the clean-only series ----------------------------------------------------------------------

TEST(Interval, CleanOnlySeriesHasItsOwnInterval) {
  // Curves with a clean-only loss 0.3 nats above the all-document one and a different seed
  // spread: the clean-only forecast has its own 90% interval, around its own prediction, in
  // forecast.json (per fraction and at 100%).
  TempDir dir("forecast-clean");
  const double ct = tiny_target_compute();
  const std::vector<double> cps = {ct / 64 / 20, ct / 32 / 20, ct / 16 / 20, ct / 8 / 20};
  auto law = [&](double C) { return 1.5 + std::pow(C / ct, -0.25); };
  Gauss g{11};
  json lj = synthetic_ladder(dir, cps, 3,
                             [&](double C, size_t, int) { return law(C) + 0.01 * g.next(); });
  for (auto& r : lj["rungs"])
    for (auto& p : r["curve"]) p["clean_loss"] = p["loss"].get<double>() + 0.3 + 0.03 * g.next();
  std::ofstream(dir.str("ladder.json")) << lj.dump(2) << "\n";
  sc::ForecastOptions o = tiny_target(dir);
  o.law.l_inf = 1.5;
  const json f = sc::make_forecast(o);
  const json& iv = f["prediction"]["interval"];
  const json& civ = f["prediction"]["clean_interval"];
  ASSERT_TRUE(iv.is_object());
  ASSERT_TRUE(civ.is_object()) << f["prediction"].dump();
  EXPECT_EQ(civ, f["fits"][19]["clean_interval"]);
  EXPECT_TRUE(f["fits"][4]["clean_interval"].is_object());
  const double cp = f["prediction"]["clean_final_loss"].get<double>();
  EXPECT_LT(civ["lo"].get<double>(), cp);
  EXPECT_GT(civ["hi"].get<double>(), cp);
  EXPECT_NEAR(cp - f["prediction"]["final_loss"].get<double>(), 0.3, 0.1);
  // Its own noise (3× the seeds' spread): wider than the all-document interval.
  EXPECT_GT(civ["hi"].get<double>() - civ["lo"].get<double>(),
            1.5 * (iv["hi"].get<double>() - iv["lo"].get<double>()));
  // The clean series has no canaries of its own and the compare run no interval.
  EXPECT_FALSE(f["fits"][19].contains("clean_canaries"));
}

// --- the committed pre-registration (docs/experiments.md "Third attempt") -----------------------
TEST(PreRegistration, CommittedForecastReproducesFromTheCommittedLadder) {
  // docs/forecast_cpu5.json was written by `marin forecast --compare` from the ladder committed
  // as docs/ladder_cpu5.json, before the canary and the target trained: the same inputs must give
  // the same law, forward holdouts, predictions and intervals, bit for bit, or the registration
  // no longer says what the code would predict. The ladder's bytes are what the forecast hashed.
  // The fit is scalar, single-threaded double arithmetic at the baseline ISA, so it is the same
  // on every CPU whose glibc picks the same libm exp/log (every machine seen has FMA: Zen 3-5).
  const std::string ladder_text = marin::read_file(MARIN_SOURCE_DIR "/docs/ladder_cpu5.json");
  const json registered =
      json::parse(marin::read_file(MARIN_SOURCE_DIR "/docs/forecast_cpu5.json"));
  EXPECT_EQ(marin::xxh64_hex(ladder_text), registered["ladder"]["xxh64"]);
  // The tokenizer (runs/full/tokenizer.json, built from the fetched corpus) is only hashed into
  // the target's binding; without it the binding records none and the numbers are unchanged.
  json ladder = json::parse(ladder_text);
  ladder["ladder"]["tokenizer"] = "";
  TempDir dir("forecast-cpu5");
  std::ofstream(dir.str("ladder.json")) << ladder.dump(2) << "\n";
  sc::ForecastOptions o;
  o.ladder_dir = dir.str();
  o.target_name = "configs/ladder_cpu_target.toml";
  o.target = marin::ModelConfig::from_toml_file(MARIN_SOURCE_DIR "/configs/ladder_cpu_target.toml");
  o.law.l_inf = 1.5;
  o.compare = true;
  const json f = sc::make_forecast(o);
  EXPECT_EQ(f["inputs"]["law"], registered["inputs"]["law"]);
  EXPECT_EQ(f["prediction"], registered["prediction"]);
  EXPECT_EQ(f["forward_holdouts"], registered["forward_holdouts"]);
  EXPECT_EQ(f["canaries"], registered["canaries"]);
  EXPECT_EQ(f["fits"], registered["fits"]);
  EXPECT_EQ(f["inputs"]["target"]["train_flags"], registered["inputs"]["target"]["train_flags"]);
  EXPECT_EQ(registered["inputs"]["target"]["tokenizer_xxh64"], "ad1cfcc6e5ba7033");
  // The numbers docs/experiments.md quotes.
  EXPECT_EQ(registered["inputs"]["law"]["family"], "sigmoid");
  EXPECT_NEAR(registered["prediction"]["final_loss"].get<double>(), 3.7261, 5e-5);
  EXPECT_NEAR(registered["prediction"]["interval"]["lo"].get<double>(), 3.5980, 5e-5);
  EXPECT_NEAR(registered["prediction"]["interval"]["hi"].get<double>(), 3.8384, 5e-5);

  // The canary, trained after the registration (docs/ladder_cpu5_canary.json: the same ladder with
  // d192 done), scored against its registered forecast as `train --forecast` did before the
  // target's first step: 4.0602 against 3.9990, a miss by +0.0611 nats (+1.53 %).
  TempDir after("forecast-cpu5-canary");
  std::filesystem::copy_file(MARIN_SOURCE_DIR "/docs/ladder_cpu5_canary.json",
                             after.str("ladder.json"));
  const json s = sc::score_canaries(registered, after.str());
  ASSERT_EQ(s.size(), 1u);
  EXPECT_EQ(s[0]["name"], "d192");
  EXPECT_NEAR(s[0]["predicted"].get<double>(), 3.9990, 5e-5);
  EXPECT_NEAR(s[0]["actual"].get<double>(), 4.0602, 5e-5);
  EXPECT_NEAR(s[0]["diff_percent"].get<double>(), 1.53, 5e-3);
  EXPECT_EQ(s[0]["verdict"], "miss");
}

// The target, trained after the registration and the canary: docs/target_cpu5_report.json is the
// forecast_report.json `train --forecast` wrote at its last step. Its scores must follow from the
// registered forecast and the two measured losses alone, and be the numbers docs/experiments.md
// quotes: 3.8188 against 3.7261 (+2.49 %), clean-only 3.9468 against 3.8796 (+1.73 %), both
// misses inside their 90 % intervals.
TEST(PreRegistration, TheTargetsReportFollowsFromTheRegisteredForecast) {
  const json registered =
      json::parse(marin::read_file(MARIN_SOURCE_DIR "/docs/forecast_cpu5.json"));
  const json report =
      json::parse(marin::read_file(MARIN_SOURCE_DIR "/docs/target_cpu5_report.json"));
  EXPECT_EQ(report["ladder_xxh64"], registered["ladder"]["xxh64"]);
  EXPECT_EQ(report["forecast_created"], registered["created"]);
  EXPECT_EQ(report["steps"], 4620);
  const double all = report["actual"].get<double>(),
               clean = report["clean"]["actual"].get<double>();
  const sc::ForecastTracker tracker = sc::ForecastTracker::from_json(registered, 4620);
  const json again = tracker.final_report(all, clean);
  for (const char* k : {"predicted", "diff_nats", "diff_percent", "verdict"}) {
    EXPECT_EQ(again[k], report[k]) << k;
    EXPECT_EQ(again["clean"][k], report["clean"][k]) << "clean " << k;
  }
  EXPECT_EQ(report["clean"]["against"], "clean-only forecast");
  const json& iv = registered["prediction"]["interval"];
  const json& civ = registered["prediction"]["clean_interval"];
  EXPECT_EQ(report["interval"], iv);
  EXPECT_EQ(report["inside_interval"].get<bool>(),
            all >= iv["lo"].get<double>() && all <= iv["hi"].get<double>());
  EXPECT_EQ(report["clean"]["inside_interval"].get<bool>(),
            clean >= civ["lo"].get<double>() && clean <= civ["hi"].get<double>());
  // The numbers docs/experiments.md quotes.
  EXPECT_NEAR(all, 3.8188, 5e-5);
  EXPECT_NEAR(report["diff_percent"].get<double>(), 2.49, 5e-3);
  EXPECT_EQ(report["verdict"], "miss");
  EXPECT_TRUE(report["inside_interval"].get<bool>());
  EXPECT_NEAR(clean, 3.9468, 5e-5);
  EXPECT_NEAR(report["clean"]["diff_percent"].get<double>(), 1.73, 5e-3);
  EXPECT_EQ(report["clean"]["verdict"], "miss");
  EXPECT_TRUE(report["clean"]["inside_interval"].get<bool>());
}
