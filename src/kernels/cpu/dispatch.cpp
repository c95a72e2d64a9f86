// Which Highway target the float kernels run on. Every SIMD kernel file is compiled once per
// target in HWY_TARGETS (AVX-512, AVX2 and the 128-bit baseline; see CMakeLists.txt) and
// HWY_DYNAMIC_DISPATCH picks the best one the CPU supports on first use. This file reports that
// choice (for bench and metrics) and lets tests pin each supported target in turn.
#include <string>
#include <vector>

#include "kernels/kernels.hpp"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "kernels/cpu/dispatch.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

HWY_BEFORE_NAMESPACE();
namespace marin::kernels::cpu::HWY_NAMESPACE {
// The target this copy was compiled for: dispatching to it answers which copy runs.
int64_t CompiledTarget() {
  return HWY_TARGET;
}
}  // namespace marin::kernels::cpu::HWY_NAMESPACE
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
#include <cctype>
#include <cstdlib>

#include <fmt/ranges.h>

#include "core/error.hpp"

namespace marin::kernels {

namespace cpu {
HWY_EXPORT(CompiledTarget);
}  // namespace cpu

namespace {
// Highway's names, lower-cased, with AVX3 spelled as what it is.
std::string isa_label(int64_t target) {
  if (target == HWY_AVX3) return "avx512";
  if (target == HWY_AVX3_DL) return "avx512-dl";
  std::string s = hwy::TargetName(target);
  for (char& c : s) c = char(std::tolower(static_cast<unsigned char>(c)));
  return s;
}
}  // namespace

std::string isa_name() {
  return isa_label(HWY_DYNAMIC_DISPATCH(cpu::CompiledTarget)());
}

std::vector<std::string> isa_targets() {
  std::vector<std::string> out;
  for (int64_t t : hwy::SupportedAndGeneratedTargets()) out.push_back(isa_label(t));
  return out;
}

void force_isa(const std::string& name) {
  hwy::SetSupportedTargetsForTest(0);  // search the real list, not an earlier forced one
  if (name.empty()) return;
  for (int64_t t : hwy::SupportedAndGeneratedTargets()) {
    if (isa_label(t) == name) {
      hwy::SetSupportedTargetsForTest(t);
      return;
    }
  }
  fail(
      "MARIN_ISA / force_isa: '{}' is not a target this binary has and this CPU supports "
      "(expected one of: {})",
      name, fmt::join(isa_targets(), ", "));
}

void force_isa_from_env() {
  if (const char* isa = std::getenv("MARIN_ISA"); isa && *isa) force_isa(isa);
}

}  // namespace marin::kernels
#endif  // HWY_ONCE
