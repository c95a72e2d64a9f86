// marin plan: the accounting of recipe.md §6 and the hyperparameters of §5 for a configuration,
// without allocating anything.
#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "cli/options.hpp"
#include "core/error.hpp"
#include "model/accounting.hpp"
#include "model/model.hpp"
#include "optim/hparams.hpp"

namespace marin::cli {
namespace {

struct PlanOptions {
  ModelOptions model;
  int64_t batch = 0, seq_len = 0, steps = 0;
  double tokens_per_param = 0;
  bool json = false;
};

// Counts in thousands (K, M, B, T); byte sizes in powers of 1024 (KiB … PiB).
std::string human(double x) {
  const char* units[] = {"", "K", "M", "B", "T"};
  int u = 0;
  while (std::abs(x) >= 1000 && u < 4) x /= 1000, ++u;
  return fmt::format("{:.2f}{}", x, units[u]);
}

std::string bytes(double x) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  while (std::abs(x) >= 1024 && u < 5) x /= 1024, ++u;
  return fmt::format("{:.2f} {}", x, units[u]);
}

int run_plan(const PlanOptions& o) {
  ModelConfig c = o.model.resolve();
  if (o.seq_len > 0) {
    c.seq_len = o.seq_len;
    c.validate();
  }
  const PresetRun pr = preset_run(o.model.preset);
  const int64_t batch = o.batch > 0 ? o.batch : pr.batch;
  if (o.steps > 0 && o.tokens_per_param > 0) fail("give either --steps or --tokens-per-param");
  const double tpp = o.tokens_per_param > 0 ? o.tokens_per_param : pr.tokens_per_param;
  const int64_t steps = o.steps > 0 ? o.steps : steps_for_budget(c, batch, tpp);
  if (steps <= 0) fail("the budget gives {} steps; increase --steps or --tokens-per-param", steps);
  const Accounting a = account(c);
  const HyperParams h = heuristic_hparams(c.hidden_dim, batch, c.seq_len, steps);

  // Training memory: fp32 weights and gradients of every tensor, optimizer moments (MuonH keeps
  // one, Adam/AdamH two), and the activations the model saves for backward at this batch.
  int64_t muon = 0, adam = 0;  // the table holds names and shapes only: cheap even for the hero
  const ParamTable table(c);
  for (auto& p : table.params()) {
    if (p.group == OptGroup::MuonH)
      muon += p.size;
    else if (p.group != OptGroup::State)
      adam += p.size;
  }
  const int64_t weights = 4 * a.every_tensor, grads = 4 * a.every_tensor;
  const int64_t opt_state = 4 * (muon + 2 * adam);
  const int64_t acts = Model<float>::activation_bytes(c, int(batch));
  const int64_t tokens_per_step = batch * c.seq_len;
  const double train_flops = training_flops(c, batch, steps);

  nlohmann::json j = {
      {"active_params", a.active_params},
      {"headline_total_params", a.headline_params},
      {"every_tensor_params", a.every_tensor},
      {"forward_flops_per_token", a.fwd_flops_per_token},
      {"forward_flops_per_token_no_head", a.fwd_flops_no_head},
      {"batch", batch},
      {"seq_len", c.seq_len},
      {"tokens_per_step", tokens_per_step},
      {"steps", steps},
      {"tokens", double(steps) * double(tokens_per_step)},
      {"training_flops", train_flops},
      {"forecast_flops_per_step", forecast_flops_per_step(c, batch)},
      {"muonh_lr", h.muonh_lr},
      {"adam_lr", h.adam_lr},
      {"beta1", h.beta1},
      {"beta2", h.beta2},
      {"eps", h.eps},
      {"memory_bytes",
       {{"weights", weights},
        {"gradients", grads},
        {"optimizer_state", opt_state},
        {"activations", acts},
        {"total", weights + grads + opt_state + acts}}},
      {"config", c.to_json()},
  };
  if (o.json) {
    fmt::print("{}\n", j.dump());
    return 0;
  }
  fmt::print("model          {}\n", o.model.preset.empty() ? o.model.config : o.model.preset);
  fmt::print("active params  {:>20}  ({})\n", a.active_params, human(double(a.active_params)));
  fmt::print("total params   {:>20}  ({})  headline: L·core(E) + 2·V·d\n", a.headline_params,
             human(double(a.headline_params)));
  fmt::print("every tensor   {:>20}  ({})\n", a.every_tensor, human(double(a.every_tensor)));
  fmt::print("fwd FLOPs/tok  {:>20}\n", a.fwd_flops_per_token);
  fmt::print("batch × seq    {} × {} = {} tokens/step\n", batch, c.seq_len, tokens_per_step);
  fmt::print("steps          {:>20}\n", steps);
  fmt::print("train FLOPs    {:>20.4e}\n", train_flops);
  fmt::print("muonh_lr {:.3e}  adam_lr {:.3e}  beta1 {:.2f}  beta2 {:.4f}  eps {:.3e}\n",
             h.muonh_lr, h.adam_lr, h.beta1, h.beta2, h.eps);
  fmt::print("memory (fp32)  weights {}  grads {}  optimizer {}  activations {}  total {}\n",
             bytes(double(weights)), bytes(double(grads)), bytes(double(opt_state)),
             bytes(double(acts)), bytes(double(weights + grads + opt_state + acts)));
  return 0;
}

}  // namespace

MARIN_COMMAND(plan, "plan",
              "Parameter, FLOP, step, learning-rate and memory accounting of a config",
              [](CLI::App& app) -> Runner {
                auto o = std::make_shared<PlanOptions>();
                o->model.add(app);
                app.add_option("--batch", o->batch, "sequences per step (default: the preset's)");
                app.add_option("--seq-len", o->seq_len, "override seq_len");
                app.add_option("--steps", o->steps, "training steps");
                app.add_option("--tokens-per-param", o->tokens_per_param,
                               "budget in tokens per active parameter (default 791)");
                app.add_flag("--json", o->json, "one JSON object instead of the table");
                return [o] { return run_plan(*o); };
              });

}  // namespace marin::cli
