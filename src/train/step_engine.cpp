#include "train/step_engine.hpp"

#include <fmt/core.h>

#include <cmath>

#include "core/error.hpp"
#include "core/profile.hpp"
#include "core/timer.hpp"
#include "kernels/optim.hpp"
#include "model/expert_shard.hpp"

namespace marin {
namespace {

// Sum of squares of a strided set of tensors, per optimizer group.
struct GroupNorms {
  double sq[4] = {0, 0, 0, 0};
  nlohmann::json json() const {
    return {{"muonh", std::sqrt(sq[0])}, {"adamh", std::sqrt(sq[1])}, {"adam", std::sqrt(sq[2])}};
  }
};

// Over the tensors this rank updates (its optimizer shards: each tensor, or each expert shard of
// one, is updated by exactly one rank), then summed over all ranks.
GroupNorms group_norms(const ParamTable& t, const float* x, const Optimizer& opt,
                       parallel::Comm& comm) {
  GroupNorms g;
  for (auto& p : t.params()) {
    if (!opt.owns(p.offset)) continue;
    g.sq[int(p.group)] += kernels::sum_squares(x + p.offset, p.size);
  }
  comm.allreduce(g.sq, 4);
  return g;
}

// The cross-rank reductions of QB balancing over the data-parallel group.
class CommQBReducer final : public QBReducer {
 public:
  explicit CommQBReducer(parallel::Comm& c) : c_(c) {}
  void reduce_range(QBRange& r) override {
    c_.allreduce(&r.lo, 1, parallel::Op::Min);
    c_.allreduce(&r.max, 1, parallel::Op::Max);
  }
  void reduce_counts(int64_t* counts, int64_t n) override { c_.allreduce(counts, n); }
  int64_t reduce_tokens(int64_t local) override { return c_.allreduce(local); }

 private:
  parallel::Comm& c_;
};

// Copies a micro-batch's routing (logits and α, what QB reads) into the step's log at row `at`.
void log_routing(Routing<float>& log, const Routing<float>& r, int64_t at) {
  std::copy(r.logits.data(), r.logits.data() + r.rows * r.E, log.logits.data() + at * r.E);
  std::copy(r.alpha.data(), r.alpha.data() + r.rows, log.alpha.data() + at);
}

}  // namespace

void StepEngine::check_shape(TrainOptions& o, int N) {
  if (o.batch <= 0) fail("--batch must be positive, got {}", o.batch);
  // The micro-batch is a property of the run (the unit of the exact gradient sum), not of the
  // rank count (a checkpoint from before it was recorded gets the default).
  if (o.micro_batch <= 0) o.micro_batch = default_micro_batch(o.batch);
  const int micro = o.micro_batch;
  if (o.batch % micro != 0) fail("--micro-batch {} does not divide --batch {}", micro, o.batch);
  const int units = o.batch / micro;
  if (units % N != 0)
    fail(
        "--batch {} cannot be split over {} ranks: it is {} micro-batches of {} rows "
        "(--micro-batch), and the rank count must divide that number",
        o.batch, N, units, micro);
}

StepEngine::StepEngine(const TrainOptions& o, parallel::Comm& comm) : opt_(o), comm_(comm) {
  const int N = comm_.size();
  check_shape(opt_, N);
  micro_ = opt_.micro_batch;
  units_ = o.batch / micro_;
  local_units_ = units_ / N;
  if (o.ep < 1 || N % o.ep != 0)
    fail("--ep {} must be at least 1 and divide the number of ranks ({})", o.ep, N);
  if (o.model.num_experts % o.ep != 0)
    fail("--ep {} must divide num_experts ({})", o.ep, o.model.num_experts);
  // The compute dtype, resolved on this CPU (a bf16 request oneDNN cannot run falls back to fp32
  // with one line saying why); set again before each step, as other engines may share the
  // process.
  const kernels::DtypeChoice dt = kernels::resolve_dtype(o.dtype);
  if (!dt.message.empty() && comm_.is_root()) fmt::print(stderr, "{}\n", dt.message);
  dtype_ = dt.dtype;  // in force while this engine computes (kernels::DtypeScope)
  if (o.ep > 1) {
    // Replica d = ranks d·P … d·P + P − 1 (an expert-parallel group: neighbours, like Megatron's
    // EP inside a node); shard j's replicas: ranks j, j + P, ….
    experts_ = comm_.split(comm_.rank() / o.ep, comm_.rank());
    replicas_ = comm_.split(comm_.rank() % o.ep, comm_.rank());
  }
  full_table_ = std::make_unique<ParamTable>(o.model);
  {
    const kernels::DtypeScope in(dtype_);  // the model's memory admission counts its bf16 copy
    model_ = std::make_unique<Model<float>>(o.model, micro_, experts_.get());
  }
  // The regions of the flat buffer and who shares them: the dense tensors all ranks, an expert
  // shard its replicas.
  const ParamTable& table = model_->table();
  const int64_t eb = table.expert_begin();
  const bool sharded = o.shard_params && N > 1;
  std::vector<ParamRegion> regions = {{{0, eb}, &comm_, /*gather=*/!sharded}};
  if (eb < table.total()) regions.push_back({{eb, table.total()}, replicas_.get()});
  optimizer_ = std::make_unique<Optimizer>(table, o.optim, regions, experts_.get());
  if (sharded) {
    shards_ = std::make_unique<ShardedParams>(
        model_->param_units(), optimizer_->regions().front().shards, model_->params(), comm_);
    model_->set_param_gate(shards_.get());
  }
  partials_.resize(size_t(local_units_ - 1));
  for (auto& p : partials_) p.resize(size_t(table.total()));
  expert_partials_.resize(ep() > 1 ? size_t(local_units_ - 1) : 0);
  for (auto& p : expert_partials_) p.resize(model_->source_grads().size());
  // The rollback copy lives in the partials, which are dead while it is.
  std::vector<std::span<float>> spare;
  for (auto* bufs : {&partials_, &expert_partials_})
    for (auto& p : *bufs) spare.emplace_back(p.data(), p.size());
  update_guard_.lend(std::move(spare));
  std::vector<parallel::Segment> segments;
  for (auto& p : table.params()) segments.push_back({p.offset, p.size});
  std::vector<parallel::SumRegion> sums;
  for (auto& r : optimizer_->regions()) sums.push_back({r.where.range, r.where.group, r.shards});
  grad_sum_ = std::make_unique<parallel::ExactSum>(segments, table.total(), sums);
  grad_sum_->set_release_unowned(sharded);
  if (o.overlap && N > 1 && parallel::comm_thread_supported())
    comm_thread_ = std::make_unique<parallel::CommThread>();
  // Expert parallelism: the all-to-alls run on the communication thread too (overlapped with
  // the experts; and the backward's gradient sums queue on it).
  model_->set_dispatch(
      {o.transport, o.waves, N > 1 ? &comm_ : nullptr, ep() > 1 ? comm_thread_.get() : nullptr});
  if (N > 1) qb_reducer_ = std::make_unique<CommQBReducer>(comm_);
  qb_ = QBBalancer(o.model.qb_bins, qb_reducer_.get());
  const ModelConfig& c = o.model;
  routing_log_.resize(size_t(c.num_layers));
  router_acc_.resize(size_t(c.num_layers));
  for (auto& r : routing_log_) {
    r.rows = int64_t(local_units_) * micro_ * c.seq_len, r.E = c.num_experts, r.K = c.top_k;
    r.logits.resize(size_t(r.rows * r.E));
    r.alpha.resize(size_t(r.rows));
  }
  const size_t n = size_t(o.batch) * c.seq_len;
  tokens_.resize(n);
  labels_.resize(n);
  seg_.resize(n);
}

void StepEngine::start_prefault() {
  // Not with --shard-params, which gives pages back; not v under MuonH, which only its Adam
  // groups write (a fresh page read is the shared zero page: no memory).
  if (prefault_ || shards_) return;
  prefault_ = std::make_unique<Prefault>();
  const auto add = [&](Buffer<float>& b) { prefault_->add(b.data(), b.size() * sizeof(float)); };
  add(model_->params()), add(model_->grads()), add(optimizer_->local_m());
  if (opt_.optim.kind != "muonh") add(optimizer_->local_v());
  for (auto* bufs : {&partials_, &expert_partials_})
    for (auto& b : *bufs) add(b);
  prefault_->start();
}

StepEngine::~StepEngine() = default;

void StepEngine::init(uint64_t seed) {
  model_->init(seed);
  if (shards_) shards_->release_all();  // each rank keeps its run
}

void StepEngine::load_full_state(const float* params, const float* m, const float* v) {
  const ParamTable& local = model_->table();
  take_shard(*full_table_, params, local, model_->params().data());
  if (shards_) shards_->release_all();
  if (!m) return;
  Buffer<float> lm(size_t(local.total())), lv(size_t(local.total()));
  take_shard(*full_table_, m, local, lm.data());
  take_shard(*full_table_, v, local, lv.data());
  optimizer_->load_state(lm.data(), lv.data());
}

FullState StepEngine::gather_full_state() {
  FullState s;
  s.params = model_->params().data();
  if (comm_.size() == 1) {  // the optimizer's one shard is the whole table, in its order
    MARIN_CHECK(int64_t(optimizer_->local_m().size()) == full_table_->total(),
                "one process's optimizer state is not the whole table");
    s.m = optimizer_->local_m().data(), s.v = optimizer_->local_v().data();
    return s;
  }
  optimizer_->gather_state(s.gathered_m, s.gathered_v);  // collective: on each group's rank 0
  // --shard-params: rank 0 assembles the dense region (the other ranks hold their runs only).
  Buffer<float> local = shards_ ? shards_->gather_on_root() : Buffer<float>();
  if (shards_ && comm_.is_root()) s.params = local.data();
  // Expert parallelism: the first replica's ranks (each its shard's region root) assemble the
  // full stacks on rank 0.
  if (ep() > 1 && comm_.rank() < ep()) {
    const size_t n = comm_.is_root() ? size_t(full_table_->total()) : 0;
    Buffer<float> full_m(n), full_v(n);
    s.gathered.resize(n);
    gather_shards(model_->table(), s.params, *full_table_, s.gathered.data(), *experts_);
    gather_shards(model_->table(), s.gathered_m.data(), *full_table_, full_m.data(), *experts_);
    gather_shards(model_->table(), s.gathered_v.data(), *full_table_, full_v.data(), *experts_);
    s.params = s.gathered.data();
    std::swap(s.gathered_m, full_m), std::swap(s.gathered_v, full_v);
  } else if (shards_ && comm_.is_root()) {
    s.gathered = std::move(local);  // s.params points into it
  }
  s.m = s.gathered_m.data(), s.v = s.gathered_v.data();
  return s;
}

int64_t StepEngine::full_element_base(const ParamInfo& p) const {
  // Local element i of tensor p is element base + i of the full tensor (take_shard's rule).
  const ParamInfo& f = full_table_->at(p.name);
  return (p.routed_expert ? p.first_expert * (f.size / f.num_mats) : 0) - p.offset;
}

namespace {

// Calls f(p, b, e) for every tensor p of `table` whose local elements [b, e) lie in `run` (of the
// local flat buffer): what the writer of a sharded checkpoint stores and a resuming rank reads.
template <class F>
void for_each_overlap(const ParamTable& table, parallel::Range run, F&& f) {
  for (const ParamInfo& p : table.params()) {
    const int64_t b = std::max(run.begin, p.offset), e = std::min(run.end, p.offset + p.size);
    if (b < e) f(p, b, e);
  }
}

}  // namespace

std::vector<StatePiece> StepEngine::state_pieces() {
  std::vector<StatePiece> out;
  const float* params = model_->params().data();
  for (const Optimizer::Region& r : optimizer_->regions()) {
    const parallel::Range own = r.own();
    const float* m = optimizer_->local_m().data() + r.state_at;  // from own.begin on
    const float* v = optimizer_->local_v().data() + r.state_at;
    for_each_overlap(model_->table(), own, [&](const ParamInfo& p, int64_t b, int64_t e) {
      const int64_t at = full_element_base(p);
      out.push_back({p.name, at + b, at + e, params + b, m + (b - own.begin), v + (b - own.begin)});
    });
  }
  return out;
}

void StepEngine::load_sharded_state(const std::string& dir) {
  const ParamTable& local = model_->table();
  std::vector<StateTarget> want;
  // The tensors' elements inside `run`: x[i] receives local element run.begin + i of whichever of
  // params, m, v x is.
  auto add = [&](parallel::Range run, float* params, float* m, float* v) {
    for_each_overlap(local, run, [&](const ParamInfo& p, int64_t b, int64_t e) {
      const int64_t at = full_element_base(p), skip = b - run.begin;
      auto from = [skip](float* x) { return x ? x + skip : nullptr; };
      want.push_back({p.name, at + b, at + e, from(params), from(m), from(v)});
    });
  };
  const parallel::Range dense{0, local.expert_begin()},
      experts{local.expert_begin(), local.total()};
  const parallel::Range held = shards_ ? shards_->own() : dense;  // of the dense parameters
  float* params = model_->params().data();
  add(held, params + held.begin, nullptr, nullptr);
  add(experts, params + experts.begin, nullptr, nullptr);
  for (const Optimizer::Region& r : optimizer_->regions())
    add(r.own(), nullptr, optimizer_->local_m().data() + r.state_at,
        optimizer_->local_v().data() + r.state_at);
  marin::load_sharded_state(dir, *full_table_, want);
  if (shards_) shards_->release_all();
}

LossStats StepEngine::forward_backward(bool backward) {
  const int64_t S = opt_.model.seq_len;
  // Every rank normalises by the global batch's scored tokens (it holds the whole batch).
  int64_t scored = 0;
  for (int32_t l : labels_) scored += l >= 0;
  if (backward) model_->begin_step(int64_t(opt_.batch) * S);  // capacity over the whole step
  LossStats sum;
  for (int w = 0; w < local_units_; ++w) {
    // Wave w: rank r computes micro-batch w·N + r (a wave is in row order across the ranks).
    const int64_t unit = int64_t(w) * comm_.size() + comm_.rank();
    const size_t at = size_t(unit * micro_ * S);
    // --shard-params: the forward's gathers too on the communication thread, one unit ahead,
    // where the forward makes no MPI call of its own (dropless; the capacity and pooled rules
    // number arrivals over the ranks).
    const bool ahead = shards_ && comm_thread_ &&
                       (!backward || model_->dispatch().transport == Transport::Dropless);
    if (ahead) shards_->set_thread(comm_thread_.get());
    const LossStats s = model_->forward({micro_, tokens_.data() + at, labels_.data() + at,
                                         seg_.data() + at, scored, w > 0,
                                         /*evaluation=*/!backward});
    if (ahead) shards_->set_thread(nullptr);
    sum.loss += s.loss, sum.ce += s.ce, sum.z += s.z;
    if (!backward) continue;
    for (int64_t l = 0; l < opt_.model.num_layers; ++l) {
      const auto& moe = model_->block(l).moe();
      log_routing(routing_log_[size_t(l)], moe.router().routing(), int64_t(w) * micro_ * S);
      router_acc_[size_t(l)].add(moe.router().routing(), moe.plan());
    }
    const bool overlap = comm_thread_ && w + 1 == local_units_;
    if (overlap) {
      // Each block's exact sum starts on the communication thread once the last micro-batch's
      // backward has finished it (the earlier micro-batches' partials are complete).
      parts_ = gradient_parts();
      model_->set_gradient_listener([this](parallel::Range r) {
        if (r.begin == 0) inject_nan_grad();  // the testing aid, before element 0 is summed
        comm_thread_->submit([this, r] {
          grad_sum_->sum_range(r, parts_, units_, comm_);
          release_gradients(r);
        });
      });
      if (shards_) shards_->set_thread(comm_thread_.get());  // gathers beside the sums
    }
    model_->backward();
    if (overlap) {
      model_->set_gradient_listener({});
      // An expert-parallel shard's expert slices, final now (each source's part at the shard).
      const parallel::Range experts{model_->table().expert_begin(), model_->table().total()};
      if (experts.end > experts.begin)
        comm_thread_->submit(
            [this, experts] { grad_sum_->sum_range(experts, parts_, units_, comm_); });
      if (shards_) shards_->set_thread(nullptr);
      exposed_seconds_ = comm_thread_->wait();  // before this thread's next MPI call
    }
    if (w + 1 < local_units_) {
      const Buffer<float>& g = model_->grads();
      kernels::copy(g.data(), partials_[size_t(w)].data(), int64_t(g.size()));
      if (ep() > 1) {
        const Buffer<float>& e = model_->source_grads();
        kernels::copy(e.data(), expert_partials_[size_t(w)].data(), int64_t(e.size()));
      }
    }
  }
  double v[3] = {sum.loss, sum.ce, sum.z};
  comm_.allreduce(v, 3);
  sum.loss = v[0], sum.ce = v[1], sum.z = v[2];
  sum.tokens = scored;
  return sum;
}

std::string StepEngine::check_update(int64_t step) {
  // Testing aids: poison what this step's update wrote, on the last rank only (the decision to
  // roll back must still be taken by every rank).
  std::vector<UpdateGuard::Owned> owned;
  for (auto& r : optimizer_->regions()) owned.push_back({r.own(), r.state_at});
  const parallel::Range own = owned.front().range;
  if (comm_.rank() == comm_.size() - 1 && own.end > own.begin) {
    for (int64_t s : opt_.inject_nan_param_steps)
      if (s == step) model_->params()[size_t(own.begin)] = std::nanf("");
    for (int64_t s : opt_.inject_inf_state_steps)
      if (s == step) optimizer_->local_v()[0] = INFINITY;
  }
  return UpdateGuard::check(model_->table(), model_->params().data(), optimizer_->local_m().data(),
                            optimizer_->local_v().data(), owned, comm_);
}

void StepEngine::inject_nan_grad() {
  for (int64_t bad : opt_.inject_nan_grad_steps)
    if (bad == step_now_ && comm_.is_root()) model_->grads()[0] = std::nanf("");
}

void StepEngine::release_gradients(parallel::Range r) {
  if (!shards_) return;
  const parallel::Range own = shards_->own();
  model_->grads().release_pages_except(size_t(r.begin), size_t(r.end), size_t(own.begin),
                                       size_t(own.end));
}

std::vector<parallel::Partial> StepEngine::gradient_parts() {
  // Under expert parallelism a micro-batch's gradient is in pieces: the dense tensors where it
  // was computed, each expert shard's part at the shard (one piece per source rank).
  const ParamTable& table = model_->table();
  const parallel::Range dense{0, table.expert_begin()},
      experts{table.expert_begin(), table.total()};
  std::vector<parallel::Partial> parts;
  for (int w = 0; w < local_units_; ++w) {
    const bool last = w + 1 == local_units_;
    parts.push_back({last ? model_->grads().data() : partials_[size_t(w)].data(), dense});
    if (ep() == 1) continue;
    const float* by_source =
        last ? model_->source_grads().data() : expert_partials_[size_t(w)].data();
    for (int src = 0; src < ep(); ++src)
      parts.push_back({by_source + src * experts.size(), experts});
  }
  return parts;
}

bool StepEngine::reduce_gradients(StepResult& out) {
  // The exact sum of every micro-batch's gradient, each rank receiving the tensors it updates;
  // the optimizer all-gathers the updated parameters. With the communication thread the sums
  // ran during the backward, and what remains is the rounding of this rank's part: comm_seconds
  // is then the communication the backward did not hide (the wait for the thread) and that.
  Timer tc;
  Buffer<float>& grads = model_->grads();
  bool finite = false;
  if (comm_thread_) {
    finite = grad_sum_->finish(grads.data());
    out.comm_seconds = exposed_seconds_ + tc.seconds();
    out.comm_overlapped = true;
  } else {
    inject_nan_grad();
    finite = grad_sum_->reduce(gradient_parts(), units_, comm_, grads.data());
    release_gradients({0, model_->table().expert_begin()});
    out.comm_seconds = tc.seconds();
  }
  // --shard-params: the gathers of the forward and backward that the compute waited for.
  if (shards_) out.comm_seconds += shards_->take_seconds();
  // Per rank: the int64 reduce-scatter and the fp32 all-gather each move about the whole region;
  // --shard-params gathers the dense region twice a micro-batch (its forward and backward).
  for (auto& r : optimizer_->regions())
    if (r.where.group && r.where.group->size() > 1) {
      const int64_t gathers = r.where.gather ? 1 : 2 * local_units_;
      out.comm_bytes += int64_t(sizeof(int64_t) + gathers * sizeof(float)) * r.where.range.size();
    }
  for (int64_t l = 0; l < opt_.model.num_layers; ++l) {
    const DispatchTraffic a2a = model_->block(l).moe().take_traffic();
    out.all_to_all_seconds += a2a.seconds;
    out.all_to_all_bytes += a2a.bytes;
  }
  return finite;
}

void StepEngine::update(StepResult& out, int64_t step) {
  const ParamTable& table = model_->table();
  Buffer<float>& grads = model_->grads();
  nlohmann::json& m = out.metrics;
  const GroupNorms gn = group_norms(table, grads.data(), *optimizer_, comm_);
  // Router health of this step (before the bias moves), over the global batch.
  std::vector<double> sums;
  for (auto& acc : router_acc_) sums.insert(sums.end(), acc.sums(), acc.sums() + acc.size());
  comm_.allreduce(sums.data(), int64_t(sums.size()));
  nlohmann::json routers = nlohmann::json::array();
  size_t at = 0;
  for (auto& acc : router_acc_) {
    std::copy(sums.begin() + long(at), sums.begin() + long(at + size_t(acc.size())), acc.sums());
    at += size_t(acc.size());
    routers.push_back(to_json(acc.finish()));
  }
  m["router"] = routers;
  // --shard-params: the runs this rank holds (its dense run, its expert slices).
  std::vector<parallel::Range> kept;
  if (shards_) kept = {shards_->own(), {table.expert_begin(), table.total()}};
  update_guard_.save(model_->params(), optimizer_->local_m(), optimizer_->local_v(), kept);
  optimizer_->step(model_->params().data(), grads.data(), step);
  out.comm_seconds += optimizer_->last_gather_seconds();
  if (opt_.qb)  // bias for the next step's forward pass, from the whole step's routing
    for (int64_t l = 0; l < opt_.model.num_layers; ++l)
      qb_.update_layer(routing_log_[size_t(l)], model_->block(l).moe().router().bias());
  m["grad_norm"] = gn.json();
  if (const std::string bad = check_update(step); !bad.empty()) {
    update_guard_.restore(model_->params(), optimizer_->local_m(), optimizer_->local_v());
    out.finite = false;
    m["skipped"] = fmt::format("non-finite update ({}), rolled back", bad);
  } else {
    m["param_norm"] = group_norms(table, model_->params().data(), *optimizer_, comm_).json();
  }
}

StepResult StepEngine::step(BatchSource& data, int64_t step) {
  const ModelConfig& c = opt_.model;
  StepResult out;
  const kernels::DtypeScope dtype(dtype_);
  {
    const profile::Scope ps("data.next");
    data.next(opt_.batch, tokens_.data(), labels_.data(), seg_.data());
  }
  for (auto& acc : router_acc_) acc.reset(c.num_experts, c.top_k);
  for (int64_t l = 0; l < c.num_layers; ++l) model_->block(l).moe().take_traffic();  // validation
  step_now_ = step;
  if (shards_) shards_->take_seconds();  // not a validation's gathers since the last step
  const LossStats s = forward_backward(/*backward=*/true);
  bool grads_finite = false;
  {
    const profile::Scope ps("gradients.reduce");
    grads_finite = reduce_gradients(out);
  }
  out.loss = s;
  out.finite = grads_finite && std::isfinite(s.loss);
  nlohmann::json& m = out.metrics;
  // "step" counts the steps done with this one (1-based), as the CLI, checkpoints (step-N) and
  // the report do; `step`, the optimizer's and schedule's index, is 0-based.
  m = {{"step", step + 1},
       {"loss", s.loss},
       {"ce", s.ce},
       {"z", s.z},
       {"tokens", s.tokens},
       {"world_size", comm_.size()},
       {"dtype", kernels::dtype_name(dtype_)}};
  if (ep() > 1) m["ep"] = ep();
  if (shards_) m["shard_params"] = true;
  const LearningRates lr = optimizer_->rates(step);
  m["lr"] = {{"muonh", lr.muonh}, {"adam", lr.adam}};
  if (out.finite) {
    const profile::Scope ps("optimizer.update");
    update(out, step);
  } else
    m["skipped"] = "non-finite loss or gradient, update skipped";
  return out;
}

LossStats StepEngine::evaluate(BatchSource& data) {
  const kernels::DtypeScope dtype(dtype_);
  data.next(opt_.batch, tokens_.data(), labels_.data(), seg_.data());
  return forward_backward(/*backward=*/false);  // an evaluation: dropless
}

}  // namespace marin
