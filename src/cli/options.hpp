#pragma once
// Options shared by every command that builds a model configuration.
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

}  // namespace marin::cli
