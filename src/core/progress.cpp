// The progress display (see progress.hpp).
#include "core/progress.hpp"

#include <fmt/core.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>

namespace marin {

namespace {

std::atomic<double> g_plain_interval{30.0};

std::string si(double v, const std::string& unit) {
  const char* prefix[] = {"", "k", "M", "G", "T"};
  int i = 0;
  while (std::fabs(v) >= 1000.0 && i < 4) {
    v /= 1000.0;
    ++i;
  }
  return fmt::format("{:.1f} {}{}", v, prefix[i], unit);
}

std::string clock(double s) {
  if (!std::isfinite(s) || s < 0) return "--:--";
  const auto t = static_cast<uint64_t>(s + 0.5);
  if (t >= 3600) return fmt::format("{}:{:02d}:{:02d}", t / 3600, (t / 60) % 60, t % 60);
  return fmt::format("{:02d}:{:02d}", t / 60, t % 60);
}

}  // namespace

void Progress::set_plain_interval(double seconds) {
  g_plain_interval = std::isfinite(seconds) && seconds > 0 ? seconds : 0.0;
}

double Progress::plain_interval() {
  return g_plain_interval;
}

Progress::Progress(uint64_t total, std::string label, std::string unit, uint64_t start)
    : total_(total),
      start_count_(start),
      label_(std::move(label)),
      unit_(std::move(unit)),
      tty_(::isatty(STDERR_FILENO) == 1),
      enabled_(total > 0 && (tty_ || plain_interval() > 0)),
      done_(start),
      last_line_done_(start),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

Progress::~Progress() {
  finish();
}

double Progress::rate_of(uint64_t done, double seconds) const {
  return seconds > 0 && done > start_count_ ? double(done - start_count_) / seconds : 0.0;
}

std::string Progress::line(uint64_t done, double seconds) const {
  const double frac = total_ ? std::min(1.0, double(done) / double(total_)) : 1.0;
  constexpr int kWidth = 24;
  const int fill = static_cast<int>(frac * kWidth);
  std::string bar(fill, '#');
  bar.append(kWidth - fill, '.');
  const double rate = rate_of(done, seconds);
  const double eta = rate > 0 ? double(total_ - std::min(done, total_)) / rate : NAN;
  return fmt::format("{}{} [{}] {:5.1f}% {}/s elapsed {} eta {}{}", label_,
                     unit_.empty() ? fmt::format(" {}/{}", done, total_) : "", bar, frac * 100.0,
                     si(rate, unit_), clock(seconds), clock(eta), detail_);
}

std::string Progress::plain_line(uint64_t done, double seconds) const {
  const double frac = total_ ? std::min(1.0, double(done) / double(total_)) : 1.0;
  const double rate = rate_of(done, seconds);
  const double eta = rate > 0 ? double(total_ - std::min(done, total_)) / rate : NAN;
  // Plain counts as they are ("40/100"); a unit in SI form ("12.3 MB/40.0 MB").
  const std::string counts = unit_.empty()
                                 ? fmt::format("{}/{}", done, total_)
                                 : si(double(done), unit_) + "/" + si(double(total_), unit_);
  return fmt::format("{} {} ({:.1f}%) | {}/s | elapsed {} | ETA {}{}", label_, counts, frac * 100.0,
                     unit_.empty() ? fmt::format("{:.3g}", rate) : si(rate, unit_), clock(seconds),
                     clock(eta), detail_);
}

void Progress::draw_locked(bool force) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  const double s = std::chrono::duration<double>(now - start_).count();
  if (tty_) {
    if (!force && now - last_draw_ < std::chrono::milliseconds(100)) return;
    last_draw_ = now;
    std::fprintf(stderr, "\r%s\x1b[K", line(done_, s).c_str());
  } else {
    const double every = plain_interval();
    if (!force && (every <= 0 || std::chrono::duration<double>(now - last_draw_).count() < every))
      return;
    last_draw_ = now;
    last_line_done_ = done_;
    ++lines_;
    std::fprintf(stderr, "%s\n", plain_line(done_, s).c_str());
  }
  std::fflush(stderr);
}

void Progress::update(uint64_t done) {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  done_ = done;
  draw_locked(false);
}

void Progress::add(uint64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  done_ = std::min(total_, done_ + n);  // an estimate past the end (split over ranks) stops there
  draw_locked(false);
}

void Progress::set_detail(std::string detail) {
  std::lock_guard<std::mutex> lock(mu_);
  detail_ = std::move(detail);
}

void Progress::line_now() {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  draw_locked(true);
}

void Progress::finish() {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  finished_ = true;
  if (!enabled_) return;
  if (tty_) {
    draw_locked(true);
    std::fputc('\n', stderr);
    std::fflush(stderr);
  } else if (lines_ > 0 && done_ != last_line_done_) {
    draw_locked(true);  // a log that had lines gets the last one
  }
}

}  // namespace marin
