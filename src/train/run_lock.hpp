#pragma once
// Ownership of a run directory (docs/reliability.md, "Run directories"). Two trainers writing one
// run directory interleave their metrics and checkpoints and lose a run, and a new run started on
// an old one prunes its checkpoints, so:
//   - a process that writes a run directory holds RUN/run.lock, an exclusive flock(2) lock, for
//     as long as it writes (the kernel releases it when the process dies, so a crash leaves no
//     stale lock); the file says who holds it (host, pid, command), which a second writer's error
//     names;
//   - a new run refuses a directory that already holds a run (run.json or checkpoints); with
//     `overwrite` the old run is renamed aside (RUN.old-N), never deleted.
// Under MPI only rank 0 writes the run directory, so only rank 0 takes the lock.
#include <memory>
#include <string>

namespace marin {

class RunLock {
 public:
  // Creates `dir` if needed and locks DIR/run.lock; marin::Error naming the holder when another
  // process holds it. `what` describes the holder in the lock file (e.g. "marin train").
  RunLock(const std::string& dir, const std::string& what);
  ~RunLock();
  RunLock(const RunLock&) = delete;
  RunLock& operator=(const RunLock&) = delete;
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
  int fd_ = -1;
};

// True when `dir` holds a training run: run.json, or a checkpoints/ directory with anything in it.
bool holds_run(const std::string& dir);

// Takes the lock of run directory `dir` for a writer. With `fresh` (a new run, not a resume) a
// directory that already holds a run is refused, or, with `overwrite`, renamed aside first (the
// new name is printed) and a fresh directory locked in its place.
std::unique_ptr<RunLock> claim_run_dir(const std::string& dir, bool fresh, bool overwrite,
                                       const std::string& what = "marin train");

}  // namespace marin
