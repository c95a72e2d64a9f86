#include "parallel/comm_thread.hpp"

#include <exception>

#include "core/timer.hpp"
#include "kernels/threads.hpp"

namespace marin::parallel {

CommThread::CommThread() : thread_([this] { loop(); }) {}

CommThread::~CommThread() {
  bool running = false;
  {
    std::unique_lock lock(mu_);
    if (std::uncaught_exceptions() > 0) {
      // An error is on its way to main(), which ends every rank (MPI_Abort). The other ranks may
      // never join the collective a job is in, so neither it nor the queued ones are waited for.
      jobs_.clear();
      running = busy_;
    } else {
      done_.wait(lock, [&] { return jobs_.empty() && !busy_; });
    }
    stop_ = true;
  }
  ready_.notify_one();
  if (running)
    thread_.detach();  // blocked in MPI until the abort ends the process
  else
    thread_.join();
}

uint64_t CommThread::submit(std::function<void()> job) {
  uint64_t ticket = 0;
  {
    const std::lock_guard lock(mu_);
    jobs_.push_back(std::move(job));
    ticket = ++submitted_;
  }
  ready_.notify_one();
  return ticket;
}

double CommThread::wait() {
  uint64_t last = 0;
  {
    const std::lock_guard lock(mu_);
    last = submitted_;
  }
  return wait(last);
}

double CommThread::wait(uint64_t ticket) {
  const Timer t;
  std::unique_lock lock(mu_);
  done_.wait(lock, [&] { return finished_ >= ticket; });
  if (error_) {
    const std::exception_ptr e = error_;
    error_ = nullptr;
    std::rethrow_exception(e);
  }
  return t.seconds();
}

void CommThread::loop() {
  // The jobs' conversions (exact sum) run beside the compute, not as a second team of threads.
  kernels::run_kernels_single_threaded_here();
  std::unique_lock lock(mu_);
  for (;;) {
    ready_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
    if (jobs_.empty()) return;  // stop_
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    busy_ = true;
    const bool skip = error_ != nullptr;  // after a failure the rest are skipped
    lock.unlock();
    std::exception_ptr failed;
    try {
      if (!skip) job();
    } catch (...) {
      failed = std::current_exception();
    }
    lock.lock();
    if (failed && !error_) error_ = failed;
    busy_ = false;
    ++finished_;
    done_.notify_all();
  }
}

}  // namespace marin::parallel
