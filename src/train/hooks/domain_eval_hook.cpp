#include "train/hooks/domain_eval_hook.hpp"

#include "core/error.hpp"
#include "data/tokenizer/tokenizer.hpp"
#include "eval/macro_metric.hpp"
#include "train/trainer.hpp"

namespace marin {

DomainEvalHook::DomainEvalHook() = default;
DomainEvalHook::~DomainEvalHook() = default;

void DomainEvalHook::check(const TrainOptions& o) {
  if (o.ep > 1 && o.eval_domains_every > 0)
    fail(
        "--eval-domains-every is not supported with --ep > 1 (its documents are split unevenly "
        "over the ranks, while expert-parallel forwards run in lockstep): evaluate a checkpoint "
        "with `marin eval` instead");
}

nlohmann::json DomainEvalHook::evaluate(Trainer& t, const eval::MacroEvaluator* ev) {
  const TrainOptions& o = t.options();
  if (t.engine().ep() > 1)
    fail("per-domain evaluation of a training run is not supported with --ep > 1 (use marin eval)");
  if (!ev) {
    if (!all_domains_) {
      if (o.data.value("kind", "") != "mixture")
        fail("per-domain evaluation during training needs text data (--data with --token-dir)");
      eval::MacroMetric all;
      all.token_dir = o.data.at("tokens").get<std::string>();
      const uint64_t hash = o.tokenizer.empty() ? 0 : Tokenizer::load(o.tokenizer).hash();
      all_domains_ = std::make_unique<eval::MacroEvaluator>(all, hash);
    }
    ev = all_domains_.get();
  }
  const kernels::DtypeScope dtype(t.dtype());
  const WholeParams whole = t.engine().whole_params();  // each rank runs its own documents
  return eval::summary(ev->evaluate(t.model(), &t.comm()));
}

void DomainEvalHook::after_step(Trainer& t, nlohmann::json& m) {
  if (due(t.options(), t.step())) m["eval"] = evaluate(t, nullptr);
}

}  // namespace marin
