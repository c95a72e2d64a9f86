#include "plan/model_size.hpp"

#include <fmt/format.h>

#include <cctype>
#include <cmath>
#include <utility>

#include "core/error.hpp"
#include "model/accounting.hpp"

namespace marin {

double parse_param_count(const std::string& text, const std::string& flag) {
  size_t used = 0;
  double v = std::nan("");
  try {
    v = std::stod(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  std::string suffix = text.substr(used);
  double scale = 1;
  if (suffix.size() == 1) {
    const char u = char(std::toupper(static_cast<unsigned char>(suffix[0])));
    scale = u == 'K' ? 1e3 : u == 'M' ? 1e6 : u == 'B' ? 1e9 : u == 'T' ? 1e12 : 0;
    if (scale != 0) suffix.clear();
  }
  if (used == 0 || !suffix.empty() || !(v * scale >= 1e3) || !std::isfinite(v * scale))
    fail("{} '{}': expected a parameter count of at least 1K, like 350M, 1B or 1.5e9", flag, text);
  return v * scale;
}

ActiveExperts parse_active_experts(const std::string& text, const std::string& flag) {
  ActiveExperts a;
  const size_t slash = text.find('/');
  try {
    size_t k_end = 0, e_end = 0;
    if (slash != std::string::npos) {
      a.top_k = std::stoll(text.substr(0, slash), &k_end);
      a.num_experts = std::stoll(text.substr(slash + 1), &e_end);
    }
    if (slash == std::string::npos || k_end != slash || e_end != text.size() - slash - 1) a = {};
  } catch (const std::exception&) {
    a = {};
  }
  if (a.top_k < 1 || a.num_experts <= a.top_k)
    fail("{} '{}': expected K/E, K routed experts active of E (1 ≤ K < E), like 8/64", flag, text);
  return a;
}

int64_t preset_depth(int64_t width) {
  // (width, layers) of d512, d768, d1024, d1536, d2048 and hero-535b (ModelConfig::preset).
  static const std::pair<double, double> points[] = {{512, 6},   {768, 8},   {1024, 12},
                                                     {1536, 16}, {2048, 22}, {6144, 48}};
  constexpr size_t n = std::size(points);
  const double w = double(width);
  size_t i = 0;  // the segment [i, i + 1] that holds w, or the nearest end segment
  while (i + 2 < n && w > points[i + 1].first) ++i;
  const auto [w0, l0] = points[i];
  const auto [w1, l1] = points[i + 1];
  const double slope = std::log(l1 / l0) / std::log(w1 / w0);
  const double layers = l0 * std::exp(slope * std::log(w / w0));
  return std::max<int64_t>(1, std::llround(layers));
}

SizedModel size_to_target(double target_params, const ActiveExperts& active,
                          const std::vector<std::string>& sets) {
  constexpr int64_t kHeadDim = 128;
  SizedModel best;
  bool found = false;
  std::string last_error;
  for (int64_t d = 2 * kHeadDim; d <= 256 * kHeadDim; d += kHeadDim) {
    ModelConfig c = ModelConfig::shape_rule(d, preset_depth(d), kHeadDim);
    c.top_k = active.top_k;
    c.num_experts = active.num_experts;
    try {
      apply_overrides(c, sets);
      c.validate();
    } catch (const Error& e) {
      last_error = e.what();
      continue;
    }
    const Accounting a = account(c);
    const double err = (double(a.headline_params) - target_params) / target_params;
    if (!found || std::abs(err) < std::abs(best.relative_error)) {
      best.config = c;
      best.headline_params = a.headline_params;
      best.active_params = a.active_params;
      best.relative_error = err;
      found = true;
    }
  }
  if (!found) fail("no configuration of the shape rule validates: {}", last_error);
  for (const char* preset : {"d512", "d768", "d1024", "d1536", "d2048", "hero-535b"}) {
    std::vector<std::string> sets = best.config.overrides_from(ModelConfig::preset(preset));
    if (best.base.empty() || sets.size() < best.sets.size()) {
      best.base = preset;
      best.sets = std::move(sets);
    }
  }
  return best;
}

}  // namespace marin
