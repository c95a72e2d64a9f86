// marin tokenize: text -> token shards + manifest (docs/data.md). `--corpus ROOT` reads the
// project's corpus layout; `--in PATH...` reads corpora as they ship, through the document seam
// (data/sources/document_source.hpp).
#include <fmt/core.h>

#include <chrono>
#include <memory>

#include "cli/options.hpp"
#include "core/error.hpp"
#include "core/hash.hpp"
#include "data/shards.hpp"
#include "data/sources/token_import.hpp"
#include "data/sources/tokenize_inputs.hpp"
#include "data/tokenizer/tokenizer.hpp"
#include "parallel/comm.hpp"

namespace {

struct Options {
  std::string vocab, corpus, out, split = "both";
  std::vector<std::string> inputs;
  std::string format = "auto", domain, domain_from;
  double valid_fraction = 0;
  std::string text_field = "text", id_field;
  uint64_t max_doc_bytes = uint64_t(1) << 30;
  int threads = 2;
  bool no_verify = false;
};

// `--format llmc|megatron --in FILE...`: token files already tokenized with this tokenizer
// become token shards as they are, no text and no re-tokenization.
int run_token_import(const Options& o, const marin::Tokenizer& tok) {
  if (!o.domain_from.empty())
    marin::fail("tokenize --format {} takes --domain NAME, not --domain-from", o.format);
  marin::data::TokenImportOptions opts;
  opts.inputs = o.inputs;
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
             o.inputs.size(), o.format, m.shards.size(), docs, tokens, o.out);
  return 0;
}

int run(const Options& o) {
  if (o.vocab.empty()) marin::fail("tokenize needs --tokenizer FILE (tokenizer.json or .tiktoken)");
  if (o.corpus.empty() == o.inputs.empty())
    marin::fail("tokenize needs exactly one of --corpus ROOT (the corpus layout) and --in PATH...");
  if (!o.inputs.empty() && o.domain.empty() == o.domain_from.empty())
    marin::fail("tokenize --in needs exactly one of --domain NAME and --domain-from dir");
  if (o.inputs.empty() &&
      (!o.domain.empty() || !o.domain_from.empty() || o.format != "auto" || o.valid_fraction != 0))
    marin::fail(
        "--domain, --domain-from, --format and --valid-fraction apply to --in; --corpus reads "
        "its domains and splits from its layout");
  marin::parallel::Comm& world = marin::parallel::world();
  if (world.size() > 1 && (o.inputs.empty() || marin::data::is_token_format(o.format)))
    marin::fail(
        "tokenize {}: runs in one process; under mpirun only --in with text, JSONL or "
        "Parquet files is split over the ranks",
        o.inputs.empty() ? "--corpus" : "--format " + o.format);
  const auto t0 = std::chrono::steady_clock::now();
  marin::Tokenizer tok = marin::Tokenizer::load(o.vocab);
  if (marin::data::is_token_format(o.format)) return run_token_import(o, tok);
  marin::TokenManifest m;
  if (!o.corpus.empty()) {
    marin::TokenizeOptions opts;
    opts.corpus = o.corpus;
    opts.out = o.out;
    opts.threads = o.threads;
    opts.verify = !o.no_verify;
    if (o.split != "both") opts.splits = {o.split};
    m = marin::tokenize_corpus(tok, opts);
  } else {
    marin::data::TokenizeInputsOptions opts;
    opts.inputs = o.inputs;
    opts.out = o.out;
    opts.format = o.format;
    opts.domain = o.domain;
    opts.domain_from_dir = !o.domain_from.empty();
    opts.valid_fraction = o.valid_fraction;
    opts.source.text_field = o.text_field;
    opts.source.id_field = o.id_field;
    opts.source.max_doc_bytes = o.max_doc_bytes;
    opts.threads = o.threads;
    opts.progress = world.is_root();
    opts.group = &world;
    if (o.split != "both") opts.splits = {o.split};
    m = marin::data::tokenize_inputs(tok, opts);
    if (!world.is_root()) return 0;
  }
  uint64_t docs = 0, tokens = 0, bytes = 0;
  for (const auto& s : m.shards) docs += s.documents, tokens += s.tokens, bytes += s.bytes;
  uint64_t skipped = 0;
  for (const auto& [reason, n] : m.skipped) skipped += n;
  const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fmt::print(
      stderr,
      "tokenize: {} shard(s), {} documents, {} tokens from {:.2f} MB ({:.2f} bytes/token) "
      "in {:.1f} s -> {}/manifest.json (tokenizer {}){}\n",
      m.shards.size(), docs, tokens, bytes / 1e6, tokens ? double(bytes) / double(tokens) : 0.0,
      sec, o.out, marin::hex64(m.tokenizer_hash),
      skipped ? fmt::format("; {} document(s) skipped, counted in the manifest", skipped) : "");
  return 0;
}

}  // namespace

MARIN_COMMAND(tokenize, "tokenize",
              "Turn text into token shards (<out>/<domain>/<split>-*.tok) and <out>/manifest.json: "
              "a corpus layout (--corpus) or files as they ship (--in: text, JSONL, gzip/zstd)",
              [](CLI::App& app) -> marin::cli::Runner {
                auto o = std::make_shared<Options>();
                app.add_option("--tokenizer", o->vocab, "tokenizer.json or .tiktoken file");
                marin::cli::add_deprecated(app, "--vocab", "--tokenizer", o->vocab);
                app.add_option("--corpus", o->corpus,
                               "Corpus root: <domain>/{train,valid}-NNNNN.jsonl, one "
                               "{\"id\", \"text\"} per line");
                app.add_option("--in", o->inputs,
                               "Input files, directories (walked recursively, sorted) or globs");
                app.add_option("--format", o->format,
                               "--in: auto (magic number, then extension), text, jsonl, parquet, "
                               "llmc or megatron")
                    ->capture_default_str();
                app.add_option("--domain", o->domain, "--in: the domain of every document");
                app.add_option("--domain-from", o->domain_from,
                               "--in: 'dir': a file's domain is its first directory below the "
                               "--in directory")
                    ->check(CLI::IsMember({"dir"}));
                app.add_option("--valid-fraction", o->valid_fraction,
                               "--in: fraction of documents held out for validation, by a hash "
                               "of the id (or text); a Hub file name's split overrides it")
                    ->check(marin::cli::in_range<double>(0.0, 1.0))
                    ->capture_default_str();
                app.add_option("--text-field", o->text_field,
                               "--in JSONL: the text's field, a dotted path for nested ones (a.b)")
                    ->capture_default_str();
                app.add_option("--id-field", o->id_field,
                               "--in JSONL: the id's field (the split hashes it instead of the "
                               "text)");
                app.add_option("--max-doc-bytes", o->max_doc_bytes,
                               "--in: a longer document (or JSONL line) is an error naming the "
                               "file and offset")
                    ->check(CLI::Range(uint64_t(1), uint64_t(1) << 40))
                    ->capture_default_str();
                app.add_option("--out", o->out, "Output token directory")->required();
                app.add_option("--split", o->split,
                               "Which splits to write (the other split's shards already in "
                               "--out stay listed)")
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
