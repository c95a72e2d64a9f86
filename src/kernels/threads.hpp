#pragma once
// The compute threads of the process (OpenMP; cpu/threads.cpp). main() sets them from --threads,
// else OMP_NUM_THREADS, else the idle cores.
//
// oneDNN's sgemm sums in an order that depends on the thread count on some shapes (measured: the
// d224 ladder target trained at one and at two threads differs from its second step on; OpenBLAS
// does not), so a run is bit-identical only at the thread count it ran with. A resume therefore
// keeps the thread count its checkpoint records unless the user chose one (--threads,
// OMP_NUM_THREADS): `chosen` says which.
#include <cstdint>
#include <functional>

namespace marin::kernels {

void set_compute_threads(int n, bool chosen);
int compute_threads();  // omp_get_max_threads()
// The kernels the calling thread runs from now on use one thread (OpenMP's count is per thread):
// for a helper thread (parallel::CommThread) whose work must not compete with the compute's team.
void run_kernels_single_threaded_here();
bool compute_threads_chosen();

// Independent tasks 0 … tasks−1 spread over the compute threads, for work made of many small
// pieces whose products do not scale inside one GEMM (Newton–Schulz of 32 experts' 128×128
// matrices: one GEMM on two threads runs no faster than on one). `slot` is in
// [0, task_slots(tasks)) and no two tasks run at once on one slot, so a slot indexes per-thread
// scratch (read task_slots before the call: inside a task compute_threads() is 1). The kernels a
// task calls run single-threaded (each task sets its thread's count to 1, whatever the OpenMP
// runtime's nesting rules; the caller's own count is put back afterwards), so each task computes
// the same bits at every thread count.
// An exception from a task reaches the caller (the first one; tasks not yet started are skipped).
int task_slots(int64_t tasks);  // min(tasks, compute_threads()), at least 1
void parallel_tasks(int64_t tasks, const std::function<void(int64_t task, int slot)>& run);

}  // namespace marin::kernels
