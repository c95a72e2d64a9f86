// The compute threads of the process (threads.hpp): OpenMP's count, and whether the user chose it.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <exception>

#include "kernels/threads.hpp"

namespace marin::kernels {

namespace {
std::atomic<bool> g_chosen{false};
}  // namespace

void set_compute_threads(int n, bool chosen) {
  omp_set_num_threads(std::max(1, n));
  g_chosen = chosen;
}

void run_kernels_single_threaded_here() {
  omp_set_num_threads(1);
}

int compute_threads() {
  return omp_get_max_threads();
}

bool compute_threads_chosen() {
  return g_chosen;
}

int task_slots(int64_t tasks) {
  return int(std::clamp<int64_t>(tasks, 1, compute_threads()));
}

void parallel_tasks(int64_t tasks, const std::function<void(int64_t task, int slot)>& run) {
  const int slots = task_slots(tasks);
  if (slots == 1) {
    for (int64_t t = 0; t < tasks; ++t) run(t, 0);
    return;
  }
  // Dynamic: tasks of one batch cost alike, but another process may hold a core. An exception
  // must not leave the OpenMP region (that terminates the process): the first is kept, the
  // remaining tasks are skipped, and it is rethrown on the calling thread.
  std::exception_ptr error;
  std::atomic<bool> failed{false};
  // The calling thread runs tasks too, and clang's libomp keeps a count it set inside the region
  // after the region ends (libgomp does not): the process's compute threads then stayed at one
  // for good (caught by the sanitizer build's tests). So the caller's count is put back after.
  const int outer = compute_threads();
#pragma omp parallel for schedule(dynamic, 1) num_threads(slots)
  for (int64_t t = 0; t < tasks; ++t) {
    if (failed.load(std::memory_order_relaxed)) continue;
    try {
      // Each task single-threaded by its own setting (this thread's, for this region only),
      // not by the runtime's nesting rules: oneDNN, built against libgomp, ran a task's sgemm on
      // more threads, with other bits, when the region was another runtime's (clang's libomp in
      // the sanitizer build).
      omp_set_num_threads(1);
      run(t, omp_get_thread_num());
    } catch (...) {
#pragma omp critical(marin_parallel_tasks_error)
      if (!error) error = std::current_exception();
      failed = true;
    }
  }
  omp_set_num_threads(outer);
  if (error) std::rethrow_exception(error);
}

}  // namespace marin::kernels
