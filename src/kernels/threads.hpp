#pragma once
// The compute threads of the process (OpenMP; cpu/threads.cpp). main() sets them from --threads,
// else OMP_NUM_THREADS, else the idle cores.
//
// oneDNN's sgemm sums in an order that depends on the thread count on some shapes (measured: the
// d224 ladder target trained at one and at two threads differs from its second step on; OpenBLAS
// does not), so a run is bit-identical only at the thread count it ran with. A resume therefore
// keeps the thread count its checkpoint records unless the user chose one (--threads,
// OMP_NUM_THREADS): `chosen` says which.
namespace marin::kernels {

void set_compute_threads(int n, bool chosen);
int compute_threads();  // omp_get_max_threads()
bool compute_threads_chosen();

}  // namespace marin::kernels
