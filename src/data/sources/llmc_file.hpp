// llm.c token files (`.bin`), as karpathy/llm.c's dev/data/data_common.py `write_datafile`
// writes them: a header of 256 little-endian int32 — [0] magic, [1] version, [2] token count,
// the rest 0 — then the tokens. Two layouts exist:
//   magic 20240520, version 1: uint16 tokens (GPT-2); every document starts with <|endoftext|>
//   magic 20240801, version 7: uint32 tokens (Llama 3); every document starts with
//                              <|begin_of_text|>
// The files carry no document index: a document is found by its leading delimiter (the
// tokenizer's EOS for version 1, its BOS for version 7). llm.c's fineweb.py cuts its shards at a
// token count, mid-document, so the files of one import are read as ONE token stream, in the
// order given, and a document may continue from one file into the next.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "data/sources/token_import_reader.hpp"

namespace marin {
class Tokenizer;
}

namespace marin::data {

struct LlmcHeader {
  static constexpr uint64_t kBytes = 256 * 4;
  static constexpr int32_t kMagicGpt2 = 20240520, kVersionGpt2 = 1;
  static constexpr int32_t kMagicLlama3 = 20240801, kVersionLlama3 = 7;
  static constexpr int32_t kMagicEval = 20240522;  // llm.c's HellaSwag/MMLU files: no tokens
  int32_t magic = 0, version = 0;
  uint32_t token_bytes = 0;  // 2 or 4
  uint64_t tokens = 0;
};

// The header of `f`, checked: the size (at least the header), the magic and its version, a
// non-negative token count, and a file size equal to the header plus that many tokens (a
// truncated file or trailing bytes). marin::Error naming the file, the field and its offset.
LlmcHeader read_llmc_header(FileWindow& f);

// Reads llm.c files as one token stream and hands each document to `sink`: the tokens after a
// delimiter up to the next delimiter or the end of the stream. The delimiters themselves are
// dropped; the stream's leading delimiter opens the first document, and tokens before a first
// delimiter (a file cut mid-document, given first) form a document of their own. Every id is
// checked against `vocab` (marin::Error naming the file, the token's index and byte offset).
class LlmcStream {
 public:
  LlmcStream(const Tokenizer& tok, const TokenVocab& vocab, DocumentSink sink,
             BytesRead progress = {});
  // The next file of the stream. All files of a stream must have one layout (version).
  void read(const std::string& path);
  // Hands over the last document (the stream's end closes it).
  void finish();
  uint64_t documents() const { return documents_; }

 private:
  const Tokenizer& tok_;
  const TokenVocab& vocab_;
  DocumentSink sink_;
  BytesRead progress_;
  std::optional<int32_t> version_;
  std::string first_file_;
  std::optional<uint32_t> delimiter_;
  std::vector<uint32_t> doc_;
  bool open_ = false;  // doc_ holds a document (possibly empty) begun by a delimiter or tokens
  uint64_t documents_ = 0;
};

}  // namespace marin::data
