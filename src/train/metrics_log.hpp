#pragma once
// RUN/metrics.jsonl: one JSON line per step, appended and flushed by its one writer (rank 0).
#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>

namespace marin {

class MetricsLog {
 public:
  // `writer`: this process writes the file (rank 0); the others' write() does nothing.
  MetricsLog(const std::string& run_dir, bool writer);
  ~MetricsLog();
  MetricsLog(const MetricsLog&) = delete;
  MetricsLog& operator=(const MetricsLog&) = delete;
  // Appends a line. A failed write (a full disk, a read-only file) is kept, not thrown (error()):
  // the loop stops every rank at the end of the step with a checkpoint and this message, so
  // nothing trained is lost; later lines are dropped.
  void write(const nlohmann::json& j);
  // The failed write, if any (the writer's; "" on the other ranks).
  const std::string& error() const { return error_; }
  // Keeps the lines of RUN/metrics.jsonl for steps before `step` (the checkpoint a run resumes
  // from), so every step appears once after a resume; a torn last line from a crash goes too.
  static void truncate(const std::string& run_dir, int64_t step);

 private:
  std::string path_;
  bool writer_ = false;
  FILE* file_ = nullptr;
  std::string error_;
};

}  // namespace marin
