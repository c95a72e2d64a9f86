// marin init: a freshly initialised model (recipe §3) written as a checkpoint directory.
#include <fmt/core.h>

#include "cli/options.hpp"
#include "core/limits.hpp"
#include "model/accounting.hpp"
#include "model/params.hpp"
#include "train/checkpoint.hpp"

namespace marin::cli {
namespace {

struct InitOptions {
  ModelOptions model;
  uint64_t seed = 0;
  std::string out;
};

int run_init(const InitOptions& o) {
  const ModelConfig c = o.model.resolve();
  ParamTable table(c);
  require_memory(int64_t(sizeof(float)) * table.total(),
                 fmt::format("the model's {} parameters (fp32)", table.total()));
  Buffer<float> params(table.total());
  table.initialize(params.data(), o.seed);
  save_model(o.out, c, table, params.data());
  fmt::print("wrote {}/config.json and {}/model.safetensors ({} tensors, {} parameters)\n", o.out,
             o.out, table.params().size(), every_tensor_params(c));
  return 0;
}

}  // namespace

MARIN_COMMAND(
    init, "init", "Write a freshly initialised model checkpoint", [](CLI::App& app) -> Runner {
      auto o = std::make_shared<InitOptions>();
      o->model.add(app);
      app.add_option("--seed", o->seed, "initialisation seed")->default_val(0)->check(seed_range());
      app.add_option("--out", o->out, "checkpoint directory to create")->required();
      return [o] { return run_init(*o); };
    });

}  // namespace marin::cli
