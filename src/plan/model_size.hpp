#pragma once
// Sizing a model to a target (`marin plan --target-params 1B --active 8/64`): the configuration of
// the shape rule (ModelConfig::shape_rule, the d-presets' family) whose headline total parameters
// (recipe §6) come nearest to the target, at the presets' depth for each width.
#include <cstdint>
#include <string>
#include <vector>

#include "model/config.hpp"

namespace marin {

// "1B", "350M", "1.5e9", "7T": a parameter count (K, M, B, T are powers of 1000). marin::Error
// naming `flag` and the text for anything else.
double parse_param_count(const std::string& text, const std::string& flag);

// "8/64": top_k of num_experts. marin::Error naming `flag` for anything else (K ≥ 1, K < E).
struct ActiveExperts {
  int64_t top_k = 0, num_experts = 0;
};
ActiveExperts parse_active_experts(const std::string& text, const std::string& flag);

// The layers the d-presets give a width (d512: 6 … d2048: 22, hero-535b's d6144: 48),
// interpolated in log-log between them and extended along the end segments.
int64_t preset_depth(int64_t width);

struct SizedModel {
  ModelConfig config;
  int64_t headline_params = 0, active_params = 0;
  double relative_error = 0;  // (headline − target) / target
  // `--preset base` plus these --set flags make this configuration: the shape-rule preset that
  // needs the fewest of them.
  std::string base;
  std::vector<std::string> sets;
};

// Widths are multiples of head_dim 128 from 256 to 32768; `sets` (--set key=value) are applied
// to every candidate, so a changed vocabulary or sequence length is counted in the search.
// marin::Error when no candidate validates.
SizedModel size_to_target(double target_params, const ActiveExperts& active,
                          const std::vector<std::string>& sets);

}  // namespace marin
