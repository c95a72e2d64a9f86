// marin decontaminate: a copy of a text corpus without the training documents that share a
// paragraph with an evaluation document (Paloma's rule; docs/evaluation.md). A top-level command
// because `marin corpus` (src/cli/corpus.cpp) dispatches only its own `build`.
#include <fmt/core.h>

#include <memory>

#include "cli/options.hpp"
#include "core/fileio.hpp"
#include "eval/contamination.hpp"

namespace marin::cli {
namespace {

struct DecontaminateArgs {
  eval::DecontaminateOptions o;
  std::string json_out;
  bool no_verify = false;
};

int run_decontaminate(const DecontaminateArgs& args) {
  DecontaminateArgs a = args;
  a.o.verify = !a.no_verify;
  const eval::DecontaminateResult r = eval::decontaminate(a.o);
  fmt::print("{} evaluation documents, {} distinct paragraphs of ≥ {} words\n", r.eval_documents,
             r.eval_paragraphs, a.o.min_words);
  fmt::print("{:<20} {:>10} {:>8} {:>14}\n", "training domain", "documents", "removed",
             "removed bytes");
  uint64_t docs = 0, removed = 0, bytes = 0;
  for (const auto& d : r.domains) {
    fmt::print("{:<20} {:>10} {:>8} {:>14}\n", d.domain, d.documents, d.removed, d.removed_bytes);
    docs += d.documents, removed += d.removed, bytes += d.removed_bytes;
  }
  fmt::print("{:<20} {:>10} {:>8} {:>14}\n-> {}/manifest.json\n", "total", docs, removed, bytes,
             a.o.out);
  if (!a.json_out.empty()) write_file_atomic(a.json_out, r.to_json().dump(2) + "\n");
  return 0;
}

}  // namespace

MARIN_COMMAND(
    decontaminate, "decontaminate",
    "Copy a text corpus without the training documents that share a paragraph with an "
    "evaluation document (Paloma's rule)",
    [](CLI::App& app) -> Runner {
      auto a = std::make_shared<DecontaminateArgs>();
      app.add_option("--corpus", a->o.corpus, "input corpus (<domain>/<split>-NNNNN.jsonl)")
          ->required();
      app.add_option("--out", a->o.out, "output corpus directory (new or empty)")->required();
      app.add_option("--eval-corpus", a->o.eval_corpus,
                     "corpus holding the evaluation documents (default: --corpus)");
      app.add_option("--eval-domains", a->o.eval_domains,
                     "evaluation domains (default: every domain with valid shards)")
          ->delimiter(',');
      app.add_option("--eval-split", a->o.eval_split, "split of the evaluation documents")
          ->capture_default_str();
      app.add_option("--train-domains", a->o.train_domains,
                     "training domains to filter (default: every domain with train shards)")
          ->delimiter(',');
      app.add_option("--min-words", a->o.min_words,
                     "paragraphs with fewer normalised words are not compared")
          ->capture_default_str()
          ->check(in_range<int>(1, 1 << 20));
      app.add_option("--json", a->json_out, "write the counts as JSON here");
      app.add_flag("--no-verify", a->no_verify,
                   "skip checking each shard against the xxh64 in its corpus manifest");
      return [a] { return run_decontaminate(*a); };
    });

}  // namespace marin::cli
