// The cluster planner (docs/cluster_planner.md): the 535B run layout's exact numbers (issue 11's
// research summary) through the library and through the real binary, the shipped hardware files,
// and the errors for bad hardware files and layouts.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "model/accounting.hpp"
#include "plan/cluster_plan.hpp"

using namespace marin;
using marin::testing::error_of;
using marin::testing::run;
using marin::testing::TempDir;

namespace {

const std::string kClusters = std::string(MARIN_SOURCE_DIR) + "/configs/cluster/";

ClusterPlan plan_on(const std::string& file, int64_t racks, ClusterOptions o = {}) {
  o.racks = racks;
  o.batch = preset_run("hero-535b").batch;
  return plan_cluster(ModelConfig::preset("hero-535b"), ClusterHardware::load(kClusters + file), o);
}

const TransportEstimate& transport(const ClusterPlan& p, const std::string& name) {
  for (const TransportEstimate& t : p.transports)
    if (t.name == name) return t;
  throw std::runtime_error("no transport " + name);
}

std::string write(const TempDir& dir, const std::string& name, const std::string& text) {
  std::ofstream(dir.str(name)) << text;
  return dir.str(name);
}

// A valid hardware file to break one field at a time.
const std::string kGood = R"(name = "test"
unit = "node"
gpus_per_unit = 8
[gpu]
bf16_dense_tflops = 1000
hbm_gb = 80
hbm_tb_per_s = 3
[nvlink]
gb_per_s = 450
domain_gpus = 8
[network]
gb_per_s = 50
)";

std::string replaced(const std::string& from, const std::string& to) {
  std::string s = kGood;
  s.replace(s.find(from), from.size(), to);
  return s;
}

}  // namespace

TEST(PooledCapacity, HeroResearchSummary) {
  const PooledCapacity p = pooled_capacity(65'536, 8, 64, 6, 3, 1.15);
  EXPECT_EQ(p.assignments, 524'288);
  EXPECT_EQ(p.sender_rows, 3'141);     // ceil(1.15·524288/(64·3)) = ceil(3140.27)
  EXPECT_EQ(p.receiver_rows, 33'497);  // ceil(1.15·524288/(6·3)) = ceil(33496.18)
}

TEST(PooledCapacity, CeilingOfTheBalancedShare) {
  EXPECT_EQ(capacity_rows(1.0, 600, 6), 100);  // an exact share is not rounded up
  EXPECT_EQ(capacity_rows(1.0, 601, 6), 101);
  EXPECT_EQ(capacity_rows(1.25, 64, 8), 10);
  EXPECT_NE(error_of([] { pooled_capacity(0, 8, 64, 6, 3, 1.15); }), "");
  EXPECT_NE(error_of([] { pooled_capacity(10, 8, 64, 6, 3, 0.0); }).find("capacity factor"),
            std::string::npos);
}

TEST(ClusterPlan, HeroMeshOnGb200) {
  const ClusterPlan p = plan_on("gb200-nvl72.toml", 11);
  const ClusterMesh& m = p.mesh;
  EXPECT_EQ(m.gpus_per_rack, 64);  // the most of 72 that divide E = 384
  EXPECT_EQ(m.gpus, 704);
  EXPECT_EQ(m.replica, 11);
  EXPECT_EQ(m.data, 1);
  EXPECT_EQ(m.expert, 64);
  EXPECT_EQ(m.experts_per_gpu, 6);
  EXPECT_EQ(m.sequences_per_gpu, 16);
  EXPECT_EQ(m.tokens_per_gpu, 65'536);  // 46,137,344 tokens / 704 GPUs
  EXPECT_EQ(m.ep_peers_nvlink, 63);
  EXPECT_EQ(m.ep_peers_network, 0);
  EXPECT_TRUE(m.shard_group_on_nvlink);
  EXPECT_EQ(p.pooled.assignments, 524'288);
  EXPECT_EQ(p.pooled.sender_rows, 3'141);
  EXPECT_EQ(p.pooled.receiver_rows, 33'497);
  EXPECT_DOUBLE_EQ(p.capacity_factor, 1.15);
  EXPECT_EQ(p.waves, 3);
}

TEST(ClusterPlan, SplitIsTheAccountingsEveryTensor) {
  const ModelConfig c = ModelConfig::preset("hero-535b");
  const ParamSplit s = split_params(c);
  EXPECT_EQ(s.expert + s.other + s.state, every_tensor_params(c));
  EXPECT_EQ(s.expert, c.num_layers * (core_params(c, c.num_experts) - core_params(c, 0)));
  EXPECT_EQ(s.state, c.num_layers * c.num_experts);  // the router bias
  EXPECT_GT(s.ns_flops_expert, s.ns_flops_other);
}

TEST(ClusterPlan, HeroMemoryIsTheRackShardOfEveryTensor) {
  const ClusterPlan p = plan_on("gb200-nvl72.toml", 11);
  const ModelConfig c = ModelConfig::preset("hero-535b");
  const double every = double(every_tensor_params(c));
  EXPECT_NEAR(p.memory.expert_weights + p.memory.other_weights, 4 * every / 64, 1.0);
  EXPECT_DOUBLE_EQ(p.memory.layer_inputs, 2.0 * 48 * 65'536 * 6144);
  EXPECT_GT(p.memory.layer_working_set, 0);
  EXPECT_LT(p.memory.device(), p.hw.hbm_bytes);  // the 535B run fit
}

TEST(ClusterPlan, HeroAllToAllBytes) {
  const ClusterPlan p = plan_on("gb200-nvl72.toml", 11);
  EXPECT_EQ(p.row_bytes, 3072 * 2);
  const double per_step = 6.0 * 48 * 6144;  // exchanges × layers × row bytes
  const TransportEstimate& dropless = transport(p, "dropless");
  EXPECT_DOUBLE_EQ(dropless.rows_sent, 524'288.0 * 63 / 64);
  EXPECT_DOUBLE_EQ(dropless.bytes_per_step, 516'096 * per_step);
  EXPECT_DOUBLE_EQ(dropless.network_bytes, 0);
  EXPECT_DOUBLE_EQ(dropless.expert_rows, 524'288);
  const TransportEstimate& pooled = transport(p, "pooled");
  EXPECT_DOUBLE_EQ(pooled.rows_sent, 3.0 * 63 * 3'141);  // W waves × other shards × capacity
  EXPECT_DOUBLE_EQ(pooled.bytes_per_step, 3.0 * 63 * 3'141 * per_step);
  EXPECT_DOUBLE_EQ(pooled.expert_rows, 3.0 * 6 * 33'497);
  EXPECT_EQ(p.capacity_rows_per_expert, 100'489);  // ceil(1.15·64·524288/384)
  EXPECT_DOUBLE_EQ(transport(p, "capacity").expert_rows, 6.0 * 100'489);
}

TEST(ClusterPlan, HeroRoofline) {
  const ClusterPlan p = plan_on("gb200-nvl72.toml", 11);
  const ModelConfig c = ModelConfig::preset("hero-535b");
  EXPECT_DOUBLE_EQ(p.model_flops_per_step, training_flops(c, 11264, 1));
  const TransportEstimate& d = transport(p, "dropless");
  EXPECT_DOUBLE_EQ(d.executed_flops, 4.0 * double(forward_flops_per_token(c)) * 65'536);
  for (const TransportEstimate& t : p.transports) {
    EXPECT_GE(t.step_serial_s, t.step_overlap_s) << t.name;
    EXPECT_GT(t.mfu_serial, 0) << t.name;
    EXPECT_LT(t.mfu_overlap, 0.75) << t.name;  // remat caps MFU at 3/4 of the efficiency
    EXPECT_NEAR(t.mfu_serial * t.step_serial_s * 2.5e15 * 704, p.model_flops_per_step, 1e6);
  }
  // Fixed shapes pay for their padding: pooled is never faster than dropless here.
  EXPECT_GT(transport(p, "pooled").step_serial_s, d.step_serial_s);
  // Twice the efficiency halves the GEMM part of the step.
  ClusterOptions fast;
  fast.compute_efficiency = 1.0;
  EXPECT_LT(transport(plan_on("gb200-nvl72.toml", 11, fast), "dropless").compute_s, d.compute_s);
}

TEST(ClusterHardware, ShippedFilesLoad) {
  const ClusterHardware gb = ClusterHardware::load(kClusters + "gb200-nvl72.toml");
  EXPECT_EQ(gb.unit, "rack");
  EXPECT_EQ(gb.gpus_per_unit, 72);
  EXPECT_EQ(gb.nvlink_domain, 72);
  EXPECT_DOUBLE_EQ(gb.bf16_flops, 2.5e15);
  EXPECT_DOUBLE_EQ(gb.nvlink_bytes_per_s, 900e9);
  EXPECT_DOUBLE_EQ(gb.network_bytes_per_s, 50e9);
  const ClusterHardware h100 = ClusterHardware::load(kClusters + "h100-8gpu.toml");
  EXPECT_EQ(h100.unit, "node");
  EXPECT_EQ(h100.gpus_per_unit, 8);
  EXPECT_EQ(h100.nvlink_domain, 8);
  EXPECT_DOUBLE_EQ(h100.bf16_flops, 989.5e12);
  EXPECT_DOUBLE_EQ(h100.hbm_bytes, 80e9);
  EXPECT_DOUBLE_EQ(h100.hbm_bytes_per_s, 3.35e12);
  const ClusterHardware h200 = ClusterHardware::load(kClusters + "h200-8gpu.toml");
  EXPECT_EQ(h200.gpus_per_unit, 8);
  EXPECT_DOUBLE_EQ(h200.hbm_bytes, 141e9);
  EXPECT_DOUBLE_EQ(h200.hbm_bytes_per_s, 4.8e12);
  EXPECT_DOUBLE_EQ(h200.nvlink_bytes_per_s, 450e9);
}

TEST(ClusterPlan, EightGpuNodes) {
  // Default EP = one node's NVLink domain: 48 experts per GPU, the same 65,536 tokens.
  const ClusterPlan h100 = plan_on("h100-8gpu.toml", 88);
  EXPECT_EQ(h100.mesh.expert, 8);
  EXPECT_EQ(h100.mesh.replica, 88);
  EXPECT_EQ(h100.mesh.experts_per_gpu, 48);
  EXPECT_EQ(h100.mesh.tokens_per_gpu, 65'536);
  EXPECT_GT(h100.memory.device(), h100.hw.hbm_bytes);  // 48 experts' fp32 weights do not fit
  // EP 64 across 8 nodes: 7 peers on NVLink, 56 over InfiniBand, which now carries the exchange.
  ClusterOptions ep64;
  ep64.ep = 64;
  const ClusterPlan h200 = plan_on("h200-8gpu.toml", 88, ep64);
  EXPECT_EQ(h200.mesh.replica, 11);
  EXPECT_EQ(h200.mesh.data, 1);
  EXPECT_EQ(h200.mesh.ep_peers_nvlink, 7);
  EXPECT_EQ(h200.mesh.ep_peers_network, 56);
  EXPECT_FALSE(h200.mesh.shard_group_on_nvlink);
  EXPECT_EQ(h200.pooled.sender_rows, 3'141);
  const TransportEstimate& d = transport(h200, "dropless");
  EXPECT_DOUBLE_EQ(d.network_bytes, d.bytes_per_step * 56 / 63);
  EXPECT_GT(d.a2a_s, transport(plan_on("gb200-nvl72.toml", 11), "dropless").a2a_s);
}

TEST(ClusterHardware, BadFilesNameFileAndField) {
  TempDir tmp("cluster-hw");
  auto err = [&](const std::string& text) {
    const std::string path = write(tmp, "hw.toml", text);
    const std::string e = error_of([&] { ClusterHardware::load(path); });
    EXPECT_NE(e.find(path), std::string::npos) << e;
    return e;
  };
  const std::string good = write(tmp, "good.toml", kGood);  // the template itself is valid
  EXPECT_EQ(error_of([&] { ClusterHardware::load(good); }), "");
  EXPECT_NE(err(replaced("hbm_gb = 80\n", "")).find("missing field 'gpu.hbm_gb'"),
            std::string::npos);
  EXPECT_NE(err(replaced("hbm_gb", "hbm_gbs")).find("unknown field 'gpu.hbm_gbs'"),
            std::string::npos);
  EXPECT_NE(err(replaced("gb_per_s = 50", "gb_per_s = -50")).find("'network.gb_per_s'"),
            std::string::npos);
  EXPECT_NE(err(replaced("gpus_per_unit = 8", "gpus_per_unit = \"8\"")).find("'gpus_per_unit'"),
            std::string::npos);
  EXPECT_NE(err(replaced("\"node\"", "\"pod\"")).find("'unit'"), std::string::npos);
  EXPECT_NE(err(replaced("domain_gpus = 8", "domain_gpus = 3")).find("'nvlink.domain_gpus'"),
            std::string::npos);
  EXPECT_NE(err(replaced("[gpu]", "[gpu")).find(": TOML error: "), std::string::npos);
  EXPECT_NE(error_of([] { ClusterHardware::load("/nonexistent/hw.toml"); }), "");
}

TEST(ClusterPlan, BadLayoutsNameTheOption) {
  auto err = [](ClusterOptions o, int64_t racks = 11) {
    return error_of([&] { plan_on("gb200-nvl72.toml", racks, o); });
  };
  ClusterOptions o;
  o.ep = 7;
  EXPECT_NE(err(o).find("--ep 7 must divide num_experts (384)"), std::string::npos) << err(o);
  o = {};
  o.gpus_per_rack = 80;
  EXPECT_NE(err(o).find("--gpus-per-rack 80 exceeds the 72 GPUs per rack"), std::string::npos);
  o = {};
  o.ep = 48;  // divides 384 but not the 64 GPUs used per rack
  EXPECT_NE(err(o).find("must divide one another"), std::string::npos) << err(o);
  EXPECT_NE(err({}, 10).find("--batch 11264 must be a positive multiple of the 640 GPUs"),
            std::string::npos);
  o = {};
  o.waves = 0;
  EXPECT_NE(err(o).find("--waves"), std::string::npos);
  o = {};
  o.capacity_factor = -1;
  EXPECT_NE(err(o).find("--capacity-factor"), std::string::npos);
  o = {};
  o.compute_efficiency = 1.5;
  EXPECT_NE(err(o).find("--compute-efficiency"), std::string::npos);
}

TEST(ClusterCli, HeroCommandPrintsTheExactCapacities) {
  auto r = run("plan --preset hero-535b --cluster " + kClusters + "gb200-nvl72.toml --racks 11");
  ASSERT_EQ(r.code, 0) << r.out;
  for (const char* s :
       {"replica × data × expert = 11 × 1 × 64 = 704 GPUs", "6 of 384 experts",
        "= 65,536 tokens per step", "3,141 = ceil(cf·A/(S·W))", "33,497 = ceil(cf·A/(E_loc·W))",
        "524,288 assignments", "dropless", "capacity", "pooled", "(fits)"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
}

TEST(ClusterCli, JsonCarriesThePlan) {
  auto r =
      run("plan --preset hero-535b --cluster " + kClusters + "gb200-nvl72.toml --racks 11 --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["active_params"].get<int64_t>(), 22'762'487'808);  // plan's own fields stay
  const nlohmann::json& c = j["cluster"];
  EXPECT_EQ(c["mesh"]["gpus"].get<int64_t>(), 704);
  EXPECT_EQ(c["mesh"]["experts_per_gpu"].get<int64_t>(), 6);
  EXPECT_EQ(c["mesh"]["tokens_per_gpu"].get<int64_t>(), 65'536);
  EXPECT_EQ(c["pooled"]["sender_rows_per_wave"].get<int64_t>(), 3'141);
  EXPECT_EQ(c["pooled"]["receiver_rows_per_wave"].get<int64_t>(), 33'497);
  for (const char* t : {"dropless", "capacity", "pooled"}) {
    EXPECT_GT(c["transports"][t]["a2a_bytes_per_step"].get<double>(), 0) << t;
    EXPECT_GT(c["transports"][t]["mfu_serial"].get<double>(), 0) << t;
  }
  EXPECT_EQ(c["hardware"]["name"].get<std::string>(), "GB200 NVL72");
}

TEST(ClusterCli, OptionsAndErrors) {
  auto r = run("plan --preset hero-535b --cluster " + kClusters +
               "h100-8gpu.toml --racks 88 --ep 64 --waves 4 --capacity-factor 1.25 --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json c = nlohmann::json::parse(r.out)["cluster"];
  EXPECT_EQ(c["mesh"]["replica"].get<int64_t>(), 11);
  EXPECT_EQ(c["pooled"]["waves"].get<int64_t>(), 4);
  // ceil(1.25·524288/(64·4)) = 2560, ceil(1.25·524288/(6·4)) = 27307
  EXPECT_EQ(c["pooled"]["sender_rows_per_wave"].get<int64_t>(), 2'560);
  EXPECT_EQ(c["pooled"]["receiver_rows_per_wave"].get<int64_t>(), 27'307);

  r = run("plan --preset hero-535b --racks 11");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--racks needs --cluster"), std::string::npos) << r.out;
  TempDir tmp("cluster-cli");
  const std::string bad = write(tmp, "bad.toml", replaced("bf16_dense_tflops", "bf16_tflops"));
  r = run("plan --preset hero-535b --cluster " + bad + " --racks 11");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find(bad + ":5: unknown field 'gpu.bf16_tflops'"), std::string::npos) << r.out;
}

// issue 42, plan: the run's total time and GPU-hours, memory labelled per GPU and per cluster, and
// a batch chosen on a cluster when none is given.
TEST(ClusterCli, RunTotalsAndClusterMemoryFollowFromTheStepAndTheMesh) {
  auto r =
      run("plan --preset hero-535b --cluster " + kClusters + "gb200-nvl72.toml --racks 11 --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  const nlohmann::json& c = j["cluster"];
  EXPECT_EQ(c["steps"].get<int64_t>(), 390'251);  // recipe §6: the 535B run's steps
  EXPECT_EQ(c["steps"], j["steps"]);
  EXPECT_EQ(c["batch"].get<int64_t>(), 11'264);
  EXPECT_EQ(c["batch_origin"].get<std::string>(), "the preset's");
  for (const char* name : {"dropless", "capacity", "pooled"}) {
    const nlohmann::json& t = c["transports"][name];
    const double steps = 390'251;
    EXPECT_DOUBLE_EQ(t["run_seconds_serial"].get<double>(),
                     steps * t["step_seconds_serial"].get<double>());
    EXPECT_DOUBLE_EQ(t["run_seconds_overlap"].get<double>(),
                     steps * t["step_seconds_overlap"].get<double>());
    EXPECT_DOUBLE_EQ(t["gpu_hours_serial"].get<double>(),
                     704 * t["run_seconds_serial"].get<double>() / 3600);
    EXPECT_DOUBLE_EQ(t["gpu_hours_overlap"].get<double>(),
                     704 * t["run_seconds_overlap"].get<double>() / 3600);
    EXPECT_LE(t["run_seconds_overlap"].get<double>(), t["run_seconds_serial"].get<double>());
  }
  EXPECT_DOUBLE_EQ(c["memory_bytes_cluster"]["device_total"].get<double>(),
                   704 * c["memory_bytes_per_gpu"]["device_total"].get<double>());
  EXPECT_DOUBLE_EQ(c["memory_bytes_cluster"]["optimizer_state_host"].get<double>(),
                   704 * c["memory_bytes_per_gpu"]["optimizer_state_host"].get<double>());

  r = run("plan --preset hero-535b --cluster " + kClusters + "gb200-nvl72.toml --racks 11");
  ASSERT_EQ(r.code, 0) << r.out;
  for (const char* s :
       {"memory (fp32)  one process, whole model:", "memory/GPU", "memory/cluster",
        "run            390,251 steps on 704 GPUs, serial / overlapped:", "GPU-hours", "days"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
}

TEST(ClusterCli, WithoutBatchEveryShippedFilePlansEveryPreset) {
  // cpu-small's batch (8) does not split over the GB200's 32 GPUs that divide its 32 experts: the
  // file's 16 sequences per GPU do. Before, every cluster file refused the default batch.
  for (const char* file : {"gb200-nvl72.toml", "h100-8gpu.toml", "h200-8gpu.toml"})
    for (const std::string& preset : ModelConfig::preset_names()) {
      const auto r = run("plan --preset " + preset + " --cluster " + kClusters + file + " --json");
      ASSERT_EQ(r.code, 0) << preset << " on " << file << ": " << r.out;
      const nlohmann::json c = nlohmann::json::parse(r.out)["cluster"];
      EXPECT_EQ(c["batch"].get<int64_t>() % c["mesh"]["gpus"].get<int64_t>(), 0);
    }
  const auto r = run("plan --preset cpu-small --cluster " + kClusters + "gb200-nvl72.toml --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["cluster"]["mesh"]["gpus"].get<int64_t>(), 32);
  EXPECT_EQ(j["cluster"]["batch"].get<int64_t>(), 16 * 32);
  EXPECT_EQ(j["batch"].get<int64_t>(), 16 * 32);  // and the plan's steps and rates use it
  EXPECT_NE(j["cluster"]["batch_origin"].get<std::string>().find("16 sequences per GPU"),
            std::string::npos);
  // A given --batch is still checked against the GPUs.
  const auto bad =
      run("plan --preset cpu-small --cluster " + kClusters + "gb200-nvl72.toml --batch 8");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("--batch 8 must be a positive multiple of the 32 GPUs"), std::string::npos)
      << bad.out;
}

TEST(ClusterHardwareFile, DefaultSequencesPerGpuIsAPositiveCount) {
  const ClusterHardware h = ClusterHardware::from_toml_text(kGood, "good.toml");
  EXPECT_EQ(h.default_sequences_per_gpu, 1);  // optional: one sequence per GPU when absent
  const ClusterHardware d =
      ClusterHardware::from_toml_text(kGood + "\n[defaults]\nsequences_per_gpu = 4\n", "d.toml");
  EXPECT_EQ(d.default_sequences_per_gpu, 4);
  const std::string e = error_of([&] {
    ClusterHardware::from_toml_text(kGood + "\n[defaults]\nsequences_per_gpu = 0\n", "z.toml");
  });
  EXPECT_NE(e.find("defaults.sequences_per_gpu"), std::string::npos) << e;
  EXPECT_NE(e.find("must be a positive integer"), std::string::npos) << e;
}
