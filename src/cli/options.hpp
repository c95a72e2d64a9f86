#pragma once
// Options shared by several commands: the validators of numeric options, the model
// configuration, and the training data.
#include <fmt/format.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <type_traits>
#include <vector>

#include "cli/command.hpp"
#include "core/limits.hpp"
#include "kernels/kernels.hpp"
#include "model/config.hpp"

namespace marin::cli {

// The one validator of numeric options (docs/reliability.md): the value parses as T and lies in
// [lo, hi] (or (lo, hi] with open_lo); NaN and ±inf never do. CLI11 prefixes the message with
// the option's name: "--steps: 0 is out of range [1, 1000000000000]".
template <class T>
CLI::Validator in_range(T lo, T hi, bool open_lo = false) {
  const std::string range = fmt::format("{}{}, {}]", open_lo ? "(" : "[", lo, hi);
  return CLI::Validator(
      [=](std::string& text) -> std::string {
        T v{};
        if (!CLI::detail::lexical_cast(text, v))
          return fmt::format("'{}' is not {} (expected a value in {})", text,
                             std::is_integral_v<T> ? "an integer" : "a number", range);
        if constexpr (std::is_floating_point_v<T>)
          if (!std::isfinite(v))
            return fmt::format("{} is not a finite number (expected a value in {})", text, range);
        if (open_lo ? !(v > lo) : !(v >= lo))
          return fmt::format("{} is out of range {}", text, range);
        if (!(v <= hi)) return fmt::format("{} is out of range {}", text, range);
        return std::string();
      },
      "in " + range);
}

// Ranges shared by several commands, so that each is written once.
inline CLI::Validator steps_range() {
  return in_range<int64_t>(1, kMaxSteps);
}
inline CLI::Validator period_range() {
  return in_range<int64_t>(0, kMaxSteps);
}  // 0: off
inline CLI::Validator batch_range() {
  return in_range<int>(1, kMaxBatch);
}
inline CLI::Validator threads_range() {
  return in_range<int>(1, kMaxThreads);
}
// A seed (the options hold uint64_t, but CLI11 would wrap "-1" to 2^64 − 1).
inline CLI::Validator seed_range() {
  return in_range<int64_t>(0, INT64_MAX);
}
// --allow-nonfinite of the commands that load a model checkpoint (score, sample, eval).
inline constexpr const char* kAllowNonfiniteHelp =
    "load a checkpoint holding NaN or Inf weights (forensics: warn instead of refusing)";
// A learning rate or weight decay: 0 asks for the default (the §5 rule), above 1 is poison.
inline CLI::Validator rate_range() {
  return in_range<double>(0, 1);
}

// An old spelling of an option, still accepted for one release: it sets the same value, is
// hidden from --help, and warns naming the current spelling (docs/cli.md lists them all).
template <class T>
CLI::Option* add_deprecated(CLI::App& app, const std::string& old_flag, const std::string& flag,
                            T& target) {
  return app.add_option(old_flag, target, "deprecated spelling of " + flag)
      ->group("")
      ->each([old_flag, flag](const std::string&) {
        fmt::print(stderr, "marin: warning: {} is deprecated; use {}\n", old_flag, flag);
      });
}

// --dtype of the commands that run a model for speed (bench, eval, sample, score; train declares
// it in its option table with the same name and help): what the GEMMs compute in.
struct DtypeOption {
  std::string dtype = "auto";
  void add(CLI::App& app) {
    app.add_option("--dtype", dtype, kernels::kDtypeHelp)
        ->check(CLI::IsMember({"auto", "fp32", "bf16", "bf16-emulated"}))
        ->default_val("auto");
  }
  // Resolves the request on this CPU (the fallback's one line on stderr) and sets it for every
  // GEMM of the process; returns what it computes in.
  kernels::Dtype apply() const {
    const kernels::DtypeChoice c = kernels::resolve_dtype(dtype);
    if (!c.message.empty()) fmt::print(stderr, "{}\n", c.message);
    kernels::set_compute_dtype(c.dtype);
    return c.dtype;
  }
};

struct ModelOptions {
  std::string preset;
  std::string config;
  std::vector<std::string> sets;
  void add(CLI::App& app) {
    app.add_option("--preset", preset,
                   "preset name: tiny, cpu-small, d512, d768, d1024, d1536, d2048, hero-535b");
    app.add_option("--config", config,
                   "TOML file of model fields (a [model] table or top level): every field, or "
                   "with --preset only the ones to change");
    app.add_option("--set", sets, "override a field, e.g. --set hidden_dim=128 (repeatable)")
        ->take_all();
  }
  ModelConfig resolve() const { return resolve_config(preset, config, sets); }
};

// Where training data comes from (marin train, marin ladder): pre-tokenized rows, or a mixture
// over the token shards of `marin tokenize` (docs/data.md).
struct DataOptions {
  std::string rows, valid_rows, data, token_dir, tokenizer;
  void add(CLI::App& app) {
    app.add_option("--rows", rows,
                   "training data: pre-tokenized rows, docs/formats.md (row s·B+i at step s)");
    app.add_option("--valid-rows", valid_rows, "validation rows for --rows");
    add_deprecated(app, "--tokens", "--rows", rows);
    add_deprecated(app, "--valid-tokens", "--valid-rows", valid_rows);
    app.add_option("--data", data, "training data: a mixture config (TOML/JSON, see docs/data.md)");
    app.add_option("--token-dir", token_dir, "token shards of --data (marin tokenize)");
    app.add_option("--tokenizer", tokenizer,
                   "tokenizer.json of the shards (checked, copied into checkpoints)");
  }
};

}  // namespace marin::cli
