// Terminal progress line (see progress.hpp).
#include "core/progress.hpp"

#include <fmt/core.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>

namespace marin {

namespace {

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

Progress::Progress(uint64_t total, std::string label, std::string unit)
    : total_(total),
      label_(std::move(label)),
      unit_(std::move(unit)),
      enabled_(::isatty(STDERR_FILENO) == 1),
      start_(std::chrono::steady_clock::now()),
      last_draw_(start_) {}

Progress::~Progress() {
  finish();
}

std::string Progress::line(uint64_t done, double seconds) const {
  const double frac = total_ ? std::min(1.0, double(done) / double(total_)) : 1.0;
  constexpr int kWidth = 24;
  const int fill = static_cast<int>(frac * kWidth);
  std::string bar(fill, '#');
  bar.append(kWidth - fill, '.');
  const double rate = seconds > 0 ? double(done) / seconds : 0.0;
  const double eta = rate > 0 ? double(total_ - std::min(done, total_)) / rate : NAN;
  return fmt::format("{} [{}] {:5.1f}% {}/s elapsed {} eta {}", label_, bar, frac * 100.0,
                     si(rate, unit_), clock(seconds), clock(eta));
}

void Progress::draw_locked(bool force) {
  if (!enabled_) return;
  const auto now = std::chrono::steady_clock::now();
  if (!force && now - last_draw_ < std::chrono::milliseconds(100)) return;
  last_draw_ = now;
  const double s = std::chrono::duration<double>(now - start_).count();
  std::fprintf(stderr, "\r%s\x1b[K", line(done_, s).c_str());
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
  done_ += n;
  draw_locked(false);
}

void Progress::finish() {
  std::lock_guard<std::mutex> lock(mu_);
  if (finished_) return;
  finished_ = true;
  if (!enabled_) return;
  draw_locked(true);
  std::fputc('\n', stderr);
  std::fflush(stderr);
}

}  // namespace marin
