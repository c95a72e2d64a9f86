// `marin tokenize --in PATH...`: corpora as they ship (text trees, JSONL, gzip/zstd, and the
// formats of the registry) read through the document seam into the token shards and manifest of
// data/shards.hpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "data/shards.hpp"
#include "data/sources/document_source.hpp"

namespace marin::parallel {
class Comm;
}

namespace marin::data {

struct TokenizeInputsOptions {
  std::vector<std::string> inputs;  // files, directories, globs
  std::string out;                  // TOKDIR
  std::string format = "auto";
  std::string domain;            // every document's domain ...
  bool domain_from_dir = false;  // ... or the first directory below the input root
  double valid_fraction = 0;     // split_rule.hpp, unless the file's Hub name says its split
  std::vector<std::string> splits = {"train", "valid"};  // which splits to write
  SourceOptions source;
  int threads = 2;
  bool progress = true;
  uint64_t shard_tokens = uint64_t(1) << 24;  // a token shard is cut after this many tokens
  // Under mpirun: the ranks share the input files (balanced by size), each writes the shards and
  // state of its files, and rank 0 writes the one manifest. Null: this process does everything.
  parallel::Comm* group = nullptr;
};

// Writes <out>/<domain>/<split>-FFFFF-PPPP.tok (file F of the inputs, piece P) and
// <out>/manifest.json. Each finished input file leaves <out>/.tokenize/FFFFF.json, so a run that
// was killed continues from the files it finished when run again with the same inputs (at any rank
// count). Under a group, every rank must call it with the same options; the output directory must
// be one that every rank sees (a shared file system).
TokenManifest tokenize_inputs(const Tokenizer& tok, const TokenizeInputsOptions& o);

}  // namespace marin::data
