#include "train/checkpoint.hpp"

#include <filesystem>
#include <nlohmann/json.hpp>

#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/json_file.hpp"
#include "train/finite_check.hpp"
#include "train/safetensors.hpp"
#include "train/sharded_checkpoint.hpp"

namespace marin {
namespace fs = std::filesystem;

void write_model_tensors(const std::string& dir, const ParamTable& table, const float* params) {
  std::vector<TensorView> views;
  for (auto& p : table.params()) views.push_back({p.name, p.shape, params + p.offset});
  write_safetensors(dir + "/model.safetensors", views, {{"format", "marin.cpp"}});
}

void save_model(const std::string& dir, const ModelConfig& c, const ParamTable& table,
                const float* params) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail("{}: cannot create checkpoint directory: {}", dir, ec.message());
  write_model_tensors(dir, table, params);
  write_file_atomic(dir + "/config.json", c.to_json().dump(2) + "\n");
}

ModelConfig load_config(const std::string& dir) {
  const std::string path = dir + "/config.json";
  // The error_code form: a link loop (a `latest` pointing at itself) is a message, not an
  // uncaught filesystem_error.
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    if (ec) fail("{}: {} (is '{}' a checkpoint directory?)", path, ec.message(), dir);
    fail("{}: missing (is '{}' a checkpoint directory?)", path, dir);
  }
  const nlohmann::json j = load_json(path);
  ModelConfig c = ModelConfig::from_json(j, path);
  try {
    c.validate();
  } catch (const Error& e) {
    fail("{}: {}", path, e.what());
  }
  return c;
}

void load_params(const std::string& dir, const ParamTable& table, float* params,
                 bool allow_nonfinite) {
  if (is_sharded_checkpoint(dir))
    return load_sharded_checkpoint(dir, table, params, nullptr, nullptr, allow_nonfinite);
  const SafetensorsFile f = read_safetensors(dir + "/model.safetensors");
  for (auto& p : table.params()) {
    const Tensor& t = f.at(p.name, p.shape);
    std::copy(t.data.begin(), t.data.end(), params + p.offset);
  }
  for (auto& name : f.names)
    if (!table.find(name))
      fail("{}/model.safetensors: unexpected tensor '{}' (not part of this config)", dir, name);
  require_finite_params(table, params, dir + "/model.safetensors", allow_nonfinite);
}

}  // namespace marin
