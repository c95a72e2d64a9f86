// The loss's reductions (see kernels/loss.hpp): sequential, so the sums keep their order.
#include "kernels/loss.hpp"

namespace marin::kernels {

template <class T>
void loss_sums(T* ce, const T* lse, const int32_t* labels, i64 rows, double* ce_sum,
               double* z_sum) {
  double c = 0, z = 0;
  for (i64 i = 0; i < rows; ++i) {
    if (labels[i] < 0) {
      ce[i] = 0;
      continue;
    }
    c += double(ce[i]);
    z += double(lse[i]) * double(lse[i]);
  }
  *ce_sum = c;
  *z_sum = z;
}

template void loss_sums<float>(float*, const float*, const int32_t*, i64, double*, double*);
template void loss_sums<double>(double*, const double*, const int32_t*, i64, double*, double*);

}  // namespace marin::kernels
