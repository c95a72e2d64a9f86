#pragma once
// Populating a training run's largest buffers in the background. The first touch of a fresh
// page costs the kernel's fault and zeroing, and a training step's parameters, gradients, earlier
// micro-batches' gradients and optimizer state are first touched all at once by its first step.
// A Prefault takes such buffers (add) and populates them on a thread of its own (start) with
// madvise(MADV_POPULATE_WRITE) (Linux 5.14+), which faults the pages in without writing to them,
// so it is safe beside the owner's own first writes: the work moves to the otherwise idle vCPU
// while the run initialises its weights and starts. Only buffers the run will touch whole are
// added (a buffer of Buffer's that is never touched costs no memory; populated, it would). Where
// the kernel refuses the advice nothing happens.
#include <atomic>
#include <cstddef>
#include <thread>
#include <vector>

namespace marin {

class Prefault {
 public:
  Prefault() = default;
  ~Prefault();  // stops and joins the thread: before the buffers it was given are freed
  Prefault(const Prefault&) = delete;
  Prefault& operator=(const Prefault&) = delete;

  void add(void* p, size_t bytes);
  void start();  // populates what was added, in the background

 private:
  struct Range {
    char* p;
    size_t bytes;
  };
  std::vector<Range> ranges_;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace marin
