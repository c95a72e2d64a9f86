// Pre-tokenized imports (`marin tokenize --format llmc|megatron --in FILE...`): token files that
// llm.c or Megatron-LM wrote become the project's own token shards and manifest, so
// `marin train --token-dir OUT` trains on them with no re-tokenization (docs/data.md,
// "Pre-tokenized imports").
//
// Each imported document ends the way `marin tokenize` ends a tokenized one (encode_document):
// its ids, then the tokenizer's EOS. A document whose last id already is EOS (Megatron's
// `--append-eod`) keeps it once; otherwise EOS is appended. llm.c's leading delimiters are
// dropped (llmc_file.hpp). So a file made from some texts with a tokenizer imports to exactly the
// token shard `marin tokenize` makes of the same texts with that tokenizer.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/shards.hpp"

namespace marin::data {

struct TokenImportOptions {
  std::vector<std::string> inputs;  // llmc: the .bin files, in stream order; megatron: PREFIX
                                    // (or PREFIX.bin / PREFIX.idx) per dataset
  std::string format;               // "llmc" or "megatron"
  std::string out;                  // the token directory written
  std::string domain;               // the one domain every document goes to
  double valid_fraction = 0;        // data/sources/split_rule.hpp, keyed by the document's ids
  uint64_t shard_tokens = uint64_t(1) << 24;  // a shard is closed once it holds this many tokens
  bool progress = true;                       // a progress bar on stderr when it is a terminal
};

// The formats import_token_files reads.
bool is_token_format(const std::string& format);

// Reads every input and writes OUT/<domain>/{train,valid}-NNNNN.tok (write_token_shard: documents
// in input order, a shard closed at the first document boundary past shard_tokens) and
// OUT/manifest.json: the TokenManifest, plus "sources" (each input file's path, size and
// xxh64) and "import" (the format and the EOS rule). A document goes to "valid" by
// split_for(key, valid_fraction), the key being its ids as the shard stores them, as
// little-endian uint32, whatever the input's dtype. Memory stays bounded by the shard size and
// the longest document. marin::Error naming the file and offset on any bad input.
TokenManifest import_token_files(const Tokenizer& tok, const TokenImportOptions& o);

}  // namespace marin::data
