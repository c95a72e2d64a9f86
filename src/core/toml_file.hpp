// TOML, read in one place: every TOML file of the project (model configs, mixtures, ladders,
// cluster hardware files) is opened and parsed here, so each is validated and fuzzed once.
// toml++ stays inside toml_file.cpp. Errors are marin::Error naming file:line, the dotted key and
// what was expected: `ladder.toml:7: field 'ladder.seed' must be an integer in [0, 2^63), got
// "x"`, `m.toml:1:19: TOML error: ...`.
#pragma once

#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace marin {

class TomlFile {
 public:
  enum class Kind { Missing, Table, Array, String, Integer, Real, Bool, Date };

  // Reads `path` (core/fileio: regular files only) and parses it.
  static TomlFile load(const std::string& path);
  // Parses `text`; `origin` names it in errors (a path, or "<toml>").
  static TomlFile parse(std::string_view text, const std::string& origin);

  TomlFile(TomlFile&&) noexcept;
  TomlFile& operator=(TomlFile&&) noexcept;
  ~TomlFile();

  const std::string& origin() const { return origin_; }

  // Keys are dotted paths from the root ("gpu.hbm_gb"); "" is the root table.
  Kind kind(std::string_view key) const;
  bool has(std::string_view key) const { return kind(key) != Kind::Missing; }
  // The keys of a table, sorted (empty when `table` is not a table).
  std::vector<std::string> keys(std::string_view table = "") const;
  // "file:line" of a key's value (just the file when the key is missing or has no position).
  std::string where(std::string_view key) const;
  // Fails with "file:line: field 'key' <what>".
  [[noreturn]] void fail_field(std::string_view key, std::string_view what) const;

  // Typed getters: a missing key, a value of another type or one outside [lo, hi] is an error
  // naming file:line and the key. number() takes integers too (as TOML writes `1` for 1.0).
  int64_t integer(std::string_view key, int64_t lo, int64_t hi) const;
  double number(std::string_view key, double lo, double hi) const;
  std::string string(std::string_view key) const;
  std::vector<std::string> strings(std::string_view key) const;
  // The same, or nullopt when the key is absent.
  std::optional<int64_t> integer_if(std::string_view key, int64_t lo, int64_t hi) const;
  std::optional<double> number_if(std::string_view key, double lo, double hi) const;
  // A number as written, NaN and infinities included (for readers that range-check it later,
  // naming the field their way).
  double real(std::string_view key) const;

  // A table as JSON (integers stay integers; dates, times and the floats JSON cannot hold --
  // inf, -inf, nan -- become their TOML text), for readers that validate a document shared with
  // JSON input (mixtures, ladders).
  nlohmann::json json(std::string_view table = "") const;

 private:
  struct Impl;
  TomlFile(std::unique_ptr<Impl> impl, std::string origin);
  std::unique_ptr<Impl> impl_;
  std::string origin_;
};

}  // namespace marin
