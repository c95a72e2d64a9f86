#pragma once
// Runs the real `marin` binary (as a user would) and captures its exit code and output.
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "core/buffer.hpp"
#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/rng.hpp"
#include "model/params.hpp"
#include "train/checkpoint.hpp"
#include "train/run_checkpoint.hpp"

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

// Writes a test's input file as a user's editor would (not atomically), making its folders.
inline void write_text(const std::filesystem::path& path, std::string_view text) {
  if (path.has_parent_path()) std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

// A checkpoint of `preset` with every tensor moved off its init (gains ≠ 1, head gate ≠ 0,
// SConv ≠ identity) and a non-zero router bias, so no part of the architecture is trivial and
// the logits are not uniform.
inline ModelConfig write_moved_checkpoint(const std::string& dir, const std::string& preset,
                                          uint64_t seed) {
  const ModelConfig c = ModelConfig::preset(preset);
  const ParamTable table(c);
  std::vector<float> p(size_t(table.total()));
  table.initialize(p.data(), seed);
  Rng rng(seed + 7);
  for (auto& t : table.params()) {
    const bool bias = t.name.find("router_bias") != std::string::npos;
    const double scale = bias ? 0.5 : (t.init == Init::Normal ? 0.0 : 0.3);
    for (int64_t i = 0; i < t.size; ++i) p[size_t(t.offset + i)] += float(scale * rng.normal());
  }
  save_model(dir, c, table, p.data());
  return c;
}

struct RunResult {
  int code = -1;
  std::string out;  // stdout and stderr together
};

// A shell command line, its stdout and stderr captured together.
inline RunResult run_shell(const std::string& command) {
  RunResult r;
  const std::string cmd = command + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

// `marin ARGS`, as a user types it.
// The command that runs `marin` under real mpirun with np ranks, one OpenMP thread each (arguments
// follow).
inline std::string mpirun_command(int np) {
  return std::string(MARIN_MPIEXEC) +
         " --allow-run-as-root --oversubscribe --bind-to none -x OMP_NUM_THREADS=1 -np " +
         std::to_string(np) + " " + MARIN_BIN;
}

inline RunResult run(const std::string& args) {
  return run_shell(std::string(MARIN_BIN) + " " + args);
}

// `marin ARGS` under mpirun with np ranks (np = 0: the plain binary, no MPI launcher).
inline RunResult mpirun(int np, const std::string& args) {
  return np == 0 ? run(args) : run_shell(mpirun_command(np) + " " + args);
}

// Starts `marin ARGS` (args begin with a space) in the background, output discarded.
inline pid_t spawn_train(const std::string& args) {
  pid_t pid = fork();
  if (pid == 0) {
    const std::string cmd = std::string(MARIN_BIN) + args + " >/dev/null 2>&1";
    execl("/bin/sh", "sh", "-c", ("exec " + cmd).c_str(), (char*)nullptr);
    _exit(127);
  }
  return pid;
}

// Rows (formats.md) with a learnable pattern (arithmetic progressions mod the vocabulary).
inline void write_rows(const std::string& path, int rows, int S = 64, uint32_t V = 512,
                       uint64_t seed = 99) {
  std::vector<uint32_t> ids;
  uint64_t x = seed;
  for (int r = 0; r < rows; ++r) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const uint32_t base = uint32_t(x >> 40) % V, step = 1 + uint32_t(x >> 20) % 5;
    for (int t = 0; t <= S; ++t) ids.push_back((base + step * t) % V);
  }
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(ids.data()), std::streamsize(ids.size() * 4));
}

// The full-layout parameters and optimizer state of a checkpoint of either layout (a sharded one
// assembled), for bit-for-bit comparisons.
struct FullCheckpoint {
  marin::Buffer<float> params, m, v;
  bool operator==(const FullCheckpoint& o) const {
    const auto same = [](const marin::Buffer<float>& a, const marin::Buffer<float>& b) {
      return a.size() == b.size() &&
             std::equal(a.data(), a.data() + a.size(), b.data());  // bitwise: all finite
    };
    return same(params, o.params) && same(m, o.m) && same(v, o.v);
  }
};
inline FullCheckpoint load_checkpoint(const std::string& ckpt) {
  FullCheckpoint c;
  marin::load_run_checkpoint(ckpt, marin::ParamTable(marin::load_config(ckpt)), c.params, c.m, c.v);
  return c;
}
inline FullCheckpoint final_checkpoint(const std::string& run_dir) {
  auto ckpt = marin::latest_checkpoint(run_dir);
  if (!ckpt) throw std::runtime_error(run_dir + ": no checkpoint");
  return load_checkpoint(*ckpt);
}

// The bytes of the newest checkpoint's parameters in the full layout, whichever layout it was
// written in (a run over several ranks writes sharded ones by default); "" when there is none.
inline std::string final_weights(const std::string& run_dir) {
  auto ckpt = marin::latest_checkpoint(run_dir);
  if (!ckpt) return std::string();
  const marin::Buffer<float> p = load_checkpoint(*ckpt).params;
  return std::string(reinterpret_cast<const char*>(p.data()), p.size() * sizeof(float));
}

// RUN/metrics.jsonl, one object per line.
inline std::vector<nlohmann::json> metrics(const std::string& run_dir) {
  std::vector<nlohmann::json> out;
  std::ifstream f(run_dir + "/metrics.jsonl");
  std::string line;
  while (std::getline(f, line)) out.push_back(nlohmann::json::parse(line));
  return out;
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
  RunResult r = run("tokenizer train --vocab-size " + std::to_string(vocab) + " --in " + fixture +
                    "/bible_kjv/train-00000.jsonl --out " + dir.str("tok.json"));
  if (r.code != 0) return r.out;
  r = run("tokenize --tokenizer " + dir.str("tok.json") + " --corpus " + fixture + " --out " +
          dir.str("tokens"));
  return r.code == 0 ? "" : r.out;
}

// A checkpoint to score tasks with: `marin init --preset tiny --seed 3` in DIR/ck, with a BPE of
// 512 tokens trained on the fixture's KJV text beside it (DIR/ck/tokenizer.json). Returns the
// failing command's output, or "" on success.
inline std::string tiny_checkpoint_with_tokenizer(const TempDir& dir) {
  RunResult r = run("init --preset tiny --seed 3 --out " + dir.str("ck"));
  if (r.code != 0) return r.out;
  r = run("tokenizer train --vocab-size 512 --in " + std::string(MARIN_SOURCE_DIR) +
          "/data/fixture/bible_kjv/train-00000.jsonl --out " + dir.str("ck/tokenizer.json"));
  return r.code == 0 ? "" : r.out;
}

// The [family] table of a ladder whose d64 rung is the `tiny` preset (configs/ladder_tiny.toml's
// family), for ladder configs written inside tests.
inline const std::string kTinyFamily = R"(
[family]
head_dim = 8
num_experts = 8
top_k = 2
gated_norm_rank = 16
seq_len = 64
sliding_window = 32
vocab_size = 512
)";

}  // namespace marin::testing
