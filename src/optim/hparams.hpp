#pragma once
// Marin's hyperparameter rule (August refit, recipe.md §5) as a function of the run's shape.
#include <cstdint>

namespace marin {

struct HyperParams {
  double adam_lr = 0, muonh_lr = 0, beta1 = 0.9, beta2 = 0.95, eps = 1e-8;
};

// tpb = batch·seq_len tokens per step; tokens = steps·tpb.
HyperParams heuristic_hparams(int64_t hidden_dim, int64_t batch, int64_t seq_len, int64_t steps);

}  // namespace marin
