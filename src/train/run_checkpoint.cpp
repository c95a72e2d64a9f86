#include "train/run_checkpoint.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/hash.hpp"
#include "core/json_file.hpp"
#include "core/limits.hpp"
#include "train/checkpoint.hpp"
#include "train/finite_check.hpp"
#include "train/run_state_check.hpp"
#include "train/safetensors.hpp"
#include "train/sharded_checkpoint.hpp"

namespace marin {
namespace fs = std::filesystem;

namespace {

void fsync_dir(const std::string& dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd >= 0) {
    ::fsync(fd);
    ::close(fd);
  }
}

// Refuses (naming the tensor) parameters or a full optimizer state m, v holding a NaN or Inf.
void require_finite_state(const std::string& what, const ParamTable& table, const float* params,
                          const float* m, const float* v) {
  require_finite_params(table, params, what);
  const parallel::Range all{0, table.total()};
  for (const auto& [name, buf] : {std::pair{"m", m}, std::pair{"v", v}})
    if (const int64_t t = first_nonfinite_tensor(table, buf, all); t >= 0)
      fail("{}: optimizer state {} of tensor '{}' holds a NaN or Inf", what, name,
           table.params()[size_t(t)].name);
}

// checkpoints/latest: a relative symlink to the newest checkpoint, so commands and docs need no
// machine-dependent step number. Replaced atomically (a new link renamed over the old one); a
// file system without symlinks only loses the convenience, with a warning.
void point_latest_at(const fs::path& root, const std::string& name) {
  const fs::path link = root / "latest", tmp = root / "latest.tmp";
  std::error_code ec;
  fs::remove(tmp, ec);
  fs::create_directory_symlink(name, tmp, ec);
  if (!ec) fs::rename(tmp, link, ec);
  if (ec)
    fmt::print(stderr, "marin: warning: {}: cannot point it at {}: {}\n", link.string(), name,
               ec.message());
}

}  // namespace

bool checkpoint_known_finite(const std::string& ckpt_dir) {
  try {
    const auto j = try_parse_json(read_file(ckpt_dir + "/state.json"));
    return j && j->is_object() && j->value("finite", false) == true;
  } catch (const std::exception&) {
    return false;  // unreadable, or "finite" is not a boolean
  }
}

std::string checkpoint_file_hash(const std::string& path) {
  return xxh64_file_hex(path);
}

std::string start_checkpoint_dir(const std::string& run_dir, int64_t step) {
  const std::string tmp = fmt::format("{}/checkpoints/step-{:08d}.tmp", run_dir, step);
  std::error_code ec;
  fs::remove_all(tmp, ec);
  fs::create_directories(tmp, ec);
  if (ec) fail("{}: cannot create checkpoint directory: {}", tmp, ec.message());
  return tmp;
}

std::string publish_checkpoint(const std::string& tmp, const RunState& state,
                               const ModelConfig& config, const nlohmann::json& fields) {
  write_file_atomic(tmp + "/config.json", config.to_json().dump(2) + "\n");
  if (!state.options.tokenizer.empty())
    write_file_atomic(tmp + "/tokenizer.json", read_file(state.options.tokenizer));
  nlohmann::json st = {{"step", state.step},
                       {"options", state.options.to_json()},
                       {"data", state.data_state},
                       {"lineage", state.lineage},
                       {"threads", state.threads},
                       {"finite", true}};  // checked by the writers: pruning keeps the newest such
  st.update(fields);
  st["state_xxh64"] = state_checksum(st);  // state.json is covered like the tensors
  write_file_atomic(tmp + "/state.json", st.dump(2) + "\n");
  fsync_dir(tmp);
  const fs::path root = fs::path(tmp).parent_path();
  const std::string final_dir = tmp.substr(0, tmp.size() - 4);  // without ".tmp"
  std::error_code ec;
  fs::remove_all(final_dir, ec);
  fs::rename(tmp, final_dir, ec);
  if (ec) fail("{}: cannot publish checkpoint: {}", final_dir, ec.message());
  point_latest_at(root, fs::path(final_dir).filename().string());
  fsync_dir(root.string());
  return final_dir;
}

std::string save_run_checkpoint(const std::string& run_dir, const RunState& state,
                                const ModelConfig& config, const ParamTable& table,
                                const float* params, const float* m, const float* v) {
  require_finite_state(fmt::format("checkpoint of step {}", state.step), table, params, m, v);
  const std::string tmp = start_checkpoint_dir(run_dir, state.step);
  write_model_tensors(tmp, table, params);  // config.json: publish_checkpoint
  const int64_t n = table.total();
  std::vector<TensorView> views = {{"m", {n}, m}, {"v", {n}, v}};
  write_safetensors(tmp + "/optimizer.safetensors", views, {{"layout", "marin parameter table"}});
  return publish_checkpoint(
      tmp, state, config,
      {{"files",
        {{"model.safetensors", checkpoint_file_hash(tmp + "/model.safetensors")},
         {"optimizer.safetensors", checkpoint_file_hash(tmp + "/optimizer.safetensors")}}}});
}

RunState read_run_state(const std::string& ckpt_dir) {
  const std::string path = ckpt_dir + "/state.json";
  const nlohmann::json j = read_state_json(ckpt_dir);
  RunState s;
  try {
    s.step = j.at("step").get<int64_t>();
    s.options = TrainOptions::from_json(j.at("options"), path + ": options");
    s.data_state = j.at("data");
    s.lineage = j.value("lineage", nlohmann::json());
    s.threads = j.value("threads", 0);
    if (s.threads < 0 || s.threads > kMaxThreads)
      fail("{}: threads = {} is invalid (expected a value in [0, {}]; 0: not recorded)", path,
           s.threads, kMaxThreads);
  } catch (const nlohmann::json::exception& e) {
    fail("{}: missing or malformed field: {}", path, e.what());
  }
  return s;
}

void verify_run_checkpoint(const std::string& ckpt_dir, const std::vector<std::string>* hash_only) {
  const auto j = read_state_json(ckpt_dir);
  const std::vector<std::string> expected =
      is_sharded_state(j) ? sharded_files(j, ckpt_dir)
                          : std::vector<std::string>{"model.safetensors", "optimizer.safetensors"};
  const auto files = j.value("files", nlohmann::json());
  for (const std::string& file : expected)
    if (!files.is_object() || !files.contains(file) || !files[file].is_string())
      fail("{}/state.json: files.{}: missing checksum", ckpt_dir, file);
  for (auto& [file, hash] : files.items()) {
    if (std::find(expected.begin(), expected.end(), file) == expected.end())
      fail("{}/state.json: files.{}: not a file of this checkpoint", ckpt_dir, file);
    if (!hash.is_string()) fail("{}/state.json: files.{}: not a checksum string", ckpt_dir, file);
    if (hash_only && std::find(hash_only->begin(), hash_only->end(), file) == hash_only->end())
      continue;
    const std::string got = checkpoint_file_hash(ckpt_dir + "/" + file);
    if (got != hash.get<std::string>())
      fail("{}/{}: checksum mismatch (state.json says {}, file has {}): the checkpoint is damaged",
           ckpt_dir, file, hash.get<std::string>(), got);
  }
}

void load_run_checkpoint(const std::string& ckpt_dir, const ParamTable& table,
                         Buffer<float>& params, Buffer<float>& m, Buffer<float>& v) {
  const int64_t n = table.total();
  params.resize(size_t(n)), m.resize(size_t(n)), v.resize(size_t(n));
  if (is_sharded_checkpoint(ckpt_dir))
    return load_sharded_checkpoint(ckpt_dir, table, params.data(), m.data(), v.data());
  verify_run_checkpoint(ckpt_dir);
  load_params(ckpt_dir, table, params.data());
  const SafetensorsFile f = read_safetensors(ckpt_dir + "/optimizer.safetensors");
  const Tensor& tm = f.at("m", std::vector<int64_t>{n});
  const Tensor& tv = f.at("v", std::vector<int64_t>{n});
  const parallel::Range all{0, n};
  for (const auto& [name, t] : {std::pair{"m", &tm}, std::pair{"v", &tv}})
    if (const int64_t bad = first_nonfinite_tensor(table, t->data.data(), all); bad >= 0)
      fail("{}/optimizer.safetensors: optimizer state {} of tensor '{}' holds a NaN or Inf",
           ckpt_dir, name, table.params()[size_t(bad)].name);
  std::copy(tm.data.begin(), tm.data.end(), m.data());
  std::copy(tv.data.begin(), tv.data.end(), v.data());
}

int64_t checkpoint_step(const std::string& dir) {
  const std::string name = fs::path(dir).filename().string();
  if (name.rfind("step-", 0) != 0 || name.size() == 5 ||
      name.find_first_not_of("0123456789", 5) != std::string::npos)
    return -1;
  try {
    return std::stoll(name.substr(5));
  } catch (...) {
    return -1;
  }
}

std::vector<std::string> checkpoint_dirs(const std::string& run_dir) {
  const fs::path root = fs::path(run_dir) / "checkpoints";
  std::vector<std::pair<int64_t, std::string>> found;
  std::error_code ec;
  for (auto& e : fs::directory_iterator(root, ec)) {
    const int64_t s = checkpoint_step(e.path().string());
    if (s >= 0 && fs::exists(e.path() / "state.json")) found.push_back({s, e.path().string()});
  }
  std::sort(found.rbegin(), found.rend());
  std::vector<std::string> dirs;
  for (auto& f : found) dirs.push_back(f.second);
  return dirs;
}

std::optional<std::string> latest_checkpoint(const std::string& run_dir) {
  for (const std::string& dir : checkpoint_dirs(run_dir)) {
    try {
      verify_run_checkpoint(dir);
      return dir;
    } catch (const Error& e) {
      fmt::print(stderr, "marin: warning: skipping checkpoint: {}\n", e.what());
    }
  }
  return std::nullopt;
}

void prune_checkpoints(const std::string& run_dir, const std::string& keep, int64_t keep_every) {
  const fs::path root = fs::path(run_dir) / "checkpoints";
  std::error_code ec;
  // The older checkpoints may be the only finite ones: none goes for a checkpoint whose state is
  // not known to be finite.
  if (!checkpoint_known_finite(keep)) return;
  for (auto& e : fs::directory_iterator(root, ec)) {
    const int64_t s = checkpoint_step(e.path().string());
    if (s < 0 || e.path().string() == keep) continue;
    if (keep_every > 0 && s % keep_every == 0) continue;
    if (s < checkpoint_step(keep)) fs::remove_all(e.path(), ec);
  }
  // Leftovers of interrupted writes.
  for (auto& e : fs::directory_iterator(root, ec))
    if (e.path().extension() == ".tmp") fs::remove_all(e.path(), ec);
}

}  // namespace marin
