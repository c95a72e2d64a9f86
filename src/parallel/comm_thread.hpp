#pragma once
// A thread that runs communication while the compute goes on (docs/distributed.md, "Overlap").
// Open MPI 4.1 makes no progress on a collective unless a thread is inside an MPI call, so a
// nonblocking collective started before the backward would still wait for its end; a thread of
// our own that calls the blocking collective does overlap. Jobs run one at a time in the order
// they were submitted (the order every rank submits them in, so collectives match); wait()
// returns when all are done and rethrows the first job's exception.
//
// Only one thread may be inside MPI at a time (MPI_THREAD_SERIALIZED): while jobs run, the
// submitting thread makes no MPI call of its own, and it calls wait() before its next one.
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>

namespace marin::parallel {

class CommThread {
 public:
  CommThread();
  // Waits for the jobs, then ends the thread; while an exception unwinds (an error on its way to
  // MPI_Abort) it drops the queued jobs and leaves a running one behind instead.
  ~CommThread();
  CommThread(const CommThread&) = delete;
  CommThread& operator=(const CommThread&) = delete;

  // Queues `job`; returns its ticket (1 for the first job, then 2, 3, …) for wait(ticket).
  uint64_t submit(std::function<void()> job);
  // Blocks until every submitted job has run; returns the seconds it blocked (the communication
  // the compute did not hide), and rethrows the first exception a job threw.
  double wait();
  // Blocks until the job of `ticket` (and so every job before it) has run; as wait() otherwise.
  double wait(uint64_t ticket);

 private:
  void loop();
  std::mutex mu_;
  std::condition_variable ready_, done_;
  std::deque<std::function<void()>> jobs_;
  bool busy_ = false, stop_ = false;
  uint64_t submitted_ = 0, finished_ = 0;  // jobs so far (tickets)
  std::exception_ptr error_;
  std::thread thread_;
};

// True when MPI was initialised with MPI_THREAD_SERIALIZED or more, so a second thread may make
// the calls (false in a process without MPI, which has nothing to communicate).
bool comm_thread_supported();

}  // namespace marin::parallel
