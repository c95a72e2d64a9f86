#pragma once
// The whole model (recipe §2): embedding + RMSNorm + GatedNorm, L blocks, final RMSNorm +
// GatedNorm, untied LM head, CE + z-loss. Explicit forward/backward in the llm.c style: forward
// saves what backward needs in buffers sized once for (max_batch, seq_len); nothing is
// allocated inside a step. Instantiated for float (training) and double (gradient checks).
#include <functional>
#include <memory>
#include <vector>

#include "core/arena.hpp"
#include "core/buffer.hpp"
#include "model/block.hpp"
#include "model/gated_norm.hpp"
#include "model/params.hpp"
#include "parallel/comm.hpp"

namespace marin {

// One batch of B rows of seq_len tokens. labels < 0 are not scored. seg: segment (document) ids
// per token, or null when every row is one document.
struct Batch {
  int B = 0;
  const int32_t* tokens = nullptr;
  const int32_t* labels = nullptr;
  const int32_t* seg = nullptr;
  // The loss is a mean over this many scored tokens (0: the ones in this batch). Data-parallel
  // ranks and micro-batches pass the global batch's count, so their losses and gradients add
  // up to those of the whole batch.
  int64_t norm_tokens = 0;
  // The weights are those of the previous forward (a step's later micro-batches, the later
  // batches of an evaluation): its bf16 copy of them (kernels::WeightCopy) is reused, not
  // converted again. Never set it after the weights changed.
  bool same_weights = false;
  // An evaluation forward (validation, scoring, tasks): dropless, every assignment computed,
  // whatever the model's dispatch settings (a capacity limit is a training-time rule).
  bool evaluation = false;
};

struct LossStats {
  double loss = 0;  // mean CE + z_loss · mean lse²
  double ce = 0;    // mean CE (nats/token)
  double z = 0;     // mean lse²
  int64_t tokens = 0;
};

// Fully sharded parameters (--shard-params, train/sharded_params.hpp): the model asks for each
// run of its table (Model::param_units) before it reads it and lets go of it after, so a rank
// holds only its own shard of the parameters plus the runs in use.
enum class Pass { Forward, Backward };
class ParamGate {
 public:
  virtual ~ParamGate() = default;
  // Makes the values of unit `u` present; `pass` says which unit comes next (u + 1 forward,
  // u − 1 backward), which a gate may start fetching early.
  virtual void acquire(int u, Pass pass) = 0;
  virtual void release(int u) = 0;
  // The backward's first unit will be u: a gate may start fetching it now.
  virtual void prefetch(int u) { (void)u; }
};

// Training allocates the gradients (as many values as the parameters); inference (evaluation,
// scoring, sampling) has none, which halves the memory of the weights, and refuses backward().
enum class ModelUse { Training, Inference };

template <class T>
class Model {
 public:
  // experts: the expert-parallel group this rank's shard of the experts belongs to (null or one
  // rank: every expert here). See ParamTable and docs/distributed.md.
  Model(const ModelConfig& c, int max_batch, parallel::Comm* experts = nullptr,
        ModelUse use = ModelUse::Training);
  Model(const ModelConfig& c, int max_batch, ModelUse use) : Model(c, max_batch, nullptr, use) {}
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelConfig& config() const { return cfg_; }
  const ParamTable& table() const { return table_; }
  Buffer<T>& params() { return params_; }
  const Buffer<T>& params() const { return params_; }
  Buffer<T>& grads() { return grads_; }
  // Expert parallelism: the weight gradients of this rank's experts from the rows of each source
  // rank of the group (source s at s·expert_region_size(), laid out like the table's expert
  // region); the expert region of grads() stays zero. Empty without expert parallelism.
  Buffer<T>& source_grads() { return source_grads_; }
  int64_t expert_region_size() const { return table_.total() - table_.expert_begin(); }
  parallel::Comm* experts_group() const { return experts_; }
  T* param(const std::string& name) { return params_.data() + table_.at(name).offset; }
  T* grad(const std::string& name) { return grads_.data() + table_.at(name).offset; }
  void init(uint64_t seed) { table_.initialize(params_.data(), seed); }

  // How training forwards dispatch (docs/distributed.md, "Expert transports"): set by the trainer
  // at its start and on a transport switch. An evaluation batch (Batch::evaluation) is dropless
  // whatever they say.
  void set_dispatch(const DispatchSettings& d) { dispatch_ = d; }
  const DispatchSettings& dispatch() const { return dispatch_; }

  // A training step of `tokens` tokens (the global batch) whose micro-batches are the next
  // forwards: a capacity-limited transport counts its capacity and arrival order over all of
  // them (DispatchPlan::begin_step).
  void begin_step(int64_t tokens) {
    for (auto& b : blocks_) b->moe().begin_step(tokens);
  }
  // Validates token ids against the vocabulary (a clear error, not a crash), then runs forward.
  LossStats forward(const Batch& batch);
  // Gradients of the last forward's loss, written (not accumulated) into grads(). A training
  // model only.
  void backward();
  // Called during backward() each time the gradients of a run of the table are final, so their
  // reduction can start while the rest is computed (StepEngine's overlap): the final norm and LM
  // head, then each block from the last to the first, then the embedding. The runs tile
  // [0, table().expert_begin()): an expert-parallel shard's expert slices, which sit apart at the
  // end of the table, are final when backward() returns. An empty function stops the calls.
  void set_gradient_listener(std::function<void(parallel::Range)> f);
  // The runs of the table the model reads one after the other: the embedding (and its norms),
  // each block, then the final norm and LM head (up to expert_begin(): the routed experts of an
  // expert-parallel shard are not among them). The gradient listener's runs are these.
  const std::vector<parallel::Range>& param_units() const { return units_; }
  // Every forward and backward acquires each unit from `gate` before it reads it, and releases
  // it after (null: the parameters are all present). A training forward keeps the last unit for
  // the backward, which starts there. Not offered to decode().
  void set_param_gate(ParamGate* gate) { gate_ = gate; }

  // Incremental decoding through the same modules as forward(): runs `token` at position
  // cache.pos of one document, reading and extending the earlier positions' state in `cache`
  // (built from this model's config), and returns its logits [vocab_size] (cache.logits, valid
  // until the next call). Dropless, like evaluation. The logits equal forward()'s at that position
  // of a row holding the same tokens. It overwrites the modules' saved activations (backward()
  // needs a new forward() first) but not logits() or token_ce().
  const T* decode(int32_t token, DecodeCache<T>& cache);
  // decode() of n sequences at once (batched generation): tokens[i] runs at caches[i]->pos of its
  // own sequence, all n in one forward of n rows, so the projections and experts are n-row
  // products instead of n one-row ones. Each sequence's logits go to its cache's `logits`. The
  // caches must be distinct; 1 <= n <= max_batch · seq_len. Each row's logits equal decode()'s
  // for that sequence alone up to the summation order of the products (tests/eval/test_sample.cpp).
  void decode(const int32_t* tokens, DecodeCache<T>* const* caches, int64_t n);

  // Per-token CE of the last forward ([B·S], label < 0 → 0) and the logits of the last forward.
  const T* token_ce() const { return ce_.data(); }
  const T* logits() const { return logits_.data(); }
  int last_batch() const { return B_; }
  int max_batch() const { return max_batch_; }
  Block<T>& block(int64_t i) { return *blocks_[i]; }
  const Block<T>& block(int64_t i) const { return *blocks_[i]; }

  // Bytes the bf16 copy of the weights holds now (0 in fp32 and for double).
  int64_t weight_copy_bytes() const { return weight_copy_ ? weight_copy_->bytes() : 0; }

  ModelUse use() const { return grads_.size() ? ModelUse::Training : ModelUse::Inference; }

  // Bytes of saved activations and workspace for this model's max_batch (what `plan` reports).
  static int64_t activation_bytes(const ModelConfig& c, int batch);
  // At most the bytes weight_copy_bytes() reaches computing in dtype d (kernels::WeightCopy's
  // bounds over the table's matrices; 0 in fp32 and for double): counted by the memory admission
  // in the compute dtype in force when the model is made, and reported by `plan` for bf16.
  static int64_t weight_copy_bytes_bound(const ParamTable& table, kernels::Dtype d, ModelUse use);

 private:
  DispatchSettings dispatch_;                             // set_dispatch
  std::function<void(parallel::Range)> gradients_ready_;  // set_gradient_listener
  void gradients_ready(parallel::Range r) {
    if (gradients_ready_) gradients_ready_(r);
  }
  std::vector<parallel::Range> units_;  // param_units()
  ParamGate* gate_ = nullptr;           // set_param_gate
  // Unit u's values, present (and in the bf16 copy, when `convert`).
  void acquire(int u, Pass pass, bool convert);
  void release(int u) {
    if (gate_) gate_->release(u);
  }
  static size_t admitted_params(const ParamTable& table, const ModelConfig& c, int max_batch,
                                ModelUse use);

  ModelConfig cfg_;
  parallel::Comm* experts_;
  ParamTable table_;
  int max_batch_, S_, B_ = 0;
  Buffer<T> params_, grads_, source_grads_;
  // float: the bf16 copy of params_ the compute-dtype GEMMs read (null for double).
  std::unique_ptr<kernels::WeightCopy> weight_copy_;
  void refresh_weight_copy() {
    if (weight_copy_) weight_copy_->refresh();
  }
  Binder<T> bind_;
  GatedRMSNorm<T> embed_norm_, final_norm_;
  std::vector<std::unique_ptr<Block<T>>> blocks_;
  Buffer<T> embed_, hs_, hf_, logits_, lse_, ce_;
  Buffer<T> decode_logits_;  // [n, V] of a batched decode, sized at its first use
  Buffer<int32_t> tokens_, labels_, seg_, safe_labels_;
  Arena<T> arena_;
  double inv_count_ = 0;
};

}  // namespace marin
