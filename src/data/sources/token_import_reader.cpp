// The bounded file window and the id check of the pre-tokenized readers (token_import_reader.hpp).
#include "data/sources/token_import_reader.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "core/error.hpp"
#include "core/fileio.hpp"
#include "data/tokenizer/tokenizer.hpp"

namespace marin::data {

FileWindow::FileWindow(const std::string& path, size_t window) : path_(path) {
  fd_ = open_input(path);  // a FIFO, directory or device is refused by what it is
  struct stat st {};
  if (::fstat(fd_, &st) != 0) {
    const int err = errno;
    ::close(fd_);
    fail("{}: cannot stat: {}", path, std::strerror(err));
  }
  size_ = static_cast<uint64_t>(st.st_size);
  buf_.resize(window);
}

FileWindow::~FileWindow() {
  if (fd_ >= 0) ::close(fd_);
}

const uint8_t* FileWindow::at(uint64_t off, size_t n) {
  if (n > buf_.size())
    fail("{}: internal: {} bytes asked of a {}-byte window", path_, n, buf_.size());
  if (off > size_ || n > size_ - off)
    fail("{}: truncated: {} bytes at byte offset {} run past the end of the file ({} bytes)", path_,
         n, off, size_);
  if (off >= begin_ && off + n <= end_) return buf_.data() + (off - begin_);
  // Refill from `off`: readers move forward, so the window starts where they ask.
  const size_t want = size_t(std::min<uint64_t>(buf_.size(), size_ - off));
  size_t got = 0;
  while (got < want) {
    const ssize_t r = ::pread(fd_, buf_.data() + got, want - got, off_t(off + got));
    if (r < 0 && errno == EINTR) continue;
    if (r < 0)
      fail("{}: cannot read at byte offset {}: {}", path_, off + got, std::strerror(errno));
    if (r == 0)
      fail("{}: the file shrank while it was read (end at byte offset {}, expected {} bytes)",
           path_, off + got, size_);
    got += size_t(r);
  }
  begin_ = off;
  end_ = off + want;
  return buf_.data();
}

TokenVocab::TokenVocab(const Tokenizer& tok) : bytes_(tok.vocab_size(), kGap) {
  for (uint32_t id = 0; id < bytes_.size(); ++id)
    if (tok.has_token(id))
      bytes_[id] = tok.is_special(id) ? 0 : uint32_t(tok.token_bytes(id).size());
}

uint32_t TokenVocab::check(uint64_t v, const std::string& file, uint64_t index,
                           uint64_t byte) const {
  if (v >= bytes_.size())
    fail(
        "{}: token {} (byte offset {}) is id {}, outside the tokenizer's vocabulary of {} (was the "
        "file made with another tokenizer?)",
        file, index, byte, v, bytes_.size());
  if (bytes_[v] == kGap)
    fail("{}: token {} (byte offset {}) is id {}, which the tokenizer has no token for", file,
         index, byte, v);
  return uint32_t(v);
}

}  // namespace marin::data
