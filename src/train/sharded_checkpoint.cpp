#include "train/sharded_checkpoint.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <map>

#include "core/error.hpp"
#include "core/fileio.hpp"
#include "parallel/agreement.hpp"
#include "train/finite_check.hpp"
#include "train/run_state_check.hpp"
#include "train/safetensors.hpp"

namespace marin {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

constexpr const char* kFormat = "sharded";

std::string shard_file(int rank, int ranks) {
  return fmt::format("shard-{:05d}-of-{:05d}.safetensors", rank, ranks);
}

// The key of a piece's values in its shard file ("params", "m" or "v").
std::string piece_key(const char* kind, const std::string& tensor, int64_t begin, int64_t end) {
  return fmt::format("{}/{}[{}:{}]", kind, tensor, begin, end);
}

// A slice in words: the elements, and for a routed-expert stack the experts they hold.
std::string describe_slice(const ParamInfo& t, int64_t begin, int64_t end) {
  std::string s = fmt::format("elements [{}, {})", begin, end);
  const int64_t per = t.size / std::max<int64_t>(t.num_mats, 1);
  if (t.num_mats > 1 && begin % per == 0 && end % per == 0)
    s += end - begin == per ? fmt::format(" (expert {})", begin / per)
                            : fmt::format(" (experts {}-{})", begin / per, end / per - 1);
  return s;
}

// Testing aid (tests/parallel/test_sharded_checkpoint.cpp): MARIN_TEST_KILL_SHARD_WRITER=STEP:RANK
// makes that rank SIGKILL itself halfway through writing its shard of checkpoint STEP, as a
// crashed node would.
void maybe_die_writing(const std::string& path, int64_t step, int rank) {
  const char* spec = std::getenv("MARIN_TEST_KILL_SHARD_WRITER");
  if (!spec || fmt::format("{}:{}", step, rank) != spec) return;
  write_file_atomic(path + ".partial", std::string(4096, 'x'));
  std::raise(SIGKILL);
}

// This rank's shard: its pieces checked finite, written, and read back for the checksum. Returns
// its entry of the manifest.
json write_own_shard(const std::string& tmp, const RunState& state, const ParamTable& full,
                     const std::vector<StatePiece>& mine, int rank, int ranks) {
  std::vector<TensorView> views;
  json pieces = json::array();
  for (const StatePiece& p : mine) {
    const ParamInfo& t = full.at(p.tensor);
    for (const auto& [kind, data] :
         {std::pair{"params", p.params}, std::pair{"m", p.m}, std::pair{"v", p.v}}) {
      if (any_nonfinite(data, p.end - p.begin))
        fail("checkpoint of step {}: {} of tensor '{}', {}, holds a NaN or Inf", state.step, kind,
             t.name, describe_slice(t, p.begin, p.end));
      views.push_back({piece_key(kind, p.tensor, p.begin, p.end), {p.end - p.begin}, data});
    }
    pieces.push_back({{"tensor", p.tensor}, {"begin", p.begin}, {"end", p.end}});
  }
  const std::string file = shard_file(rank, ranks);
  maybe_die_writing(tmp + "/" + file, state.step, rank);
  write_safetensors(tmp + "/" + file, views,
                    {{"format", "marin.cpp sharded checkpoint"},
                     {"rank", std::to_string(rank)},
                     {"ranks", std::to_string(ranks)}});
  return {{"file", file},
          {"rank", rank},
          {"pieces", pieces},
          {"xxh64", checkpoint_file_hash(tmp + "/" + file)}};
}

// The pieces of each tensor, from the manifest, checked to cover it exactly once.
struct Placed {
  std::string file;
  int64_t begin, end;
};
std::map<std::string, std::vector<Placed>> check_coverage(const std::string& dir, const json& st,
                                                          const ParamTable& full) {
  std::map<std::string, std::vector<Placed>> by_tensor;
  for (const json& shard : st.at("shards"))
    for (const json& p : shard.at("pieces")) {
      const std::string name = p.at("tensor").get<std::string>();
      const ParamInfo* t = full.find(name);
      if (!t) fail("{}/state.json: tensor '{}' is not part of this model", dir, name);
      const int64_t b = p.at("begin").get<int64_t>(), e = p.at("end").get<int64_t>();
      if (b < 0 || e <= b || e > t->size)
        fail("{}/state.json: tensor '{}': slice [{}, {}) is outside its {} elements", dir, name, b,
             e, t->size);
      by_tensor[name].push_back({shard.at("file").get<std::string>(), b, e});
    }
  for (const ParamInfo& t : full.params()) {
    auto& pieces = by_tensor[t.name];
    std::sort(pieces.begin(), pieces.end(),
              [](const Placed& a, const Placed& b) { return a.begin < b.begin; });
    int64_t at = 0;
    for (size_t i = 0; i < pieces.size(); ++i) {
      const Placed& p = pieces[i];
      if (p.begin > at)
        fail("{}: tensor '{}': {} are in no shard", dir, t.name, describe_slice(t, at, p.begin));
      if (p.begin < at)
        fail("{}: tensor '{}': {} are held twice ({} and {})", dir, t.name,
             describe_slice(t, p.begin, std::min(at, p.end)), pieces[i - 1].file, p.file);
      at = p.end;
    }
    if (at < t.size)
      fail("{}: tensor '{}': {} are in no shard", dir, t.name, describe_slice(t, at, t.size));
  }
  return by_tensor;
}

}  // namespace

std::string save_sharded_checkpoint(const std::string& run_dir, const RunState& state,
                                    const ModelConfig& config, const ParamTable& full,
                                    const std::vector<StatePiece>& mine, const Mesh& mesh,
                                    parallel::Comm& comm) {
  const std::string what = fmt::format("sharded checkpoint of step {}", state.step);
  std::string tmp, error;
  if (comm.is_root()) {
    try {
      tmp = start_checkpoint_dir(run_dir, state.step);
    } catch (const Error& e) {
      error = e.what();
    }
  }
  parallel::agree_on_error(comm, error, what);  // also: no rank writes before the directory exists
  comm.broadcast(tmp);
  json entry;
  try {
    entry = write_own_shard(tmp, state, full, mine, comm.rank(), comm.size());
  } catch (const Error& e) {
    error = e.what();
  }
  parallel::agree_on_error(comm, error, what);
  const std::vector<std::string> entries = comm.allgather(entry.dump());
  std::string dir;
  if (comm.is_root()) {
    try {
      json shards = json::array(), files = json::object(), tensors = json::object();
      for (const std::string& e : entries) {
        json s = json::parse(e);
        files[s.at("file").get<std::string>()] = s.at("xxh64");
        s.erase("xxh64");
        shards.push_back(std::move(s));
      }
      for (const ParamInfo& t : full.params())
        tensors[t.name] = {{"shape", t.shape}, {"dtype", "F32"}};
      const json fields = {
          {"format", kFormat},
          {"mesh", {{"ranks", mesh.ranks}, {"dp", mesh.ranks / mesh.ep}, {"ep", mesh.ep}}},
          {"tensors", tensors},
          {"shards", shards},
          {"files", files}};
      // The manifest itself must describe the model exactly once before it is published.
      check_coverage(tmp, fields, full);
      dir = publish_checkpoint(tmp, state, config, fields);
    } catch (const std::exception& e) {
      error = e.what();
    }
  }
  parallel::agree_on_error(comm, error, what);
  comm.broadcast(dir);
  return dir;
}

bool is_sharded_state(const json& state) {
  return state.is_object() && state.value("format", std::string()) == kFormat;
}

bool is_sharded_checkpoint(const std::string& dir) {
  std::error_code ec;
  if (fs::exists(dir + "/model.safetensors", ec) || !fs::exists(dir + "/state.json", ec))
    return false;
  return is_sharded_state(read_state_json(dir));
}

std::vector<std::string> sharded_files(const json& state, const std::string& dir) {
  std::vector<std::string> files;
  try {
    for (const json& s : state.at("shards")) {
      const std::string f = s.at("file").get<std::string>();
      if (f.find('/') != std::string::npos || f.rfind("shard-", 0) != 0)
        fail("{}/state.json: shards: '{}' is not a shard file name", dir, f);
      files.push_back(f);
    }
  } catch (const json::exception& e) {
    fail("{}/state.json: shards: missing or malformed: {}", dir, e.what());
  }
  if (files.empty()) fail("{}/state.json: shards: none listed", dir);
  return files;
}

namespace {

// One copy of a load: the elements [begin, end) of a target's tensor, from the stored piece
// [piece_begin, piece_end).
struct Copy {
  int64_t piece_begin = 0, piece_end = 0, begin = 0, end = 0;
  const StateTarget* target = nullptr;
};

// The finite check of what one target received.
void require_finite_target(const std::string& dir, const StateTarget& t, bool allow_nonfinite) {
  const int64_t n = t.end - t.begin;
  if (t.params) require_finite_tensor(t.tensor, t.params, n, dir, allow_nonfinite);
  for (const auto& [kind, x] : {std::pair{"m", t.m}, std::pair{"v", t.v}})
    if (x && any_nonfinite(x, n))
      fail("{}: optimizer state {} of tensor '{}' holds a NaN or Inf", dir, kind, t.tensor);
}

}  // namespace

void load_sharded_state(const std::string& dir, const ParamTable& full,
                        const std::vector<StateTarget>& want, bool allow_nonfinite) {
  const json st = read_state_json(dir);
  std::map<std::string, std::vector<Placed>> by_tensor;
  try {
    by_tensor = check_coverage(dir, st, full);
  } catch (const json::exception& e) {
    fail("{}/state.json: shards: missing or malformed: {}", dir, e.what());
  }
  // Which stored pieces each target overlaps, by file.
  std::map<std::string, std::vector<Copy>> by_file;
  for (const StateTarget& t : want) {
    if (!full.find(t.tensor)) fail("{}: tensor '{}' is not part of this model", dir, t.tensor);
    for (const Placed& p : by_tensor.at(t.tensor)) {
      const int64_t b = std::max(p.begin, t.begin), e = std::min(p.end, t.end);
      if (b < e) by_file[p.file].push_back({p.begin, p.end, b, e, &t});
    }
  }
  std::vector<std::string> reading;
  for (const auto& [file, copies] : by_file) reading.push_back(file);
  verify_run_checkpoint(dir, &reading);
  for (const auto& [file, copies] : by_file) {
    const SafetensorsFile f = read_safetensors(dir + "/" + file);
    for (const Copy& c : copies) {
      const StateTarget& t = *c.target;
      for (const auto& [kind, out] :
           {std::pair{"params", t.params}, std::pair{"m", t.m}, std::pair{"v", t.v}}) {
        if (!out) continue;
        const Tensor& x = f.at(piece_key(kind, t.tensor, c.piece_begin, c.piece_end),
                               std::vector<int64_t>{c.piece_end - c.piece_begin});
        std::copy(x.data.begin() + (c.begin - c.piece_begin),
                  x.data.begin() + (c.end - c.piece_begin), out + (c.begin - t.begin));
      }
    }
  }
  for (const StateTarget& t : want) require_finite_target(dir, t, allow_nonfinite);
}

void load_sharded_checkpoint(const std::string& dir, const ParamTable& full, float* params,
                             float* m, float* v, bool allow_nonfinite) {
  std::vector<StateTarget> all;
  auto at = [](float* x, int64_t offset) { return x ? x + offset : nullptr; };
  for (const ParamInfo& t : full.params())
    all.push_back({t.name, 0, t.size, params + t.offset, at(m, t.offset), at(v, t.offset)});
  load_sharded_state(dir, full, all, allow_nonfinite);
}

}  // namespace marin
