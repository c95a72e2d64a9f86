#pragma once
// The model configuration: every field of recipe.md §1, under the names of formats.md's
// config.json. Presets, TOML files and `--set key=value` overrides all produce one of these, and
// validate() rejects anything the model cannot run with a message naming the field.
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace marin {

struct ModelConfig {
  int64_t hidden_dim = 64;
  int64_t num_layers = 4;
  int64_t num_heads = 8;
  int64_t head_dim = 8;
  int64_t kv_heads_local = 2;
  int64_t kv_heads_global = 1;
  int64_t sliding_window = 32;
  int64_t global_every = 4;
  double rope_theta = 10000.0;
  int64_t rope_dim = 4;
  double qk_mult = 1.3;
  int64_t sconv_kernel = 4;
  std::vector<std::string> sconv_sites = {"k", "attn", "mlp"};
  int64_t num_experts = 8;
  int64_t top_k = 2;
  int64_t expert_dim = 32;
  int64_t latent_dim = 32;
  int64_t num_shared_experts = 2;
  int64_t shared_dim = 32;
  int64_t gated_norm_rank = 16;
  double combine_sum = 2.5;
  int64_t qb_bins = 10000;
  double capacity_factor = 1.15;
  int64_t vocab_size = 512;
  int64_t seq_len = 64;
  double z_loss = 1e-4;
  double init_scale = 0.5;

  // Layer i (0-based) is global when (i+1) % global_every == 0, and the last layer always is.
  bool is_global(int64_t layer) const {
    return (layer + 1) % global_every == 0 || layer == num_layers - 1;
  }
  int64_t num_global_layers() const;
  bool has_sconv(const std::string& site) const;
  int64_t q_dim() const { return num_heads * head_dim; }
  int64_t kv_dim() const { return kv_heads_local * head_dim; }  // stored KV width

  // Throws marin::Error naming the field and what was expected: every field has a range
  // ("num_layers = 1000000000 is out of range [1, 4096]"), then the rules between fields.
  void validate() const;
  // Sets one field from text ("hidden_dim=256", "sconv_sites=k,mlp"); unknown names are errors.
  void set(const std::string& key, const std::string& value);
  // The "key=value" overrides (--set) that turn `base` into this config, in field order.
  std::vector<std::string> overrides_from(const ModelConfig& base) const;
  nlohmann::json to_json() const;
  // `where` names the source (a file) in error messages. Unknown fields are errors; so is a
  // missing one unless `base` (a named preset) gives the fields left out.
  static ModelConfig from_json(const nlohmann::json& j, const std::string& where,
                               const ModelConfig* base = nullptr);
  static ModelConfig from_toml_file(const std::string& path, const ModelConfig* base = nullptr);
  static ModelConfig preset(const std::string& name);
  static std::vector<std::string> preset_names();
  // Marin's shape rule for a family member of width d with L layers (hd 128 unless given).
  static ModelConfig shape_rule(int64_t d, int64_t layers, int64_t head_dim = 128);
  static std::vector<std::string> field_names();
};

// Run-level sizes that go with a preset (the 535B run's batch; tokens-per-active-param budget).
struct PresetRun {
  int64_t batch = 8;
  double tokens_per_param = 791.0;
};
PresetRun preset_run(const std::string& name);

// Loads --preset and/or --config (a config file gives every field, or the preset named with it
// fills the ones left out), then applies each "key=value" override, then validates.
ModelConfig resolve_config(const std::string& preset, const std::string& config_path,
                           const std::vector<std::string>& overrides);
// Each "key=value" (--set) in order, through ModelConfig::set; no validation.
void apply_overrides(ModelConfig& c, const std::vector<std::string>& overrides);

}  // namespace marin
