#include "optim/hparams.hpp"

#include <algorithm>
#include <cmath>

namespace marin {

HyperParams heuristic_hparams(int64_t hidden_dim, int64_t batch, int64_t seq_len, int64_t steps) {
  const double tpb = static_cast<double>(batch) * static_cast<double>(seq_len);
  const double tokens = static_cast<double>(steps) * tpb;
  HyperParams h;
  h.adam_lr =
      std::min(0.05, 0.087571 * std::pow(tokens, -0.3461) *
                         std::pow(static_cast<double>(hidden_dim), -0.3448) * std::sqrt(tpb));
  h.muonh_lr = std::min(0.05, (13.0 / 3.0) * h.adam_lr);
  h.beta1 = 0.90;
  h.beta2 = std::clamp(std::pow(0.999, tpb / 131072.0), 0.95, 0.9999);
  h.eps = 9.676e-18 * std::sqrt(static_cast<double>(steps));
  return h;
}

}  // namespace marin
