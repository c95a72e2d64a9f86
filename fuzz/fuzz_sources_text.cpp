// The document seam's text reader (data/sources/text_source.cpp): one file is one document,
// decoded by magic number (plain, gzip, zstd), refused past --max-doc-bytes or at a NUL byte (a
// binary file). The first byte picks a small --max-doc-bytes (bit 0) and the file name's
// compression suffix (bits 1-2: none, .gz, .zst), which must not matter: the magic decides.
#include "data/sources/document_source.hpp"
#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  static const char* names[] = {"fuzz.txt", "fuzz.txt.gz", "fuzz.txt.zst", "fuzz.md"};
  marin::data::SourceOptions o;
  o.max_doc_bytes = (data[0] & 1) ? 64 : 16u << 20;
  const std::string path =
      marin::fuzz::input_file(names[(data[0] >> 1) & 3], marin::fuzz::as_text(data + 1, size - 1));
  marin::fuzz::refuse_or_accept([&] {
    auto src = marin::data::open_source(path, "text", o);
    marin::data::Document d;
    while (src->next(d)) {
    }
  });
  return 0;
}
