// The scaling ladder and the forecast (recipe.md §9, docs/scaling.md): the power-law fit recovers
// known laws (L∞ fixed and fitted), leave-one-rung-out on a hand case, ladder files build rungs
// by the shape rule (tiny, cpu-small and Marin's d512…d2048 are rungs), a tiny ladder trains end
// to end and resumes, `marin plan` agrees with it on compute, and the tracker's beat/miss.
#include <fmt/core.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/rng.hpp"
#include "model/accounting.hpp"
#include "optim/hparams.hpp"
#include "scaling/fit.hpp"
#include "scaling/forecast.hpp"
#include "scaling/ladder.hpp"
#include "train/run_checkpoint.hpp"

using marin::testing::kTinyFamily;
using marin::testing::run;
using marin::testing::TempDir;
using nlohmann::json;
namespace fs = std::filesystem;
namespace sc = marin::scaling;

namespace {

// Deterministic noise in [−1, 1].
struct Noise {
  uint64_t x = 12345;
  double next() {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    return double(x >> 11) / double(1ull << 53) * 2.0 - 1.0;
  }
};

// compute = 10^e for e in [lo, hi] (n points), loss = l_inf + A·C^−α, times (1 + rel·noise) on
// the reducible part.
void law(double A, double alpha, double l_inf, double lo, double hi, int n, double rel,
         std::vector<double>& c, std::vector<double>& l) {
  Noise z;
  c.clear(), l.clear();
  for (int i = 0; i < n; ++i) {
    c.push_back(std::pow(10.0, lo + (hi - lo) * i / (n - 1)));
    l.push_back(l_inf + A * std::pow(c.back(), -alpha) * (1 + rel * z.next()));
  }
}

}  // namespace

TEST(Fit, FixedLInfRecoversAAndAlphaExactly) {
  std::vector<double> c, l;
  law(40.0, 0.12, 1.5, 12, 18, 5, 0.0, c, l);
  const sc::PowerLawFit f = sc::fit_power_law(c, l, 1.5);
  EXPECT_NEAR(f.alpha, 0.12, 1e-10);
  EXPECT_NEAR(f.A / 40.0, 1.0, 1e-8);
  EXPECT_DOUBLE_EQ(f.l_inf, 1.5);
  EXPECT_FALSE(f.l_inf_fitted);
  EXPECT_NEAR(f.r2, 1.0, 1e-12);
  EXPECT_NEAR(f.r2_log, 1.0, 1e-12);
  ASSERT_EQ(f.loo.errors.size(), 5u);
  EXPECT_LT(f.loo.max_abs, 1e-9);
}

TEST(Fit, FixedLInfWithNoise) {
  std::vector<double> c, l;
  law(40.0, 0.12, 1.5, 12, 18, 6, 0.01, c, l);  // 1% noise on the reducible loss
  const sc::PowerLawFit f = sc::fit_power_law(c, l, 1.5);
  EXPECT_NEAR(f.alpha, 0.12, 0.004);
  EXPECT_NEAR(std::log(f.A), std::log(40.0), 0.004 * std::log(1e15) + 0.01);
  // The law itself (not just its parameters) is recovered across the fitted range.
  for (double e : {12.0, 15.0, 18.0}) {
    const double C = std::pow(10.0, e);
    EXPECT_NEAR(f.predict(C), 1.5 + 40.0 * std::pow(C, -0.12), 0.01) << "C=1e" << e;
  }
  EXPECT_GT(f.r2, 0.99);
  EXPECT_GT(f.loo.rmse, 0);
}

TEST(Fit, FittedLInfRecoversTheLaw) {
  std::vector<double> c, l;
  law(60.0, 0.2, 2.0, 12, 18, 5, 0.0, c, l);
  sc::PowerLawFit f = sc::fit_power_law(c, l, std::nullopt);
  EXPECT_TRUE(f.l_inf_fitted);
  EXPECT_NEAR(f.l_inf, 2.0, 1e-5);
  EXPECT_NEAR(f.alpha, 0.2, 1e-5);
  EXPECT_NEAR(f.A / 60.0, 1.0, 1e-3);
  EXPECT_FALSE(f.l_inf_at_bound);
  // A pure power law (no L∞): the best L∞ is the lower bound, flagged, never below it.
  std::vector<double> c0, l0;
  law(60.0, 0.2, 0.0, 12, 18, 5, 0.0, c0, l0);
  const sc::PowerLawFit f0 = sc::fit_free(c0, l0, 0.0);
  EXPECT_TRUE(f0.l_inf_at_bound);
  EXPECT_GE(f0.l_inf, 0.0);
  EXPECT_NEAR(f0.alpha, 0.2, 1e-6);

  law(60.0, 0.2, 2.0, 12, 18, 7, 0.002, c, l);  // 0.2% noise on the reducible loss
  f = sc::fit_power_law(c, l, std::nullopt);
  EXPECT_NEAR(f.l_inf, 2.0, 0.05);
  EXPECT_NEAR(f.alpha, 0.2, 0.02);
  ASSERT_EQ(f.loo.errors.size(), 7u);
  // A wrong L∞ fits worse in loss space than the fitted one (it is the minimiser).
  EXPECT_LT(f.sse, sc::fit_fixed(c, l, 1.5).sse);
  EXPECT_LT(f.sse, sc::fit_fixed(c, l, 1.9).sse);
}

TEST(Fit, LeaveOneOutByHand) {
  // L∞ = 1 and L − 1 = 1, 0.5, 0.2 at C = 1, 10, 100. Two points fit a line exactly in log space:
  //   without C=100: (L−1) = 0.5^log10(C) → 0.25 at C=100: predicted 1.25, actual 1.2 → +0.05
  //   without C=10:  (L−1) = 0.2^(log10(C)/2) → √0.2 at C=10: 1.4472136 − 1.5 → −0.0527864
  //   without C=1:   slope 0.4 per decade from 0.5 at C=10 → 1.25 at C=1: 2.25 − 2 → +0.25
  const std::vector<double> c = {1, 10, 100}, l = {2.0, 1.5, 1.2};
  const sc::PowerLawFit f = sc::fit_power_law(c, l, 1.0);
  ASSERT_EQ(f.loo.errors.size(), 3u);
  EXPECT_NEAR(f.loo.errors[0], 0.25, 1e-12);
  EXPECT_NEAR(f.loo.errors[1], std::sqrt(0.2) + 1 - 1.5, 1e-12);
  EXPECT_NEAR(f.loo.errors[2], 0.05, 1e-12);
  const double rmse =
      std::sqrt((0.25 * 0.25 + std::pow(std::sqrt(0.2) - 0.5, 2) + 0.05 * 0.05) / 3);
  EXPECT_NEAR(f.loo.rmse, rmse, 1e-12);
  EXPECT_NEAR(f.loo.max_abs, 0.25, 1e-12);
  // Too few points for a leave-one-out: none reported.
  EXPECT_TRUE(sc::fit_power_law({1, 10}, {2.0, 1.5}, 1.0).loo.errors.empty());
}

TEST(Fit, RefusesBadInput) {
  EXPECT_THROW(sc::fit_fixed({1, 10, 100}, {2.0, 1.5, 1.2}, 1.3), marin::Error);  // L∞ ≥ a loss
  EXPECT_THROW(sc::fit_fixed({10}, {2.0}, 1.0), marin::Error);
  EXPECT_THROW(sc::fit_fixed({10, 10}, {2.0, 1.9}, 1.0), marin::Error);
  EXPECT_THROW(sc::fit_fixed({-1, 10}, {2.0, 1.9}, 1.0), marin::Error);
  EXPECT_THROW(sc::fit_free({1, 10}, {2.0, 1.5}), marin::Error);  // 3 parameters, 2 points
}

// --- ladder files -----------------------------------------------------------------------------

TEST(Ladder, ShapeRuleRungsAreThePresets) {
  // tiny and cpu-small are members of the family: the shape rule plus their non-derived fields.
  auto t = sc::LadderConfig::from_toml_text(
      "[ladder]\nwidths = [64]\nlayers = [4]\ntokens_per_param = 1\n" + kTinyFamily, "t");
  ASSERT_EQ(t.rungs.size(), 1u);
  EXPECT_EQ(t.rungs[0].model.to_json(), marin::ModelConfig::preset("tiny").to_json());
  EXPECT_EQ(t.rungs[0].name, "d64");
  auto cs = sc::LadderConfig::from_toml_text(R"([ladder]
widths = [256]
layers = [8]
names = ["small"]
[family]
head_dim = 32
num_experts = 32
top_k = 4
gated_norm_rank = 32
seq_len = 512
sliding_window = 256
vocab_size = 8192
)",
                                             "cs");
  EXPECT_EQ(cs.rungs[0].model.to_json(), marin::ModelConfig::preset("cpu-small").to_json());
  EXPECT_EQ(cs.rungs[0].name, "small");
  // Marin's rungs: the shape rule's defaults (hd 128, E 384, K 8, S 4096, V 128256).
  auto m = sc::LadderConfig::from_toml_text(
      "[ladder]\nwidths = [512, 768, 1024, 1536, 2048]\nlayers = [6, 8, 12, 16, 22]\n", "m");
  ASSERT_EQ(m.rungs.size(), 5u);
  for (auto& r : m.rungs)
    EXPECT_EQ(r.model.to_json(), marin::ModelConfig::preset(r.name).to_json()) << r.name;
  // Per-rung overrides apply to that rung only.
  auto o = sc::LadderConfig::from_toml_text(
      "[ladder]\nwidths = [64, 128]\nlayers = [4, 4]\n" + kTinyFamily + "[rung.d128]\ntop_k = 3\n",
      "o");
  EXPECT_EQ(o.rungs[0].model.top_k, 2);
  EXPECT_EQ(o.rungs[1].model.top_k, 3);
  EXPECT_EQ(o.rungs[1].model.num_heads, 16);
  EXPECT_EQ(o.rungs[1].model.expert_dim, 64);
  EXPECT_EQ(o.rungs[1].model.kv_heads_local, 4);
  EXPECT_EQ(o.rungs[1].model.kv_heads_global, 2);
}

TEST(Ladder, BudgetBatchRatesAndCompute) {
  auto c = sc::LadderConfig::from_toml_text(R"([ladder]
widths = [32, 64, 96]
layers = [2, 3, 4]
tokens_per_param = 3.0
[batch]
base = 3
base_width = 32
exponent = 1.0
multiple = 2
)" + kTinyFamily,
                                            "b");
  c.set_rows_data("train.bin", "valid.bin");
  c.finalize();
  const int64_t want_batch[] = {4, 6, 10};  // 3·(d/32) rounded to a multiple of 2: 3→4, 6, 9→10
  for (size_t i = 0; i < c.rungs.size(); ++i) {
    const sc::Rung& r = c.rungs[i];
    EXPECT_EQ(r.batch, want_batch[i]) << r.name;
    EXPECT_EQ(r.budget_steps, marin::steps_for_budget(r.model, r.batch, 3.0));
    EXPECT_EQ(r.steps % sc::kFractions, 0);
    EXPECT_GE(r.steps, r.budget_steps);
    EXPECT_LT(r.steps, r.budget_steps + sc::kFractions);
    EXPECT_EQ(r.eval_every * sc::kFractions, r.steps);
    EXPECT_EQ(r.compute_per_step, marin::forecast_flops_per_step(r.model, r.batch));
    const marin::HyperParams h =
        marin::heuristic_hparams(r.model.hidden_dim, r.batch, r.model.seq_len, r.steps);
    EXPECT_EQ(r.options.optim.muonh_lr, h.muonh_lr);
    EXPECT_EQ(r.options.optim.adam_lr, h.adam_lr);
    EXPECT_EQ(r.options.optim.beta1, h.beta1);
    EXPECT_EQ(r.options.optim.beta2, h.beta2);
    EXPECT_EQ(r.options.optim.eps, h.eps);
    EXPECT_EQ(r.options.steps, r.steps);
    EXPECT_EQ(r.options.eval_every, r.eval_every);
    EXPECT_EQ(r.options.valid["path"], "valid.bin");
  }
  // Explicit sizes win over the rule.
  auto s = sc::LadderConfig::from_toml_text(
      "[ladder]\nwidths = [32, 64]\nlayers = [2, 2]\n[batch]\nsizes = [7, 9]\n" + kTinyFamily, "s");
  EXPECT_EQ(s.rungs[0].batch, 7);
  EXPECT_EQ(s.rungs[1].batch, 9);
}

TEST(Ladder, RefusesBadFiles) {
  auto msg = [](const std::string& text) {
    try {
      sc::LadderConfig::from_toml_text(text, "bad.toml");
    } catch (const marin::Error& e) {
      return std::string(e.what());
    }
    return std::string("(accepted)");
  };
  const std::string head = "[ladder]\nwidths = [64]\nlayers = [4]\n";
  EXPECT_NE(msg(head + "[family]\nnum_heads = 4\n").find("derived by the shape rule"),
            std::string::npos);
  EXPECT_NE(msg("[ladder]\nwidths = [64, 128]\nlayers = [4]\n").find("one layer count per width"),
            std::string::npos);
  EXPECT_NE(msg(head + "tokens_per_parm = 3\n" + kTinyFamily).find("unknown key 'tokens_per_parm'"),
            std::string::npos);
  EXPECT_NE(msg(head + "ckpt_every_percent = 7\n" + kTinyFamily).find("multiple of 5"),
            std::string::npos);
  EXPECT_NE(msg(head + "[family]\nhead_dim = 8\nnum_experts = 8\ntop_k = 8\n").find("top_k + 1"),
            std::string::npos);
  EXPECT_NE(msg(head + "[family]\nhead_dim = 48\n").find("must divide the width"),
            std::string::npos);
  EXPECT_NE(msg(head + kTinyFamily + "[rung.d65]\ntop_k = 1\n").find("names no rung"),
            std::string::npos);
  EXPECT_NE(msg(head + kTinyFamily + "[data]\nkind = \"rows\"\npath = \"x\"\n")
                .find("'valid' is required"),
            std::string::npos);
  EXPECT_NE(msg("[model]\nhidden_dim = 3\n").find("unknown key 'model'"), std::string::npos);
  auto c = sc::LadderConfig::from_toml_text(head + kTinyFamily, "nodata");
  EXPECT_THROW(c.finalize(), marin::Error);  // no data anywhere
}

// --- tracking ---------------------------------------------------------------------------------

namespace {
json fake_forecast(int64_t steps) {
  json fits = json::array();
  for (int k = 1; k <= 20; ++k) {
    const double g = k / 20.0;
    json e = {{"fraction", g}, {"target_step", std::llround(g * steps)}};
    e["predicted_loss"] = k == 7 ? json(nullptr) : json(3.0 - 0.05 * k);  // 2.0 at 100%
    fits.push_back(e);
  }
  return {{"format", "marin-forecast-v1"},
          {"created", "2025-01-01T00:00:00Z"},
          {"ladder", {{"xxh64", "0123456789abcdef"}}},
          {"inputs", {{"target", {{"steps", steps}}}}},
          {"fits", fits},
          {"prediction", {{"final_loss", 2.0}, {"metric", "valid_ce"}}}};
}
}  // namespace

TEST(Tracker, ObservesForecastFractionsOnly) {
  const auto t = sc::ForecastTracker::from_json(fake_forecast(200), 200);
  EXPECT_EQ(t.steps().size(), 19u);  // the 35% fit failed: no prediction there
  EXPECT_EQ(t.steps().front(), 10);
  EXPECT_EQ(t.steps().back(), 200);
  EXPECT_FALSE(t.observe(11, 2.9).has_value());
  EXPECT_FALSE(t.observe(70, 2.6).has_value());
  auto r = t.observe(10, 2.9);  // 5%: predicted 2.95
  ASSERT_TRUE(r.has_value());
  EXPECT_DOUBLE_EQ((*r)["fraction"].get<double>(), 0.05);
  EXPECT_DOUBLE_EQ((*r)["predicted"].get<double>(), 2.95);
  EXPECT_NEAR((*r)["diff_nats"].get<double>(), -0.05, 1e-12);
  EXPECT_NEAR((*r)["diff_percent"].get<double>(), -100.0 * 0.05 / 2.95, 1e-10);
  EXPECT_TRUE((*r)["beat"].get<bool>());
  r = t.observe(100, 2.6);  // 50%: predicted 2.5 → miss by 0.1 nats = 4%
  ASSERT_TRUE(r.has_value());
  EXPECT_NEAR((*r)["diff_nats"].get<double>(), 0.1, 1e-12);
  EXPECT_NEAR((*r)["diff_percent"].get<double>(), 4.0, 1e-10);
  EXPECT_FALSE((*r)["beat"].get<bool>());
}

TEST(Tracker, FinalReportBeatMissAndClean) {
  const auto t = sc::ForecastTracker::from_json(fake_forecast(200), 200);
  EXPECT_DOUBLE_EQ(t.predicted_final(), 2.0);
  json r = t.final_report(2.03, 2.01);  // miss by 0.03 nats (1.5%); clean: miss by 0.01 (0.5%)
  EXPECT_EQ(r["verdict"], "miss");
  EXPECT_NEAR(r["diff_nats"].get<double>(), 0.03, 1e-12);
  EXPECT_NEAR(r["diff_percent"].get<double>(), 1.5, 1e-9);
  EXPECT_EQ(r["clean"]["verdict"], "miss");
  EXPECT_NEAR(r["clean"]["diff_nats"].get<double>(), 0.01, 1e-12);
  EXPECT_NEAR(r["clean"]["diff_percent"].get<double>(), 0.5, 1e-9);
  EXPECT_NEAR(r["all_minus_clean_nats"].get<double>(), 0.02, 1e-12);
  EXPECT_EQ(r["ladder_xxh64"], "0123456789abcdef");
  r = t.final_report(1.96, 2.04);  // beats on all documents, misses on the clean ones
  EXPECT_EQ(r["verdict"], "beat");
  EXPECT_NEAR(r["diff_percent"].get<double>(), -2.0, 1e-9);
  EXPECT_EQ(r["clean"]["verdict"], "miss");
  EXPECT_NEAR(r["clean"]["diff_percent"].get<double>(), 2.0, 1e-9);
  r = t.final_report(2.0, std::nullopt);
  EXPECT_EQ(r["verdict"], "exact");
  EXPECT_FALSE(r.contains("clean"));
  // A forecast is for one budget.
  EXPECT_THROW(sc::ForecastTracker::from_json(fake_forecast(200), 300), marin::Error);
  EXPECT_THROW(sc::ForecastTracker::from_json(json{{"format", "x"}}, 200), marin::Error);
}

// --- end to end -------------------------------------------------------------------------------

namespace {

// Rows with a learnable pattern, seq_len 64, ids < 512, from `seed`.
void write_rows(const std::string& path, int rows, uint64_t seed) {
  marin::testing::write_rows(path, rows, 64, 512, seed);
}

json load_json(const std::string& path) {
  return json::parse(marin::read_file(path));
}

// A rung's model config as --set flags for `marin plan`.
std::string plan_sets(const std::string& model_toml) {
  return " --config " + model_toml;
}

}  // namespace

TEST(LadderCli, TinyLadderTrainsResumesAndForecasts) {
  TempDir tmp("scaling");
  write_rows(tmp.str("train.bin"), 256, 7);
  write_rows(tmp.str("valid.bin"), 16, 99);
  const std::string dir = tmp.str("ladder");
  const std::string cmd = "ladder --config " MARIN_SOURCE_DIR "/configs/ladder_tiny.toml --out " +
                          dir + " --rows " + tmp.str("train.bin") + " --valid-rows " +
                          tmp.str("valid.bin");
  auto r = run(cmd);
  ASSERT_EQ(r.code, 0) << r.out;
  const json lj = load_json(dir + "/ladder.json");
  const json& rungs = lj["rungs"];
  ASSERT_EQ(rungs.size(), 4u);
  EXPECT_EQ(lj["metric"], "valid_ce");
  for (auto& rg : rungs) {
    const std::string name = rg["name"];
    EXPECT_EQ(rg["status"], "done") << name;
    const int64_t steps = rg["steps"];
    EXPECT_EQ(steps % 20, 0);
    EXPECT_GE(steps, 20);
    ASSERT_EQ(rg["curve"].size(), 20u) << name;
    for (int k = 0; k < 20; ++k) {
      const json& p = rg["curve"][k];
      EXPECT_EQ(p["step"].get<int64_t>(), (k + 1) * steps / 20);
      EXPECT_DOUBLE_EQ(p["fraction"].get<double>(),
                       double(p["step"].get<int64_t>()) / double(steps));
      EXPECT_DOUBLE_EQ(p["compute"].get<double>(),
                       rg["compute_per_step"].get<double>() * double(p["step"].get<int64_t>()));
      EXPECT_TRUE(std::isfinite(p["loss"].get<double>()));
    }
    // The final checkpoint is complete and the 50% one was kept (keep_every_percent = 50).
    auto ckpt = marin::latest_checkpoint(dir + "/rung-" + name);
    ASSERT_TRUE(ckpt.has_value());
    EXPECT_EQ(marin::read_run_state(*ckpt).step, steps);
    EXPECT_TRUE(
        fs::exists(fmt::format("{}/rung-{}/checkpoints/step-{:08d}", dir, name, steps / 2)));

    // `marin plan` on the rung's model, batch and steps gives the same compute and rates.
    auto p = run("plan" + plan_sets(dir + "/rung-" + name + "/model.toml") + " --batch " +
                 std::to_string(rg["batch"].get<int64_t>()) + " --steps " + std::to_string(steps) +
                 " --json");
    ASSERT_EQ(p.code, 0) << p.out;
    const json pj = json::parse(p.out);
    EXPECT_EQ(pj["forecast_flops_per_step"].get<double>(), rg["compute_per_step"].get<double>())
        << name;
    EXPECT_EQ(pj["active_params"], rg["active_params"]) << name;
    EXPECT_EQ(pj["config"], rg["config"]) << name;
    EXPECT_EQ(pj["muonh_lr"].get<double>(), rg["hparams"]["muonh_lr"].get<double>()) << name;
    EXPECT_EQ(pj["adam_lr"].get<double>(), rg["hparams"]["adam_lr"].get<double>()) << name;
  }
  // Rungs grow: compute per step and batch increase along the ladder.
  for (size_t i = 1; i < rungs.size(); ++i) {
    EXPECT_GT(rungs[i]["compute_per_step"].get<double>(),
              rungs[i - 1]["compute_per_step"].get<double>());
    EXPECT_GE(rungs[i]["batch"].get<int64_t>(), rungs[i - 1]["batch"].get<int64_t>());
  }

  // Interrupted rung: its final checkpoint is gone, the 50% one remains. A rerun skips the
  // finished rungs, resumes this one from 50% and reproduces its curve bit for bit.
  const std::string victim = rungs[1]["name"];
  const int64_t vsteps = rungs[1]["steps"];
  fs::remove_all(fmt::format("{}/rung-{}/checkpoints/step-{:08d}", dir, victim, vsteps));
  r = run(cmd);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find(fmt::format("rung {} resumes at step {} of {}", victim, vsteps / 2, vsteps)),
            std::string::npos)
      << r.out;
  for (size_t i = 0; i < rungs.size(); ++i) {
    if (i == 1) continue;
    EXPECT_NE(r.out.find(fmt::format("rung {} is done", rungs[i]["name"].get<std::string>())),
              std::string::npos)
        << r.out;
  }
  const json lj2 = load_json(dir + "/ladder.json");
  EXPECT_EQ(lj2["rungs"][1]["curve"], rungs[1]["curve"]);
  EXPECT_EQ(lj2, lj);  // ladder.json is deterministic: same training, same file

  // A rung trained with other options is not silently reused.
  const std::string toml = marin::read_file(MARIN_SOURCE_DIR "/configs/ladder_tiny.toml");
  std::string changed = toml;
  changed.replace(changed.find("seed = 1"), 8, "seed = 2");
  marin::write_file_atomic(tmp.str("changed.toml"), changed);
  r = run("ladder --config " + tmp.str("changed.toml") + " --out " + dir + " --rows " +
          tmp.str("train.bin") + " --valid-rows " + tmp.str("valid.bin"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("trained with different options (seed)"), std::string::npos) << r.out;

  // The forecast: 20 fits, the hash of ladder.json, a prediction, no silent overwrite.
  const std::string fc = tmp.str("forecast.json");
  r = run("forecast --ladder " + dir +
          " --preset tiny --target-steps 400 --target-batch 16 "
          "--fit-l-inf --out " +
          fc);
  ASSERT_EQ(r.code, 0) << r.out;
  const json f = load_json(fc);
  EXPECT_EQ(f["format"], "marin-forecast-v1");
  EXPECT_EQ(f["ladder"]["xxh64"], sc::xxh64_hex(marin::read_file(dir + "/ladder.json")));
  EXPECT_EQ(f["inputs"]["l_inf"]["mode"], "fitted");
  EXPECT_EQ(f["inputs"]["target"]["compute_per_step"].get<double>(),
            marin::forecast_flops_per_step(marin::ModelConfig::preset("tiny"), 16));
  ASSERT_EQ(f["fits"].size(), 20u);
  for (auto& e : f["fits"]) {
    ASSERT_EQ(e["points"].size(), 4u);
    EXPECT_DOUBLE_EQ(e["target_compute"].get<double>(),
                     f["inputs"]["target"]["compute_per_step"].get<double>() * 400 *
                         e["fraction"].get<double>());
    if (!e["fit"].is_null()) {
      const json& ft = e["fit"];
      EXPECT_DOUBLE_EQ(e["predicted_loss"].get<double>(),
                       ft["l_inf"].get<double>() +
                           ft["A"].get<double>() * std::pow(e["target_compute"].get<double>(),
                                                            -ft["alpha"].get<double>()));
      EXPECT_EQ(ft["loo"]["errors"].size(), 4u);
    }
  }
  r = run("forecast --ladder " + dir +
          " --preset tiny --target-steps 400 --target-batch 16 --out " + fc);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("pre-registration"), std::string::npos) << r.out;
  // With L∞ fixed at 0 (below every loss) every fraction has a fit; the tracker reads the file.
  r = run("forecast --ladder " + dir +
          " --preset tiny --target-steps 400 --target-batch 16 "
          "--l-inf 0 --force --out " +
          fc);
  ASSERT_EQ(r.code, 0) << r.out;
  const json f0 = load_json(fc);
  for (auto& e : f0["fits"]) ASSERT_FALSE(e["fit"].is_null()) << e.dump();
  const sc::ForecastTracker t(fc, 400);
  EXPECT_EQ(t.steps().size(), 20u);
  EXPECT_EQ(t.steps()[0], 20);
  EXPECT_DOUBLE_EQ(t.predicted_final(), f0["prediction"]["final_loss"].get<double>());
  EXPECT_THROW(sc::ForecastTracker(fc, 401), marin::Error);

  // The target run, tracked against its pre-registered forecast (marin train --forecast): it
  // evaluates at every 5% and ends with a beat/miss report.
  const std::string fc40 = tmp.str("forecast40.json");
  r = run("forecast --ladder " + dir +
          " --preset tiny --target-steps 40 --target-batch 4 --l-inf 0 --out " + fc40);
  ASSERT_EQ(r.code, 0) << r.out;
  // The forecast binds its target: ladder_tiny's seed (1) as well as the batch and steps.
  r = run("train --preset tiny --batch 4 --steps 40 --seed 1 --rows " + tmp.str("train.bin") +
          " --valid-rows " + tmp.str("valid.bin") + " --forecast " + fc40 + " --out " +
          tmp.str("target"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("forecast: predicted"), std::string::npos) << r.out;
  std::ifstream mf(tmp.str("target/metrics.jsonl"));
  std::string line;
  int tracked = 0;
  while (std::getline(mf, line)) {
    const json m = json::parse(line);
    if (m.contains("forecast")) {
      ++tracked;
      EXPECT_DOUBLE_EQ(m["forecast"]["actual"].get<double>(), m["valid_ce"].get<double>());
    }
  }
  EXPECT_EQ(tracked, 20);
  const json rep = load_json(tmp.str("target/forecast_report.json"));
  EXPECT_TRUE(rep["verdict"] == "beat" || rep["verdict"] == "miss") << rep.dump();
}

// The macro-loss metric end to end on real text (the fixture): the ladder scores its kept
// checkpoints on a fixed per-domain subset with the contamination audit (KJV in training, so the
// modern-English Bible is contaminated), the forecast fits the all-document and the clean-only
// curves and carries the metric, and the target run is scored with exactly that metric.
TEST(LadderCli, MacroLossLadderForecastAndCleanComparison) {
  TempDir tmp("scaling-macro");
  ASSERT_EQ(marin::testing::tokenize_fixture(tmp), "");
  std::ofstream(tmp.str("mix.toml")) << "weights = { bible_kjv = 1, fortunes = 1 }\n";
  std::ofstream(tmp.str("ladder.toml"))
      << "[ladder]\nname = \"m\"\nwidths = [32, 48, 64]\nlayers = [2, 2, 3]\n"
         "tokens_per_param = 0.25\neval_batches = 1\nkeep_every_percent = 5\n"
         "[batch]\nbase = 2\nbase_width = 32\n"
         "[family]\nhead_dim = 8\nnum_experts = 8\ntop_k = 2\ngated_norm_rank = 16\n"
         "seq_len = 64\nsliding_window = 32\nvocab_size = 512\n"
         "[eval]\nmetric = \"macro_loss\"\nmax_tokens = 300\n"
         "domains = [\"bible_web_modern\", \"fortunes\", \"brown_press\"]\n"
         "[data]\nkind = \"mixture\"\nmixture = \"" +
             tmp.str("mix.toml") + "\"\ntoken_dir = \"" + tmp.str("tokens") + "\"\ntokenizer = \"" +
             tmp.str("tok.json") + "\"\n";
  const std::string dir = tmp.str("ladder");
  const std::string cmd = "ladder --config " + tmp.str("ladder.toml") + " --out " + dir;
  auto r = run(cmd);
  ASSERT_EQ(r.code, 0) << r.out;
  const json lj = load_json(dir + "/ladder.json");
  EXPECT_EQ(lj["metric"], "macro_loss");
  EXPECT_EQ(lj["eval"]["max_tokens"], 300);
  EXPECT_EQ(lj["eval"]["train"].size(), 2u);  // the mixture's two training domains
  for (auto& rg : lj["rungs"]) {
    ASSERT_EQ(rg["curve"].size(), 20u);
    const int64_t last = rg["curve"][19]["step"];
    const json cached = load_json(fmt::format("{}/rung-{}/checkpoints/step-{:08d}/macro_eval.json",
                                              dir, rg["name"].get<std::string>(), last));
    EXPECT_EQ(cached["metric"], lj["eval"]);
    EXPECT_EQ(cached["result"]["macro_loss"], rg["curve"][19]["loss"]);
    // The KJV-trained rung sees its modern-English chapters as contaminated.
    EXPECT_GE(cached["result"]["contaminated_documents"].get<int>(), 1);
    for (auto& p : rg["curve"]) {
      ASSERT_TRUE(p.contains("clean_loss")) << p.dump();
      EXPECT_NE(p["clean_loss"], p["loss"]);
    }
  }
  // A rerun trains nothing and reads the cached scores: the same ladder.json.
  r = run(cmd);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.find("macro loss"), std::string::npos) << r.out;
  EXPECT_EQ(load_json(dir + "/ladder.json"), lj);

  const std::string target = tmp.str("target.toml");
  std::ofstream(target) << marin::read_file(dir + "/rung-d64/model.toml");
  r = run("forecast --ladder " + dir + " --config " + target +
          " --set num_layers=4 --target-steps 20 --target-batch 2 --out " + tmp.str("f.json"));
  ASSERT_EQ(r.code, 0) << r.out;
  const json f = load_json(tmp.str("f.json"));
  EXPECT_EQ(f["eval"], lj["eval"]);
  EXPECT_EQ(f["prediction"]["metric"], "macro_loss");
  ASSERT_TRUE(f["prediction"]["clean_final_loss"].is_number()) << f["prediction"].dump();
  EXPECT_TRUE(f["fits"][19]["clean_fit"].is_object());
  // The clean-only forecast has its own interval (from its own residuals), printed.
  const json& civ = f["prediction"]["clean_interval"];
  ASSERT_TRUE(civ.is_object()) << f["prediction"].dump();
  EXPECT_LT(civ["lo"].get<double>(), f["prediction"]["clean_final_loss"].get<double>());
  EXPECT_GT(civ["hi"].get<double>(), f["prediction"]["clean_final_loss"].get<double>());
  EXPECT_NE(civ, f["prediction"]["interval"]);
  EXPECT_NE(r.out.find("at 100%, clean-only documents: ["), std::string::npos) << r.out;

  r = run("train --config " + target + " --set num_layers=4 --batch 2 --steps 20 --data " +
          tmp.str("mix.toml") + " --token-dir " + tmp.str("tokens") + " --tokenizer " +
          tmp.str("tok.json") + " --forecast " + tmp.str("f.json") + " --out " + tmp.str("t"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("forecast (clean-only documents, clean-only forecast)"), std::string::npos)
      << r.out;
  const json rep = load_json(tmp.str("t/forecast_report.json"));
  EXPECT_EQ(rep["metric"], "macro_loss");
  EXPECT_EQ(rep["clean"]["against"], "clean-only forecast");
  EXPECT_DOUBLE_EQ(rep["clean"]["predicted"].get<double>(),
                   f["prediction"]["clean_final_loss"].get<double>());
  EXPECT_DOUBLE_EQ(rep["all_minus_clean_nats"].get<double>(),
                   rep["actual"].get<double>() - rep["clean"]["actual"].get<double>());
  EXPECT_EQ(rep["clean"]["interval"], civ);
  EXPECT_EQ(rep["clean"]["inside_interval"].get<bool>(),
            rep["clean"]["actual"].get<double>() >= civ["lo"].get<double>() &&
                rep["clean"]["actual"].get<double>() <= civ["hi"].get<double>());
  // Every forecast fraction (one step each here) was scored with the metric and compared.
  std::ifstream mf(tmp.str("t/metrics.jsonl"));
  int records = 0;
  for (std::string line; std::getline(mf, line);) {
    const json m = json::parse(line);
    if (!m.contains("forecast")) continue;
    ++records;
    EXPECT_EQ(m["forecast"]["actual"], m["eval"]["macro_loss"]);
    EXPECT_TRUE(m["forecast"].contains("clean"));
  }
  EXPECT_EQ(records, 20);
}

// A rung's metrics.jsonl counts steps from 1 ("step": N after N steps); a rung trained before it
// did (another machine's, imported) counts from 0 and reads the same.
TEST(Ladder, ValidCeCurveReadsOneBasedAndOlderZeroBasedMetrics) {
  TempDir tmp("ladder-steps");
  sc::Rung rung;
  rung.run = "d32";
  rung.eval_every = 2;
  rung.steps = 2 * sc::kFractions;
  rung.compute_per_step = 1;
  std::vector<std::vector<sc::CurvePoint>> curves;
  for (int64_t first : {1, 0}) {
    rung.dir = tmp.str(fmt::format("from{}", first));
    fs::create_directories(rung.dir);
    std::string lines;
    for (int64_t done = 1; done <= rung.steps; ++done) {
      json m = {{"step", done - 1 + first}, {"loss", 1.0}};
      if (done % rung.eval_every == 0) m["valid_ce"] = 10.0 / double(done);
      lines += m.dump() + "\n";
    }
    marin::write_file_atomic(rung.dir + "/metrics.jsonl", lines);
    curves.push_back(sc::valid_ce_curve(rung));
  }
  for (const auto& curve : curves) {
    ASSERT_EQ(curve.size(), size_t(sc::kFractions));
    for (size_t k = 0; k < curve.size(); ++k) {
      EXPECT_EQ(curve[k].step, int64_t(2 * (k + 1)));
      EXPECT_DOUBLE_EQ(curve[k].loss, 10.0 / double(2 * (k + 1)));
    }
  }
}

TEST(LadderCli, CpuLadderConfigValidates) {
  auto r = run("ladder --config " MARIN_SOURCE_DIR "/configs/ladder_cpu.toml --dry-run");
  ASSERT_EQ(r.code, 0) << r.out;
  for (const char* name : {"d64", "d96", "d128", "d160"})
    EXPECT_NE(r.out.find(name), std::string::npos) << r.out;
  auto c = sc::LadderConfig::load(MARIN_SOURCE_DIR "/configs/ladder_cpu.toml");
  ASSERT_GE(c.rungs.size(), 4u);
  EXPECT_EQ(c.data_source["kind"], "mixture");
  EXPECT_EQ(c.data_source["mixture"], "configs/corpus_mixture.toml");
  EXPECT_EQ(c.eval_source.value("metric", ""), "macro_loss");
  // The target config is the family's shape rule at d224/L7, with ≥ 4× the largest rung's compute.
  const marin::ModelConfig target =
      marin::ModelConfig::from_toml_file(MARIN_SOURCE_DIR "/configs/ladder_cpu_target.toml");
  marin::ModelConfig rule = marin::ModelConfig::shape_rule(224, 7, 32);
  const marin::ModelConfig& largest = c.rungs.back().model;
  for (int64_t marin::ModelConfig::*f :
       {&marin::ModelConfig::num_experts, &marin::ModelConfig::top_k,
        &marin::ModelConfig::gated_norm_rank, &marin::ModelConfig::seq_len,
        &marin::ModelConfig::sliding_window, &marin::ModelConfig::vocab_size})
    rule.*f = largest.*f;
  EXPECT_EQ(target.to_json(), rule.to_json());
  const double target_c = marin::forecast_flops_per_step(target, 8) *
                          double(marin::steps_for_budget(target, 8, c.tokens_per_param));
  const auto& big = c.rungs.back();
  EXPECT_GE(target_c, 4.0 * big.compute_per_step * double(big.steps));
}

TEST(LadderCli, BudgetsTrainAsTheirOwnRunsAndFeedTheChinchillaLaw) {
  // Two rungs at two budgets: four runs, each in its own directory with its own schedule,
  // recorded in ladder.json; a rerun retrains nothing; the chinchilla law fits the four ends of
  // run and the power law the rungs at the target's budget.
  TempDir tmp("scaling-budgets");
  write_rows(tmp.str("train.bin"), 256, 7);
  write_rows(tmp.str("valid.bin"), 16, 99);
  std::ofstream(tmp.str("ladder.toml"))
      << "[ladder]\nname = \"b\"\nwidths = [32, 48]\nlayers = [2, 2]\n"
         "tokens_per_param = [0.25, 0.5]\nseed = 1\neval_batches = 1\nckpt_every_percent = 25\n"
         "[batch]\nbase = 2\nbase_width = 32\n"
         "[family]\nhead_dim = 8\nnum_experts = 8\ntop_k = 2\ngated_norm_rank = 16\n"
         "seq_len = 64\nsliding_window = 32\nvocab_size = 512\n";
  const std::string dir = tmp.str("ladder");
  const std::string cmd = "ladder --config " + tmp.str("ladder.toml") + " --out " + dir +
                          " --rows " + tmp.str("train.bin") + " --valid-rows " +
                          tmp.str("valid.bin");
  auto r = run(cmd);
  ASSERT_EQ(r.code, 0) << r.out;
  const json lj = load_json(dir + "/ladder.json");
  EXPECT_EQ(lj["ladder"]["budgets"], json::array({0.25, 0.5}));
  ASSERT_EQ(lj["rungs"].size(), 4u);
  const char* runs[] = {"d32-tpp0.25", "d32-tpp0.5", "d48-tpp0.25", "d48-tpp0.5"};
  for (size_t i = 0; i < 4; ++i) {
    const json& rg = lj["rungs"][i];
    EXPECT_EQ(rg["run"], runs[i]);
    EXPECT_EQ(rg["label"], runs[i]);
    EXPECT_EQ(rg["tokens_per_param"], i % 2 ? 0.5 : 0.25);
    EXPECT_EQ(rg["status"], "done");
    EXPECT_EQ(rg["curve"].size(), 20u);
    EXPECT_EQ(rg["dir"], dir + "/rung-" + runs[i]);
    // The run's own schedule: trained to its own steps.
    const json rj = load_json(dir + "/rung-" + runs[i] + "/run.json");
    EXPECT_EQ(rj["options"]["steps"], rg["steps"]) << rj.dump();
  }
  EXPECT_GT(lj["rungs"][1]["steps"].get<int64_t>(), lj["rungs"][0]["steps"].get<int64_t>());
  r = run(cmd);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("rung d48-tpp0.5 is done"), std::string::npos) << r.out;
  EXPECT_EQ(load_json(dir + "/ladder.json"), lj);

  r = run("forecast --ladder " + dir + " --preset tiny --target-steps 20 --l-inf 1 --law " +
          "chinchilla --out " + tmp.str("fc.json"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("chinchilla: E 1.0000 (fixed)"), std::string::npos) << r.out;
  const json fc = load_json(tmp.str("fc.json"));
  EXPECT_EQ(fc["inputs"]["law"]["family"], "chinchilla");
  EXPECT_EQ(fc["fits"][19]["fit"]["n"], 4);
  EXPECT_TRUE(fc["prediction"]["final_loss"].is_number());
  r = run("forecast --ladder " + dir + " --preset tiny --target-steps 20 --l-inf 1 --out " +
          tmp.str("fp.json"));
  ASSERT_EQ(r.code, 0) << r.out;
  const json fp = load_json(tmp.str("fp.json"));
  EXPECT_EQ(fp["fits"][19]["fit"]["n"], 2);  // d32 and d48 at 0.25, the target's budget
  EXPECT_EQ(fp["fits"][19]["points"][1]["rung"], "d48-tpp0.25");
}

TEST(LadderCli, SecondCpuExperimentConfigValidates) {
  // configs/ladder_cpu5.toml (issue 17 item 6, docs/experiments.md "to run"): d96/L3, d128/L4,
  // d160/L5 at 5 tokens per parameter, batches on the rule, two seeds each and three for d160, a
  // canary d192/L6 (one seed), learning rates 2× the rule, the macro loss every 5%.
  auto c = sc::LadderConfig::load(MARIN_SOURCE_DIR "/configs/ladder_cpu5.toml");
  std::vector<std::string> runs;
  for (auto& r : c.rungs) runs.push_back(r.run);
  EXPECT_EQ(runs, (std::vector<std::string>{"d96-seed0", "d96-seed1", "d128-seed0", "d128-seed1",
                                            "d160-seed0", "d160-seed1", "d160-seed2", "d192"}));
  for (auto& r : c.rungs) {
    EXPECT_EQ(r.tokens_per_param, 5.0) << r.run;
    EXPECT_EQ(r.model.num_layers, r.model.hidden_dim / 32) << r.run;
    EXPECT_EQ(double(r.batch), r.rule_batch) << r.run;  // 3, 4, 5, 6: on the rule
    EXPECT_EQ(r.canary, r.name == "d192") << r.run;
  }
  EXPECT_EQ(c.lr_multiplier, 2.0);
  EXPECT_EQ(c.keep_every_percent, 5);
  EXPECT_EQ(c.eval_source.value("metric", ""), "macro_loss");
  // Downstream tasks at every evaluation (issue 15: the metric against compute on the rungs).
  EXPECT_EQ(c.tasks,
            (std::vector<std::string>{"cloze_definitions", "lambada_style", "verse_completion"}));
  EXPECT_EQ(c.task_dir, "runs/full/tasks");
  // The target (configs/ladder_cpu_target.toml, d224/L7) at the rule's batch 7 and the ladder's
  // budget: 6.6× the compute of d160.
  const marin::ModelConfig target =
      marin::ModelConfig::from_toml_file(MARIN_SOURCE_DIR "/configs/ladder_cpu_target.toml");
  EXPECT_EQ(c.batch.batch_for(target.hidden_dim), 7);
  const double target_c =
      marin::forecast_flops_per_step(target, 7) * double(c.steps_for(target, 7));
  const auto& d160 = c.rungs[4];
  EXPECT_NEAR(target_c / (d160.compute_per_step * double(d160.steps)), 6.6, 0.05);
}

TEST(LadderCli, ForecastRefusesAnUnfinishedLadder) {
  TempDir tmp("scaling-unfinished");
  json lj = {{"format", "marin-ladder-v1"},
             {"ladder", {{"name", "x"}, {"tokens_per_param", 1.0}}},
             {"metric", "valid_ce"},
             {"rungs", json::array({{{"name", "a"}, {"status", "done"}, {"curve", json::array()}},
                                    {{"name", "b"}, {"status", "pending"}},
                                    {{"name", "c"}, {"status", "pending"}}})}};
  marin::write_file_atomic(tmp.str("ladder.json"), lj.dump());
  auto r = run("forecast --ladder " + tmp.str() +
               " --preset tiny --target-steps 100 "
               "--target-batch 8 --out " +
               tmp.str("f.json"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("rung b is not done"), std::string::npos) << r.out;
  EXPECT_FALSE(fs::exists(tmp.str("f.json")));
}

// --runs trains only the named runs (a ladder spread over sessions or machines): the others stay
// pending and the ladder is not complete (exit 3); a finished run left out by a later --runs is
// still recorded, not retrained; a name that is no run is refused with the list of runs.
TEST(LadderCli, RunsTrainsOnlyTheNamedRunsAndRecordsFinishedOnes) {
  TempDir tmp("scaling-runs");
  write_rows(tmp.str("train.bin"), 256, 7);
  write_rows(tmp.str("valid.bin"), 16, 99);
  const std::string cmd = "ladder --config " MARIN_SOURCE_DIR "/configs/ladder_tiny.toml --out " +
                          tmp.str("ladder") + " --rows " + tmp.str("train.bin") + " --valid-rows " +
                          tmp.str("valid.bin");
  auto status = [&] {
    const json lj = load_json(tmp.str("ladder/ladder.json"));
    std::vector<std::string> s;
    for (auto& rg : lj["rungs"]) s.push_back(rg["status"]);
    return s;
  };
  auto r = run(cmd + " --runs d48");
  ASSERT_EQ(r.code, 3) << r.out;
  EXPECT_EQ(status(), (std::vector<std::string>{"pending", "done", "pending", "pending"}));
  EXPECT_FALSE(fs::exists(tmp.str("ladder/rung-d32")));
  const json d48 = load_json(tmp.str("ladder/ladder.json"))["rungs"][1];
  ASSERT_EQ(d48["curve"].size(), 20u);

  r = run(cmd + " --runs d32");
  ASSERT_EQ(r.code, 3) << r.out;
  EXPECT_EQ(status(), (std::vector<std::string>{"done", "done", "pending", "pending"}));
  EXPECT_NE(r.out.find("rung d48 is done"), std::string::npos) << r.out;
  EXPECT_EQ(load_json(tmp.str("ladder/ladder.json"))["rungs"][1], d48);

  r = run(cmd + " --runs d32,d50");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--runs names d50, which is not a run of this ladder (runs: d32, d48, "
                       "d64, d80)"),
            std::string::npos)
      << r.out;
}

// A ladder spread over machines: --import takes another directory's ladder.json (a run directory
// does not outlive its machine, its record can be committed) and counts its finished runs as
// done, without their directories, here and in later calls; a file of another recipe or a run
// that differs is refused, naming the fields. [ladder] dtype pins every run's and the target's
// dtype; the forecast refuses rungs computed in different dtypes and binds the target to theirs.
TEST(LadderCli, ImportCountsAnotherLaddersRunsAndTheDtypeBindsTheTarget) {
  TempDir tmp("scaling-import");
  write_rows(tmp.str("train.bin"), 256, 7);
  write_rows(tmp.str("valid.bin"), 16, 99);
  std::string toml = marin::read_file(MARIN_SOURCE_DIR "/configs/ladder_tiny.toml");
  toml.replace(toml.find("seed = 1"), 8, "seed = 1\ndtype = \"fp32\"");
  marin::write_file_atomic(tmp.str("ladder.toml"), toml);
  const std::string data =
      " --rows " + tmp.str("train.bin") + " --valid-rows " + tmp.str("valid.bin");
  const std::string cmd = "ladder --config " + tmp.str("ladder.toml") + data + " --out ";
  const std::string a = tmp.str("a"), b = tmp.str("b");

  auto r = run(cmd + a + " --runs d32,d48");
  ASSERT_EQ(r.code, 3) << r.out;
  const json la = load_json(a + "/ladder.json");
  EXPECT_EQ(la["ladder"]["dtype"], "fp32");
  EXPECT_EQ(la["rungs"][0]["dtype"], "fp32");  // as the trainer resolved it
  EXPECT_EQ(load_json(a + "/rung-d32/run.json")["options"]["dtype"], "fp32");

  r = run(cmd + b + " --runs d64,d80 --import " + a + "/ladder.json");
  ASSERT_EQ(r.code, 0) << r.out;  // complete: two runs imported, two trained
  EXPECT_NE(r.out.find("run d32 is done in " + a + "/ladder.json, not retrained"),
            std::string::npos)
      << r.out;
  const json lb = load_json(b + "/ladder.json");
  for (int i = 0; i < 4; ++i) EXPECT_EQ(lb["rungs"][i]["status"], "done") << i;
  for (int i = 0; i < 2; ++i) {
    EXPECT_EQ(lb["rungs"][i]["curve"], la["rungs"][i]["curve"]);
    EXPECT_EQ(lb["rungs"][i]["imported"], a + "/ladder.json");
  }
  EXPECT_FALSE(lb["rungs"][2].contains("imported"));
  EXPECT_FALSE(fs::exists(b + "/rung-d32"));
  // Recorded: a later call needs neither the file nor the directories of a.
  fs::rename(a, tmp.str("a-moved"));
  r = run(cmd + b);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(load_json(b + "/ladder.json"), lb);
  fs::rename(tmp.str("a-moved"), a);

  // Another recipe, or a run that is not this ladder's run, is refused by name.
  json other = la;
  other["ladder"]["lr_multiplier"] = 3.0;
  marin::write_file_atomic(tmp.str("other.json"), other.dump());
  r = run(cmd + tmp.str("c") + " --runs d64 --import " + tmp.str("other.json"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("not a result of this ladder: its recipe differs in lr_multiplier"),
            std::string::npos)
      << r.out;
  other = la;
  other["rungs"][0]["seed"] = 7;
  marin::write_file_atomic(tmp.str("other.json"), other.dump());
  r = run(cmd + tmp.str("c") + " --runs d64 --import " + tmp.str("other.json"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("run d32 differs from this ladder's in seed"), std::string::npos) << r.out;

  // The forecast binds the dtype: in the flags it prints and against the target's options.
  const std::string fc = tmp.str("forecast.json");
  const std::string target = " --preset tiny --target-steps 40 --target-batch 4 --l-inf 0";
  r = run("forecast --ladder " + b + target + " --out " + fc);
  ASSERT_EQ(r.code, 0) << r.out;
  const json f = load_json(fc);
  EXPECT_EQ(f["inputs"]["target"]["computed_dtype"], "fp32");
  EXPECT_EQ(f["inputs"]["target"]["options"]["dtype"], "fp32");
  EXPECT_NE(f["inputs"]["target"]["train_flags"].get<std::string>().find("--dtype fp32"),
            std::string::npos);
  const std::string train =
      "train --preset tiny --batch 4 --steps 40 --seed 1" + data + " --out " + tmp.str("target");
  r = run(train + " --forecast " + fc);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("dtype: forecast \"fp32\", run \"auto\""), std::string::npos) << r.out;

  // Rungs computed in two dtypes are not one ladder.
  json mixed = lb;
  mixed["rungs"][3]["dtype"] = "bf16";
  fs::create_directories(tmp.str("mixed"));
  marin::write_file_atomic(tmp.str("mixed/ladder.json"), mixed.dump());
  r = run("forecast --ladder " + tmp.str("mixed") + target + " --out " + tmp.str("m.json"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("run d32 computed in fp32 and run d80 in bf16"), std::string::npos) << r.out;
  // "auto" in the ladder: the target must compute in what the rungs resolved it to, which
  // auto never resolves to here (bf16-emulated).
  json emulated = lb;
  emulated["ladder"]["dtype"] = "auto";
  for (auto& rg : emulated["rungs"]) rg["dtype"] = "bf16-emulated";
  marin::write_file_atomic(tmp.str("mixed/ladder.json"), emulated.dump());
  r = run("forecast --ladder " + tmp.str("mixed") + target + " --out " + tmp.str("e.json"));
  ASSERT_EQ(r.code, 0) << r.out;
  r = run(train + " --forecast " + tmp.str("e.json"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("the ladder's rungs computed in bf16-emulated (train with --dtype "
                       "bf16-emulated)"),
            std::string::npos)
      << r.out;

  toml.replace(toml.find("dtype = \"fp32\""), 14, "dtype = \"fp16\"");
  try {
    sc::LadderConfig::from_toml_text(toml, "x.toml");
    ADD_FAILURE() << "dtype fp16 accepted";
  } catch (const marin::Error& e) {
    EXPECT_NE(std::string(e.what()).find(
                  "x.toml [ladder]: 'dtype' must be auto, fp32, bf16 or bf16-emulated, got 'fp16'"),
              std::string::npos)
        << e.what();
  }
}

// --- downstream metrics from the loss (scaling/downstream.hpp) --------------------------------

namespace {

// Points of m(L) = floor + (1 − floor)·σ(−k(L − l0)) at losses spread over [lo, hi], times
// rel·noise (absolute, in metric units).
void link_points(double floor, double k, double l0, double lo, double hi, int n, double noise,
                 std::vector<double>& L, std::vector<double>& y) {
  Noise z;
  L.clear(), y.clear();
  for (int i = 0; i < n; ++i) {
    L.push_back(lo + (hi - lo) * i / (n - 1));
    y.push_back(floor + (1 - floor) / (1 + std::exp(k * (L.back() - l0))) + noise * z.next());
  }
}

}  // namespace

TEST(Downstream, LogisticLinkRecoversAKnownLaw) {
  std::vector<double> L, y;
  link_points(0.25, 2.5, 4.2, 3.0, 6.5, 30, 0.0, L, y);
  sc::LinkFit f = sc::fit_loss_link(L, y, 0.25, 1.0);
  EXPECT_NEAR(f.k, 2.5, 1e-6);
  EXPECT_NEAR(f.l0, 4.2, 1e-6);
  EXPECT_LT(f.rmse, 1e-8);
  EXPECT_NEAR(f.r2, 1.0, 1e-12);
  EXPECT_NEAR(f.predict(4.2), 0.625, 1e-6);  // the midpoint between floor and ceiling
  // Noisy (±0.02, about a 500-item task's standard error): still close.
  link_points(0.25, 2.5, 4.2, 3.0, 6.5, 60, 0.02, L, y);
  f = sc::fit_loss_link(L, y, 0.25, 1.0);
  EXPECT_NEAR(f.k, 2.5, 0.25);
  EXPECT_NEAR(f.l0, 4.2, 0.05);
  EXPECT_LT(f.rmse, 0.02);
  // Only the foot of the curve (every point near chance, as on small ladders): the fit still
  // returns a curve through the points rather than failing.
  link_points(0.25, 3.0, 2.0, 4.0, 6.0, 20, 0.0, L, y);
  f = sc::fit_loss_link(L, y, 0.25, 1.0);
  EXPECT_LT(f.rmse, 1e-6);
  for (size_t i : {0, 9, 19}) EXPECT_NEAR(f.predict(L[i]), y[i], 1e-6) << i;
  // Bad input is named.
  EXPECT_THROW(sc::fit_loss_link({1, 2}, {0.3, 0.4}), marin::Error);
  EXPECT_THROW(sc::fit_loss_link({2, 2, 2}, {0.3, 0.4, 0.5}), marin::Error);
  EXPECT_THROW(sc::fit_loss_link({1, 2, 3}, {0.3, 0.4, 0.5}, 0.5, 0.5), marin::Error);
  EXPECT_EQ(sc::parse_downstream_metric("cloze/acc").task, "cloze");
  EXPECT_TRUE(sc::parse_downstream_metric("cloze/clean/acc_norm").clean);
  EXPECT_EQ(sc::parse_downstream_metric("cloze/clean/acc_norm").metric, "acc_norm");
  EXPECT_THROW(sc::parse_downstream_metric("cloze"), marin::Error);
  EXPECT_THROW(sc::parse_downstream_metric("cloze/dirty/acc"), marin::Error);
}

TEST(Downstream, ForecastCarriesTheTargetLossThroughTheLink) {
  // A synthetic ladder.json: three rungs whose curve points carry a task scored by a known link.
  const double k = 3.0, l0 = 4.0;
  auto m = [&](double L) { return 0.25 + 0.75 / (1 + std::exp(k * (L - l0))); };
  json rungs = json::array();
  for (int r = 0; r < 3; ++r) {
    json curve = json::array();
    for (int i = 1; i <= 20; ++i) {
      const double L = 6.0 - 0.4 * r - 0.05 * i;
      curve.push_back(
          {{"step", i},
           {"loss", L},
           {"tasks",
            {{"cloze",
              {{"acc", m(L)},
               {"clean", {{"n", 10}, {"acc", r == 0 ? json() : json(m(L + 0.1))}}}}}}}});
    }
    rungs.push_back({{"name", fmt::format("d{}", 32 * (r + 1))},
                     {"status", "done"},
                     {"canary", false},
                     {"curve", curve}});
  }
  rungs.push_back(
      {{"name", "canary"}, {"status", "pending"}, {"canary", true}, {"curve", json::array()}});
  const json ladder = {{"metric", "valid_ce"}, {"rungs", rungs}};
  const json forecast = {
      {"fits",
       {{{"fraction", 0.5}, {"target_step", 10}, {"predicted_loss", 4.5}},
        {{"fraction", 1.0}, {"target_step", 20}, {"predicted_loss", 3.9}}}},
      {"prediction",
       {{"final_loss", 3.9}, {"interval", {{"lo", 3.8}, {"hi", 4.1}, {"level", 0.9}}}}}};
  sc::DownstreamSpec spec = sc::parse_downstream_metric("cloze/acc");
  spec.floor = 0.25;
  const json d = sc::downstream_forecast(ladder, forecast, spec);
  EXPECT_EQ(d["points"].size(), 60u);
  EXPECT_NEAR(d["link"]["k"].get<double>(), k, 1e-6);
  EXPECT_NEAR(d["link"]["L0"].get<double>(), l0, 1e-6);
  ASSERT_EQ(d["predictions"].size(), 2u);
  EXPECT_NEAR(d["predictions"][0]["predicted"].get<double>(), m(4.5), 1e-6);
  EXPECT_NEAR(d["final"]["predicted"].get<double>(), m(3.9), 1e-6);
  // The loss interval [3.8, 4.1] maps to [m(4.1), m(3.8)]: a lower loss is a higher metric.
  EXPECT_NEAR(d["final"]["interval_loss_only"]["lo"].get<double>(), m(4.1), 1e-6);
  EXPECT_NEAR(d["final"]["interval_loss_only"]["hi"].get<double>(), m(3.8), 1e-6);
  // The whole interval: these points lie on the link (no scatter, no fit uncertainty), so it is
  // the target loss's spread alone, a normal of the interval's width (sd = 0.3 / (2 · 1.645))
  // around 3.9, through the link.
  const double sd = 0.3 / (2 * 1.6448536);
  EXPECT_NEAR(d["final"]["interval"]["lo"].get<double>(), m(3.9 + 1.6448536 * sd), 0.01);
  EXPECT_NEAR(d["final"]["interval"]["hi"].get<double>(), m(3.9 - 1.6448536 * sd), 0.01);
  EXPECT_EQ(d["holdout"]["rung"], "d96");
  EXPECT_EQ(d["holdout"]["n"], 20);
  EXPECT_LT(d["holdout"]["rmse"].get<double>(), 1e-6);
  // The clean-only metric: the smallest rung has no clean score (null), so its points are
  // skipped; the rest follow m(L + 0.1).
  spec = sc::parse_downstream_metric("cloze/clean/acc");
  spec.floor = 0.25;
  const json c = sc::downstream_forecast(ladder, forecast, spec);
  EXPECT_EQ(c["points"].size(), 40u);
  EXPECT_EQ(c["skipped_points"], 20);
  EXPECT_NEAR(c["link"]["L0"].get<double>(), l0 - 0.1, 1e-5);
  // A task the ladder did not score is an error naming it.
  const std::string err = marin::testing::error_of([&] {
    sc::downstream_forecast(ladder, forecast, sc::parse_downstream_metric("nosuch/acc"));
  });
  EXPECT_NE(err.find("no task 'nosuch'"), std::string::npos) << err;
}

TEST(Downstream, TheMetricIntervalCoversANewEvaluationAtItsLevel) {
  // Rungs' points scattered around a known link (Gaussian, sd 0.02: a task of ~500 items) and a
  // target whose loss is known exactly: the 90% interval must cover a new evaluation at that loss
  // about 90% of the time, which it can only by carrying the link's fit uncertainty and one
  // evaluation's scatter (the loss-only interval is then a single point).
  const double k = 3.0, l0 = 4.2, noise = 0.02, target_loss = 3.9;
  auto m = [&](double L) { return 0.25 + 0.75 / (1 + std::exp(k * (L - l0))); };
  const json forecast = {{"fits", json::array()}, {"prediction", {{"final_loss", target_loss}}}};
  sc::DownstreamSpec spec = sc::parse_downstream_metric("cloze/acc");
  spec.floor = 0.25;
  int covered = 0;
  const int trials = 200;
  for (int t = 0; t < trials; ++t) {
    marin::Rng rng(1000 + uint64_t(t));
    json rungs = json::array();
    for (int r = 0; r < 3; ++r) {
      json curve = json::array();
      for (int i = 1; i <= 8; ++i) {
        const double L = 5.6 - 0.35 * r - 0.08 * i;
        curve.push_back({{"step", i},
                         {"loss", L},
                         {"tasks", {{"cloze", {{"acc", m(L) + noise * rng.normal()}}}}}});
      }
      rungs.push_back(
          {{"name", fmt::format("d{}", 32 * (r + 1))}, {"status", "done"}, {"curve", curve}});
    }
    const json d = sc::downstream_forecast({{"rungs", rungs}}, forecast, spec);
    const json& iv = d["final"]["interval"];
    ASSERT_TRUE(iv["lo"].is_number()) << d["final"].dump();
    const double fresh = m(target_loss) + noise * rng.normal();
    covered += iv["lo"].get<double>() <= fresh && fresh <= iv["hi"].get<double>();
  }
  EXPECT_GE(covered, 170) << covered << " of " << trials;  // 85–95%, as the loss's interval
  EXPECT_LE(covered, 190) << covered << " of " << trials;
}

TEST(ForecastPlot, DrawsBothPredictionIntervals) {
  // scripts/plot_forecast.py (marin forecast --plot) on the committed forecast of the first CPU
  // experiment, given an interval on every fraction for all documents and for the clean ones.
  TempDir tmp("forecast-plot");
  json f = load_json(MARIN_SOURCE_DIR "/docs/forecast_cpu.json");
  for (json& e : f["fits"]) {
    const double p = e["predicted_loss"].get<double>(), c = e["predicted_clean_loss"].get<double>();
    e["interval"] = {{"lo", p - 0.05}, {"hi", p + 0.05}, {"level", 0.9}};
    e["clean_interval"] = {{"lo", c - 0.06}, {"hi", c + 0.06}, {"level", 0.9}};
  }
  marin::write_file_atomic(tmp.str("f.json"), f.dump());
  const auto r =
      marin::testing::run_shell("/usr/bin/python3 " MARIN_SOURCE_DIR "/scripts/plot_forecast.py " +
                                tmp.str("f.json") + " " + tmp.str("f.png"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_GT(fs::file_size(tmp.str("f.png")), 10000u);
}

// A tiny ladder with a [tasks] table: every rung's curve points carry the task's scores (as the
// trainer recorded them at each evaluation), and `marin forecast --metric` fits the link and
// forecasts the target's metric.
TEST(LadderCli, LadderRecordsTasksAndForecastPredictsAMetric) {
  TempDir tmp("scaling-tasks");
  ASSERT_EQ(marin::testing::tokenize_fixture(tmp), "");
  auto r = run("tasks build --corpus " MARIN_SOURCE_DIR "/data/fixture --out " + tmp.str("tasks") +
               " --tasks verse_completion --max-items 8");
  ASSERT_EQ(r.code, 0) << r.out;
  std::ofstream(tmp.str("mix.toml")) << "weights = { bible_kjv = 1, fortunes = 1 }\n";
  std::ofstream(tmp.str("ladder.toml"))
      << "[ladder]\nname = \"t\"\nwidths = [32, 48, 64]\nlayers = [2, 2, 3]\n"
         "tokens_per_param = 0.25\neval_batches = 1\n"
         "[batch]\nbase = 2\nbase_width = 32\n"
         "[family]\nhead_dim = 8\nnum_experts = 8\ntop_k = 2\ngated_norm_rank = 16\n"
         "seq_len = 64\nsliding_window = 32\nvocab_size = 512\n"
         "[tasks]\nnames = [\"verse_completion\"]\ndir = \"" +
             tmp.str("tasks") + "\"\n[data]\nkind = \"mixture\"\nmixture = \"" +
             tmp.str("mix.toml") + "\"\ntoken_dir = \"" + tmp.str("tokens") + "\"\ntokenizer = \"" +
             tmp.str("tok.json") + "\"\n";
  const std::string dir = tmp.str("ladder");
  r = run("ladder --config " + tmp.str("ladder.toml") + " --out " + dir);
  ASSERT_EQ(r.code, 0) << r.out;
  const json lj = load_json(dir + "/ladder.json");
  EXPECT_EQ(lj["ladder"]["tasks"]["names"], json::array({"verse_completion"}));
  for (auto& rg : lj["rungs"]) {
    ASSERT_EQ(rg["curve"].size(), 20u);
    for (auto& p : rg["curve"]) {
      const json& t = p["tasks"]["verse_completion"];
      ASSERT_TRUE(t["acc"].is_number()) << p.dump();
      EXPECT_EQ(t["n"], 8);
      EXPECT_EQ(t["clean"]["n"].get<int>() + t["contaminated"]["n"].get<int>(), 8);
    }
  }
  const std::string target = tmp.str("target.toml");
  std::ofstream(target) << marin::read_file(dir + "/rung-d64/model.toml");
  r = run("forecast --ladder " + dir + " --config " + target +
          " --set num_layers=4 --target-steps 20 --target-batch 2 --metric "
          "verse_completion/acc,verse_completion/acc_norm --metric-floor 0.25 --out " +
          tmp.str("f.json"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("downstream verse_completion/acc from valid_ce"), std::string::npos)
      << r.out;
  const json f = load_json(tmp.str("f.json"));
  for (const char* name : {"verse_completion/acc", "verse_completion/acc_norm"}) {
    const json& d = f["downstream"][name];
    ASSERT_TRUE(d.is_object()) << name;
    EXPECT_EQ(d["points"].size(), 60u);
    EXPECT_EQ(d["link"]["floor"], 0.25);
    EXPECT_EQ(d["predictions"].size(), 20u);
    const double p = d["final"]["predicted"].get<double>();
    EXPECT_GE(p, 0.25);
    EXPECT_LE(p, 1.0);
    EXPECT_EQ(d["holdout"]["rung"], "d64");
  }
  // The target run scores the forecast's downstream metrics from its own task evaluations: at
  // the predicted steps it scores (every 5 steps here) and at the end, against the interval.
  r = run("train --config " + target + " --set num_layers=4 --data " + tmp.str("mix.toml") +
          " --token-dir " + tmp.str("tokens") + " --tokenizer " + tmp.str("tok.json") + " " +
          f["inputs"]["target"]["train_flags"].get<std::string>() + " --forecast " +
          tmp.str("f.json") + " --tasks verse_completion --task-dir " + tmp.str("tasks") +
          " --tasks-every 5 --out " + tmp.str("target"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("forecast verse_completion/acc: predicted"), std::string::npos) << r.out;
  const json rep = load_json(tmp.str("target/forecast_report.json"));
  for (const char* name : {"verse_completion/acc", "verse_completion/acc_norm"}) {
    const json& d = rep["downstream"][name];
    ASSERT_TRUE(d["actual"].is_number()) << name << " " << d.dump();
    EXPECT_DOUBLE_EQ(d["predicted"].get<double>(),
                     f["downstream"][name]["final"]["predicted"].get<double>());
    // 8 items: the accuracy is a multiple of 1/8.
    EXPECT_DOUBLE_EQ(d["actual"].get<double>() * 8, std::round(d["actual"].get<double>() * 8));
    EXPECT_DOUBLE_EQ(d["diff"].get<double>(),
                     d["actual"].get<double>() - d["predicted"].get<double>());
    EXPECT_TRUE(d["inside_interval"].is_boolean()) << d.dump();
    ASSERT_EQ(d["observed"].size(), 4u) << d.dump();  // steps 5, 10, 15, 20
    EXPECT_EQ(d["observed"][3]["step"], 20);
    EXPECT_DOUBLE_EQ(d["observed"][3]["actual"].get<double>(), d["actual"].get<double>());
  }
  // A metric of a task the ladder did not score.
  r = run("forecast --ladder " + dir + " --config " + target +
          " --set num_layers=4 --target-steps 20 --target-batch 2 --metric cloze_definitions/acc "
          "--out " +
          tmp.str("g.json"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("no task 'cloze_definitions'"), std::string::npos) << r.out;
}

// docs/scaling.md opens with the 30-second loop (issue 42): its first bash block, run as written
// in a directory laid out like the repository (build/bin/marin, data/, configs/), trains the
// ladder, registers the forecast and trains the target against it; and its train line is the one
// the forecast prints.
TEST(Scaling, TheThirtySecondLoopOfTheDocsRuns) {
  namespace fs = std::filesystem;
  TempDir tmp("quick-loop");
  const std::string doc = marin::read_file(MARIN_SOURCE_DIR "/docs/scaling.md");
  const size_t open = doc.find("```bash\n");
  ASSERT_NE(open, std::string::npos);
  const size_t body = open + 8, close = doc.find("```", body);
  const std::string block = doc.substr(body, close - body);
  fs::create_directories(tmp.path / "build/bin");
  fs::create_symlink(MARIN_BIN, tmp.path / "build/bin/marin");
  for (const char* d : {"data", "configs"})
    fs::create_directory_symlink(fs::path(MARIN_SOURCE_DIR) / d, tmp.path / d);
  marin::testing::write_text(tmp.str("loop.sh"), "set -e\n" + block);
  const auto r = marin::testing::run_shell("cd " + tmp.str() + " && bash loop.sh");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("forecast: predicted"), std::string::npos) << r.out;
  const json report =
      json::parse(marin::read_file(tmp.str("runs/quick/target/forecast_report.json")));
  EXPECT_TRUE(report["interval"].is_object()) << report.dump();
  // The block's train line (continuations joined) is the printed one, but for --out.
  std::string documented = block.substr(block.find("$B train "));
  documented = documented.substr(0, documented.find("--out "));
  for (size_t at; (at = documented.find("\\\n  ")) != std::string::npos;)
    documented.replace(at, 4, "");
  const std::string q = "runs/quick";
  for (size_t at; (at = documented.find("$Q")) != std::string::npos;) documented.replace(at, 2, q);
  const size_t printed = r.out.find("train the target:\n  marin ");
  ASSERT_NE(printed, std::string::npos) << r.out;
  EXPECT_NE(r.out.find(documented.substr(3), printed), std::string::npos)
      << "documented: " << documented << "\n"
      << r.out;
}
