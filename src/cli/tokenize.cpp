// marin tokenize: text corpus (JSONL shards) -> token shards + manifest (docs/data.md).
#include <fmt/core.h>

#include <chrono>
#include <memory>

#include "cli/options.hpp"
#include "core/error.hpp"
#include "core/hash.hpp"
#include "data/shards.hpp"
#include "data/sources/token_import.hpp"
#include "data/tokenizer/tokenizer.hpp"

namespace {

struct Options {
  std::string vocab, corpus, out, split = "both";
  int threads = 2;
  bool no_verify = false;
  // Pre-tokenized imports (--format llmc|megatron, docs/data.md "Pre-tokenized imports").
  std::vector<std::string> in;
  std::string format, domain;
  double valid_fraction = 0;
};

// `--format llmc|megatron --in FILE...`: token files already tokenized with this tokenizer
// become token shards as they are, no text and no re-tokenization.
int run_token_import(const Options& o, const marin::Tokenizer& tok) {
  if (!o.corpus.empty())
    marin::fail("tokenize --format {} reads --in FILE..., not --corpus", o.format);
  marin::data::TokenImportOptions opts;
  opts.inputs = o.in;
  opts.format = o.format;
  opts.out = o.out;
  opts.domain = o.domain;
  opts.valid_fraction = o.valid_fraction;
  const marin::TokenManifest m = marin::data::import_token_files(tok, opts);
  uint64_t docs = 0, tokens = 0;
  for (const auto& s : m.shards) docs += s.documents, tokens += s.tokens;
  fmt::print(stderr,
             "tokenize: imported {} {} file(s): {} shard(s), {} documents, {} tokens -> "
             "{}/manifest.json\n",
             o.in.size(), o.format, m.shards.size(), docs, tokens, o.out);
  return 0;
}

int run(const Options& o) {
  if (o.vocab.empty()) marin::fail("tokenize needs --tokenizer FILE (tokenizer.json or .tiktoken)");
  const auto t0 = std::chrono::steady_clock::now();
  marin::Tokenizer tok = marin::Tokenizer::load(o.vocab);
  if (marin::data::is_token_format(o.format)) return run_token_import(o, tok);
  if (o.corpus.empty())
    marin::fail("tokenize needs --corpus ROOT (or --format llmc|megatron --in FILE...)");
  marin::TokenizeOptions opts;
  opts.corpus = o.corpus;
  opts.out = o.out;
  opts.threads = o.threads;
  opts.verify = !o.no_verify;
  if (o.split != "both") opts.splits = {o.split};
  const marin::TokenManifest m = marin::tokenize_corpus(tok, opts);
  uint64_t docs = 0, tokens = 0, bytes = 0;
  for (const auto& s : m.shards) docs += s.documents, tokens += s.tokens, bytes += s.bytes;
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fmt::print(stderr,
             "tokenize: {} shard(s), {} documents, {} tokens from {:.2f} MB ({:.2f} bytes/token) "
             "in {:.1f} s -> {}/manifest.json (tokenizer {})\n",
             m.shards.size(), docs, tokens, bytes / 1e6,
             tokens ? double(bytes) / double(tokens) : 0.0, sec, o.out,
             marin::hex64(m.tokenizer_hash));
  return 0;
}

}  // namespace

MARIN_COMMAND(tokenize, "tokenize",
              "Turn a text corpus (<root>/<domain>/<split>-NNNNN.jsonl) into token shards "
              "(<out>/<domain>/<split>-NNNNN.tok) and <out>/manifest.json",
              [](CLI::App& app) -> marin::cli::Runner {
                auto o = std::make_shared<Options>();
                app.add_option("--tokenizer", o->vocab, "tokenizer.json or .tiktoken file");
                marin::cli::add_deprecated(app, "--vocab", "--tokenizer", o->vocab);
                app.add_option("--corpus", o->corpus,
                               "Corpus root: <domain>/{train,valid}-NNNNN.jsonl, one "
                               "{\"id\", \"text\"} per line");
                app.add_option("--out", o->out, "Output token directory")->required();
                app.add_option("--split", o->split, "Which splits to tokenize")
                    ->check(CLI::IsMember({"train", "valid", "both"}))
                    ->capture_default_str();
                app.add_option("--threads", o->threads, "Encoding threads")
                    ->check(marin::cli::threads_range())
                    ->capture_default_str();
                app.add_flag("--no-verify", o->no_verify,
                             "skip checking each text shard against the xxh64 in the corpus "
                             "manifest");
                app.add_option("--in", o->in, "Token files to import (--format llmc|megatron)");
                app.add_option("--format", o->format,
                               "llmc (llm.c .bin) or megatron (Megatron-LM PREFIX.bin + .idx): "
                               "import token files instead of tokenizing text")
                    ->check(CLI::IsMember({"llmc", "megatron"}));
                app.add_option("--domain", o->domain, "The domain imported documents go to");
                app.add_option("--valid-fraction", o->valid_fraction,
                               "Fraction of imported documents put in the valid split")
                    ->check(marin::cli::in_range<double>(0.0, 1.0))
                    ->capture_default_str();
                return [o]() { return run(*o); };
              });
