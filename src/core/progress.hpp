#pragma once
// A one-line progress display for long-running commands: percentage, rate and ETA, redrawn in
// place with a carriage return at most ten times a second. It prints only when stderr is a
// terminal, so logs and test output stay clean. update()/add() may be called from any thread.
//
//   marin::Progress p(total_bytes, "tokenize", "B");
//   for (...) p.add(n);   // or p.update(done)
//   p.finish();           // final line + newline (also done by the destructor)
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace marin {

class Progress {
 public:
  // unit: shown after the rate ("B" gives "12.3 MB/s"); empty for plain counts ("1.2k/s").
  Progress(uint64_t total, std::string label, std::string unit = "");
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  void update(uint64_t done);  // absolute
  void add(uint64_t n);        // relative
  void finish();
  bool enabled() const { return enabled_; }
  // The line that would be drawn for `done` after `seconds` (for tests and logs).
  std::string line(uint64_t done, double seconds) const;

 private:
  void draw_locked(bool force);

  uint64_t total_;
  std::string label_, unit_;
  bool enabled_;
  bool finished_ = false;
  uint64_t done_ = 0;
  std::chrono::steady_clock::time_point start_, last_draw_;
  std::mutex mu_;
};

}  // namespace marin
