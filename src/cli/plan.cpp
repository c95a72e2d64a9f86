// marin plan: the accounting of recipe.md §6 and the hyperparameters of §5 for a configuration,
// without allocating anything; with --cluster, the cluster planner (docs/cluster_planner.md).
#include <fmt/core.h>
#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <optional>

#include "cli/options.hpp"
#include "core/error.hpp"
#include "core/limits.hpp"
#include "model/accounting.hpp"
#include "model/model.hpp"
#include "optim/hparams.hpp"
#include "plan/cluster_plan.hpp"
#include "plan/model_size.hpp"
#include "train/rank_memory.hpp"
#include "train/step_engine.hpp"

namespace marin::cli {
namespace {

struct PlanOptions {
  ModelOptions model;
  int64_t batch = 0, seq_len = 0, steps = 0;
  double tokens_per_param = 0;
  bool json = false;
  std::string cluster;  // a hardware file: turns on the cluster planner
  ClusterOptions layout;
  std::string target_params;  // --target-params: size the model by the shape rule
  std::string active;         // --active K/E
  // --ranks: the memory of each rank of `marin train` under mpirun (with --ep, --micro-batch,
  // --shard-params as there).
  int ranks = 0, micro_batch = 0;
  bool shard_params = false;
};

// Counts in thousands (K, M, B, T); byte sizes in powers of 1024 (KiB … PiB).
std::string human(double x) {
  const char* units[] = {"", "K", "M", "B", "T"};
  int u = 0;
  while (std::abs(x) >= 1000 && u < 4) x /= 1000, ++u;
  return fmt::format("{:.2f}{}", x, units[u]);
}

std::string bytes(double x) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (std::abs(x) >= 1024 && u < 5) x /= 1024, ++u;
  return fmt::format("{:.2f} {}", x, units[u]);
}

// 65536 → "65,536": the planner's row and token counts are quoted this way in the docs.
std::string grouped(double v) {
  const std::string digits = fmt::format("{:.0f}", std::abs(v));
  std::string out = v < 0 ? "-" : "";
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return out;
}

// Seconds as the largest unit that keeps the number ≥ 1: "42.0 s", "3.20 h", "51.3 days".
std::string duration(double s) {
  if (s < 60) return fmt::format("{:.1f} s", s);
  if (s < 3600) return fmt::format("{:.1f} min", s / 60);
  if (s < 86400) return fmt::format("{:.2f} h", s / 3600);
  return fmt::format("{:.1f} days", s / 86400);
}

// `marin train` over o.ranks MPI ranks: what each rank holds (train/rank_memory.hpp), in the JSON
// and as one line.
nlohmann::json rank_memory_report(const PlanOptions& o, const ModelConfig& c, int64_t batch,
                                  bool print) {
  TrainOptions t;
  t.model = c;
  t.batch = int(batch);
  t.micro_batch = o.micro_batch;
  t.ep = int(std::max<int64_t>(1, o.layout.ep));
  t.shard_params = o.shard_params;
  StepEngine::check_shape(t, o.ranks);  // the errors marin train would give
  if (o.ranks % t.ep != 0 || c.num_experts % t.ep != 0)
    fail("--ep {} must divide --ranks ({}) and num_experts ({})", t.ep, o.ranks, c.num_experts);
  const RankMemory fp32 = rank_memory(t, o.ranks, false), bf16 = rank_memory(t, o.ranks, true);
  if (print)
    fmt::print(
        "memory/rank    {} rank{} × EP {}, micro-batch {}{}: weights {}  grads {}  partials {}  "
        "exact sum {}  optimizer {}  rollback {}  activations {}  total {} (bf16: + copy {} = "
        "{})\n",
        o.ranks, o.ranks == 1 ? "" : "s", t.ep, t.micro_batch,
        t.shard_params ? ", parameters sharded" : "", bytes(double(fp32.weights)),
        bytes(double(fp32.gradients)), bytes(double(fp32.partials)),
        bytes(double(fp32.accumulator)), bytes(double(fp32.optimizer)),
        bytes(double(fp32.rollback)), bytes(double(fp32.activations)), bytes(double(fp32.total())),
        bytes(double(bf16.weight_copy)), bytes(double(bf16.total())));
  return {{"ranks", o.ranks},
          {"ep", t.ep},
          {"micro_batch", t.micro_batch},
          {"shard_params", t.shard_params},
          {"fp32", fp32.json()},
          {"bf16", bf16.json()}};
}

void print_cluster(const ClusterPlan& p, const ModelConfig& c) {
  const ClusterHardware& h = p.hw;
  const ClusterMesh& m = p.mesh;
  const GpuMemory& mem = p.memory;
  fmt::print("\ncluster        {} ({})\n", h.name, h.origin);
  fmt::print(
      "  per GPU      {:.0f} TFLOP/s bf16 dense, HBM {:.0f} GB at {:.2f} TB/s, NVLink {:.0f} GB/s "
      "(domain {}), network {:.0f} GB/s (links: each way)\n",
      h.bf16_flops / 1e12, h.hbm_bytes / 1e9, h.hbm_bytes_per_s / 1e12, h.nvlink_bytes_per_s / 1e9,
      h.nvlink_domain, h.network_bytes_per_s / 1e9);
  fmt::print(
      "mesh           replica × data × expert = {} × {} × {} = {} GPUs ({} {}{} × {} of {})\n",
      m.replica, m.data, m.expert, m.gpus, m.racks, h.unit, m.racks == 1 ? "" : "s",
      m.gpus_per_rack, h.gpus_per_unit);
  fmt::print(
      "  EP group     {} GPUs: {} peers on NVLink, {} over the network; shard group {} on {}\n",
      m.expert, m.ep_peers_nvlink, m.ep_peers_network, m.shard_group,
      m.shard_group_on_nvlink ? "NVLink" : "the network");
  fmt::print("batch          {} sequences ({})\n", p.batch, p.batch_origin);
  fmt::print("per GPU        {} of {} experts; {} sequence{} × {} = {} tokens per step\n",
             m.experts_per_gpu, c.num_experts, m.sequences_per_gpu,
             m.sequences_per_gpu == 1 ? "" : "s", c.seq_len, grouped(double(m.tokens_per_gpu)));
  fmt::print("memory/GPU     weights fp32 {} (experts {} + rest {})  gradients fp32 {}\n",
             bytes(mem.expert_weights + mem.other_weights), bytes(mem.expert_weights),
             bytes(mem.other_weights), bytes(mem.gradients));
  fmt::print(
      "               layer inputs bf16 {} (full remat)  one layer recomputed {}  "
      "weight gather {}\n",
      bytes(mem.layer_inputs), bytes(mem.layer_working_set), bytes(mem.weight_gather));
  fmt::print("               device {} of {} HBM ({})  optimizer state {} on pinned host\n",
             bytes(mem.device()), bytes(h.hbm_bytes),
             mem.device() <= h.hbm_bytes ? "fits" : "DOES NOT FIT", bytes(mem.optimizer_state));
  fmt::print("memory/cluster device {} over {} GPUs  optimizer state {} on the hosts\n",
             bytes(mem.device() * double(m.gpus)), m.gpus,
             bytes(mem.optimizer_state * double(m.gpus)));
  const PooledCapacity& q = p.pooled;
  fmt::print(
      "pooled waves   A = {} × {} = {} assignments, S = {} shards, E_loc = {}, W = {}, cf {}\n",
      grouped(double(m.tokens_per_gpu)), c.top_k, grouped(double(q.assignments)), m.expert,
      m.experts_per_gpu, p.waves, p.capacity_factor);
  fmt::print("               sender rows per destination shard per wave {:>8} = ceil(cf·A/(S·W))\n",
             grouped(double(q.sender_rows)));
  fmt::print(
      "               receiver rows per local expert per wave    {:>8} = ceil(cf·A/(E_loc·W))\n",
      grouped(double(q.receiver_rows)));
  fmt::print("capacity       rows per expert {} = ceil(cf·S·A/E) over one expert group\n",
             grouped(double(p.capacity_rows_per_expert)));
  fmt::print(
      "all-to-all     per GPU per step: {} layers × {} exchanges × rows sent × {} B "
      "(latent {} × bf16)\n",
      c.num_layers, kA2aTransfersPerLayer, p.row_bytes, c.latent_dim);
  fmt::print("  {:<9} {:>9} {:>11} {:>11} {:>11} {:>7} {:>9} {:>17} {:>15}\n", "transport",
             "rows/exch", "expert rows", "bytes", "network", "a2a s", "compute s", "step s ser/ovl",
             "MFU ser/ovl");
  for (const TransportEstimate& t : p.transports)
    fmt::print(
        "  {:<9} {:>9} {:>11} {:>11} {:>11} {:>7.2f} {:>9.2f} {:>8.2f} / {:>6.2f} "
        "{:>6.1f}% / {:>4.1f}%\n",
        t.name, grouped(t.rows_sent), grouped(t.expert_rows), bytes(t.bytes_per_step),
        bytes(t.network_bytes), t.a2a_s, t.compute_s, t.step_serial_s, t.step_overlap_s,
        100 * t.mfu_serial, 100 * t.mfu_overlap);
  fmt::print(
      "roofline       model {:.4e} FLOP/step = 3·F_fwd·tokens; executed 4·F_fwd per token "
      "(remat) at {:.0f}% of peak, links at {:.0f}%\n",
      p.model_flops_per_step, 100 * p.compute_efficiency, 100 * p.comm_efficiency);
  fmt::print(
      "               + activations over HBM {:.2f} s + Newton–Schulz {:.2f} s; FSDP {} in "
      "{:.2f} s; DP all-reduce {} in {:.2f} s\n",
      p.hbm_s, p.ns_s, bytes(p.fsdp_bytes), p.fsdp_s, bytes(p.dp_bytes), p.dp_s);
  fmt::print(
      "               serial = compute + communication (the 535B run ran collectives without "
      "overlap); overlap = max of the two\n");
  fmt::print("run            {} steps on {} GPUs, serial / overlapped:\n", grouped(double(p.steps)),
             m.gpus);
  for (const TransportEstimate& t : p.transports)
    fmt::print("  {:<9} {:>11} / {:<11} {:>14} / {} GPU-hours\n", t.name, duration(t.run_serial_s),
               duration(t.run_overlap_s), grouped(t.gpu_hours_serial),
               grouped(t.gpu_hours_overlap));
}

// --target-params / --active: the model the plan is for.
ModelConfig planned_model(const PlanOptions& o, std::optional<SizedModel>& sized) {
  if (o.target_params.empty()) {
    ModelConfig c = o.model.resolve();
    if (!o.active.empty()) {
      const ActiveExperts a = parse_active_experts(o.active, "--active");
      c.top_k = a.top_k;
      c.num_experts = a.num_experts;
      c.validate();
    }
    return c;
  }
  if (!o.model.preset.empty() || !o.model.config.empty())
    fail(
        "--target-params chooses the model by the shape rule: give it without --preset or "
        "--config (--set still applies)");
  ActiveExperts a{8, 384};  // the shape rule's own
  if (!o.active.empty()) a = parse_active_experts(o.active, "--active");
  sized = size_to_target(parse_param_count(o.target_params, "--target-params"), a, o.model.sets);
  return sized->config;
}

int run_plan(const PlanOptions& o) {
  std::optional<SizedModel> sized;
  ModelConfig c = planned_model(o, sized);
  if (o.seq_len != 0) {  // given: validated with the config's range
    c.seq_len = o.seq_len;
    c.validate();
  }
  const PresetRun pr = preset_run(o.model.preset);
  // On a cluster the batch must split over its GPUs: the planner chooses it when none is given.
  std::optional<ClusterPlan> cluster;
  if (!o.cluster.empty()) {
    ClusterOptions layout = o.layout;
    layout.batch = o.batch;
    layout.preset_batch = pr.batch;
    cluster = plan_cluster(c, ClusterHardware::load(o.cluster), layout);
  }
  const int64_t batch = cluster ? cluster->batch : o.batch > 0 ? o.batch : pr.batch;
  if (o.steps > 0 && o.tokens_per_param > 0) fail("give either --steps or --tokens-per-param");
  const double tpp = o.tokens_per_param > 0 ? o.tokens_per_param : pr.tokens_per_param;
  const int64_t steps = o.steps > 0 ? o.steps : steps_for_budget(c, batch, tpp);
  if (steps <= 0) fail("the budget gives {} steps; increase --steps or --tokens-per-param", steps);
  const Accounting a = account(c);
  const HyperParams h = heuristic_hparams(c.hidden_dim, batch, c.seq_len, steps);

  // Training memory: fp32 weights and gradients of every tensor, optimizer moments (MuonH keeps
  // one, Adam/AdamH two), and the activations the model saves for backward at this batch.
  const ParamSplit split = split_params(c);
  const int64_t muon = split.expert + split.muon_other, adam = split.adam;
  const std::string inputs = fmt::format("{} parameters, batch {}", a.every_tensor, batch);
  const int64_t weights =
      checked("weight bytes", inputs, [&] { return 4 * Checked(a.every_tensor); });
  const int64_t grads = weights;
  const int64_t opt_state = checked("optimizer state bytes", inputs,
                                    [&] { return 4 * (Checked(muon) + 2 * Checked(adam)); });
  const int64_t acts = Model<float>::activation_bytes(c, int(batch));
  const int64_t total = checked("training memory bytes", inputs,
                                [&] { return Checked(weights) + grads + opt_state + acts; });
  // Computing in bf16 adds the weights' bf16 copy and its GEMM layouts (kernels::WeightCopy).
  const int64_t bf16_copy = Model<float>::weight_copy_bytes_bound(
      ParamTable(c), kernels::Dtype::bf16, ModelUse::Training);
  const int64_t tokens_per_step = batch * c.seq_len;
  const double train_flops = training_flops(c, batch, steps);

  nlohmann::json j = {
      {"active_params", a.active_params},
      {"headline_total_params", a.headline_params},
      {"every_tensor_params", a.every_tensor},
      {"forward_flops_per_token", a.fwd_flops_per_token},
      {"forward_flops_per_token_no_head", a.fwd_flops_no_head},
      {"batch", batch},
      {"seq_len", c.seq_len},
      {"tokens_per_step", tokens_per_step},
      {"steps", steps},
      {"tokens", double(steps) * double(tokens_per_step)},
      {"training_flops", train_flops},
      {"forecast_flops_per_step", forecast_flops_per_step(c, batch)},
      {"muonh_lr", h.muonh_lr},
      {"adam_lr", h.adam_lr},
      {"beta1", h.beta1},
      {"beta2", h.beta2},
      {"eps", h.eps},
      {"memory_bytes",
       {{"weights", weights},
        {"gradients", grads},
        {"optimizer_state", opt_state},
        {"activations", acts},
        {"total", total},
        {"bf16_weight_copy", bf16_copy}}},
      {"config", c.to_json()},
  };
  if (sized)
    j["sized"] = {{"target_params", parse_param_count(o.target_params, "--target-params")},
                  {"relative_error", sized->relative_error},
                  {"preset", sized->base},
                  {"sets", sized->sets}};
  if (cluster) {
    cluster->set_steps(steps);
    j["cluster"] = cluster->to_json();
  }
  if (o.ranks > 0) j["memory_per_rank"] = rank_memory_report(o, c, batch, false);
  if (o.json) {
    fmt::print("{}\n", j.dump());
    return 0;
  }
  if (sized) {
    std::string flags = "--preset " + sized->base;
    for (const std::string& kv : sized->sets) flags += " --set " + kv;
    fmt::print("model          sized to {} total parameters ({:+.1f} %): {}\n", o.target_params,
               100 * sized->relative_error, flags);
  } else {
    fmt::print("model          {}\n", o.model.preset.empty() ? o.model.config : o.model.preset);
  }
  fmt::print("active params  {:>20}  ({})\n", a.active_params, human(double(a.active_params)));
  fmt::print("total params   {:>20}  ({})  headline: L·core(E) + 2·V·d\n", a.headline_params,
             human(double(a.headline_params)));
  fmt::print("every tensor   {:>20}  ({})\n", a.every_tensor, human(double(a.every_tensor)));
  fmt::print("fwd FLOPs/tok  {:>20}\n", a.fwd_flops_per_token);
  fmt::print("batch × seq    {} × {} = {} tokens/step\n", batch, c.seq_len, tokens_per_step);
  fmt::print("steps          {:>20}\n", steps);
  fmt::print("train FLOPs    {:>20.4e}\n", train_flops);
  fmt::print("muonh_lr {:.3e}  adam_lr {:.3e}  beta1 {:.2f}  beta2 {:.4f}  eps {:.3e}\n",
             h.muonh_lr, h.adam_lr, h.beta1, h.beta2, h.eps);
  // What one process training the whole model at this batch allocates (`marin train`); a
  // cluster's per-GPU and whole-cluster figures follow under "memory/GPU" and "memory/cluster".
  fmt::print(
      "memory (fp32)  one process, whole model: weights {}  grads {}  optimizer {}  "
      "activations {}  total {}\n",
      bytes(double(weights)), bytes(double(grads)), bytes(double(opt_state)), bytes(double(acts)),
      bytes(double(total)));
  fmt::print("memory (bf16)  + weight copy {} = {}\n", bytes(double(bf16_copy)),
             bytes(double(total + bf16_copy)));
  if (o.ranks > 0) rank_memory_report(o, c, batch, true);
  if (cluster) print_cluster(*cluster, c);
  return 0;
}

}  // namespace

MARIN_COMMAND(plan, "plan",
              "Parameter, FLOP, step, learning-rate and memory accounting of a config",
              [](CLI::App& app) -> Runner {
                auto o = std::make_shared<PlanOptions>();
                o->model.add(app);
                app.add_option("--batch", o->batch,
                               "sequences per step (default: the preset's; on a cluster, the "
                               "preset's if it splits over the GPUs, else the hardware file's)")
                    ->check(in_range<int64_t>(1, kMaxBatch));
                app.add_option("--seq-len", o->seq_len, "override seq_len");
                app.add_option("--steps", o->steps, "training steps")->check(steps_range());
                app.add_option("--tokens-per-param", o->tokens_per_param,
                               "budget in tokens per active parameter (default 791)")
                    ->check(in_range<double>(0, 1e9, /*open_lo=*/true));
                app.add_flag("--json", o->json, "one JSON object instead of the table");
                app.add_option("--target-params", o->target_params,
                               "size the model to this many total parameters (e.g. 1B, 350M): "
                               "the nearest configuration of the shape rule");
                app.add_option("--active", o->active,
                               "routed experts active of all, K/E (e.g. 8/64; with "
                               "--target-params the default is the shape rule's 8/384)");
                app.add_option("--ranks", o->ranks,
                               "MPI ranks of a marin train run: the memory of each rank (with "
                               "--ep, --micro-batch and --shard-params as marin train takes them)")
                    ->check(in_range<int>(1, 1 << 20));
                app.add_option("--micro-batch", o->micro_batch,
                               "with --ranks: rows per forward (default as marin train)")
                    ->check(in_range<int>(0, kMaxBatch));
                app.add_flag("--shard-params", o->shard_params,
                             "with --ranks: the dense parameters and gradients sharded (ZeRO-3)");
                ClusterOptions& l = o->layout;
                app.add_option("--cluster", o->cluster,
                               "hardware file (configs/cluster/*.toml): plan the mesh, memory, "
                               "all-to-all and step time on it");
                // Options that only mean something on a cluster, refused without --cluster.
                const std::vector<CLI::Option*> layout_only = {
                    app.add_option("--racks", l.racks, "racks (or nodes) of the cluster (1)"),
                    app.add_option("--gpus-per-rack", l.gpus_per_rack,
                                   "GPUs used per rack (default: the most that divide "
                                   "num_experts, 64 of an NVL72's 72)"),
                    app.add_option("--ep", l.ep,
                                   "expert-parallel width (default: the GPUs of one NVLink "
                                   "domain in use; with --ranks: as marin train's --ep)"),
                    app.add_option("--waves", l.waves, "pooled-wave transport: waves W (3)"),
                    app.add_option("--capacity-factor", l.capacity_factor,
                                   "capacity factor (default: the model config's)"),
                    app.add_option("--compute-efficiency", l.compute_efficiency,
                                   "achieved fraction of the bf16 peak (0.7)"),
                    app.add_option("--comm-efficiency", l.comm_efficiency,
                                   "achieved fraction of link bandwidth (0.8)")};
                return [o, layout_only] {
                  for (CLI::Option* opt : layout_only)
                    if (opt->count() > 0 && o->cluster.empty() &&
                        !(opt->get_name() == "--ep" && o->ranks > 0))
                      fail("{} needs --cluster FILE (a hardware file, configs/cluster/*.toml)",
                           opt->get_name());
                  if ((o->micro_batch > 0 || o->shard_params) && o->ranks == 0)
                    fail("--micro-batch and --shard-params need --ranks N (a marin train run)");
                  return run_plan(*o);
                };
              });

}  // namespace marin::cli
