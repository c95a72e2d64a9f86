#pragma once
// Options shared by several commands: the model configuration, and the training data.
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "model/config.hpp"

namespace marin::cli {

struct ModelOptions {
  std::string preset;
  std::string config;
  std::vector<std::string> sets;
  void add(CLI::App& app) {
    app.add_option("--preset", preset,
                   "preset name: tiny, cpu-small, d512, d768, d1024, d1536, d2048, hero-535b");
    app.add_option("--config", config, "TOML file of model fields (a [model] table or top level)");
    app.add_option("--set", sets, "override a field, e.g. --set hidden_dim=128 (repeatable)")
        ->take_all();
  }
  ModelConfig resolve() const { return resolve_config(preset, config, sets); }
};

// Where training data comes from (marin train, marin ladder): pre-tokenized rows, or a mixture
// over the token shards of `marin tokenize` (docs/data.md).
struct DataOptions {
  std::string tokens, valid_tokens, data, token_dir, tokenizer;
  void add(CLI::App& app) {
    app.add_option("--tokens", tokens, "training data: pre-tokenized rows (row s·B+i at step s)");
    app.add_option("--valid-tokens", valid_tokens, "validation rows for --tokens");
    app.add_option("--data", data, "training data: a mixture config (TOML/JSON, see docs/data.md)");
    app.add_option("--token-dir", token_dir, "token shards of --data (marin tokenize)");
    app.add_option("--tokenizer", tokenizer,
                   "tokenizer.json of the shards (checked, copied into checkpoints)");
  }
};

}  // namespace marin::cli
