#pragma once
// The parameter table: every tensor of the model with its formats.md name, shape, optimizer group
// and initialiser, laid out back to back in one flat buffer (so gradients, optimizer state and
// checkpoints all share one layout). Built once from a ModelConfig.
//
// Expert parallelism (docs/distributed.md): with an ExpertShard of P > 1 ranks, each routed-expert
// stack [E, rows, cols] holds only this rank's E/P experts [E/P, rows, cols] (experts
// rank·E/P … (rank+1)·E/P − 1), and those tensors are laid out after every other tensor, so the
// flat buffer is two regions: the dense tensors every rank holds ([0, expert_begin())) and this
// rank's expert slices ([expert_begin(), total())). Checkpoints always hold the full tensors
// (model/expert_shard.hpp converts).
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/config.hpp"

namespace marin {

enum class OptGroup { MuonH, AdamH, Adam, State };
enum class Init { Normal, Ones, Zeros, SConvIdentity };

// Which experts of every routed-expert stack this process holds: shard `rank` of `ranks`.
struct ExpertShard {
  int64_t ranks = 1, rank = 0;
};

struct ParamInfo {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0;  // into the flat buffer, in elements
  int64_t size = 0;
  OptGroup group = OptGroup::Adam;
  Init init = Init::Normal;
  // >1 for the routed-expert stacks [E, rows, cols]: E matrices orthogonalised one by one.
  int64_t num_mats = 1;
  // A routed-expert stack: this table holds its experts first_expert … first_expert + num_mats − 1
  // of `all_mats` (all of them without expert parallelism).
  bool routed_expert = false;
  int64_t first_expert = 0, all_mats = 1;
  int64_t rows() const { return shape.size() >= 2 ? shape[shape.size() - 2] : 1; }
  int64_t cols() const { return shape.back(); }
};

class ParamTable {
 public:
  explicit ParamTable(const ModelConfig& c, ExpertShard shard = {});
  const std::vector<ParamInfo>& params() const { return params_; }
  int64_t total() const { return total_; }
  const ExpertShard& expert_shard() const { return shard_; }
  // Where the region of expert slices begins (total() without expert parallelism: one region).
  int64_t expert_begin() const { return expert_begin_; }
  // The bounds of the runs the model reads one after the other (Model::param_units): 0, then the
  // start of each block, of the final norm (and LM head), and expert_begin() — the embedding,
  // each block and the head, L + 2 runs.
  std::vector<int64_t> unit_bounds() const;
  // Throws marin::Error if the name is unknown.
  const ParamInfo& at(const std::string& name) const;
  const ParamInfo* find(const std::string& name) const;

  // Fills `out` (size total()) per §3: σ·TruncNormal(−3, 3) with σ = init_scale/√d for matrices,
  // ones for gains, zeros for the head gate and router bias, identity for SConv. Each tensor draws
  // from its own stream keyed by its name, so the result does not depend on table order.
  template <class T>
  void initialize(T* out, uint64_t seed) const;

 private:
  ParamInfo& add(std::string name, std::vector<int64_t> shape, OptGroup g, Init init,
                 int64_t mats = 1);
  ModelConfig cfg_;
  ExpertShard shard_;
  int64_t expert_begin_ = 0;
  std::vector<ParamInfo> params_;
  std::unordered_map<std::string, size_t> index_;
  int64_t total_ = 0;
};

const char* group_name(OptGroup g);

}  // namespace marin
