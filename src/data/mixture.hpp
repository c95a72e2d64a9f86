#pragma once
// A data mixture: named sources (a domain and split of a token directory) and a schedule of
// weight sets that switch at given steps (docs/data.md, "Mixture config").
//
// TOML (or the same structure in JSON):
//
//   [sources]                       # optional; a source named in weights with no entry here
//   prose = { domain = "gutenberg" }                # is the domain of that name, split "train"
//   code  = { domain = "code_python", split = "train" }
//
//   [[phase]]                       # or a top-level `weights = {...}` for a single phase
//   start_step = 0
//   weights = { prose = 0.7, code = 0.3 }           # relative; normalised per phase
//   [[phase]]
//   start_fraction = 0.28           # of the run's total steps (resolved by resolved(total))
//   weights = { prose = 0.5, code = 0.5 }
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace marin {

struct TokenManifest;

struct MixtureSource {
  std::string name;
  std::string domain;
  std::string split = "train";
};

struct MixturePhase {
  int64_t start_step = 0;       // valid when start_fraction < 0
  double start_fraction = -1;   // ≥ 0: a fraction of the run, turned into a step by resolved()
  std::vector<double> weights;  // one per source, ≥ 0, not all zero (not normalised)
};

struct MixtureConfig {
  std::string origin = "<mixture>";  // file name for error messages
  std::vector<MixtureSource> sources;
  std::vector<MixturePhase> phases;  // increasing start

  // Reads a .toml or .json file (by extension; other names are tried as TOML). Validates the
  // structure and the weights (see validate()); marin::Error naming the file and field.
  static MixtureConfig load(const std::string& path);
  static MixtureConfig from_json(const nlohmann::json& j, const std::string& origin = "<json>");
  static MixtureConfig from_toml_text(const std::string& text,
                                      const std::string& origin = "<toml>");
  // One phase with the given weights; each source is the domain of its name, split "train".
  static MixtureConfig uniform(const std::vector<std::string>& domains);

  nlohmann::json to_json() const;
  // Weights finite and ≥ 0, not all zero in any phase; one weight per source; the first phase
  // starts at step 0; starts strictly increasing; unique source names.
  void validate() const;
  // Every source's domain has shards of its split in the token directory.
  void check_against(const TokenManifest& m) const;
  // Fractions turned into steps (floor(fraction · total_steps)); fails if a fraction is present
  // and total_steps ≤ 0.
  MixtureConfig resolved(int64_t total_steps) const;
  bool needs_total_steps() const;
  // Index of the phase in effect at `step` (the last phase whose start ≤ step). Requires resolved
  // starts.
  int phase_at(int64_t step) const;
  int source_index(const std::string& name) const;  // −1 if absent
};

}  // namespace marin
