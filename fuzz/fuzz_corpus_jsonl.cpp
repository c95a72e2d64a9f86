// A text corpus shard (<domain>/<split>-NNNNN.jsonl): the one document rule of data/text_corpus
// (UTF-8, one JSON object with a string "text" per non-blank line) that tokenize, eval, the
// contamination index and tokenizer training share, and the shard-name rule on the first line.
#include "data/text_corpus.hpp"
#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace tc = marin::text_corpus;
  const std::string_view text = marin::fuzz::as_text(data, size);
  (void)tc::shard_split(text.substr(0, text.find('\n')));
  marin::fuzz::refuse_or_accept([&] {
    uint64_t bytes = 0;
    tc::for_each_document(text, "fuzz.jsonl",
                          [&](const tc::Document& d) { bytes += d.text.size(); });
  });
  return 0;
}
