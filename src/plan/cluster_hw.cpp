// Reads a hardware file through core/toml_file: the fields are few and flat, and every message
// names the file (and line) and the dotted field.
#include "plan/cluster_hw.hpp"

#include <fmt/ranges.h>

#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <vector>

#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/toml_file.hpp"

namespace marin {
namespace {

// The schema: dotted key → what it is (printed when the field is missing).
const std::map<std::string, std::string>& schema() {
  static const std::map<std::string, std::string> s = {
      {"name", "a display name"},
      {"unit", "\"rack\" or \"node\": what --racks counts"},
      {"gpus_per_unit", "GPUs in one rack or node"},
      {"gpu.bf16_dense_tflops", "dense bf16 tensor-core peak per GPU, TFLOP/s"},
      {"gpu.hbm_gb", "HBM capacity per GPU, GB (10^9 bytes)"},
      {"gpu.hbm_tb_per_s", "HBM bandwidth per GPU, TB/s"},
      {"nvlink.gb_per_s", "NVLink bandwidth per GPU, each direction, GB/s"},
      {"nvlink.domain_gpus", "GPUs in one NVLink domain"},
      {"network.gb_per_s", "inter-node bandwidth per GPU, each direction, GB/s"},
      {"defaults.sequences_per_gpu", "optional: sequences per GPU of the default batch"},
  };
  return s;
}

struct Reader {
  const TomlFile& file;

  void present(const std::string& key) const {
    if (!file.has(key)) fail("{}: missing field '{}' ({})", file.origin(), key, schema().at(key));
  }
  double positive(const std::string& key) const {
    present(key);
    const TomlFile::Kind k = file.kind(key);  // integers convert too
    const double v = k == TomlFile::Kind::Integer || k == TomlFile::Kind::Real
                         ? file.json(key).get<double>()
                         : std::nan("");
    if (!(v > 0)) file.fail_field(key, "must be a positive number");
    return v;
  }
  int64_t count(const std::string& key) const {
    present(key);
    if (file.kind(key) != TomlFile::Kind::Integer || file.json(key).get<int64_t>() <= 0)
      file.fail_field(key, "must be a positive integer");
    return file.json(key).get<int64_t>();
  }
  std::string text(const std::string& key) const {
    present(key);
    return file.string(key);
  }
  // Every leaf must be in the schema; tables only group.
  void no_unknown(const std::string& table) const {
    for (const std::string& k : file.keys(table)) {
      const std::string key = table.empty() ? k : table + "." + k;
      if (file.kind(key) == TomlFile::Kind::Table) {
        no_unknown(key);
      } else if (!schema().count(key)) {
        std::vector<std::string> known;
        for (auto& [name, _] : schema()) known.push_back(name);
        fail("{}: unknown field '{}' (known fields: {})", file.where(key), key,
             fmt::join(known, ", "));
      }
    }
  }
};

}  // namespace

ClusterHardware ClusterHardware::from_toml_text(const std::string& text,
                                                const std::string& origin) {
  const TomlFile t = TomlFile::parse(text, origin);
  const Reader r{t};
  r.no_unknown("");
  ClusterHardware h;
  h.origin = origin;
  h.name = r.text("name");
  h.unit = r.text("unit");
  if (h.unit != "rack" && h.unit != "node")
    fail("{}: field 'unit' must be \"rack\" or \"node\", got \"{}\"", origin, h.unit);
  h.gpus_per_unit = r.count("gpus_per_unit");
  h.nvlink_domain = r.count("nvlink.domain_gpus");
  // The planner places an expert group on consecutive GPUs; it assumes domains tile a unit.
  if (h.gpus_per_unit % h.nvlink_domain != 0)
    fail("{}: 'nvlink.domain_gpus' ({}) must divide 'gpus_per_unit' ({})", origin, h.nvlink_domain,
         h.gpus_per_unit);
  h.bf16_flops = r.positive("gpu.bf16_dense_tflops") * 1e12;
  h.hbm_bytes = r.positive("gpu.hbm_gb") * 1e9;
  h.hbm_bytes_per_s = r.positive("gpu.hbm_tb_per_s") * 1e12;
  h.nvlink_bytes_per_s = r.positive("nvlink.gb_per_s") * 1e9;
  h.network_bytes_per_s = r.positive("network.gb_per_s") * 1e9;
  if (t.has("defaults.sequences_per_gpu"))
    h.default_sequences_per_gpu = r.count("defaults.sequences_per_gpu");
  return h;
}

ClusterHardware ClusterHardware::load(const std::string& path) {
  return from_toml_text(read_file(path), path);
}

nlohmann::json ClusterHardware::to_json() const {
  return {{"file", origin},
          {"name", name},
          {"unit", unit},
          {"gpus_per_unit", gpus_per_unit},
          {"nvlink_domain_gpus", nvlink_domain},
          {"bf16_dense_flops", bf16_flops},
          {"hbm_bytes", hbm_bytes},
          {"hbm_bytes_per_s", hbm_bytes_per_s},
          {"nvlink_bytes_per_s", nvlink_bytes_per_s},
          {"network_bytes_per_s", network_bytes_per_s},
          {"default_sequences_per_gpu", default_sequences_per_gpu}};
}

}  // namespace marin
