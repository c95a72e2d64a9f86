// The one-process communicator, the launcher detection and the world group.
#include "parallel/comm.hpp"

#include <cstdlib>
#include <cstring>

#include "core/error.hpp"

namespace marin::parallel {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::F32:
    case DType::I32:
      return 4;
    case DType::F64:
    case DType::I64:
      return 8;
    case DType::U8:
      return 1;
  }
  return 1;
}

void Comm::broadcast(std::string& s, int root) {
  int64_t n = int64_t(s.size());
  broadcast(&n, 1, root);
  s.resize(size_t(n));
  if (n > 0) broadcast_raw(s.data(), n, DType::U8, root);
}

std::vector<std::string> Comm::allgather(const std::string& s) {
  const std::vector<int64_t> counts = allgather(int64_t(s.size()));
  std::vector<int64_t> displs(counts.size(), 0);
  for (size_t q = 1; q < counts.size(); ++q) displs[q] = displs[q - 1] + counts[q - 1];
  std::string all(size_t(displs.back() + counts.back()), '\0');
  allgatherv(reinterpret_cast<const uint8_t*>(s.data()), int64_t(s.size()),
             reinterpret_cast<uint8_t*>(all.data()), counts.data(), displs.data());
  std::vector<std::string> out;
  for (size_t q = 0; q < counts.size(); ++q)
    out.push_back(all.substr(size_t(displs[q]), size_t(counts[q])));
  return out;
}

Range split_evenly(int64_t n, int size, int rank) {
  const int64_t q = n / size, r = n % size;
  Range out;
  out.begin = rank * q + std::min<int64_t>(rank, r);
  out.end = out.begin + q + (rank < r ? 1 : 0);
  return out;
}

namespace {

class LocalComm final : public Comm {
 public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  std::string backend() const override { return "local"; }
  void barrier() override {}
  void broadcast_raw(void*, int64_t, DType, int) override {}
  void allreduce_raw(void*, int64_t, DType, Op) override {}
  void allgatherv_raw(const void* send, int64_t n, void* recv, const int64_t*,
                      const int64_t* displs, DType t) override {
    copy(send, n, static_cast<char*>(recv) + displs[0] * int64_t(dtype_size(t)), t);
  }
  void gatherv_raw(const void* send, int64_t n, void* recv, const int64_t* counts,
                   const int64_t* displs, DType t, int) override {
    allgatherv_raw(send, n, recv, counts, displs, t);
  }
  void alltoallv_raw(const void* send, const int64_t* send_counts, const int64_t* send_displs,
                     void* recv, const int64_t*, const int64_t* recv_displs, DType t) override {
    const int64_t es = int64_t(dtype_size(t));
    copy(static_cast<const char*>(send) + send_displs[0] * es, send_counts[0],
         static_cast<char*>(recv) + recv_displs[0] * es, t);
  }
  void reduce_scatter_raw(void*, const int64_t*, DType, Op) override {}
  void exscan_sum_raw(void* data, int64_t n, DType t) override {
    std::memset(data, 0, size_t(n) * dtype_size(t));
  }
  std::unique_ptr<Comm> split(int, int) override { return std::make_unique<LocalComm>(); }
  [[noreturn]] void abort(int code) override { std::_Exit(code); }

 private:
  static void copy(const void* src, int64_t n, void* dst, DType t) {
    if (n > 0 && src != dst) std::memmove(dst, src, size_t(n) * dtype_size(t));
  }
};

}  // namespace

std::unique_ptr<Comm> make_local_comm() {
  return std::make_unique<LocalComm>();
}

bool launched_by_mpi() {
  // OpenMPI's mpirun, PMIx launchers (srun --mpi=pmix, prterun) and MPICH/Hydra.
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"})
    if (std::getenv(v)) return true;
  return false;
}

// Defined in mpi_comm.cpp.
std::unique_ptr<Comm> make_mpi_world();
void finalize_mpi();

namespace {
std::unique_ptr<Comm>& world_ptr() {
  static std::unique_ptr<Comm> w;
  return w;
}
}  // namespace

Comm& world() {
  auto& w = world_ptr();
  if (!w) w = launched_by_mpi() ? make_mpi_world() : make_local_comm();
  return *w;
}

void finalize() {
  auto& w = world_ptr();
  if (w && w->backend() == "mpi") finalize_mpi();
}

}  // namespace marin::parallel
