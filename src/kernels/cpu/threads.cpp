// The compute threads of the process (threads.hpp): OpenMP's count, and whether the user chose it.
#include <omp.h>

#include <algorithm>
#include <atomic>

#include "kernels/threads.hpp"

namespace marin::kernels {

namespace {
std::atomic<bool> g_chosen{false};
}  // namespace

void set_compute_threads(int n, bool chosen) {
  omp_set_num_threads(std::max(1, n));
  g_chosen = chosen;
}

int compute_threads() {
  return omp_get_max_threads();
}

bool compute_threads_chosen() {
  return g_chosen;
}

}  // namespace marin::kernels
