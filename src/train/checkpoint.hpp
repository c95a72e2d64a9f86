#pragma once
// Model checkpoints in the public format of formats.md: config.json + model.safetensors (float32,
// every parameter and the router bias under its formats.md name) [+ tokenizer.json]. Each file
// is written atomically; a load checks every tensor's presence and shape and names what is wrong.
#include <string>

#include "model/config.hpp"
#include "model/model.hpp"

namespace marin {

// Writes DIR/model.safetensors alone (DIR exists): a training checkpoint's config.json is
// written with its state (run_checkpoint.hpp's publish_checkpoint).
void write_model_tensors(const std::string& dir, const ParamTable& table, const float* params);
// Writes DIR/config.json and DIR/model.safetensors (creating DIR).
void save_model(const std::string& dir, const ModelConfig& c, const ParamTable& table,
                const float* params);
// Reads DIR/config.json (validated).
ModelConfig load_config(const std::string& dir);
// Reads DIR/model.safetensors into `params` laid out by `table` (which must match the config), or
// assembles them from a sharded training checkpoint's shards (sharded_checkpoint.hpp).
// A tensor holding a NaN or Inf is refused by name, unless `allow_nonfinite` (forensics: score,
// sample and eval take --allow-nonfinite), which warns.
void load_params(const std::string& dir, const ParamTable& table, float* params,
                 bool allow_nonfinite = false);

}  // namespace marin
