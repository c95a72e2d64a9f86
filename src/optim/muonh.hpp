#pragma once
// MuonH and AdamH (recipe §5): a direction (Newton–Schulz-orthogonalised Nesterov momentum, or the
// bias-corrected Adam direction) followed by the hyperball step, which moves P on the sphere of its
// current radius:  R = ‖P‖,  P' = P − η·R·O/‖O‖,  P ← R·P'/‖P'‖  (norms floored at 1e-10).
// Free functions over raw row-major arrays; optimizer state (M, V) is plain arrays owned by the
// caller so it can be checkpointed. Nothing is allocated: the caller passes a workspace.
#include <cstdint>
#include <string_view>

#include "kernels/kernels.hpp"
#include "optim/adam.hpp"

namespace marin::optim {

using i64 = int64_t;

inline constexpr double kMuonBeta = 0.95;
inline constexpr double kHyperballNormFloor = 1e-10;

// How a stack of num_mats matrices (the routed experts of one weight kind in one layer) is put on
// the hyperball. kLayer: one radius over the whole [num_mats, rows, cols] stack (the 535B run's
// `expert_radius = "layer"`, the default); kExpert: one radius per matrix. For num_mats == 1 the
// two are the same.
enum class RadiusScope { kLayer, kExpert };
// "layer" / "expert"; anything else throws marin::Error.
RadiusScope parse_radius_scope(std::string_view s);
std::string_view radius_scope_name(RadiusScope s);

// The hyperball step on `groups` consecutive groups of group_size elements each, with the
// direction O (same layout as P). Each group keeps its own norm.
template <class T>
void hyperball_step(T* P, const T* O, i64 groups, i64 group_size, double lr);

// The squared norm of a stack whose matrices are split over ranks (expert parallelism): from this
// rank's per-matrix sums of squares, the sum over every matrix of the whole stack, added in
// matrix order so that every rank — and one process holding the whole stack — gets the same bits.
class StackSum {
 public:
  virtual ~StackSum() = default;
  virtual double total(const double* per_matrix, i64 n) const = 0;
};

// Elements of T the MuonH workspace needs: the orthogonalised stack plus the batched NS
// workspace (one per task slot at the thread count of the call).
i64 muonh_workspace_size(i64 num_mats, i64 rows, i64 cols);

// One MuonH step on P [num_mats, rows, cols] with gradient G and momentum M (same shape; M starts
// at zero and is updated in place):  M ← β·M + G;  U = β·M + G;  O = NS(U) per matrix;  hyperball
// step with radius per `scope`. G is not modified. For a stack (num_mats > 1, or `split` given:
// this rank's part of a stack), the layer radius is the sum of per-matrix sums of squares, over
// the whole stack through `split` when it is split over ranks.
template <class T>
void muonh_update(T* P, const T* G, T* M, i64 num_mats, i64 rows, i64 cols, double lr,
                  RadiusScope scope, T* workspace, double beta = kMuonBeta,
                  const StackSum* split = nullptr,
                  kernels::Precision ns_products = kernels::Precision::fp32);

// Elements of T the AdamH workspace needs (the direction u).
inline i64 adamh_workspace_size(i64 n) {
  return n;
}

// One AdamH step on a whole matrix of n elements (the LM head): m, v updated as in Adam, direction
// u = m̂/(√v̂ + ε), then the hyperball step with one radius for the matrix. step counts from 1.
template <class T>
void adamh_update(T* P, const T* G, T* M, T* V, i64 n, double lr, const AdamParams& hp, i64 step,
                  T* workspace);

}  // namespace marin::optim
