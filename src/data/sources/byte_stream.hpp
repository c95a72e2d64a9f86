// The bytes of one input file as its readers see them: decompressed when the file starts with a
// gzip or zstd magic number (never chosen by the file's name), in bounded memory, with the raw
// file's size and xxh64 (core/hash.hpp) known once it has been read to the end.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace marin::data {

enum class Codec { none, gzip, zstd };

// The codec whose magic number `head` (a file's first bytes, at least 4 when the file has them)
// starts with: gzip 1f 8b, zstd 28 b5 2f fd.
Codec detect_codec(std::string_view head);
std::string_view codec_name(Codec c);

class ByteStream {
 public:
  virtual ~ByteStream() = default;
  // Up to `n` decoded bytes into `buf`; 0 only at the end of the data. marin::Error naming the
  // file and the compressed byte offset on a truncated or corrupt stream.
  virtual size_t read(char* buf, size_t n) = 0;
  // Raw (compressed) bytes consumed so far: for progress and error offsets.
  virtual uint64_t raw_offset() const = 0;
  // xxh64 of every raw byte consumed so far (the whole file's once read() has returned 0).
  virtual uint64_t raw_xxh64() const = 0;
  virtual Codec codec() const = 0;
  const std::string& name() const { return name_; }

 protected:
  std::string name_;
};

// The file's first `n` bytes (fewer when it is shorter); core/fileio's open_input, so a FIFO,
// directory or device is refused without blocking.
std::string read_head(const std::string& path, size_t n);
// The file, decoded by its magic number.
std::unique_ptr<ByteStream> open_byte_stream(const std::string& path);
// The same over bytes in memory (tests, fuzz targets); `name` names them in errors. The bytes
// must outlive the stream.
std::unique_ptr<ByteStream> memory_byte_stream(std::string_view bytes, std::string name);

// Lines of a byte stream without their '\n', holding at most one line (≤ max_line bytes) plus a
// read buffer in memory. A longer line is a marin::Error naming the file, line and byte offset.
class LineReader {
 public:
  LineReader(ByteStream& in, uint64_t max_line);
  // The next line (a view valid until the next call), or false at the end.
  bool next(std::string_view& line);
  uint64_t line_no() const { return line_no_; }          // of the last line returned, from 1
  uint64_t line_offset() const { return line_offset_; }  // its decoded byte offset

 private:
  ByteStream& in_;
  uint64_t max_line_;
  std::string buf_;
  size_t begin_ = 0, end_ = 0;
  bool eof_ = false;
  uint64_t line_no_ = 0, line_offset_ = 0, consumed_ = 0;
};

// Reads the whole decoded stream, refusing more than `max_bytes` (marin::Error naming the file).
std::string read_all(ByteStream& in, uint64_t max_bytes);

}  // namespace marin::data
