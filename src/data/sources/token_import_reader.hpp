// What the two pre-tokenized readers (llmc_file, megatron_file) share: a file read through a
// bounded window, so a multi-GB token file costs one window of memory, and the check of an id
// read from a file against the tokenizer the import targets (docs/data.md, "Pre-tokenized
// imports").
#pragma once

#include <cstdint>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace marin {
class Tokenizer;
}

namespace marin::data {

// A read-only input file (opened with open_input: a FIFO or directory is refused) read through a
// window of `window` bytes that moves as the reader asks for bytes further on.
class FileWindow {
 public:
  explicit FileWindow(const std::string& path, size_t window = size_t(1) << 20);
  ~FileWindow();
  FileWindow(const FileWindow&) = delete;
  FileWindow& operator=(const FileWindow&) = delete;

  const std::string& path() const { return path_; }
  uint64_t size() const { return size_; }
  size_t window() const { return buf_.size(); }
  // The n bytes at [off, off + n), n ≤ window(), valid until the next call. marin::Error naming
  // the file and offset if they run past the end of the file or cannot be read.
  const uint8_t* at(uint64_t off, size_t n);
  template <class T>
  T get(uint64_t off) {
    T v;
    std::memcpy(&v, at(off, sizeof(T)), sizeof(T));
    return v;
  }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
  std::vector<uint8_t> buf_;
  uint64_t begin_ = 0, end_ = 0;  // the file's bytes [begin_, end_) are in buf_
};

// The ids of the tokenizer an import writes for: an id read from a file must name one of its
// tokens, and counts the UTF-8 bytes of its text (0 for a special token: no text encodes to one,
// so a tokenized document's byte count never includes them either).
class TokenVocab {
 public:
  explicit TokenVocab(const Tokenizer& tok);
  uint32_t size() const { return uint32_t(bytes_.size()); }
  // The id `v`, read as token `index` (byte offset `byte`) of `file`; marin::Error naming all
  // three unless it is < size() and a token of the vocabulary (not a gap between its ids).
  uint32_t check(uint64_t v, const std::string& file, uint64_t index, uint64_t byte) const;
  uint64_t text_bytes(uint32_t id) const { return bytes_[id]; }

 private:
  static constexpr uint32_t kGap = UINT32_MAX;
  std::vector<uint32_t> bytes_;  // per id: the bytes of its text; kGap for an id with no token
};

// One document as a token file holds it (the import then applies the EOS rule). The callee may
// take the ids' storage.
using DocumentSink = std::function<void(std::vector<uint32_t>& ids)>;
// Told the input bytes consumed since its last call (the progress bar).
using BytesRead = std::function<void(uint64_t bytes)>;

}  // namespace marin::data
