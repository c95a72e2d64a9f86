#include "train/train_options.hpp"

#include <numeric>

#include "optim/hparams.hpp"

namespace marin {

void TrainOptions::resolve_hparams() {
  const HyperParams h = heuristic_hparams(model.hidden_dim, batch, model.seq_len, steps);
  if (optim.muonh_lr <= 0) optim.muonh_lr = h.muonh_lr;
  if (optim.adam_lr <= 0) optim.adam_lr = h.adam_lr;
  // β1, β2 and ε always follow the rule (they depend on the batch and the horizon).
  optim.beta1 = h.beta1;
  optim.beta2 = h.beta2;
  optim.eps = h.eps;
  optim.total_steps = steps;
  if (micro_batch <= 0 && batch > 0) micro_batch = default_micro_batch(batch);
}

int default_micro_batch(int batch) {
  return batch / std::gcd(batch, 4);
}

nlohmann::json TrainOptions::to_json() const {
  return {{"model", model.to_json()},
          {"preset", preset},
          {"batch", batch},
          {"steps", steps},
          {"seed", seed},
          {"optimizer",
           {{"kind", optim.kind},
            {"muonh_lr", optim.muonh_lr},
            {"adam_lr", optim.adam_lr},
            {"beta1", optim.beta1},
            {"beta2", optim.beta2},
            {"eps", optim.eps},
            {"expert_radius", std::string(optim::radius_scope_name(optim.expert_radius))},
            {"gate_router_wd", optim.gate_router_wd},
            {"adamw_wd", optim.adamw_wd}}},
          {"transport", transport_name(transport)},
          {"waves", waves},
          {"ep", ep},
          {"qb", qb},
          {"ckpt_every", ckpt_every},
          {"keep_every", keep_every},
          {"eval_every", eval_every},
          {"eval_batches", eval_batches},
          {"eval_domains_every", eval_domains_every},
          {"max_bad_steps", max_bad_steps},
          {"micro_batch", micro_batch},
          {"strict_data", strict_data},
          {"data", data},
          {"valid", valid},
          {"tokenizer", tokenizer},
          {"forecast", forecast}};
}

TrainOptions TrainOptions::from_json(const nlohmann::json& j) {
  TrainOptions o;
  o.model = ModelConfig::from_json(j.at("model"), "state.json:model");
  o.preset = j.value("preset", "");
  o.batch = j.at("batch").get<int>();
  o.steps = j.at("steps").get<int64_t>();
  o.seed = j.at("seed").get<uint64_t>();
  const auto& op = j.at("optimizer");
  o.optim.kind = op.at("kind").get<std::string>();
  o.optim.muonh_lr = op.at("muonh_lr").get<double>();
  o.optim.adam_lr = op.at("adam_lr").get<double>();
  o.optim.beta1 = op.at("beta1").get<double>();
  o.optim.beta2 = op.at("beta2").get<double>();
  o.optim.eps = op.at("eps").get<double>();
  o.optim.expert_radius = optim::parse_radius_scope(op.at("expert_radius").get<std::string>());
  o.optim.gate_router_wd = op.at("gate_router_wd").get<bool>();
  o.optim.adamw_wd = op.at("adamw_wd").get<double>();
  o.optim.total_steps = o.steps;
  o.transport = parse_transport(j.at("transport").get<std::string>());
  o.waves = j.value("waves", int64_t(3));
  o.ep = j.value("ep", 1);
  o.qb = j.at("qb").get<bool>();
  o.ckpt_every = j.at("ckpt_every").get<int64_t>();
  o.keep_every = j.at("keep_every").get<int64_t>();
  o.eval_every = j.at("eval_every").get<int64_t>();
  o.eval_batches = j.at("eval_batches").get<int64_t>();
  o.eval_domains_every = j.value("eval_domains_every", int64_t(0));
  o.max_bad_steps = j.at("max_bad_steps").get<int>();
  o.micro_batch = j.value("micro_batch", 0);
  o.strict_data = j.value("strict_data", false);
  o.data = j.at("data");
  o.valid = j.at("valid");
  o.tokenizer = j.value("tokenizer", "");
  o.forecast = j.value("forecast", "");
  return o;
}

}  // namespace marin
