#pragma once
// Parameter and FLOP accounting exactly as recipe.md §6 (Marin's estimator). Integers are exact;
// these numbers are asserted to the last digit by tests.
#include <cstdint>

#include "model/config.hpp"

namespace marin {

struct Accounting {
  int64_t active_params = 0;    // L·core(K)
  int64_t headline_params = 0;  // L·core(E) + 2·V·d
  int64_t every_tensor = 0;     // every stored tensor (gates, norms, SConv, router bias, ...)
  int64_t fwd_flops_per_token = 0;
  int64_t fwd_flops_no_head = 0;  // F_fwd − 2·d·V (the forecast's compute measure)
};

int64_t core_params(const ModelConfig& c, int64_t k);
int64_t every_tensor_params(const ModelConfig& c);
int64_t forward_flops_per_token(const ModelConfig& c);
Accounting account(const ModelConfig& c);

// Training FLOPs = 3·F_fwd·S·batch·steps (double: the 535B run's is 2.696e24).
double training_flops(const ModelConfig& c, int64_t batch, int64_t steps);
// Forecast compute per step: 3·(F_fwd − 2·d·V)·S·batch.
double forecast_flops_per_step(const ModelConfig& c, int64_t batch);
// steps = round(tokens_per_param · active / (batch·S)).
int64_t steps_for_budget(const ModelConfig& c, int64_t batch, double tokens_per_param);

}  // namespace marin
