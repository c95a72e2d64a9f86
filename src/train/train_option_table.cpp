#include "train/train_option_table.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "core/error.hpp"
#include "core/limits.hpp"
#include "kernels/kernels.hpp"
#include "model/moe/drop_rule.hpp"
#include "optim/muonh.hpp"
#include "train/train_options.hpp"

namespace marin {
namespace {

using json = nlohmann::json;

// get/set of a member that is stored as it is.
#define MEMBER(m)                                           \
  .get = [](const TrainOptions& o) -> json { return o.m; }, \
  .set = [](TrainOptions& o, const json& v) { v.get_to(o.m); }

constexpr double kSteps = double(kMaxSteps), kBatch = double(kMaxBatch);
constexpr double kMaxSeed = 9007199254740992.0;  // 2^53: every seed is exact in JSON readers
constexpr OnResume kYes = OnResume::Yes, kBound = OnResume::NotWithForecast;  // default: No
using O = TrainOption;

// clang-format off
// The batch, the schedule and the optimizer.
std::vector<TrainOption> optimization_options() {
  return {
    {.flag = "--batch", .key = "/batch", .kind = O::Int, .lo = 1, .hi = kBatch,
     .help = "sequences per step (global: over all MPI ranks)", MEMBER(batch)},
    {.flag = "--micro-batch", .key = "/micro_batch", .kind = O::Int, .lo = 0, .hi = kBatch,
     .optional = true,
     .help = "rows per forward; the step's micro-batches are shared by the MPI ranks and their "
             "gradients summed exactly (0: batch/4, or batch/2, or batch)",
     MEMBER(micro_batch)},
    {.flag = "--steps", .key = "/steps", .kind = O::Int, .lo = 1, .hi = kSteps,
     .on_resume = kBound, .help = "total steps (schedule horizon)", MEMBER(steps)},
    {.flag = "--seed", .key = "/seed", .kind = O::Int, .lo = 0, .hi = kMaxSeed,
     .help = "initialisation seed", MEMBER(seed)},
    {.flag = "--optimizer", .key = "/optimizer/kind", .kind = O::Choice,
     .choices = {"muonh", "adamw"}, .help = "muonh (recipe) or adamw (baseline)",
     MEMBER(optim.kind)},
    {.flag = "--muonh-lr", .key = "/optimizer/muonh_lr", .kind = O::Real, .lo = 0, .hi = 1,
     .help = "peak MuonH/AdamH rate (0: the §5 rule)", MEMBER(optim.muonh_lr)},
    {.flag = "--adam-lr", .key = "/optimizer/adam_lr", .kind = O::Real, .lo = 0, .hi = 1,
     .help = "peak Adam rate (0: the §5 rule)", MEMBER(optim.adam_lr)},
    {.flag = "--adamw-wd", .key = "/optimizer/adamw_wd", .kind = O::Real, .lo = 0, .hi = 1,
     .help = "weight decay of the adamw baseline", MEMBER(optim.adamw_wd)},
    // β1, β2 and ε follow the §5 rule from the batch and the horizon (resolve_hparams).
    {.flag = nullptr, .key = "/optimizer/beta1", .kind = O::Real, .lo = 0, .hi = 1,
     .help = "Adam β1", MEMBER(optim.beta1)},
    {.flag = nullptr, .key = "/optimizer/beta2", .kind = O::Real, .lo = 0, .hi = 1,
     .help = "Adam β2", MEMBER(optim.beta2)},
    {.flag = nullptr, .key = "/optimizer/eps", .kind = O::Real, .lo = 0, .hi = 1, .open_lo = true,
     .help = "Adam ε", MEMBER(optim.eps)},
    {.flag = "--expert-radius", .key = "/optimizer/expert_radius", .kind = O::Choice,
     .choices = {"layer", "expert"},
     .help = "MuonH radius of the routed experts: per layer (recipe) or per expert",
     .get = [](const TrainOptions& o) -> json {
       return std::string(optim::radius_scope_name(o.optim.expert_radius));
     },
     .set = [](TrainOptions& o, const json& v) {
       o.optim.expert_radius = optim::parse_radius_scope(v.get<std::string>());
     }},
    {.flag = "--ns-dtype", .key = "/optimizer/ns_dtype", .kind = O::Choice,
     .choices = {"fp32", "compute"}, .optional = true,
     .absent = "fp32",  // the default until 2026-12-07: an older run resumes as it ran
     .on_resume = kYes,
     .help = "Newton-Schulz products in the compute dtype of --dtype (default; bf16 as the 535B "
             "run) or in fp32",
     MEMBER(optim.ns_dtype)},
    {.flag = "--gate-router-wd", .key = "/optimizer/gate_router_wd", .kind = O::Bool,
     .help = "decay head gate and router weights by 0.02·(1 − t/T)", MEMBER(optim.gate_router_wd)},
  };
}

// How the step is computed and distributed, checkpoints, evaluation and stopping.
std::vector<TrainOption> run_options() {
  return {
    {.flag = "--transport", .key = "/transport", .kind = O::Choice,
     .choices = {"dropless", "capacity", "pooled"}, .on_resume = kBound,
     .help = "dropless, capacity (recipe §8) or pooled (the 535B run's pooled waves)",
     .get = [](const TrainOptions& o) -> json { return transport_name(o.transport); },
     .set = [](TrainOptions& o, const json& v) {
       o.transport = parse_transport(v.get<std::string>());
     }},
    {.flag = "--waves", .key = "/waves", .kind = O::Int, .lo = 1, .hi = 64, .optional = true,
     .on_resume = kBound, .help = "waves of the pooled transport", MEMBER(waves)},
    {.flag = "--ep", .key = "/ep", .kind = O::Int, .lo = 1, .hi = 1 << 20, .optional = true,
     .on_resume = kYes,
     .help = "expert parallelism: split the routed experts over groups of P ranks (P divides the "
             "rank count and num_experts)",
     MEMBER(ep)},
    {.flag = "--dtype", .key = "/dtype", .kind = O::Choice,
     .choices = {"auto", "fp32", "bf16", "bf16-emulated"}, .optional = true, .on_resume = kYes,
     .help = kernels::kDtypeHelp,
     MEMBER(dtype)},
    {.flag = "--no-overlap", .key = "/overlap", .kind = O::Bool, .negate = true,
     .optional = true, .on_resume = kYes,
     .help = "sum the gradients after the backward, not during it, and under --ep run the "
             "all-to-alls in line, not beside the experts (same bits)",
     MEMBER(overlap)},
    {.flag = "--shard-params", .key = "/shard_params", .kind = O::Bool, .optional = true,
     .on_resume = kYes,
     .help = "shard the dense parameters and gradients over the ranks, gathering each block when "
             "it is read (ZeRO-3; same bits, less memory per rank)",
     MEMBER(shard_params)},
    {.flag = "--no-qb", .key = "/qb", .kind = O::Bool, .negate = true,
     .help = "disable QB router balancing", MEMBER(qb)},
    {.flag = "--strict-data", .key = "/strict_data", .kind = O::Bool, .optional = true,
     .help = "refuse a run that would read its rows more than once (default: a warning)",
     MEMBER(strict_data)},
    {.flag = "--ckpt-every", .key = "/ckpt_every", .kind = O::Int, .lo = 0, .hi = kSteps,
     .on_resume = kYes, .help = "rolling checkpoint every N steps (0: at the end and on a signal)",
     MEMBER(ckpt_every)},
    {.flag = "--keep-every", .key = "/keep_every", .kind = O::Int, .lo = 0, .hi = kSteps,
     .on_resume = kYes, .help = "permanent checkpoint every N steps (0: none)",
     MEMBER(keep_every)},
    {.flag = "--ckpt-format", .key = "/ckpt_format", .kind = O::Choice,
     .choices = {"auto", "full", "sharded"}, .optional = true, .on_resume = kYes,
     .help = "full: one model + optimizer file set, gathered on rank 0; sharded: every rank "
             "writes its own shard; auto (default): full in one process, sharded over several "
             "ranks (either loads at any rank count and --ep)",
     MEMBER(ckpt_format)},
    {.flag = "--eval-every", .key = "/eval_every", .kind = O::Int, .lo = 0, .hi = kSteps,
     .on_resume = kYes,
     .help = "validate every N steps (0: at the end when there is validation data)",
     MEMBER(eval_every)},
    {.flag = "--eval-batches", .key = "/eval_batches", .kind = O::Int, .lo = 1, .hi = 1 << 30,
     .on_resume = kYes, .help = "validation batches", MEMBER(eval_batches)},
    {.flag = "--eval-domains-every", .key = "/eval_domains_every", .kind = O::Int, .lo = 0,
     .hi = kSteps, .optional = true, .on_resume = kYes,
     .help = "per-domain macro loss/BPB (as marin eval) every N steps and at the end",
     MEMBER(eval_domains_every)},
    {.flag = "--tasks", .key = "/tasks", .kind = O::Text, .optional = true, .on_resume = kYes,
     .help = "downstream tasks scored during training, as marin eval --tasks: names (in "
             "--task-dir), harness YAML files or rendered JSONL, comma-separated",
     MEMBER(tasks)},
    {.flag = "--task-dir", .key = "/task_dir", .kind = O::Text, .optional = true,
     .on_resume = kYes, .help = "where --tasks names are found (marin tasks build --out)",
     MEMBER(task_dir)},
    {.flag = "--tasks-every", .key = "/tasks_every", .kind = O::Int, .lo = 0, .hi = kSteps,
     .optional = true, .on_resume = kYes,
     .help = "score the --tasks every N steps and at the end (0: at the end only)",
     MEMBER(tasks_every)},
    {.flag = "--report-every", .key = "/report_every", .kind = O::Int, .lo = 0, .hi = kSteps,
     .optional = true, .on_resume = kYes,
     .help = "refresh RUN/report.html (marin report) every N steps and at the end",
     MEMBER(report_every)},
    {.flag = "--max-bad-steps", .key = "/max_bad_steps", .kind = O::Int, .lo = 1, .hi = 1 << 20,
     .on_resume = kYes, .help = "consecutive non-finite steps before stopping",
     MEMBER(max_bad_steps)},
    {.flag = "--time-limit", .key = nullptr, .kind = O::Real, .lo = 0, .hi = 1e9,
     .on_resume = kYes,
     .help = "stop with a checkpoint after this many seconds of this invocation, counted from "
             "the end of its first step (its warm-up is not counted; 0: none)",
     MEMBER(time_limit_s)},
    {.flag = "--forecast", .key = "/forecast", .kind = O::Text, .optional = true,
     .help = "forecast.json (marin forecast) to score this run against", MEMBER(forecast)},
  };
}
// clang-format on

std::vector<TrainOption> make_table() {
  std::vector<TrainOption> t = optimization_options();
  for (TrainOption& o : run_options()) t.push_back(std::move(o));
  return t;
}
#undef MEMBER

std::string range_text(const TrainOption& s) {
  return fmt::format("{}{}, {}]", s.open_lo ? "(" : "[", s.lo, s.hi);
}

}  // namespace

const std::vector<TrainOption>& train_option_table() {
  static const std::vector<TrainOption> table = make_table();
  return table;
}

const TrainOption* find_train_option(const std::string& flag) {
  for (const TrainOption& s : train_option_table())
    if (s.flag && flag == s.flag) return &s;
  return nullptr;
}

nlohmann::json TrainOption::parse(const std::string& text) const {
  switch (kind) {
    case Int:
      return std::stoll(text);
    case Real:
      return std::stod(text);
    case Bool:
      return !negate;
    case Choice:
    case Text:
      return text;
  }
  return text;
}

std::string TrainOption::dotted_key() const {
  std::string k = std::string(key).substr(1);
  std::replace(k.begin(), k.end(), '/', '.');
  return k;
}

void TrainOption::check(const nlohmann::json& v, const std::string& where) const {
  auto bad = [&](const std::string& expected) {
    fail("{}.{} = {} is invalid (expected {})", where, dotted_key(), v.dump(), expected);
  };
  switch (kind) {
    case Int:
    case Real: {
      if (kind == Int ? !v.is_number_integer() : !v.is_number())
        bad(kind == Int ? "an integer" : "a number");
      const double x = v.get<double>();
      if (!std::isfinite(x) || (open_lo ? !(x > lo) : !(x >= lo)) || !(x <= hi))
        bad("a value in " + range_text(*this));
      return;
    }
    case Bool:
      if (!v.is_boolean()) bad("true or false");
      return;
    case Choice:
      if (!v.is_string() ||
          std::find(choices.begin(), choices.end(), v.get<std::string>()) == choices.end())
        bad(fmt::format("one of {}", fmt::join(choices, ", ")));
      return;
    case Text:
      if (!v.is_string()) bad("a string");
      return;
  }
}

}  // namespace marin
