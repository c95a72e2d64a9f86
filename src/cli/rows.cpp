// marin rows: the pre-tokenized rows format (docs/formats.md) that `train --rows` and
// `score --rows` read, written from what a user has: the token shards of `marin tokenize`
// (--token-dir, a split of some or all domains) or text files encoded with a tokenizer
// (--tokenizer, --in). Documents end with EOS as token shards store them and are cut into rows of
// seq_len + 1 ids, in order (data/rows_writer.hpp).
#include <fmt/core.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "cli/options.hpp"
#include "core/error.hpp"
#include "data/rows_writer.hpp"
#include "data/shards.hpp"
#include "data/tokenizer/documents.hpp"
#include "data/tokenizer/tokenizer.hpp"
#include "train/checkpoint.hpp"

namespace marin::cli {
namespace {

struct RowsOptions {
  std::string token_dir, split = "valid", tokenizer, checkpoint, out;
  std::vector<std::string> domains, inputs;
  int64_t seq_len = 0, max_rows = 0;
};

// The row width and the id bound: the checkpoint's, or --seq-len and the data's vocabulary.
struct RowShape {
  int64_t seq_len, vocab_size;
};

RowShape shape_of(const RowsOptions& o, int64_t data_vocab) {
  if (o.checkpoint.empty()) {
    if (o.seq_len == 0) fail("rows needs --seq-len S or --checkpoint CK (its seq_len)");
    return {o.seq_len, data_vocab};
  }
  const ModelConfig c = load_config(o.checkpoint);
  if (o.seq_len != 0 && o.seq_len != c.seq_len)
    fail("--seq-len {} differs from {}'s seq_len {}", o.seq_len, o.checkpoint, c.seq_len);
  if (data_vocab > c.vocab_size)
    fail("the data's vocabulary ({} ids) is larger than {}'s vocab_size {}", data_vocab,
         o.checkpoint, c.vocab_size);
  return {c.seq_len, c.vocab_size};
}

RowsWritten rows_from_token_dir(const RowsOptions& o) {
  const TokenManifest man = TokenManifest::load(o.token_dir);
  const RowShape s = shape_of(o, man.vocab_size);
  RowsWriter w(s.seq_len, s.vocab_size, o.max_rows);
  // Named domains must have shards of the split; by default, every domain that has some (the
  // eval-only domains have no train split).
  const std::vector<std::string> domains = o.domains.empty() ? man.domains() : o.domains;
  for (const std::string& d : domains) {
    const std::vector<TokenShardInfo> shards = man.find(d, o.split);
    if (shards.empty() && o.domains.empty()) continue;
    if (shards.empty())
      fail("{}: no {} shards of domain '{}' (domains: {})", o.token_dir, o.split, d,
           fmt::join(man.domains(), ", "));
    for (const TokenShardInfo& info : shards) {
      const TokenShard shard = man.open(info, man.tokenizer_hash);
      for (uint64_t i = 0; i < shard.documents(); ++i)
        if (!w.add(shard.document(i))) return w.finish(o.out);
    }
  }
  return w.finish(o.out);
}

RowsWritten rows_from_text(const RowsOptions& o) {
  const Tokenizer tok = Tokenizer::load(o.tokenizer);
  const RowShape s = shape_of(o, tok.vocab_size());
  RowsWriter w(s.seq_len, s.vocab_size, o.max_rows);
  std::vector<uint32_t> ids;
  for (const std::string& text : read_documents(o.inputs)) {
    ids.clear();
    encode_document(tok, text, ids);
    if (!w.add(ids)) break;
  }
  return w.finish(o.out);
}

int run_rows(const RowsOptions& o) {
  if (o.token_dir.empty() == o.inputs.empty())
    fail("rows needs one source: --token-dir DIR (token shards) or --in FILES with --tokenizer");
  if (!o.inputs.empty() && o.tokenizer.empty())
    fail("rows --in needs --tokenizer FILE (tokenizer.json or .tiktoken) to encode the text");
  const RowsWritten r = o.token_dir.empty() ? rows_from_text(o) : rows_from_token_dir(o);
  fmt::print(stderr,
             "rows: {} rows of {} ids from {} documents -> {} ({} tokens of the tail not "
             "written)\n",
             r.rows, r.tokens / r.rows, r.documents, o.out, r.dropped_tokens);
  fmt::print("{}\n", nlohmann::json({{"rows", r.rows},
                                     {"documents", r.documents},
                                     {"tokens", r.tokens},
                                     {"dropped_tokens", r.dropped_tokens},
                                     {"out", o.out}})
                         .dump());
  return 0;
}

}  // namespace

MARIN_COMMAND(
    rows, "rows",
    "Write pre-tokenized rows (docs/formats.md) for train/score --rows, from token shards or text",
    [](CLI::App& app) -> Runner {
      auto o = std::make_shared<RowsOptions>();
      app.add_option("--token-dir", o->token_dir, "token shards (marin tokenize) to read");
      app.add_option("--domains", o->domains, "with --token-dir: these domains (default: all)")
          ->delimiter(',');
      app.add_option("--split", o->split, "with --token-dir: valid (default) or train")
          ->check(CLI::IsMember({"train", "valid"}));
      app.add_option("--in", o->inputs,
                     "text files to encode instead (a .jsonl file is one {\"text\"} a line; any "
                     "other file is one document)")
          ->check(CLI::ExistingFile);
      app.add_option("--tokenizer", o->tokenizer, "with --in: tokenizer.json or .tiktoken file");
      app.add_option("--checkpoint", o->checkpoint,
                     "take seq_len (and the id bound) from this checkpoint's config.json");
      app.add_option("--seq-len", o->seq_len, "row length S (a row holds S + 1 ids)")
          ->check(in_range<int64_t>(1, int64_t(1) << 20));
      app.add_option("--max-rows", o->max_rows, "stop after this many rows (0: all)")
          ->check(in_range<int64_t>(0, int64_t(1) << 40));
      app.add_option("--out", o->out, "rows file to write")->required();
      return [o] { return run_rows(*o); };
    });

}  // namespace marin::cli
