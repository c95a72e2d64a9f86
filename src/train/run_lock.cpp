#include "train/run_lock.hpp"

#include <fcntl.h>
#include <fmt/core.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/json_file.hpp"

namespace marin {
namespace fs = std::filesystem;

namespace {

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof buf - 1) != 0) return "?";
  return buf;
}

// What the lock file says about its holder, for the second writer's message.
std::string describe_holder(int fd) {
  std::string text(4096, '\0');
  const ssize_t n = pread(fd, text.data(), text.size(), 0);
  text.resize(n > 0 ? size_t(n) : 0);
  const auto j = try_parse_json(text);
  if (!j || !j->is_object() || !j->contains("pid"))
    return "another process (it has not written its host and pid yet)";
  return fmt::format("{} (pid {} on host {})", j->value("command", std::string("a process")),
                     (*j)["pid"].dump(), j->value("host", std::string("?")));
}

}  // namespace

RunLock::RunLock(const std::string& dir, const std::string& what) : dir_(dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail("{}: cannot create run directory: {}", dir, ec.message());
  const std::string path = dir + "/run.lock";
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) fail("{}: cannot open the run's lock file: {}", path, std::strerror(errno));
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    const std::string holder = err == EWOULDBLOCK ? describe_holder(fd_) : "";
    ::close(fd_);
    fd_ = -1;
    if (err == EWOULDBLOCK)
      fail(
          "{}: the run directory is in use by {}; wait for it to finish or stop it, or choose "
          "another --out",
          dir, holder);
    fail("{}: cannot lock: {}", path, std::strerror(err));
  }
  const std::string who =
      nlohmann::json{{"host", host_name()}, {"pid", int64_t(::getpid())}, {"command", what}}
          .dump() +
      "\n";
  // Best effort: the lock itself is what excludes; the text only names the holder.
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, who.data(), who.size(), 0) != ssize_t(who.size()))
    fmt::print(stderr, "marin: warning: {}: cannot record the lock's holder: {}\n", path,
               std::strerror(errno));
}

RunLock::~RunLock() {
  if (fd_ >= 0) ::close(fd_);  // releases the flock
}

bool holds_run(const std::string& dir) {
  std::error_code ec;
  if (fs::exists(fs::path(dir) / "run.json", ec)) return true;
  const fs::path ck = fs::path(dir) / "checkpoints";
  return fs::is_directory(ck, ec) && !fs::is_empty(ck, ec);
}

std::unique_ptr<RunLock> claim_run_dir(const std::string& dir, bool fresh, bool overwrite,
                                       const std::string& what) {
  auto lock = std::make_unique<RunLock>(dir, what);
  if (!fresh || !holds_run(dir)) return lock;
  if (!overwrite)
    fail(
        "{}: already holds a run (run.json or checkpoints); continue it with --resume {}, choose "
        "another --out, or give --overwrite to move the old run aside",
        dir, dir);
  // Renamed while locked, so no other writer is using it; the lock file moves with it.
  std::string aside;
  for (int i = 1;; ++i) {
    fs::path p = fs::path(dir).lexically_normal();
    if (p.filename().empty()) p = p.parent_path();  // "run/" names the directory "run"
    aside = fmt::format("{}.old-{}", p.string(), i);
    std::error_code ec;
    if (!fs::exists(aside, ec)) break;
  }
  std::error_code ec;
  fs::rename(dir, aside, ec);
  if (ec) fail("{}: cannot move the old run aside to {}: {}", dir, aside, ec.message());
  fmt::print(stderr, "marin: moved the old run in {} aside to {}\n", dir, aside);
  lock = std::make_unique<RunLock>(dir, what);  // a fresh directory; the old lock goes
  return lock;
}

}  // namespace marin
