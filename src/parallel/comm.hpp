#pragma once
// The communicator seam (docs/distributed.md): every collective the trainer, the evaluator and
// the MoE dispatcher need, over a group of ranks. Two implementations: MPI (src/dist/mpi_comm.cpp,
// the only file that includes <mpi.h>) when the program was started by mpirun/srun, and a
// one-process communicator otherwise, so `marin train …` and `mpirun -np N marin train …` are the
// same binary and the same code path.
//
// All collectives are blocking and must be called by every rank of the group in the same order.
// Counts are in elements, not bytes.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace marin::parallel {

enum class DType { F32, F64, I64, I32, U8 };
enum class Op { Sum, Max, Min };

template <class T>
constexpr DType dtype_of();
template <>
constexpr DType dtype_of<float>() {
  return DType::F32;
}
template <>
constexpr DType dtype_of<double>() {
  return DType::F64;
}
template <>
constexpr DType dtype_of<int64_t>() {
  return DType::I64;
}
template <>
constexpr DType dtype_of<int32_t>() {
  return DType::I32;
}
template <>
constexpr DType dtype_of<uint8_t>() {
  return DType::U8;
}
size_t dtype_size(DType t);

class Comm {
 public:
  virtual ~Comm() = default;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual std::string backend() const = 0;  // "local" or "mpi"
  virtual void barrier() = 0;
  // --- the untyped primitives an implementation provides ---
  virtual void broadcast_raw(void* data, int64_t n, DType t, int root) = 0;
  virtual void allreduce_raw(void* data, int64_t n, DType t, Op op) = 0;  // in place
  // Rank r contributes `n` elements; recv[displs[q] ...] receives counts[q] elements of rank q.
  virtual void allgatherv_raw(const void* send, int64_t n, void* recv, const int64_t* counts,
                              const int64_t* displs, DType t) = 0;
  // Like allgatherv, but only `root` receives (recv may be null elsewhere).
  virtual void gatherv_raw(const void* send, int64_t n, void* recv, const int64_t* counts,
                           const int64_t* displs, DType t, int root) = 0;
  virtual void alltoallv_raw(const void* send, const int64_t* send_counts,
                             const int64_t* send_displs, void* recv, const int64_t* recv_counts,
                             const int64_t* recv_displs, DType t) = 0;
  // In place over the whole buffer of Σ counts elements, split into consecutive segments (rank
  // q's at offset Σ_{p<q} counts[p]): on return this rank's segment holds the element-wise
  // reduction over all ranks; the other segments are unspecified.
  virtual void reduce_scatter_raw(void* data, const int64_t* counts, DType t, Op op) = 0;
  // In place: x ← Σ_{q < rank} x_q (zeros on rank 0).
  virtual void exscan_sum_raw(void* data, int64_t n, DType t) = 0;
  // Ranks with the same color form a new group, ordered by key (then by rank).
  virtual std::unique_ptr<Comm> split(int color, int key) = 0;
  // Ends every rank of the job at once (a failed rank must never leave the others waiting).
  [[noreturn]] virtual void abort(int code) = 0;

  // --- typed conveniences ---
  bool is_root() const { return rank() == 0; }
  template <class T>
  void allreduce(T* x, int64_t n, Op op = Op::Sum) {
    allreduce_raw(x, n, dtype_of<T>(), op);
  }
  template <class T>
  T allreduce(T x, Op op = Op::Sum) {
    allreduce_raw(&x, 1, dtype_of<T>(), op);
    return x;
  }
  template <class T>
  void broadcast(T* x, int64_t n, int root = 0) {
    broadcast_raw(x, n, dtype_of<T>(), root);
  }
  void broadcast(std::string& s, int root = 0);
  // Every rank's string, in rank order (collective).
  std::vector<std::string> allgather(const std::string& s);
  template <class T>
  void reduce_scatter(T* x, const int64_t* counts, Op op = Op::Sum) {
    reduce_scatter_raw(x, counts, dtype_of<T>(), op);
  }
  template <class T>
  void exscan_sum(T* x, int64_t n) {
    exscan_sum_raw(x, n, dtype_of<T>());
  }
  // Equal contributions: recv holds size()·n elements, rank q's at q·n.
  template <class T>
  void allgather(const T* send, int64_t n, T* recv);
  template <class T>
  std::vector<T> allgather(T x) {
    std::vector<T> out(static_cast<size_t>(size()));
    allgather(&x, 1, out.data());
    return out;
  }
  template <class T>
  void allgatherv(const T* send, int64_t n, T* recv, const int64_t* counts, const int64_t* displs) {
    allgatherv_raw(send, n, recv, counts, displs, dtype_of<T>());
  }
  template <class T>
  void gatherv(const T* send, int64_t n, T* recv, const int64_t* counts, const int64_t* displs,
               int root = 0) {
    gatherv_raw(send, n, recv, counts, displs, dtype_of<T>(), root);
  }
  template <class T>
  void alltoallv(const T* send, const int64_t* send_counts, const int64_t* send_displs, T* recv,
                 const int64_t* recv_counts, const int64_t* recv_displs) {
    alltoallv_raw(send, send_counts, send_displs, recv, recv_counts, recv_displs, dtype_of<T>());
  }
};

template <class T>
void Comm::allgather(const T* send, int64_t n, T* recv) {
  const size_t ranks = static_cast<size_t>(size());
  std::vector<int64_t> counts(ranks, n), displs(ranks);
  for (int q = 0; q < size(); ++q) displs[size_t(q)] = int64_t(q) * n;
  allgatherv(send, n, recv, counts.data(), displs.data());
}

// The one-process group: every collective is a copy (or nothing).
std::unique_ptr<Comm> make_local_comm();

// The job's world group: MPI when this process was started by an MPI launcher (mpirun, mpiexec,
// srun --mpi=pmix), the one-process group otherwise. Initialised on first use; the MPI runtime is
// finalised by finalize() (main calls it) or, on an error, by Comm::abort.
Comm& world();
bool launched_by_mpi();
void finalize();

// Ranks [begin, end) of `n` items split as evenly as possible over `size` ranks (the first
// n % size ranks get one more).
struct Range {
  int64_t begin = 0, end = 0;
  int64_t size() const { return end - begin; }
};
Range split_evenly(int64_t n, int size, int rank);

}  // namespace marin::parallel
