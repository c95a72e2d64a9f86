#include "train/train_options.hpp"

#include <numeric>

#include "core/error.hpp"
#include "data/batch_factory.hpp"
#include "optim/hparams.hpp"
#include "train/train_option_table.hpp"

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

// The structured parts by hand; every scalar option from the table (train_option_table.cpp).
nlohmann::json TrainOptions::to_json() const {
  nlohmann::json j = {{"model", model.to_json()},
                      {"preset", preset},
                      {"data", data},
                      {"valid", valid},
                      {"tokenizer", tokenizer}};
  for (const TrainOption& s : train_option_table())
    if (s.key) j[nlohmann::json::json_pointer(s.key)] = s.get(*this);
  return j;
}

TrainOptions TrainOptions::from_json(const nlohmann::json& j, const std::string& where) {
  TrainOptions o;
  o.model = ModelConfig::from_json(j.at("model"), where + ".model");
  o.preset = j.value("preset", "");
  o.data = j.at("data");
  o.valid = j.at("valid");
  o.tokenizer = j.value("tokenizer", "");
  for (const TrainOption& s : train_option_table()) {
    if (!s.key) continue;
    const nlohmann::json::json_pointer at(s.key);
    if (!j.contains(at)) {
      if (!s.optional) fail("{}.{} is missing", where, s.dotted_key());
      // A run.json from before the option: its default, or what such a run computed with.
      if (!s.absent.is_null()) s.set(o, s.absent);
      continue;
    }
    s.check(j[at], where);
    s.set(o, j[at]);
  }
  o.optim.total_steps = o.steps;
  return o;
}

DataOptions data_options(const TrainOptions& o) {
  DataOptions d;
  d.seq_len = o.model.seq_len;
  d.vocab_size = o.model.vocab_size;
  d.rows_per_step = o.batch;
  d.total_steps = o.steps;
  d.seed = o.seed;
  d.tokenizer = o.tokenizer;
  return d;
}

}  // namespace marin
