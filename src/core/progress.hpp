#pragma once
// The one progress display for long-running commands (train's steps, eval's predictions,
// tokenize's bytes, the n-gram index): count, percentage, rate and ETA.
//   - stderr a terminal: one line redrawn in place with a carriage return, at most ten times a
//     second;
//   - stderr not a terminal (nohup, a batch scheduler, a pipe): a plain line every
//     plain_interval() seconds (--progress-every; default 30, 0: none), so a log shows that the
//     job is alive and when it will end, without a line per update.
// A total of 0 shows nothing. update()/add() may be called from any thread.
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
  // unit: shown after the counts and the rate ("B" gives "12.3 MB/s"); empty for plain counts.
  // start: what was done before this display began (a resumed run's steps): the rate and the
  // ETA count from it.
  Progress(uint64_t total, std::string label, std::string unit = "", uint64_t start = 0);
  ~Progress();
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // The seconds between plain lines off a terminal, for the whole process (--progress-every,
  // set by the CLI before a command runs); 0: no plain lines.
  static void set_plain_interval(double seconds);
  static double plain_interval();

  void update(uint64_t done);  // absolute
  void add(uint64_t n);        // relative
  // Words appended to the line from now on (train: " | 163840 tokens | loss 5.1234").
  void set_detail(std::string detail);
  // Off a terminal: the plain line now, whatever the interval (train's validations); on one: a
  // redraw now.
  void line_now();
  void finish();
  bool enabled() const { return enabled_; }
  bool tty() const { return tty_; }
  // The line that would be drawn on a terminal for `done` after `seconds` (for tests and logs).
  std::string line(uint64_t done, double seconds) const;
  // The plain line off a terminal for `done` after `seconds`:
  //   "train step 40/100 (40.0%) | 0.8/s | elapsed 00:49 | ETA 01:14 | 163840 tokens | …"
  std::string plain_line(uint64_t done, double seconds) const;

 private:
  void draw_locked(bool force);
  double rate_of(uint64_t done, double seconds) const;

  uint64_t total_, start_count_;
  std::string label_, unit_, detail_;
  bool tty_, enabled_;
  bool finished_ = false;
  uint64_t done_ = 0;
  uint64_t last_line_done_ = 0;  // off a terminal: the count of the last plain line
  int64_t lines_ = 0;            // off a terminal: plain lines printed
  std::chrono::steady_clock::time_point start_, last_draw_;
  std::mutex mu_;
};

}  // namespace marin
