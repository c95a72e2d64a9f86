// Plain, gzip (zlib) and zstd (libzstd) byte streams, chosen by magic number; the line reader.
#include "data/sources/byte_stream.hpp"

#include <unistd.h>
#include <xxhash.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "core/error.hpp"
#include "core/fileio.hpp"

namespace marin::data {

namespace {

constexpr size_t kChunk = 1 << 18;  // raw bytes read at a time

// The raw bytes of a file or of memory, hashed as they pass.
class Raw {
 public:
  Raw(const std::string& path) : name_(path), fd_(open_input(path)) { XXH64_reset(state_, 0); }
  Raw(std::string_view mem, std::string name) : name_(std::move(name)), mem_(mem) {
    XXH64_reset(state_, 0);
  }
  ~Raw() {
    if (fd_ >= 0) ::close(fd_);
    XXH64_freeState(state_);
  }
  Raw(const Raw&) = delete;
  Raw& operator=(const Raw&) = delete;

  size_t read(char* buf, size_t n) {
    size_t got = 0;
    if (fd_ < 0) {
      got = std::min(n, mem_.size() - offset_);
      std::memcpy(buf, mem_.data() + offset_, got);
    } else {
      for (;;) {
        const ssize_t r = ::read(fd_, buf, n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) fail("{}: read error at byte {}: {}", name_, offset_, std::strerror(errno));
        got = static_cast<size_t>(r);
        break;
      }
    }
    XXH64_update(state_, buf, got);
    offset_ += got;
    return got;
  }
  uint64_t offset() const { return offset_; }
  uint64_t hash() const { return XXH64_digest(state_); }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
  int fd_ = -1;
  std::string_view mem_;
  uint64_t offset_ = 0;
  XXH64_state_t* state_ = XXH64_createState();
};

class PlainStream : public ByteStream {
 public:
  explicit PlainStream(std::unique_ptr<Raw> raw) : raw_(std::move(raw)) { name_ = raw_->name(); }
  size_t read(char* buf, size_t n) override { return raw_->read(buf, n); }
  uint64_t raw_offset() const override { return raw_->offset(); }
  uint64_t raw_xxh64() const override { return raw_->hash(); }
  Codec codec() const override { return Codec::none; }

 private:
  std::unique_ptr<Raw> raw_;
};

// gzip members, one after another (`cat a.gz b.gz` is one stream of both texts).
class GzipStream : public ByteStream {
 public:
  explicit GzipStream(std::unique_ptr<Raw> raw) : raw_(std::move(raw)), in_(kChunk) {
    name_ = raw_->name();
    if (inflateInit2(&z_, 15 + 16) != Z_OK) fail("{}: cannot start zlib", name_);
  }
  ~GzipStream() override { inflateEnd(&z_); }
  uint64_t raw_offset() const override { return raw_->offset(); }
  uint64_t raw_xxh64() const override { return raw_->hash(); }
  Codec codec() const override { return Codec::gzip; }

  size_t read(char* buf, size_t n) override {
    z_.next_out = reinterpret_cast<Bytef*>(buf);
    z_.avail_out = static_cast<uInt>(std::min<size_t>(n, 1u << 30));
    while (z_.avail_out == std::min<size_t>(n, 1u << 30) && !done_) {
      if (z_.avail_in == 0) {
        z_.avail_in = static_cast<uInt>(raw_->read(in_.data(), in_.size()));
        z_.next_in = reinterpret_cast<Bytef*>(in_.data());
        if (z_.avail_in == 0) {
          if (in_member_)
            fail("{}: truncated gzip stream: the data ends at byte {} inside a member", name_,
                 raw_->offset());
          done_ = true;
          break;
        }
      }
      if (!in_member_) {
        // A new member must start with the gzip magic; anything else after a member is refused
        // rather than ignored.
        if (z_.next_in[0] != 0x1f || (z_.avail_in > 1 && z_.next_in[1] != 0x8b))
          fail("{}: byte {} after a gzip member is not the start of another member (0x{:02x})",
               name_, raw_->offset() - z_.avail_in, z_.next_in[0]);
        in_member_ = true;
      }
      const int r = inflate(&z_, Z_NO_FLUSH);
      if (r == Z_STREAM_END) {
        in_member_ = false;
        inflateReset(&z_);
      } else if (r != Z_OK && r != Z_BUF_ERROR) {
        fail("{}: corrupt gzip stream near byte {}: {}", name_, raw_->offset() - z_.avail_in,
             z_.msg ? z_.msg : zError(r));
      }
    }
    return std::min<size_t>(n, 1u << 30) - z_.avail_out;
  }

 private:
  std::unique_ptr<Raw> raw_;
  std::vector<char> in_;
  z_stream z_{};
  bool in_member_ = false, done_ = false;
};

// zstd frames, one after another (multi-frame files and `cat a.zst b.zst`).
class ZstdStream : public ByteStream {
 public:
  explicit ZstdStream(std::unique_ptr<Raw> raw)
      : raw_(std::move(raw)), in_(ZSTD_DStreamInSize()), ctx_(ZSTD_createDCtx()) {
    name_ = raw_->name();
    if (!ctx_) fail("{}: cannot start zstd", name_);
  }
  ~ZstdStream() override { ZSTD_freeDCtx(ctx_); }
  uint64_t raw_offset() const override { return raw_->offset(); }
  uint64_t raw_xxh64() const override { return raw_->hash(); }
  Codec codec() const override { return Codec::zstd; }

  size_t read(char* buf, size_t n) override {
    ZSTD_outBuffer out{buf, n, 0};
    while (out.pos == 0 && !done_) {
      if (inb_.pos == inb_.size) {
        inb_ = {in_.data(), raw_->read(in_.data(), in_.size()), 0};
        if (inb_.size == 0) {
          if (pending_ != 0)
            fail("{}: truncated zstd stream: the data ends at byte {} inside a frame", name_,
                 raw_->offset());
          done_ = true;
          break;
        }
      }
      const size_t r = ZSTD_decompressStream(ctx_, &out, &inb_);
      if (ZSTD_isError(r))
        fail("{}: corrupt zstd stream near byte {}: {}", name_,
             raw_->offset() - (inb_.size - inb_.pos), ZSTD_getErrorName(r));
      pending_ = r;
    }
    return out.pos;
  }

 private:
  std::unique_ptr<Raw> raw_;
  std::vector<char> in_;
  ZSTD_DCtx* ctx_;
  ZSTD_inBuffer inb_{nullptr, 0, 0};
  size_t pending_ = 1;  // 0 right after a frame ends
  bool done_ = false;
};

std::unique_ptr<ByteStream> decode(std::unique_ptr<Raw> raw, std::string_view head) {
  switch (detect_codec(head)) {
    case Codec::gzip:
      return std::make_unique<GzipStream>(std::move(raw));
    case Codec::zstd:
      return std::make_unique<ZstdStream>(std::move(raw));
    case Codec::none:
      break;
  }
  return std::make_unique<PlainStream>(std::move(raw));
}

}  // namespace

Codec detect_codec(std::string_view h) {
  const auto* b = reinterpret_cast<const unsigned char*>(h.data());
  if (h.size() >= 2 && b[0] == 0x1f && b[1] == 0x8b) return Codec::gzip;
  if (h.size() >= 4 && b[0] == 0x28 && b[1] == 0xb5 && b[2] == 0x2f && b[3] == 0xfd)
    return Codec::zstd;
  return Codec::none;
}

std::string_view codec_name(Codec c) {
  return c == Codec::gzip ? "gzip" : c == Codec::zstd ? "zstd" : "none";
}

std::string read_head(const std::string& path, size_t n) {
  Raw raw(path);
  std::string head(n, '\0');
  size_t got = 0;
  while (got < n) {
    const size_t r = raw.read(head.data() + got, n - got);
    if (r == 0) break;
    got += r;
  }
  head.resize(got);
  return head;
}

std::unique_ptr<ByteStream> open_byte_stream(const std::string& path) {
  const std::string head = read_head(path, 4);
  return decode(std::make_unique<Raw>(path), head);
}

std::unique_ptr<ByteStream> memory_byte_stream(std::string_view bytes, std::string name) {
  return decode(std::make_unique<Raw>(bytes, std::move(name)), bytes.substr(0, 4));
}

LineReader::LineReader(ByteStream& in, uint64_t max_line) : in_(in), max_line_(max_line) {
  buf_.resize(kChunk);
}

bool LineReader::next(std::string_view& line) {
  for (;;) {
    const char* nl =
        static_cast<const char*>(std::memchr(buf_.data() + begin_, '\n', end_ - begin_));
    const size_t len = nl ? size_t(nl - (buf_.data() + begin_)) : end_ - begin_;
    if (len > max_line_)
      fail(
          "{}: line {} (decoded byte offset {}) is longer than the limit of {} bytes "
          "(--max-doc-bytes)",
          in_.name(), line_no_ + 1, consumed_, max_line_);
    if (nl || (eof_ && begin_ < end_)) {
      line = std::string_view(buf_.data() + begin_, len);
      line_offset_ = consumed_;
      ++line_no_;
      const size_t step = nl ? len + 1 : len;
      begin_ += step;
      consumed_ += step;
      return true;
    }
    if (eof_) return false;
    // No complete line in the buffer: keep the partial one at the front and read more.
    if (begin_ > 0) {
      std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
      end_ -= begin_;
      begin_ = 0;
    }
    if (end_ == buf_.size()) buf_.resize(buf_.size() * 2);
    const size_t r = in_.read(buf_.data() + end_, buf_.size() - end_);
    if (r == 0) eof_ = true;
    end_ += r;
  }
}

std::string read_all(ByteStream& in, uint64_t max_bytes) {
  std::string out;
  std::vector<char> buf(kChunk);
  for (;;) {
    const size_t r = in.read(buf.data(), buf.size());
    if (r == 0) return out;
    if (out.size() + r > max_bytes)
      fail("{}: the document is longer than the limit of {} bytes (--max-doc-bytes)", in.name(),
           max_bytes);
    out.append(buf.data(), r);
  }
}

}  // namespace marin::data
