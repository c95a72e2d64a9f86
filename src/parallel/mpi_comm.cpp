// The MPI communicator: the only file of the project that includes <mpi.h>. MPI is initialised
// with MPI_THREAD_SERIALIZED: the main thread calls MPI, and so does the training step's
// communication thread (comm_thread.hpp), never both at once; OpenMP threads only compute.
// MPI counts are C ints, so large in-place reductions are split into chunks of 2^28 elements and
// the v-collectives refuse counts that do not fit (with the count in the message).
#include <mpi.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstring>
#include <vector>

#include "parallel/comm_thread.hpp"

#include "core/error.hpp"
#include "parallel/comm.hpp"

namespace marin::parallel {
namespace {

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::F32:
      return MPI_FLOAT;
    case DType::F64:
      return MPI_DOUBLE;
    case DType::I64:
      return MPI_INT64_T;
    case DType::I32:
      return MPI_INT32_T;
    case DType::U8:
      return MPI_UINT8_T;
  }
  return MPI_BYTE;
}

MPI_Op mpi_op(Op op) {
  switch (op) {
    case Op::Sum:
      return MPI_SUM;
    case Op::Max:
      return MPI_MAX;
    case Op::Min:
      return MPI_MIN;
  }
  return MPI_SUM;
}

int as_int(int64_t n, const char* what) {
  MARIN_CHECK(n >= 0 && n <= INT_MAX, "MPI {}: count {} does not fit an MPI int", what, n);
  return int(n);
}

std::vector<int> as_ints(const int64_t* v, int n, const char* what) {
  std::vector<int> out(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) out[size_t(i)] = as_int(v[i], what);
  return out;
}

constexpr int64_t kChunk = int64_t(1) << 28;

class MpiComm final : public Comm {
 public:
  explicit MpiComm(MPI_Comm c, bool owned) : c_(c), owned_(owned) {
    MPI_Comm_rank(c_, &rank_);
    MPI_Comm_size(c_, &size_);
  }
  ~MpiComm() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (owned_ && !finalized) MPI_Comm_free(&c_);
  }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string backend() const override { return "mpi"; }
  void barrier() override { MPI_Barrier(c_); }

  void broadcast_raw(void* data, int64_t n, DType t, int root) override {
    char* p = static_cast<char*>(data);
    const int64_t es = int64_t(dtype_size(t));
    for (int64_t i = 0; i < n; i += kChunk)
      MPI_Bcast(p + i * es, int(std::min(kChunk, n - i)), mpi_type(t), root, c_);
  }
  void allreduce_raw(void* data, int64_t n, DType t, Op op) override {
    char* p = static_cast<char*>(data);
    const int64_t es = int64_t(dtype_size(t));
    for (int64_t i = 0; i < n; i += kChunk)
      MPI_Allreduce(MPI_IN_PLACE, p + i * es, int(std::min(kChunk, n - i)), mpi_type(t), mpi_op(op),
                    c_);
  }
  void allgatherv_raw(const void* send, int64_t n, void* recv, const int64_t* counts,
                      const int64_t* displs, DType t) override {
    const auto rc = as_ints(counts, size_, "allgatherv"), rd = as_ints(displs, size_, "allgatherv");
    // In place when the caller's contribution already sits at its displacement in recv.
    const int64_t es = int64_t(dtype_size(t));
    const bool in_place = send == static_cast<const char*>(recv) + displs[rank_] * es;
    MPI_Allgatherv(in_place ? MPI_IN_PLACE : send, as_int(n, "allgatherv"), mpi_type(t), recv,
                   rc.data(), rd.data(), mpi_type(t), c_);
  }
  void gatherv_raw(const void* send, int64_t n, void* recv, const int64_t* counts,
                   const int64_t* displs, DType t, int root) override {
    std::vector<int> rc, rd;
    if (rank_ == root)
      rc = as_ints(counts, size_, "gatherv"), rd = as_ints(displs, size_, "gatherv");
    MPI_Gatherv(send, as_int(n, "gatherv"), mpi_type(t), recv, rc.data(), rd.data(), mpi_type(t),
                root, c_);
  }
  void alltoallv_raw(const void* send, const int64_t* send_counts, const int64_t* send_displs,
                     void* recv, const int64_t* recv_counts, const int64_t* recv_displs,
                     DType t) override {
    const auto sc = as_ints(send_counts, size_, "alltoallv");
    const auto sd = as_ints(send_displs, size_, "alltoallv");
    const auto rc = as_ints(recv_counts, size_, "alltoallv");
    const auto rd = as_ints(recv_displs, size_, "alltoallv");
    MPI_Alltoallv(send, sc.data(), sd.data(), mpi_type(t), recv, rc.data(), rd.data(), mpi_type(t),
                  c_);
  }
  void reduce_scatter_raw(void* data, const int64_t* counts, DType t, Op op) override {
    const auto rc = as_ints(counts, size_, "reduce_scatter");
    int64_t displ = 0;
    for (int q = 0; q < rank_; ++q) displ += counts[q];
    const size_t es = dtype_size(t), bytes = size_t(counts[rank_]) * es;
    if (recv_.size() < bytes) recv_.resize(bytes);
    MPI_Reduce_scatter(data, recv_.data(), rc.data(), mpi_type(t), mpi_op(op), c_);
    if (bytes) std::memcpy(static_cast<char*>(data) + size_t(displ) * es, recv_.data(), bytes);
  }
  void exscan_sum_raw(void* data, int64_t n, DType t) override {
    MPI_Exscan(MPI_IN_PLACE, data, as_int(n, "exscan"), mpi_type(t), MPI_SUM, c_);
    // MPI leaves rank 0's buffer undefined; the contract is zeros.
    if (rank_ == 0) std::fill_n(static_cast<char*>(data), size_t(n) * dtype_size(t), char(0));
  }
  std::unique_ptr<Comm> split(int color, int key) override {
    MPI_Comm out;
    MPI_Comm_split(c_, color, key, &out);
    return std::make_unique<MpiComm>(out, true);
  }
  [[noreturn]] void abort(int code) override {
    std::fflush(stdout);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);  // MPI_Abort does not return; this satisfies [[noreturn]]
  }

 private:
  MPI_Comm c_;
  bool owned_;
  int rank_ = 0, size_ = 1;
  std::vector<char> recv_;  // reduce_scatter's receive buffer, reused
};

}  // namespace

namespace {
int g_thread_level = MPI_THREAD_SINGLE;  // what MPI_Init_thread provided
}  // namespace

bool comm_thread_supported() {
  return g_thread_level >= MPI_THREAD_SERIALIZED;
}

std::unique_ptr<Comm> make_mpi_world() {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    // SERIALIZED: the step's communication thread (comm_thread.hpp) makes calls too, never at
    // the same time as the main thread.
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &g_thread_level);
  } else {
    MPI_Query_thread(&g_thread_level);
  }
  return std::make_unique<MpiComm>(MPI_COMM_WORLD, false);
}

void finalize_mpi() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

}  // namespace marin::parallel
