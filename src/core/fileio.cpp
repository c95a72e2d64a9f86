// Whole-file I/O (see fileio.hpp). POSIX calls so that every step (write, fsync, rename, directory
// fsync) is checked and reported.
#include "core/fileio.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <memory>

#include "core/error.hpp"
#include "core/hash.hpp"

namespace marin {

namespace {

std::string errstr(int e) {
  return std::strerror(e);
}

// Closes the descriptor and removes the temporary file unless released.
struct TmpFile {
  std::string path;
  int fd = -1;
  bool keep = false;
  ~TmpFile() {
    if (fd >= 0) ::close(fd);
    if (!keep) ::unlink(path.c_str());
  }
};

void write_all(int fd, std::string_view bytes, const std::string& path) {
  const char* p = bytes.data();
  size_t left = bytes.size();
  while (left > 0) {
    ssize_t n = ::write(fd, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("cannot write {}: {}", path, errstr(errno));
    }
    p += n;
    left -= static_cast<size_t>(n);
  }
}

}  // namespace

namespace {

// A target that exists and is not a regular file (a device such as /dev/null or /dev/stdout's
// terminal, a FIFO, a socket) must never be replaced by a rename: as root that would turn
// /dev/null into a regular file for the whole system. It is written in place instead, with no
// truncation, temporary file or fsync (which devices and pipes do not support), so
// `--json /dev/stdout` works. A directory is refused.
bool write_in_place_if_special(const std::string& path, std::span<const std::string_view> parts) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0 || S_ISREG(st.st_mode)) return false;
  if (S_ISDIR(st.st_mode)) fail("cannot write {}: it is a directory", path);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) fail("cannot write {}: {}", path, errstr(errno));
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  for (std::string_view part : parts) write_all(fd, part, path);
  return true;
}

}  // namespace

void write_file_atomic(const std::string& path, std::span<const std::string_view> parts) {
  if (write_in_place_if_special(path, parts)) return;
  TmpFile tmp;
  tmp.path = path + ".tmp." + std::to_string(::getpid());
  tmp.fd = ::open(tmp.path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (tmp.fd < 0) {
    tmp.keep = true;  // nothing was created
    fail("cannot write {}: cannot create {}: {}", path, tmp.path, errstr(errno));
  }
  for (std::string_view part : parts) write_all(tmp.fd, part, path);
  if (::fsync(tmp.fd) != 0) fail("cannot write {}: fsync failed: {}", path, errstr(errno));
  const int fd = tmp.fd;
  tmp.fd = -1;
  if (::close(fd) != 0) fail("cannot write {}: close failed: {}", path, errstr(errno));
  if (::rename(tmp.path.c_str(), path.c_str()) != 0)
    fail("cannot write {}: rename from {} failed: {}", path, tmp.path, errstr(errno));
  tmp.keep = true;  // it is `path` now
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  const std::string dir = parent.empty() ? std::string(1, '.') : parent.string();
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd < 0) fail("cannot write {}: cannot open directory {}: {}", path, dir, errstr(errno));
  const int rc = ::fsync(dfd);
  const int err = errno;
  ::close(dfd);
  if (rc != 0) fail("cannot write {}: fsync of directory {} failed: {}", path, dir, errstr(err));
}

void write_file_atomic(const std::string& path, std::string_view bytes) {
  write_file_atomic(path, std::span<const std::string_view>(&bytes, 1));
}

namespace {

const char* file_kind(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  return "not a regular file";
}

}  // namespace

int open_input(const std::string& path) {
  // O_NONBLOCK: opening a FIFO without a writer would otherwise block forever.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) fail("cannot open {}: {}", path, errstr(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int e = errno;
    ::close(fd);
    fail("cannot open {}: {}", path, errstr(e));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    fail("cannot open {}: it is {} (expected a regular file)", path, file_kind(st.st_mode));
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) != 0) {
    const int e = errno;
    ::close(fd);
    fail("cannot open {}: {}", path, errstr(e));
  }
  return fd;
}

namespace {

// Reads `path` (open_input) to its end in pieces of up to 1 MiB: sized(the size fstat reports)
// first, then take(piece) for each (the file may grow meanwhile: all of it is read).
template <class S, class F>
void read_pieces(const std::string& path, S&& sized, F&& take) {
  const int fd = open_input(path);
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat st {};
  if (::fstat(fd, &st) != 0) fail("cannot read {}: {}", path, errstr(errno));
  const size_t size = st.st_size > 0 ? size_t(st.st_size) : 0;
  sized(size);
  // The whole of a small file (and one byte to see its end) in one piece; a large one by MiBs.
  std::vector<char> buf(std::clamp(size + 1, size_t(4096), size_t(1) << 20));
  for (;;) {
    const ssize_t n = ::read(fd, buf.data(), buf.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      fail("cannot read {}: {}", path, errstr(errno));
    }
    if (n == 0) break;
    take(std::string_view(buf.data(), size_t(n)));
  }
}

}  // namespace

std::string read_file(const std::string& path) {
  std::string out;  // reserved at the size fstat reports: a large file is not copied as it grows
  read_pieces(
      path, [&](size_t size) { out.reserve(size); },
      [&](std::string_view piece) { out.append(piece); });
  return out;
}

std::string xxh64_file_hex(const std::string& path) {
  XXH64_state_t* state = XXH64_createState();
  MARIN_CHECK(state != nullptr, "xxh64: out of memory");
  const std::unique_ptr<XXH64_state_t, decltype(&XXH64_freeState)> owned(state, XXH64_freeState);
  XXH64_reset(state, 0);
  read_pieces(
      path, [](size_t) {},
      [&](std::string_view piece) { XXH64_update(state, piece.data(), piece.size()); });
  return hex64(XXH64_digest(state));
}

std::vector<std::string_view> split_lines(std::string_view text) {
  std::vector<std::string_view> lines;
  for (size_t at = 0; at < text.size();) {
    size_t nl = text.find('\n', at);
    if (nl == std::string_view::npos) nl = text.size();
    lines.push_back(text.substr(at, nl - at));
    at = nl + 1;
  }
  return lines;
}

}  // namespace marin
