// recipe.md §1 presets and §6 accounting, asserted to the last digit.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "model/accounting.hpp"
#include "model/config.hpp"
#include "model/params.hpp"
#include "optim/hparams.hpp"

using namespace marin;

TEST(Accounting, HeroExactNumbers) {
  ModelConfig c = ModelConfig::preset("hero-535b");
  c.validate();
  Accounting a = account(c);
  EXPECT_EQ(a.active_params, 22'762'487'808);
  EXPECT_EQ(a.headline_params, 535'305'388'032);
  EXPECT_EQ(a.every_tensor, 535'477'106'688);
  EXPECT_EQ(a.fwd_flops_per_token, 49'912'086'528);
  const int64_t batch = preset_run("hero-535b").batch;
  EXPECT_EQ(batch * c.seq_len, 46'137'344);
  const int64_t steps = steps_for_budget(c, batch, 791.0);
  EXPECT_EQ(steps, 390'251);
  EXPECT_NEAR(training_flops(c, batch, steps) / 1e24, 2.696, 0.0005);
  EXPECT_DOUBLE_EQ(forecast_flops_per_step(c, batch), 6.690294608796058e18);
}

TEST(Accounting, HeroLearningRates) {
  ModelConfig c = ModelConfig::preset("hero-535b");
  HyperParams h = heuristic_hparams(c.hidden_dim, 11264, c.seq_len, 390'251);
  EXPECT_NEAR(h.muonh_lr, 3.29e-3, 0.005e-3);
  EXPECT_NEAR(h.adam_lr, 7.59e-4, 0.005e-4);
  EXPECT_NEAR(h.eps, 6.04e-15, 0.005e-15);
  EXPECT_DOUBLE_EQ(h.beta2, 0.95);
  EXPECT_DOUBLE_EQ(h.beta1, 0.90);
}

TEST(Accounting, LadderRungsMatchMarin) {
  struct Rung {
    const char* name;
    double active, total;  // Marin's rounded figures
    double active_unit, total_unit;
  };
  const Rung rungs[] = {{"d768", 60.6, 1.59, 1e6, 1e9},
                        {"d1024", 162.0, 3.97, 1e6, 1e9},
                        {"d1536", 481.3, 11.52, 1e6, 1e9},
                        {"d2048", 1.171, 27.72, 1e9, 1e9}};
  for (auto& r : rungs) {
    Accounting a = account(ModelConfig::preset(r.name));
    const double act = a.active_params / r.active_unit, tot = a.headline_params / r.total_unit;
    // Round to the number of digits Marin reports.
    const double act_digits = r.active_unit == 1e9 ? 1000 : 10;
    const double tot_digits = 100;
    EXPECT_DOUBLE_EQ(std::round(act * act_digits) / act_digits, r.active) << r.name;
    EXPECT_DOUBLE_EQ(std::round(tot * tot_digits) / tot_digits, r.total) << r.name;
  }
}

TEST(Accounting, ParamTableCountsEveryTensor) {
  for (auto& name : ModelConfig::preset_names()) {
    if (name == "hero-535b") continue;  // same formula; the table would only be big
    ModelConfig c = ModelConfig::preset(name);
    ParamTable t(c);
    int64_t sum = 0;
    for (auto& p : t.params()) sum += p.size;
    EXPECT_EQ(sum, every_tensor_params(c)) << name;
  }
}

TEST(Accounting, ShapeRuleOfRungs) {
  ModelConfig c = ModelConfig::preset("d2048");
  EXPECT_EQ(c.num_layers, 22);
  EXPECT_EQ(c.num_heads, 16);
  EXPECT_EQ(c.kv_heads_local, 4);
  EXPECT_EQ(c.kv_heads_global, 2);
  EXPECT_EQ(c.expert_dim, 1024);
  EXPECT_EQ(c.rope_dim, 64);
  ModelConfig s = ModelConfig::preset("cpu-small");
  EXPECT_EQ(s.hidden_dim, 256);
  EXPECT_EQ(s.num_experts, 32);
  EXPECT_EQ(s.top_k, 4);
  EXPECT_EQ(s.sliding_window, 256);
  EXPECT_EQ(s.vocab_size, 8192);
}

TEST(Config, LayerKinds) {
  ModelConfig c = ModelConfig::preset("tiny");  // 4 layers, global_every 4
  EXPECT_FALSE(c.is_global(0));
  EXPECT_FALSE(c.is_global(2));
  EXPECT_TRUE(c.is_global(3));
  c.num_layers = 6;
  EXPECT_TRUE(c.is_global(3));
  EXPECT_FALSE(c.is_global(4));
  EXPECT_TRUE(c.is_global(5));  // the last layer is always global
}

static std::string error_of(const std::vector<std::string>& sets) {
  try {
    resolve_config("tiny", "", sets);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Config, ValidationNamesTheProblem) {
  EXPECT_NE(error_of({"bogus=1"}).find("unknown config field 'bogus'"), std::string::npos);
  EXPECT_NE(error_of({"kv_heads_local=3"}).find("kv_heads_local (3) must divide num_heads"),
            std::string::npos);
  EXPECT_NE(error_of({"kv_heads_global=3"}).find("kv_heads_global (3) must divide"),
            std::string::npos);
  EXPECT_NE(error_of({"top_k=8"}).find("top_k + 1 (9) must not exceed num_experts (8)"),
            std::string::npos);
  EXPECT_NE(error_of({"sliding_window=65"}).find("sliding_window (65) must not exceed seq_len"),
            std::string::npos);
  EXPECT_NE(error_of({"rope_dim=3"}).find("rope_dim must be even"), std::string::npos);
  EXPECT_NE(error_of({"rope_dim=10"}).find("rope_dim (10) must not exceed head_dim (8)"),
            std::string::npos);
  EXPECT_NE(error_of({"hidden_dim=abc"}).find("expected an integer, got 'abc'"), std::string::npos);
  EXPECT_NE(error_of({"sconv_sites=k,foo"}).find("unknown site 'foo'"), std::string::npos);
  EXPECT_NE(error_of({"noequals"}).find("--set expects key=value"), std::string::npos);
  EXPECT_EQ(error_of({"hidden_dim=128", "sconv_sites=k"}), "");
}

TEST(Config, JsonRoundTrip) {
  ModelConfig c = ModelConfig::preset("cpu-small");
  ModelConfig d = ModelConfig::from_json(c.to_json(), "test");
  EXPECT_EQ(c.to_json(), d.to_json());
  EXPECT_EQ(c.to_json().size(), 27u);  // every field of formats.md's config.json
}
