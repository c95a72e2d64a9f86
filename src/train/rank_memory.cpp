#include "train/rank_memory.hpp"

#include <algorithm>

#include "core/limits.hpp"
#include "model/model.hpp"

namespace marin {

int64_t RankMemory::total() const {
  return weights + gradients + partials + accumulator + optimizer + rollback + weight_copy +
         activations;
}

nlohmann::json RankMemory::json() const {
  return {{"weights", weights},         {"gradients", gradients},     {"partials", partials},
          {"accumulator", accumulator}, {"optimizer", optimizer},     {"rollback", rollback},
          {"weight_copy", weight_copy}, {"activations", activations}, {"total", total()}};
}

RankMemory rank_memory(const TrainOptions& o, int ranks, bool bf16) {
  const ModelConfig& c = o.model;
  const int micro = o.micro_batch > 0 ? o.micro_batch : default_micro_batch(o.batch);
  const int64_t local_units = std::max<int64_t>(1, o.batch / micro / ranks);
  const int P = std::max(1, o.ep);
  const ParamTable table(c, ExpertShard{P, 0});  // every shard is the same size
  const int64_t dense = table.expert_begin(), experts = table.total() - dense;
  const bool sharded = o.shard_params && ranks > 1;
  // The largest unit the model gathers at once: the embedding, a block, or the final norm + head.
  const std::vector<int64_t> bounds = table.unit_bounds();
  int64_t unit = 0;
  for (size_t u = 0; u + 1 < bounds.size(); ++u) unit = std::max(unit, bounds[u + 1] - bounds[u]);
  // Resident dense values: all of them, or this rank's run and two units in flight.
  const int64_t run = (dense + ranks - 1) / ranks;
  const int64_t held = sharded ? std::min(dense, run + 2 * unit) : dense;
  const int64_t shard = run + experts / std::max(1, ranks / P);  // the optimizer's shard
  RankMemory m;
  m.weights = 4 * (held + experts);
  // With several micro-batches a rank, the gradient is whole until the last one's backward
  // (accumulated unsharded, as FSDP's no_sync).
  m.gradients = 4 * ((local_units == 1 ? held : dense) + experts + (P > 1 ? P * experts : 0));
  m.partials = 4 * (local_units - 1) * (dense + experts + (P > 1 ? P * experts : 0));
  // One process sums chunk by chunk without it (ExactSum::reduce_here).
  m.accumulator = ranks > 1 ? 8 * (held + experts) : 0;
  m.optimizer = 8 * shard;
  // What of UpdateGuard's copy does not fit in the partials it borrows.
  m.rollback = std::max<int64_t>(
      0, 4 * (sharded ? run + experts : dense + experts) + 8 * shard - m.partials);
  m.weight_copy =
      bf16 ? Model<float>::weight_copy_bytes_bound(table, kernels::Dtype::bf16, ModelUse::Training)
           : 0;
  m.activations = Model<float>::activation_bytes(c, micro);
  return m;
}

}  // namespace marin
