#include "model/params.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <xxhash.h>
#include <cmath>

#include "core/error.hpp"
#include "core/limits.hpp"
#include "core/rng.hpp"

namespace marin {

std::vector<int64_t> ParamTable::unit_bounds() const {
  // The table's order (the constructor): embedding, blocks 0 … L−1, final norm and LM
  // head, then the expert slices of an expert-parallel shard.
  std::vector<int64_t> b = {0};
  for (int64_t l = 0; l < cfg_.num_layers; ++l)
    b.push_back(at("layers." + std::to_string(l) + ".attn_norm.weight").offset);
  b.push_back(at("final.norm.weight").offset);
  b.push_back(expert_begin_);
  return b;
}

const char* group_name(OptGroup g) {
  switch (g) {
    case OptGroup::MuonH:
      return "muonh";
    case OptGroup::AdamH:
      return "adamh";
    case OptGroup::Adam:
      return "adam";
    case OptGroup::State:
      return "state";
  }
  return "?";
}

ParamInfo& ParamTable::add(std::string name, std::vector<int64_t> shape, OptGroup g, Init init,
                           int64_t mats) {
  ParamInfo p;
  p.name = std::move(name);
  p.shape = std::move(shape);
  // In checked arithmetic: the shape comes from a configuration (limits.hpp).
  const std::string shape_text = fmt::format("{} of shape [{}]", p.name, fmt::join(p.shape, ", "));
  p.size = checked("the size of tensor", shape_text, [&] {
    Checked n = 1;
    // seam: the element count of a shape (checked integers)
    for (auto s : p.shape) n *= s;
    return n;
  });
  // Keep every tensor 64-byte aligned in the flat buffer (16 floats) for the vector kernels.
  p.offset = (total_ + 15) / 16 * 16;
  total_ = checked("the parameter count", shape_text, [&] { return Checked(p.offset) + p.size; });
  p.group = g;
  p.init = init;
  p.num_mats = mats;
  p.all_mats = mats;
  index_[p.name] = params_.size();
  params_.push_back(std::move(p));
  return params_.back();
}

ParamTable::ParamTable(const ModelConfig& c, ExpertShard shard) : cfg_(c), shard_(shard) {
  using G = OptGroup;
  const int64_t d = c.hidden_dim, r = c.gated_norm_rank, V = c.vocab_size, k = c.sconv_kernel;
  const int64_t E = c.num_experts, l = c.latent_dim, ed = c.expert_dim;
  MARIN_CHECK(shard.ranks >= 1 && shard.rank >= 0 && shard.rank < shard.ranks,
              "expert shard {} of {} ranks", shard.rank, shard.ranks);
  if (E % shard.ranks != 0)
    fail("expert parallelism over {} ranks needs num_experts ({}) to be a multiple of it",
         shard.ranks, E);
  const int64_t E_loc = E / shard.ranks;
  // The routed-expert stacks: in their layer's place without expert parallelism, after every
  // dense tensor with it (the two regions of the flat buffer).
  std::vector<std::string> expert_stacks;
  auto experts = [&](const std::string& name, std::vector<int64_t> shape) {
    if (shard.ranks > 1) return expert_stacks.push_back(name);
    add(name, std::move(shape), G::MuonH, Init::Normal, E).routed_expert = true;
  };
  // RMSNorm gain + GatedNorm: "<prefix>norm.weight", "<prefix>gnorm.{down,up}".
  auto gated_norm = [&](const std::string& norm, const std::string& gnorm) {
    add(norm + ".weight", {d}, G::Adam, Init::Ones);
    add(gnorm + ".down", {d, r}, G::MuonH, Init::Normal);
    add(gnorm + ".up", {r, d}, G::MuonH, Init::Normal);
  };
  add("embed.weight", {V, d}, G::Adam, Init::Normal);
  gated_norm("embed.norm", "embed.gnorm");
  for (int64_t i = 0; i < c.num_layers; ++i) {
    const std::string L = fmt::format("layers.{}.", i);
    gated_norm(L + "attn_norm", L + "attn_gnorm");
    add(L + "attn.wq", {d, c.q_dim()}, G::MuonH, Init::Normal);
    add(L + "attn.wk", {d, c.kv_dim()}, G::MuonH, Init::Normal);
    add(L + "attn.wv", {d, c.kv_dim()}, G::MuonH, Init::Normal);
    add(L + "attn.wo", {c.q_dim(), d}, G::MuonH, Init::Normal);
    add(L + "attn.gate", {d, c.num_heads}, G::Adam, Init::Zeros);
    if (c.has_sconv("k")) add(L + "attn.sconv_k", {k, c.kv_dim()}, G::Adam, Init::SConvIdentity);
    if (c.has_sconv("attn")) add(L + "sconv_attn", {k, d}, G::Adam, Init::SConvIdentity);
    gated_norm(L + "mlp_norm", L + "mlp_gnorm");
    add(L + "moe.router", {d, E}, G::Adam, Init::Normal);
    add(L + "moe.router_bias", {E}, G::State, Init::Zeros);
    add(L + "moe.latent_down", {d, l}, G::MuonH, Init::Normal);
    add(L + "moe.latent_norm", {l}, G::Adam, Init::Ones);
    add(L + "moe.latent_up", {l, d}, G::MuonH, Init::Normal);
    experts(L + "moe.experts.w_gate", {E, l, ed});
    experts(L + "moe.experts.w_up", {E, l, ed});
    experts(L + "moe.experts.w_down", {E, ed, l});
    for (int64_t j = 0; j < c.num_shared_experts; ++j) {
      const std::string S = fmt::format("layers.{}.shared.{}.", i, j);
      add(S + "w_gate", {d, c.shared_dim}, G::MuonH, Init::Normal);
      add(S + "w_up", {d, c.shared_dim}, G::MuonH, Init::Normal);
      add(S + "w_down", {c.shared_dim, d}, G::MuonH, Init::Normal);
    }
    if (c.has_sconv("mlp")) add(L + "sconv_mlp", {k, d}, G::Adam, Init::SConvIdentity);
  }
  gated_norm("final.norm", "final.gnorm");
  add("lm_head", {d, V}, G::AdamH, Init::Normal);
  expert_begin_ = (total_ + 15) / 16 * 16;
  for (const std::string& name : expert_stacks) {
    const bool down = name.ends_with("w_down");
    ParamInfo& p = add(name, {E_loc, down ? ed : l, down ? l : ed}, G::MuonH, Init::Normal, E_loc);
    p.routed_expert = true;
    p.first_expert = shard.rank * E_loc;
    p.all_mats = E;
  }
  if (expert_stacks.empty()) expert_begin_ = total_;
}

const ParamInfo* ParamTable::find(const std::string& name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &params_[it->second];
}

const ParamInfo& ParamTable::at(const std::string& name) const {
  const ParamInfo* p = find(name);
  if (!p) fail("no parameter named '{}' in the model", name);
  return *p;
}

template <class T>
void ParamTable::initialize(T* out, uint64_t seed) const {
  const double sigma = cfg_.init_scale / std::sqrt(static_cast<double>(cfg_.hidden_dim));
  for (auto& p : params_) {
    T* w = out + p.offset;
    switch (p.init) {
      case Init::Normal: {
        // A shard of an expert stack draws the whole stack's stream and keeps its slice, so its
        // experts start as they would in one process.
        Rng rng(mix_seed(seed, XXH64(p.name.data(), p.name.size(), 0)));
        const int64_t mat = p.size / p.num_mats, skip = p.first_expert * mat;
        for (int64_t i = 0; i < skip; ++i) rng.trunc_normal3();
        for (int64_t i = 0; i < p.size; ++i) w[i] = static_cast<T>(sigma * rng.trunc_normal3());
        break;
      }
      case Init::Ones:
        for (int64_t i = 0; i < p.size; ++i) w[i] = T(1);
        break;
      case Init::Zeros:
        for (int64_t i = 0; i < p.size; ++i) w[i] = T(0);
        break;
      case Init::SConvIdentity:  // w_0 = 1, later taps 0: the conv starts as the identity
        for (int64_t i = 0; i < p.size; ++i) w[i] = i < p.cols() ? T(1) : T(0);
        break;
    }
  }
}

template void ParamTable::initialize<float>(float*, uint64_t) const;
template void ParamTable::initialize<double>(double*, uint64_t) const;

}  // namespace marin
