// Megatron-LM indexed datasets: the index check and the document reader (megatron_file.hpp).
#include "data/sources/megatron_file.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <vector>

#include "core/error.hpp"

namespace marin::data {

namespace fs = std::filesystem;

namespace {

constexpr char kMagic[9] = {'M', 'M', 'I', 'D', 'I', 'D', 'X', '\0', '\0'};

// Megatron's DType codes: the bytes of each (0: not a code).
uint32_t dtype_bytes(uint8_t code) {
  static constexpr uint32_t kBytes[9] = {0, 1, 1, 2, 4, 8, 8, 4, 2};
  return code < 9 ? kBytes[code] : 0;
}

bool ends_with(const std::string& s, std::string_view tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}

// The ids of n values of type T at `p` (the .bin's bytes from byte offset `at`), checked and
// appended to `out`.
template <class T>
void append_ids(const uint8_t* p, uint64_t n, uint64_t at, const std::string& bin,
                const TokenVocab& vocab, std::vector<uint32_t>& out) {
  for (uint64_t j = 0; j < n; ++j) {
    T v;
    std::memcpy(&v, p + j * sizeof(T), sizeof(T));
    const uint64_t byte = at + j * sizeof(T);
    uint64_t id;
    if constexpr (std::is_floating_point_v<T>) {
      if (!(v >= 0 && v < 4294967296.0) || v != std::floor(v))
        fail("{}: token {} (byte offset {}) is {}, not a token id (a whole number ≥ 0)", bin,
             byte / sizeof(T), byte, double(v));
      id = uint64_t(v);
    } else {
      if constexpr (std::is_signed_v<T>)
        if (v < 0)
          fail("{}: token {} (byte offset {}) is id {}: negative", bin, byte / sizeof(T), byte,
               int64_t(v));
      id = uint64_t(v);
    }
    out.push_back(vocab.check(id, bin, byte / sizeof(T), byte));
  }
}

}  // namespace

MegatronPaths megatron_paths(const std::string& input) {
  std::string prefix = input;
  if (ends_with(input, ".bin") || ends_with(input, ".idx"))
    prefix = input.substr(0, input.size() - 4);
  MegatronPaths p{prefix + ".idx", prefix + ".bin"};
  for (const std::string* f : {&p.idx, &p.bin}) {
    std::error_code ec;
    // An error other than "no such file" (a symlink loop, a permission) is left to the reader,
    // whose open names it.
    if (!fs::exists(*f, ec) && !ec)
      fail(
          "{}: Megatron dataset without {} (Megatron-LM writes PREFIX.bin and PREFIX.idx; give "
          "PREFIX, PREFIX.bin or PREFIX.idx)",
          input, *f);
  }
  return p;
}

MegatronIndex read_megatron_header(FileWindow& idx) {
  const std::string& p = idx.path();
  if (idx.size() < MegatronIndex::kHeaderBytes)
    fail("{}: truncated Megatron index: {} bytes, shorter than the {}-byte header", p, idx.size(),
         MegatronIndex::kHeaderBytes);
  if (std::memcmp(idx.at(0, 9), kMagic, 9) != 0)
    fail("{}: bad magic at byte offset 0: not a Megatron index (expected \"MMIDIDX\\0\\0\")", p);
  const uint64_t version = idx.get<uint64_t>(9);
  if (version != 1)
    fail("{}: Megatron index version {} at byte offset 9 (this reader knows version 1)", p,
         version);
  MegatronIndex h;
  h.dtype = idx.get<uint8_t>(17);
  h.token_bytes = dtype_bytes(h.dtype);
  if (h.token_bytes == 0)
    fail(
        "{}: dtype code {} at byte offset 17 is not one of Megatron's (1 uint8, 2 int8, 3 int16, "
        "4 int32, 5 int64, 6 float64, 7 float32, 8 uint16)",
        p, h.dtype);
  h.sequences = idx.get<uint64_t>(18);
  const uint64_t entries = idx.get<uint64_t>(26);
  if (entries == 0)
    fail("{}: document count 0 at byte offset 26: the document index starts with 0, so it has ≥ 1",
         p);
  h.documents = entries - 1;
  // Each count is bounded by the bytes its array takes, so the sum below cannot overflow.
  const uint64_t size = idx.size();
  if (h.sequences > size / 12 || entries > size / 8)
    fail(
        "{}: the header counts {} sequences (byte offset 18) and {} document index entries (byte "
        "offset 26), more than a {}-byte file holds",
        p, h.sequences, entries, size);
  const uint64_t want = MegatronIndex::kHeaderBytes + 12 * h.sequences + 8 * entries;
  if (size == want + h.sequences && h.sequences > 0)
    h.modes = true;
  else if (size != want)
    fail(
        "{}: the header counts {} sequences and {} document index entries, which take {} bytes "
        "({} with multimodal modes), but the file has {}",
        p, h.sequences, entries, want, want + h.sequences, size);
  return h;
}

void read_megatron(const MegatronPaths& paths, const TokenVocab& vocab, const DocumentSink& sink,
                   const BytesRead& progress) {
  FileWindow idx(paths.idx, size_t(1) << 16);
  const MegatronIndex h = read_megatron_header(idx);
  // One window per array of the index, as each is read forward on its own.
  FileWindow lengths(paths.idx, size_t(1) << 16), pointers(paths.idx, size_t(1) << 16);
  FileWindow bin(paths.bin);
  const uint64_t lengths_at = MegatronIndex::kHeaderBytes;
  const uint64_t pointers_at = lengths_at + 4 * h.sequences;
  const uint64_t index_at = pointers_at + 8 * h.sequences;
  const int64_t first = idx.get<int64_t>(index_at);
  if (first != 0)
    fail("{}: the document index (byte offset {}) starts at {}, expected 0", paths.idx, index_at,
         first);
  const uint64_t last_at = index_at + 8 * h.documents;
  const int64_t last = idx.get<int64_t>(last_at);
  if (last < 0 || uint64_t(last) != h.sequences)
    fail(
        "{}: the document index ends (byte offset {}) at {}, expected the sequence count {} "
        "(byte offset 18)",
        paths.idx, last_at, last, h.sequences);
  const uint64_t w = h.token_bytes;
  const uint64_t per_block = bin.window() / w;
  std::vector<uint32_t> doc;
  uint64_t begin = 0, next = 0;  // the next sequence, and the .bin byte it must start at
  for (uint64_t d = 0; d < h.documents; ++d) {
    const uint64_t end_at = index_at + 8 * (d + 1);
    const int64_t end = idx.get<int64_t>(end_at);
    if (end < int64_t(begin) || uint64_t(end) > h.sequences)
      fail(
          "{}: document index entry {} (byte offset {}) is {}, after {}: entries must not "
          "decrease and stay ≤ the sequence count {}",
          paths.idx, d + 1, end_at, end, begin, h.sequences);
    doc.clear();
    for (uint64_t s = begin; s < uint64_t(end); ++s) {
      const int32_t len = lengths.get<int32_t>(lengths_at + 4 * s);
      const int64_t ptr = pointers.get<int64_t>(pointers_at + 8 * s);
      if (len < 0)
        fail("{}: sequence {} has length {} (byte offset {}): negative", paths.idx, s, len,
             lengths_at + 4 * s);
      const uint64_t bytes = uint64_t(len) * w;  // < 2^34
      if (ptr < 0 || uint64_t(ptr) > bin.size() || bytes > bin.size() - uint64_t(ptr))
        fail(
            "{}: sequence {} of {} tokens at byte {} of {} (pointer at byte offset {}, length at "
            "{}) runs past the end of the .bin ({} bytes)",
            paths.idx, s, len, ptr, paths.bin, pointers_at + 8 * s, lengths_at + 4 * s, bin.size());
      // Megatron's writer lays the sequences end to end from byte 0 (IndexedDatasetBuilder,
      // _IndexWriter._sequence_pointers), so each .bin byte is read once and the tokens an index
      // can name are bounded by the .bin's size.
      if (uint64_t(ptr) != next)
        fail(
            "{}: sequence {} starts at byte {} of {} (pointer at byte offset {}), but the sequence "
            "before it ends at byte {}: Megatron's sequences lie end to end",
            paths.idx, s, ptr, paths.bin, pointers_at + 8 * s, next);
      next += bytes;
      for (uint64_t i = 0; i < uint64_t(len); i += per_block) {
        const uint64_t n = std::min(per_block, uint64_t(len) - i);
        const uint64_t at = uint64_t(ptr) + i * w;
        const uint8_t* q = bin.at(at, size_t(n * w));
        switch (h.dtype) {
          case 1:
            append_ids<uint8_t>(q, n, at, paths.bin, vocab, doc);
            break;
          case 2:
            append_ids<int8_t>(q, n, at, paths.bin, vocab, doc);
            break;
          case 3:
            append_ids<int16_t>(q, n, at, paths.bin, vocab, doc);
            break;
          case 4:
            append_ids<int32_t>(q, n, at, paths.bin, vocab, doc);
            break;
          case 5:
            append_ids<int64_t>(q, n, at, paths.bin, vocab, doc);
            break;
          case 6:
            append_ids<double>(q, n, at, paths.bin, vocab, doc);
            break;
          case 7:
            append_ids<float>(q, n, at, paths.bin, vocab, doc);
            break;
          default:
            append_ids<uint16_t>(q, n, at, paths.bin, vocab, doc);
            break;
        }
        if (progress) progress(n * w);
      }
    }
    sink(doc);
    begin = uint64_t(end);
  }
  if (next != bin.size())
    fail("{}: {} bytes after byte {} belong to no sequence of {} (the .bin has {} bytes)",
         paths.bin, bin.size() - next, next, paths.idx, bin.size());
}

}  // namespace marin::data
