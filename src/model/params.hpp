#pragma once
// The parameter table: every tensor of the model with its formats.md name, shape, optimizer group
// and initialiser, laid out back to back in one flat buffer (so gradients, optimizer state and
// checkpoints all share one layout). Built once from a ModelConfig.
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/config.hpp"

namespace marin {

enum class OptGroup { MuonH, AdamH, Adam, State };
enum class Init { Normal, Ones, Zeros, SConvIdentity };

struct ParamInfo {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0;  // into the flat buffer, in elements
  int64_t size = 0;
  OptGroup group = OptGroup::Adam;
  Init init = Init::Normal;
  // >1 for the routed-expert stacks [E, rows, cols]: E matrices orthogonalised one by one.
  int64_t num_mats = 1;
  int64_t rows() const { return shape.size() >= 2 ? shape[shape.size() - 2] : 1; }
  int64_t cols() const { return shape.back(); }
};

class ParamTable {
 public:
  explicit ParamTable(const ModelConfig& c);
  const std::vector<ParamInfo>& params() const { return params_; }
  int64_t total() const { return total_; }
  // Throws marin::Error if the name is unknown.
  const ParamInfo& at(const std::string& name) const;
  const ParamInfo* find(const std::string& name) const;

  // Fills `out` (size total()) per §3: σ·TruncNormal(−3, 3) with σ = init_scale/√d for matrices,
  // ones for gains, zeros for the head gate and router bias, identity for SConv. Each tensor draws
  // from its own stream keyed by its name, so the result does not depend on table order.
  template <class T>
  void initialize(T* out, uint64_t seed) const;

 private:
  void add(std::string name, std::vector<int64_t> shape, OptGroup g, Init init, int64_t mats = 1);
  ModelConfig cfg_;
  std::vector<ParamInfo> params_;
  std::unordered_map<std::string, size_t> index_;
  int64_t total_ = 0;
};

const char* group_name(OptGroup g);

}  // namespace marin
