#pragma once
// Runs the real `marin` binary (as a user would) and captures its exit code and output.
#include <array>
#include <cstdio>
#include <filesystem>
#include <string>

#include "core/error.hpp"

namespace marin::testing {

// The message of the marin::Error thrown by f, or "" if none is thrown.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const marin::Error& e) {
    return e.what();
  }
  return "";
}

struct RunResult {
  int code = -1;
  std::string out;  // stdout and stderr together
};

inline RunResult run(const std::string& args) {
  RunResult r;
  const std::string cmd = std::string(MARIN_BIN) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// A fresh directory under the system temp dir, removed at scope exit.
struct TempDir {
  std::filesystem::path path;
  explicit TempDir(const std::string& tag) {
    path = std::filesystem::temp_directory_path() /
           ("marin-test-" + tag + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(path);
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string str(const std::string& child = "") const { return (path / child).string(); }
};

// The committed fixture corpus tokenized as a user would: a BPE of `vocab` tokens trained on its
// KJV training text (DIR/tok.json) and every domain's shards (DIR/tokens). Returns the failing
// command's output, or "" on success.
inline std::string tokenize_fixture(const TempDir& dir, int vocab = 512) {
  const std::string fixture = std::string(MARIN_SOURCE_DIR) + "/data/fixture";
  RunResult r = run("tokenizer train --vocab " + std::to_string(vocab) + " --in " + fixture +
                    "/bible_kjv/train-00000.jsonl --out " + dir.str("tok.json"));
  if (r.code != 0) return r.out;
  r = run("tokenize --vocab " + dir.str("tok.json") + " --corpus " + fixture + " --out " +
          dir.str("tokens"));
  return r.code == 0 ? "" : r.out;
}

}  // namespace marin::testing
