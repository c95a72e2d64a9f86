// The planner's arithmetic. Every count comes from the accounting module or the parameter table;
// the assumptions (sharding, precisions, passes, efficiencies) are in docs/cluster_planner.md.
#include "plan/cluster_plan.hpp"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/limits.hpp"
#include "model/accounting.hpp"
#include "model/model.hpp"
#include "model/params.hpp"
#include "optim/newton_schulz.hpp"

namespace marin {
namespace {

constexpr double kFp32 = 4, kBf16 = 2;

// The 535B run used 64 of an NVL72 rack's 72 GPUs: the most that divide E = 384, so one rack's
// expert group holds whole experts.
int64_t default_gpus_per_rack(const ModelConfig& c, const ClusterHardware& hw) {
  for (int64_t g = hw.gpus_per_unit; g > 1; --g)
    if (c.num_experts % g == 0) return g;
  return 1;
}

ClusterMesh make_mesh(const ModelConfig& c, const ClusterHardware& hw, const ClusterOptions& o) {
  ClusterMesh m;
  if (o.racks <= 0) fail("--racks must be positive, got {}", o.racks);
  m.racks = o.racks;
  if (o.gpus_per_rack < 0) fail("--gpus-per-rack must be positive, got {}", o.gpus_per_rack);
  if (o.ep < 0) fail("--ep must be positive, got {}", o.ep);
  m.gpus_per_rack = o.gpus_per_rack > 0 ? o.gpus_per_rack : default_gpus_per_rack(c, hw);
  if (m.gpus_per_rack > hw.gpus_per_unit)
    fail("--gpus-per-rack {} exceeds the {} GPUs per {} of {}", m.gpus_per_rack, hw.gpus_per_unit,
         hw.unit, hw.origin);
  m.gpus = m.racks * m.gpus_per_rack;
  const int64_t g = m.gpus_per_rack;
  const int64_t P = o.ep > 0 ? o.ep : std::min(g, hw.nvlink_domain);
  const char* ep = o.ep > 0 ? "--ep" : "the default --ep (GPUs of one NVLink domain in use)";
  if (c.num_experts % P != 0)
    fail("{} {} must divide num_experts ({}): each GPU holds whole experts", ep, P, c.num_experts);
  // An expert group is either inside one rack (the rest of the rack is the data axis) or spans
  // whole racks; anything else would split a group unevenly across racks.
  if (P <= g ? g % P != 0 : P % g != 0)
    fail("{} {} and --gpus-per-rack {} must divide one another", ep, P, g);
  if (m.gpus % P != 0) fail("{} {} must divide the {} GPUs", ep, P, m.gpus);
  m.expert = P;
  m.shard_group = std::max(P, g);
  m.data = m.shard_group / P;
  m.replica = m.gpus / m.shard_group;
  m.experts_per_gpu = c.num_experts / P;
  // Consecutive GPUs fill NVLink domains; a group's members in the GPU's own domain use NVLink.
  const int64_t in_domain = std::min({P, g, hw.nvlink_domain});
  m.ep_peers_nvlink = in_domain - 1;
  m.ep_peers_network = P - in_domain;
  m.shard_group_on_nvlink = m.shard_group <= std::min(g, hw.nvlink_domain);
  return m;
}

// The batch: --batch (a multiple of the GPUs, or an error), else the preset's own where it splits
// over the GPUs, else the hardware file's sequences per GPU times the GPUs.
void choose_batch(const ModelConfig& c, const ClusterOptions& o, ClusterPlan& p) {
  ClusterMesh& m = p.mesh;
  if (o.batch != 0) {
    if (o.batch < 0 || o.batch % m.gpus != 0)
      fail("--batch {} must be a positive multiple of the {} GPUs (whole sequences per GPU)",
           o.batch, m.gpus);
    p.batch = o.batch;
    p.batch_origin = "--batch";
  } else if (o.preset_batch > 0 && o.preset_batch % m.gpus == 0) {
    p.batch = o.preset_batch;
    p.batch_origin = "the preset's";
  } else {
    p.batch = checked("the default batch", p.hw.origin,
                      [&] { return Checked(p.hw.default_sequences_per_gpu) * m.gpus; });
    p.batch_origin =
        fmt::format("{} sequence{} per GPU, {}'s default", p.hw.default_sequences_per_gpu,
                    p.hw.default_sequences_per_gpu == 1 ? "" : "s", p.hw.origin);
  }
  m.sequences_per_gpu = p.batch / m.gpus;
  m.tokens_per_gpu = m.sequences_per_gpu * c.seq_len;
}

GpuMemory make_memory(const ModelConfig& c, const ParamSplit& s, const ClusterMesh& m) {
  GpuMemory mem;
  const double P = double(m.expert), G = double(m.shard_group);
  mem.expert_weights = kFp32 * double(s.expert) / P;
  mem.other_weights = kFp32 * double(s.other + s.state) / G;
  mem.gradients = kFp32 * (double(s.expert) / P + double(s.other) / G);
  mem.optimizer_state = kFp32 * (double(s.expert) / P + double(s.muon_other + 2 * s.adam) / G);
  mem.layer_inputs = kBf16 * double(c.num_layers * m.tokens_per_gpu * c.hidden_dim);
  // One layer's saved tensors, from the model's own buffer layout (fp32 there, bf16 here): the
  // difference between the model with L and with L − 1 layers.
  ModelConfig fewer = c;
  fewer.num_layers = c.num_layers - 1;
  const int b = int(m.sequences_per_gpu);
  const double layer_fp32 =
      double(Model<float>::activation_bytes(c, b) - Model<float>::activation_bytes(fewer, b));
  mem.layer_working_set = layer_fp32 * kBf16 / kFp32;
  const int64_t embed_or_head = c.vocab_size * c.hidden_dim;
  const double per_layer = double(s.other - 2 * embed_or_head) / double(c.num_layers);
  mem.weight_gather = kBf16 * std::max(double(embed_or_head), per_layer);
  return mem;
}

}  // namespace

ParamSplit split_params(const ModelConfig& c) {
  ParamSplit s;
  const ParamTable table(c);  // names and shapes only: cheap even for the 535B run
  // seam: planner arithmetic over the parameter table (counts and FLOPs, no tensors)
  for (const ParamInfo& p : table.params()) {
    if (p.group == OptGroup::State) {
      s.state += p.size;
    } else if (p.num_mats > 1) {
      s.expert += p.size;
      s.ns_flops_expert += double(p.num_mats) * optim::ns_flops(p.rows(), p.cols());
    } else {
      s.other += p.size;
      if (p.group == OptGroup::MuonH) {
        s.muon_other += p.size;
        s.ns_flops_other += optim::ns_flops(p.rows(), p.cols());
      } else {
        s.adam += p.size;
      }
    }
  }
  return s;
}

ClusterPlan plan_cluster(const ModelConfig& c, const ClusterHardware& hw, const ClusterOptions& o) {
  if (o.waves <= 0) fail("--waves must be positive, got {}", o.waves);
  if (o.capacity_factor < 0) fail("--capacity-factor must be positive, got {}", o.capacity_factor);
  if (!(o.compute_efficiency > 0 && o.compute_efficiency <= 1))
    fail("--compute-efficiency must be in (0, 1], got {}", o.compute_efficiency);
  if (!(o.comm_efficiency > 0 && o.comm_efficiency <= 1))
    fail("--comm-efficiency must be in (0, 1], got {}", o.comm_efficiency);
  ClusterPlan p;
  p.hw = hw;
  p.mesh = make_mesh(c, hw, o);
  choose_batch(c, o, p);
  const ClusterMesh& m = p.mesh;
  const ParamSplit s = split_params(c);
  p.memory = make_memory(c, s, m);
  p.waves = o.waves;
  p.capacity_factor = o.capacity_factor > 0 ? o.capacity_factor : c.capacity_factor;
  p.compute_efficiency = o.compute_efficiency;
  p.comm_efficiency = o.comm_efficiency;
  const int64_t P = m.expert, K = c.top_k, L = c.num_layers;
  p.pooled = pooled_capacity(m.tokens_per_gpu, K, P, m.experts_per_gpu, o.waves, p.capacity_factor);
  const int64_t A = p.pooled.assignments;
  // The §8 rule over the tokens of one expert group (P·T_local): each expert's share, times cf.
  p.capacity_rows_per_expert = capacity_rows(p.capacity_factor, P * A, c.num_experts);
  p.row_bytes = int64_t(kBf16) * c.latent_dim;

  const double peak = hw.bf16_flops, gpus = double(m.gpus);
  p.model_flops_per_step = training_flops(c, p.batch, 1);
  p.model_flops_per_gpu = p.model_flops_per_step / gpus;
  const double F = double(forward_flops_per_token(c)), T = double(m.tokens_per_gpu);
  p.hbm_s = kActivationHbmPasses * double(L) * p.memory.layer_working_set / hw.hbm_bytes_per_s;
  p.ns_flops_per_gpu = s.ns_flops_expert / double(P) + s.ns_flops_other / double(m.shard_group);
  p.ns_s = p.ns_flops_per_gpu / (peak * o.compute_efficiency);

  // FSDP inside a shard group: non-expert weights all-gathered in bf16 for the forward, the
  // remat and the backward, their fp32 gradients reduce-scattered; expert gradients all-reduced
  // over the data axis when it is wider than one.
  const double G = double(m.shard_group), D = double(m.data), R = double(m.replica);
  p.fsdp_bytes = (G - 1) / G * double(s.other) * (3 * kBf16 + kFp32) +
                 2 * (D - 1) / D * kFp32 * double(s.expert) / double(P);
  const double group_bw = m.shard_group_on_nvlink ? hw.nvlink_bytes_per_s : hw.network_bytes_per_s;
  p.fsdp_s = p.fsdp_bytes / (group_bw * o.comm_efficiency);
  // Data parallelism over replicas: a ring all-reduce of each GPU's fp32 gradient shard.
  p.dp_bytes = 2 * (R - 1) / R * p.memory.gradients;
  p.dp_s = p.dp_bytes / (hw.network_bytes_per_s * o.comm_efficiency);

  const double a = double(A), leave = double(P - 1) / double(P);
  const double E_loc = double(m.experts_per_gpu), W = double(o.waves);
  const double expert_flops_per_row = 6.0 * double(c.latent_dim) * double(c.expert_dim);
  auto estimate = [&](std::string name, double rows_sent, double expert_rows, double buffer) {
    TransportEstimate t;
    t.name = std::move(name);
    t.rows_sent = rows_sent;
    t.expert_rows = expert_rows;
    t.buffer_rows = buffer;
    t.bytes_per_step = rows_sent * double(p.row_bytes) * kA2aTransfersPerLayer * double(L);
    if (P > 1) {
      t.nvlink_bytes = t.bytes_per_step * double(m.ep_peers_nvlink) / double(P - 1);
      t.network_bytes = t.bytes_per_step * double(m.ep_peers_network) / double(P - 1);
    }
    // NVLink and the NICs are separate links: the exchange lasts as long as the slower share.
    t.a2a_s =
        std::max(t.nvlink_bytes / hw.nvlink_bytes_per_s, t.network_bytes / hw.network_bytes_per_s) /
        o.comm_efficiency;
    // Fixed-shape transports run the expert GEMMs over their whole buffers, padding included.
    t.executed_flops =
        kComputePasses * (F * T + double(L) * (expert_rows - a) * expert_flops_per_row);
    t.compute_s = t.executed_flops / (peak * o.compute_efficiency) + p.hbm_s + p.ns_s;
    t.comm_s = t.a2a_s + p.fsdp_s + p.dp_s;
    t.step_serial_s = t.compute_s + t.comm_s;
    t.step_overlap_s = std::max(t.compute_s, t.comm_s);
    t.mfu_serial = p.model_flops_per_step / (t.step_serial_s * peak * gpus);
    t.mfu_overlap = p.model_flops_per_step / (t.step_overlap_s * peak * gpus);
    return t;
  };
  // Dropless: balanced routing sends (S−1)/S of the A rows away; the experts compute exactly A.
  p.transports.push_back(estimate("dropless", a * leave, a, 0));
  // Capacity: the same expected rows (no drops at balance when cf ≥ 1), fixed receive buffers.
  const double cap_buffer = E_loc * double(p.capacity_rows_per_expert);
  p.transports.push_back(
      estimate("capacity", std::min(a, cap_buffer) * leave, cap_buffer, cap_buffer));
  // Pooled: every wave sends its full sender capacity to every other shard, whatever the routing.
  const double pooled_buffer = W * E_loc * double(p.pooled.receiver_rows);
  p.transports.push_back(estimate("pooled", W * double(P - 1) * double(p.pooled.sender_rows),
                                  pooled_buffer, pooled_buffer));
  return p;
}

void ClusterPlan::set_steps(int64_t run_steps) {
  steps = run_steps;
  const double n = double(steps), gpus = double(mesh.gpus);
  for (TransportEstimate& t : transports) {
    t.run_serial_s = n * t.step_serial_s;
    t.run_overlap_s = n * t.step_overlap_s;
    t.gpu_hours_serial = gpus * t.run_serial_s / 3600;
    t.gpu_hours_overlap = gpus * t.run_overlap_s / 3600;
  }
}

nlohmann::json ClusterPlan::to_json() const {
  nlohmann::json transports = nlohmann::json::object();
  for (const TransportEstimate& t : this->transports)
    transports[t.name] = {{"rows_sent_per_exchange", t.rows_sent},
                          {"expert_rows_per_layer", t.expert_rows},
                          {"buffer_rows_per_layer", t.buffer_rows},
                          {"a2a_bytes_per_step", t.bytes_per_step},
                          {"a2a_nvlink_bytes", t.nvlink_bytes},
                          {"a2a_network_bytes", t.network_bytes},
                          {"executed_flops_per_gpu", t.executed_flops},
                          {"a2a_seconds", t.a2a_s},
                          {"compute_seconds", t.compute_s},
                          {"comm_seconds", t.comm_s},
                          {"step_seconds_serial", t.step_serial_s},
                          {"step_seconds_overlap", t.step_overlap_s},
                          {"mfu_serial", t.mfu_serial},
                          {"mfu_overlap", t.mfu_overlap},
                          {"run_seconds_serial", t.run_serial_s},
                          {"run_seconds_overlap", t.run_overlap_s},
                          {"gpu_hours_serial", t.gpu_hours_serial},
                          {"gpu_hours_overlap", t.gpu_hours_overlap}};
  const GpuMemory& mm = memory;
  return {
      {"hardware", hw.to_json()},
      {"batch", batch},
      {"batch_origin", batch_origin},
      {"steps", steps},
      {"mesh",
       {{"racks", mesh.racks},
        {"gpus_per_rack", mesh.gpus_per_rack},
        {"gpus", mesh.gpus},
        {"replica", mesh.replica},
        {"data", mesh.data},
        {"expert", mesh.expert},
        {"shard_group", mesh.shard_group},
        {"experts_per_gpu", mesh.experts_per_gpu},
        {"sequences_per_gpu", mesh.sequences_per_gpu},
        {"tokens_per_gpu", mesh.tokens_per_gpu},
        {"ep_peers_nvlink", mesh.ep_peers_nvlink},
        {"ep_peers_network", mesh.ep_peers_network},
        {"shard_group_on_nvlink", mesh.shard_group_on_nvlink}}},
      {"memory_bytes_per_gpu",
       {{"expert_weights", mm.expert_weights},
        {"other_weights", mm.other_weights},
        {"gradients", mm.gradients},
        {"layer_inputs", mm.layer_inputs},
        {"layer_working_set", mm.layer_working_set},
        {"weight_gather", mm.weight_gather},
        {"device_total", mm.device()},
        {"hbm", hw.hbm_bytes},
        {"fits", mm.device() <= hw.hbm_bytes},
        {"optimizer_state_host", mm.optimizer_state}}},
      {"memory_bytes_cluster",
       {{"device_total", mm.device() * double(mesh.gpus)},
        {"optimizer_state_host", mm.optimizer_state * double(mesh.gpus)}}},
      {"pooled",
       {{"waves", waves},
        {"capacity_factor", capacity_factor},
        {"assignments", pooled.assignments},
        {"shards", mesh.expert},
        {"local_experts", mesh.experts_per_gpu},
        {"sender_rows_per_wave", pooled.sender_rows},
        {"receiver_rows_per_wave", pooled.receiver_rows}}},
      {"capacity_rows_per_expert", capacity_rows_per_expert},
      {"row_bytes", row_bytes},
      {"transports", transports},
      {"roofline",
       {{"model_flops_per_step", model_flops_per_step},
        {"model_flops_per_gpu", model_flops_per_gpu},
        {"compute_efficiency", compute_efficiency},
        {"comm_efficiency", comm_efficiency},
        {"activation_hbm_seconds", hbm_s},
        {"newton_schulz_flops_per_gpu", ns_flops_per_gpu},
        {"newton_schulz_seconds", ns_s},
        {"fsdp_bytes", fsdp_bytes},
        {"fsdp_seconds", fsdp_s},
        {"dp_bytes", dp_bytes},
        {"dp_seconds", dp_s}}},
  };
}

}  // namespace marin
