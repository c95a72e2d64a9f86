#pragma once
// The loss's reductions over a batch (cpu/loss.cpp), beside kernels.hpp's xent.
#include "kernels/kernels.hpp"

namespace marin::kernels {

// Over the rows with label >= 0, in row order and in double: ce_sum = Σ ce, z_sum = Σ lse²; the
// ce of every other row (not scored) is set to 0.
template <class T>
void loss_sums(T* ce, const T* lse, const int32_t* labels, i64 rows, double* ce_sum, double* z_sum);

}  // namespace marin::kernels
