#include "train/metrics_log.hpp"

#include <fmt/core.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "core/fileio.hpp"
#include "core/json_file.hpp"

namespace marin {
namespace fs = std::filesystem;

MetricsLog::MetricsLog(const std::string& run_dir, bool writer)
    : path_(run_dir + "/metrics.jsonl"), writer_(writer) {}

MetricsLog::~MetricsLog() {
  if (file_) fclose(file_);
}

void MetricsLog::write(const nlohmann::json& j) {
  if (!writer_ || !error_.empty()) return;
  if (!file_) file_ = fopen(path_.c_str(), "a");
  if (!file_) {
    error_ = fmt::format("{}: cannot open for append: {}", path_, std::strerror(errno));
    return;
  }
  const std::string line = j.dump() + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0)
    error_ = fmt::format("{}: cannot write: {}", path_, std::strerror(errno));
}

void MetricsLog::truncate(const std::string& run_dir, int64_t step) {
  const std::string path = run_dir + "/metrics.jsonl";
  if (!fs::exists(path)) return;
  const std::string text = read_file(path);
  std::string kept;
  for (const std::string_view line : split_lines(text)) {
    const auto j = try_parse_json(line);
    if (j && j->is_object() && j->contains("step") && (*j)["step"].is_number_integer() &&
        (*j)["step"].get<int64_t>() <= step)
      kept.append(line).append("\n");
  }
  write_file_atomic(path, kept);
}

}  // namespace marin
