// The main of every bench/bench_*.cpp binary: Google Benchmark's, after MARIN_ISA (as in the
// CLI, docs/cli.md), so `MARIN_ISA=avx2 bench_attention` times the AVX2 kernels on any machine.
#include <benchmark/benchmark.h>
#include <fmt/core.h>

#include "core/error.hpp"
#include "kernels/kernels.hpp"

int main(int argc, char** argv) {
  try {
    marin::kernels::force_isa_from_env();
  } catch (const marin::Error& e) {
    fmt::print(stderr, "{}: error: {}\n", argv[0], e.what());
    return 1;
  }
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
