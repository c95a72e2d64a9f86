#pragma once
// Everything that defines a training run besides its data: saved in every checkpoint so that
// `--resume` continues the same run and `--fork-from` can change chosen settings.
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "model/config.hpp"
#include "model/moe/drop_rule.hpp"
#include "optim/optimizer.hpp"

namespace marin {

struct TrainOptions {
  ModelConfig model;
  std::string preset;
  int batch = 8;  // global batch: rows per step over all data-parallel ranks
  // Rows per forward pass: the step is batch / micro_batch micro-batches whose gradients are
  // summed exactly, the unit of data parallelism (the rank count must divide their number).
  // Part of the run: it fixes the numerics, the rank count does not. 0: default_micro_batch.
  int micro_batch = 0;
  int64_t steps = 100;  // schedule horizon N
  uint64_t seed = 0;
  OptimConfig optim;  // learning rates 0 → the §5 rule
  Transport transport = Transport::Dropless;
  int64_t waves = 3;  // of the pooled transport (W)
  // Expert parallelism: ranks each routed-expert stack is split over (1: every rank holds every
  // expert). Like the rank count, a property of how the run is computed, not of its result
  // (dropless and capacity): it may change at --resume.
  int ep = 1;
  bool qb = true;  // QB router balancing (recipe §4)
  // Under MPI without --ep: the exact gradient sum of each block runs on a communication thread as
  // soon as the last micro-batch's backward has finished that block (docs/distributed.md,
  // "Overlap"). How a step is computed, not what: it may change at --resume.
  bool overlap = true;
  // Under MPI: the dense parameters and gradients are sharded over the ranks, each block gathered
  // when it is read (ZeRO-3 / FSDP style, train/sharded_params.hpp). Same bits; it may change at
  // --resume.
  bool shard_params = false;
  // Compute dtype of the GEMMs as asked (--dtype): auto, fp32, bf16 or bf16-emulated; what it
  // resolves to on the machine at hand is the trainer's dtype(), in run.json and every metrics
  // line. Master weights, gradients and optimizer state are fp32 whatever it is.
  std::string dtype = "auto";
  int64_t ckpt_every = 0;  // rolling checkpoint period (0: only at the end / on SIGINT)
  int64_t keep_every = 0;  // permanent checkpoint period (0: none)
  // "full" (one file set in the one-process layout, gathered on rank 0), "sharded" (every rank
  // writes its own part: train/sharded_checkpoint.hpp), or "auto": full in one process, sharded
  // over several ranks. Every layout resumes at any rank count.
  std::string ckpt_format = "auto";
  int64_t eval_every = 0;  // validation period (0: only at the end when validation data exists)
  int64_t eval_batches = 4;
  // Per-domain evaluation (marin eval's macro loss / BPB over every validation domain of the
  // token directory, dropless) every N steps and at the end; 0: off. Needs text data.
  int64_t eval_domains_every = 0;
  // Downstream tasks (docs/evaluation.md, "Downstream tasks"), as `marin eval --tasks` takes
  // them: names found as task_dir/NAME.yaml, harness YAML files or rendered JSONL, comma-separated
  // ("": none). Scored every tasks_every steps (0: only at the end) and at the end; each result
  // goes into the step's metrics line ("tasks") and RUN/tasks/step-N.json (the harness layout).
  std::string tasks;
  std::string task_dir;
  int64_t tasks_every = 0;
  int64_t report_every = 0;  // refresh RUN/report.html (marin report) every N steps; 0: never
  int max_bad_steps = 3;     // consecutive non-finite steps before the run stops
  double time_limit_s = 0;   // stop (with a checkpoint) after this much wall time; 0: none
  bool overwrite = false;    // a new run in a directory holding one moves that aside (not saved)
  nlohmann::json data;       // {"kind": "rows", "path": ...} or {"kind": "mixture", ...}
  nlohmann::json valid;      // same shape, or null
  std::string tokenizer;     // tokenizer.json of text data: checked against the shards, copied
                             // into every checkpoint
  std::string forecast;      // forecast.json (marin forecast) to score this run against
  // A run that reads its data more than once (more rows than a rows file holds) is an error
  // instead of a warning.
  bool strict_data = false;
  std::vector<int64_t> inject_nan_grad_steps;  // testing aid: poison the gradient at these steps
  // Testing aids: poison the update (a parameter, or the optimizer's v) at these steps.
  std::vector<int64_t> inject_nan_param_steps, inject_inf_state_steps;

  // Fills the learning rates left at 0, and β1/β2/ε, from the hyperparameter rule (§5), and the
  // micro-batch left at 0.
  void resolve_hparams();
  nlohmann::json to_json() const;
  // Every stored option range-checked by the table; errors name `where` ("…/state.json:
  // options") and the field.
  static TrainOptions from_json(const nlohmann::json& j, const std::string& where = "options");
};

// What `--resume` changes: an edit of the run's options by the options given with it (the CLI
// refuses those the option table says may not change; the trainer those a forecast binds). A
// changed transport, waves or expert split is recorded in the run's lineage (recipe §8: the 535B
// run switched transport mid-run from a checkpoint).
struct ResumeChanges {
  std::function<void(TrainOptions&)> edit;
  // The flags given with --resume ("--ep"): a given --ep is used as it is (or refused), never
  // re-derived for the rank count.
  std::vector<std::string> given;
  // The ranks the run goes on at (Trainer::resume sets its communicator's); 0: not checked.
  int ranks = 0;
};

// A quarter of the batch when 4 divides it (else a half, else the whole batch): 4 micro-batches,
// so the default run is the same at 1, 2 and 4 ranks.
int default_micro_batch(int batch);

struct DataOptions;  // data/batch_factory.hpp
// What the run's data sources need of its options (make_batch_source).
DataOptions data_options(const TrainOptions& o);

}  // namespace marin
