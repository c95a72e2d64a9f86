// llm.c token files: the header check and the document stream (llmc_file.hpp).
#include "data/sources/llmc_file.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "data/tokenizer/tokenizer.hpp"

namespace marin::data {

LlmcHeader read_llmc_header(FileWindow& f) {
  const std::string& p = f.path();
  if (f.size() < LlmcHeader::kBytes)
    fail("{}: truncated llm.c token file: {} bytes, shorter than the {}-byte header", p, f.size(),
         LlmcHeader::kBytes);
  LlmcHeader h;
  h.magic = f.get<int32_t>(0);
  h.version = f.get<int32_t>(4);
  const int32_t count = f.get<int32_t>(8);
  if (h.magic == LlmcHeader::kMagicEval)
    fail(
        "{}: magic {} at byte offset 0 is llm.c's evaluation file (HellaSwag/MMLU examples), not a "
        "token file",
        p, h.magic);
  if (h.magic == LlmcHeader::kMagicGpt2) {
    if (h.version != LlmcHeader::kVersionGpt2)
      fail("{}: llm.c version {} at byte offset 4; magic {} (GPT-2, uint16 tokens) has version {}",
           p, h.version, h.magic, LlmcHeader::kVersionGpt2);
    h.token_bytes = 2;
  } else if (h.magic == LlmcHeader::kMagicLlama3) {
    if (h.version != LlmcHeader::kVersionLlama3)
      fail(
          "{}: llm.c version {} at byte offset 4; magic {} (Llama 3, uint32 tokens) has version {}",
          p, h.version, h.magic, LlmcHeader::kVersionLlama3);
    h.token_bytes = 4;
  } else {
    fail(
        "{}: bad magic {} at byte offset 0: not an llm.c token file (expected {} for GPT-2 uint16 "
        "tokens or {} for Llama 3 uint32 tokens)",
        p, h.magic, LlmcHeader::kMagicGpt2, LlmcHeader::kMagicLlama3);
  }
  if (count < 0) fail("{}: token count {} at byte offset 8 is negative", p, count);
  h.tokens = uint64_t(count);
  const uint64_t want = LlmcHeader::kBytes + h.tokens * h.token_bytes;  // < 2^34: no overflow
  if (f.size() < want)
    fail(
        "{}: truncated: the header (byte offset 8) counts {} tokens of {} bytes, {} bytes in all, "
        "but the file has {}",
        p, h.tokens, h.token_bytes, want, f.size());
  if (f.size() > want)
    fail(
        "{}: {} bytes after the {} tokens the header (byte offset 8) counts: the count disagrees "
        "with the file's size ({} bytes, expected {})",
        p, f.size() - want, h.tokens, f.size(), want);
  return h;
}

LlmcStream::LlmcStream(const Tokenizer& tok, const TokenVocab& vocab, DocumentSink sink,
                       BytesRead progress)
    : tok_(tok), vocab_(vocab), sink_(std::move(sink)), progress_(std::move(progress)) {}

void LlmcStream::read(const std::string& path) {
  FileWindow f(path);
  const LlmcHeader h = read_llmc_header(f);
  if (!version_) {
    version_ = h.version;
    first_file_ = path;
    const bool gpt2 = h.version == LlmcHeader::kVersionGpt2;
    delimiter_ = gpt2 ? tok_.eos() : tok_.bos();
    if (!delimiter_)
      fail(
          "{}: llm.c version {} files start every document with {}, but the tokenizer has no such "
          "token, so the documents cannot be found",
          path, h.version, gpt2 ? "the end-of-text token" : "the begin-of-text token");
  } else if (h.version != *version_) {
    fail(
        "{}: llm.c version {} but {} (read before it in this import) is version {}; one import "
        "reads one layout",
        path, h.version, first_file_, *version_);
  }
  const uint32_t delimiter = *delimiter_;
  const uint64_t width = h.token_bytes;
  const uint64_t per_block = f.window() / width;
  for (uint64_t i = 0; i < h.tokens; i += per_block) {
    const uint64_t n = std::min(per_block, h.tokens - i);
    const uint64_t at = LlmcHeader::kBytes + i * width;
    const uint8_t* p = f.at(at, size_t(n * width));
    for (uint64_t j = 0; j < n; ++j) {
      uint32_t id;
      if (width == 2) {
        uint16_t v;
        std::memcpy(&v, p + 2 * j, 2);
        id = v;
      } else {
        std::memcpy(&id, p + 4 * j, 4);
      }
      if (id == delimiter) {
        if (open_) {
          sink_(doc_);
          ++documents_;
          doc_.clear();
        }
        open_ = true;
      } else {
        doc_.push_back(vocab_.check(id, path, i + j, at + j * width));
        open_ = true;
      }
    }
    if (progress_) progress_(n * width);
  }
}

void LlmcStream::finish() {
  // A delimiter at the very end opens no document: it would be empty.
  if (open_ && !doc_.empty()) {
    sink_(doc_);
    ++documents_;
  }
  doc_.clear();
  open_ = false;
}

}  // namespace marin::data
