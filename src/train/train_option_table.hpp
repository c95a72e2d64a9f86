#pragma once
// Every scalar option of a training run, declared once (as ModelConfig's fields are): its
// command-line flag, its key in run.json / state.json, its type and range, its help, and whether
// `--resume` may change it. cli/train.cpp makes the flags from this table, TrainOptions::to_json /
// from_json write and read (and range-check) the keys from it, and the resume rules come from it.
// The structured parts of a run — the model (ModelConfig's own table) and its data (--rows,
// --data, --token-dir, --tokenizer, --valid-rows) — are the run's own and never change on resume.
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace marin {

struct TrainOptions;

enum class OnResume {
  Yes,              // how the rest of the run is computed or observed
  No,               // the run's own: refused on --resume (use --fork-from)
  NotWithForecast,  // may change, except in a run scored against a forecast (it binds them)
};

struct TrainOption {
  enum Kind { Int, Real, Bool, Choice, Text };
  // Every member has a default, so the table names only what differs (designated initializers).
  const char* flag = nullptr;  // "--steps"; nullptr: not a command-line option (derived)
  const char* key =
      nullptr;  // JSON pointer under "options", "/optimizer/muonh_lr"; nullptr: not stored
  Kind kind = Int;
  double lo = 0, hi = 0;  // Int and Real: the range [lo, hi] ((lo, hi] when open_lo)
  bool open_lo = false;
  std::vector<std::string> choices = {};  // Choice
  // Bool: the flag sets the value to !negate (--no-qb clears qb).
  bool negate = false;
  // Absent from a run.json written before the option existed: the default is taken, or
  // `absent` where the default has changed since (what such a run computed with).
  bool optional = false;
  nlohmann::json absent = nullptr;
  OnResume on_resume = OnResume::No;
  const char* help = "";
  std::function<nlohmann::json(const TrainOptions&)> get = {};
  std::function<void(TrainOptions&, const nlohmann::json&)> set = {};

  // The value of `text` as given on the command line (already range-checked by the CLI).
  nlohmann::json parse(const std::string& text) const;
  // marin::Error naming `where`.key ("…/state.json: options.steps") unless v has the kind and
  // lies in the range.
  void check(const nlohmann::json& v, const std::string& where) const;
  std::string dotted_key() const;  // "/optimizer/muonh_lr" → "optimizer.muonh_lr"
};

const std::vector<TrainOption>& train_option_table();
// The entry of a flag ("--steps"), or nullptr.
const TrainOption* find_train_option(const std::string& flag);

}  // namespace marin
