// Sizing a model to a target (`marin plan --target-params 1B --active 8/64`, plan/model_size): the
// depth rule reproduces the presets, the search finds the nearest shape-rule configuration, and the
// --set flags it prints make that configuration.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "model/accounting.hpp"
#include "plan/model_size.hpp"

using namespace marin;
using marin::testing::error_of;
using marin::testing::run;

TEST(ModelSize, DepthRuleGivesThePresetsTheirLayers) {
  for (const char* name : {"d512", "d768", "d1024", "d1536", "d2048", "hero-535b"}) {
    const ModelConfig c = ModelConfig::preset(name);
    EXPECT_EQ(preset_depth(c.hidden_dim), c.num_layers) << name;
  }
  EXPECT_LE(preset_depth(256), 6);  // below and above the presets: along the end segments
  EXPECT_GE(preset_depth(8192), 48);
}

TEST(ModelSize, TheSearchFindsTheNearestConfigurationOfTheShapeRule) {
  const SizedModel s = size_to_target(1e9, {8, 64}, {});
  EXPECT_EQ(s.config.top_k, 8);
  EXPECT_EQ(s.config.num_experts, 64);
  EXPECT_EQ(s.config.num_layers, preset_depth(s.config.hidden_dim));
  EXPECT_EQ(s.headline_params, account(s.config).headline_params);
  EXPECT_NEAR(s.relative_error, (double(s.headline_params) - 1e9) / 1e9, 1e-15);
  // Brute force over the same widths: none is nearer.
  for (int64_t d = 256; d <= 32768; d += 128) {
    ModelConfig c = ModelConfig::shape_rule(d, preset_depth(d));
    c.top_k = 8;
    c.num_experts = 64;
    EXPECT_GE(std::abs(double(account(c).headline_params) - 1e9),
              std::abs(double(s.headline_params) - 1e9))
        << d;
  }
  EXPECT_LT(std::abs(s.relative_error), 0.1);
  // 1B of 8/64 is d1024's shape with 64 experts: the flags start from the preset nearest it.
  EXPECT_EQ(s.base, "d1024");
  EXPECT_EQ(s.sets, std::vector<std::string>{"num_experts=64"});
  // --set is counted in the search: a smaller vocabulary leaves more parameters to the layers.
  const SizedModel v = size_to_target(1e9, {8, 64}, {"vocab_size=32000"});
  EXPECT_EQ(v.config.vocab_size, 32000);
  EXPECT_GE(v.config.hidden_dim, s.config.hidden_dim);
}

TEST(ModelSize, BadCountsAndRatiosAreNamed) {
  EXPECT_EQ(parse_param_count("1B", "--target-params"), 1e9);
  EXPECT_EQ(parse_param_count("350m", "--target-params"), 350e6);
  EXPECT_EQ(parse_param_count("1.5e9", "--target-params"), 1.5e9);
  for (const char* bad : {"", "1Q", "B", "-1B", "1BB", "nan", "12"}) {
    const std::string e = error_of([&] { parse_param_count(bad, "--target-params"); });
    EXPECT_NE(e.find("--target-params '" + std::string(bad) + "'"), std::string::npos) << e;
  }
  const ActiveExperts a = parse_active_experts("8/64", "--active");
  EXPECT_EQ(a.top_k, 8);
  EXPECT_EQ(a.num_experts, 64);
  for (const char* bad : {"8", "8/", "/64", "64/8", "0/64", "8/64x", "a/b", "8/8"}) {
    const std::string e = error_of([&] { parse_active_experts(bad, "--active"); });
    EXPECT_NE(e.find("--active '" + std::string(bad) + "'"), std::string::npos) << e;
  }
}

TEST(ModelSize, ThePlanPrintsFlagsThatMakeTheSizedModel) {
  auto r = run("plan --target-params 1B --active 8/64 --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["config"]["top_k"].get<int64_t>(), 8);
  EXPECT_EQ(j["config"]["num_experts"].get<int64_t>(), 64);
  EXPECT_LT(std::abs(j["sized"]["relative_error"].get<double>()), 0.1);
  std::string flags = "plan --preset " + j["sized"]["preset"].get<std::string>();
  for (const auto& s : j["sized"]["sets"]) flags += " --set " + s.get<std::string>();
  r = run(flags + " --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json again = nlohmann::json::parse(r.out);
  EXPECT_EQ(again["config"], j["config"]);
  EXPECT_EQ(again["headline_total_params"], j["headline_total_params"]);

  r = run("plan --target-params 1B --active 8/64");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("model          sized to 1B total parameters"), std::string::npos) << r.out;
  r = run("plan --preset d512 --target-params 1B");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("without --preset or --config"), std::string::npos) << r.out;
  // --active alone changes the preset's experts.
  r = run("plan --preset d512 --active 4/32 --json");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(nlohmann::json::parse(r.out)["config"]["num_experts"].get<int64_t>(), 32);
}
