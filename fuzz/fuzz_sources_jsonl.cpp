// The document seam's JSONL reader over the decompressing byte stream (data/sources/): a gzip or
// zstd stream is chosen by its magic number, so a mutated input exercises zlib's and libzstd's
// truncation/corruption paths as well as the line reader and the dotted --text-field lookup.
// The first byte picks the options: bit 0 the text field ("text" or "meta.body"), bit 1 a small
// --max-doc-bytes.
#include "data/sources/byte_stream.hpp"
#include "data/sources/jsonl_source.hpp"
#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  marin::data::SourceOptions o;
  o.text_field = (data[0] & 1) ? "meta.body" : "text";
  o.id_field = "id";
  o.max_doc_bytes = (data[0] & 2) ? 64 : 1 << 20;
  const std::string_view bytes = marin::fuzz::as_text(data + 1, size - 1);
  marin::fuzz::refuse_or_accept([&] {
    auto src = marin::data::jsonl_source(marin::data::memory_byte_stream(bytes, "fuzz.jsonl"), o);
    marin::data::Document d;
    uint64_t total = 0;
    // A small compressed input may decode to a great deal: stop after 16 MB of documents.
    while (total < (16u << 20) && src->next(d)) total += d.text.size() + 1;
  });
  return 0;
}
