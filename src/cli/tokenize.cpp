// marin tokenize: text corpus (JSONL shards) -> token shards + manifest (docs/data.md).
#include <fmt/core.h>

#include <chrono>
#include <memory>

#include "cli/options.hpp"
#include "core/error.hpp"
#include "core/hash.hpp"
#include "data/shards.hpp"
#include "data/tokenizer/tokenizer.hpp"

namespace {

struct Options {
  std::string vocab, corpus, out, split = "both";
  int threads = 2;
  bool no_verify = false;
};

int run(const Options& o) {
  if (o.vocab.empty()) marin::fail("tokenize needs --tokenizer FILE (tokenizer.json or .tiktoken)");
  const auto t0 = std::chrono::steady_clock::now();
  marin::Tokenizer tok = marin::Tokenizer::load(o.vocab);
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
                               "{\"id\", \"text\"} per line")
                    ->required();
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
                return [o]() { return run(*o); };
              });
