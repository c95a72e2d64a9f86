// The per-op profile (core/profile.hpp) and `marin bench --train --profile`: self time per op,
// the products' FLOPs charged to the innermost open op, nothing collected when off; and on the
// real step, every op's products counted, the backward's exactly twice the forward's.
#include <gtest/gtest.h>

#include <chrono>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "cli_util.hpp"
#include "core/profile.hpp"
#include "model/config.hpp"

namespace profile = marin::profile;
using nlohmann::json;

namespace {
void busy(double seconds) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < end) {
  }
}
std::map<std::string, profile::Row> by_name() {
  std::map<std::string, profile::Row> m;
  for (const auto& r : profile::rows()) m[r.name] = r;
  return m;
}
}  // namespace

TEST(Profile, SelfTimeFlopsToTheInnermostOpAndNothingWhenOff) {
  profile::enable(false);
  {
    const profile::Scope off("off");
    profile::add_flops(1e9);
  }
  EXPECT_TRUE(profile::rows().empty());

  profile::enable(true);
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < 2; ++i) {
    const profile::Scope outer("outer");
    profile::add_flops(10);
    busy(0.02);
    {
      const profile::Scope inner("inner");
      busy(0.03);
      // From another thread (a kernel's worker): charged to the op open now.
      std::thread([] { profile::add_flops(5); }).join();
    }
  }
  const double total = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto m = by_name();
  const std::string slowest = profile::rows().front().name;
  profile::enable(false);
  ASSERT_EQ(m.size(), 2u);
  EXPECT_EQ(m.at("outer").calls, 2);
  EXPECT_EQ(m.at("inner").calls, 2);
  EXPECT_EQ(m.at("outer").flops, 20);
  EXPECT_EQ(m.at("inner").flops, 10);
  // Self time: the outer op's (2 × 20 ms and more) without the inner op's (2 × 30 ms and more),
  // so the two add up to the loop's time, not to more.
  EXPECT_GE(m.at("outer").seconds, 0.04);
  EXPECT_GE(m.at("inner").seconds, 0.06);
  EXPECT_NEAR(m.at("outer").seconds + m.at("inner").seconds, total, 0.01);
  EXPECT_EQ(slowest, "inner");     // slowest first
  EXPECT_TRUE(by_name().empty());  // enable() clears
}

TEST(Profile, BenchTrainProfileCountsEveryOpsProducts) {
  const auto r = marin::testing::run(
      "bench --preset tiny --batch 4 --iters 2 --warmup 1 --threads 1 --dtype fp32 --train "
      "--profile --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const json j = json::parse(r.out.substr(r.out.find("{\"")));
  std::map<std::string, json> ops;
  for (const json& o : j.at("profile")) ops[o.at("op").get<std::string>()] = o;
  const int layers = int(marin::ModelConfig::preset("tiny").num_layers);
  double fwd = 0, bwd = 0;
  for (const char* name :
       {"attention", "moe", "moe.experts", "shared_experts", "lm_head+loss", "embedding"}) {
    SCOPED_TRACE(name);
    const std::string f = std::string(name) + ".forward", b = std::string(name) + ".backward";
    ASSERT_TRUE(ops.count(f) && ops.count(b)) << r.out;
    EXPECT_GT(ops[f]["flops_per_step"].get<double>(), 0);
    // Every product of the backward is two of the forward's size (dX and dW; dQ, dK, dV, dP).
    EXPECT_EQ(ops[b]["flops_per_step"].get<double>(), 2 * ops[f]["flops_per_step"].get<double>());
    fwd += ops[f]["flops_per_step"].get<double>();
    bwd += ops[b]["flops_per_step"].get<double>();
  }
  // 4 micro-batches (micro-batch 1 of batch 4) through every layer.
  EXPECT_EQ(ops["attention.forward"]["calls_per_step"].get<double>(), 4.0 * layers);
  EXPECT_GT(ops["optimizer.update"]["flops_per_step"].get<double>(), 0);  // Newton–Schulz
  EXPECT_EQ(bwd, 2 * fwd);

  const auto t = marin::testing::run(
      "bench --preset tiny --batch 4 --iters 1 --warmup 0 --threads 1 --train --profile");
  ASSERT_EQ(t.code, 0) << t.out;
  EXPECT_NE(t.out.find("per-op profile"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("attention.backward"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("(outside every op)"), std::string::npos) << t.out;
  const auto refused = marin::testing::run("bench --preset tiny --profile");
  EXPECT_NE(refused.code, 0);
  EXPECT_NE(refused.out.find("--profile profiles the training step: add --train"),
            std::string::npos)
      << refused.out;
}
