// The local token dispatcher: gather, weighted combine, and their duals. See token_dispatcher.hpp.
#include "model/moe/token_dispatcher.hpp"

#include <algorithm>

#include "core/error.hpp"
#include "core/timer.hpp"
#include "kernels/moe.hpp"
#include "parallel/comm.hpp"
#include "parallel/comm_thread.hpp"

namespace marin {

template <class T>
LocalDispatcher<T>::LocalDispatcher(const ModelConfig& c, i64 max_rows)
    : l_(c.latent_dim), K_(c.top_k) {
  plan_.reserve(max_rows, c.num_experts, c.top_k);
  xg_.resize(size_t(max_rows * c.top_k * l_));
  yg_.resize(size_t(max_rows * c.top_k * l_));
}

template <class T>
ExpertRows<T> LocalDispatcher<T>::dispatch(const Routing<T>& r, const T* z, i64 rows,
                                           const Dispatch& d, double capacity_factor) {
  rows_ = rows;
  plan_.build(r.expert.data(), rows, d, capacity_factor);
  const i64 kept = plan_.kept, l = l_;
  kernels::moe_permute(z, plan_.row_token.data(), xg_.data(), kept, l);
  handed_ = false;
  return {plan_.offsets.data(), plan_.E, kept, xg_.data(), yg_.data()};
}

template <class T>
void LocalDispatcher<T>::sum_slots(const T* grouped, const T* w, T* out) const {
  kernels::moe_combine(grouped, w, plan_.slot_row.data(), out, rows_, K_, l_);
}

template <class T>
void LocalDispatcher<T>::combine(const Routing<T>& r, T* R) {
  sum_slots(yg_.data(), r.weight.data(), R);  // R_t = Σ_k keep·w_k·FFN_{e_k}(Z_t)
}

template <class T>
const T* LocalDispatcher<T>::combine_backward(const Routing<T>& r, const T* dR, T* dw,
                                              Arena<T>& arena) {
  const i64 l = l_, K = K_;
  T* dyg = arena.take(plan_.kept * l + 1);
  kernels::moe_combine_bwd(dR, yg_.data(), r.weight.data(), plan_.slot_row.data(), dyg, dw, rows_,
                           K, l);
  handed_ = false;
  return dyg;
}

template <class T>
bool LocalDispatcher<T>::next_part(i64& first, i64& last) {
  if (handed_) return false;
  handed_ = true, first = 0, last = plan_.E;
  return true;
}

template <class T>
void LocalDispatcher<T>::dispatch_backward(const T* dxg, T* dz) {
  sum_slots(dxg, nullptr, dz);  // the dual of the gather: add each row back to its token
}

template <class T>
AllToAllDispatcher<T>::AllToAllDispatcher(const ModelConfig& c, i64 max_rows, parallel::Comm& ep)
    : ep_(ep), l_(c.latent_dim), E_loc_(c.num_experts / ep.size()), local_(c, max_rows) {
  const size_t P = size_t(ep.size());
  send_counts_.resize(P * size_t(E_loc_));
  recv_counts_.resize(P * size_t(E_loc_));
  send_elems_.resize(P), send_displs_.resize(P), recv_elems_.resize(P), recv_displs_.resize(P);
  // The counts exchange: E_loc per peer, the same every forward.
  count_n_.assign(P, E_loc_);
  for (size_t q = 0; q < P; ++q) count_at_.push_back(int64_t(q) * E_loc_);
  blocks_.resize(P * size_t(E_loc_) + 1);
  tickets_.resize(kMaxSteps), step_send_.resize(kMaxSteps), step_recv_.resize(kMaxSteps);
  const i64 received = max_received(c, max_rows, ep.size());
  received_x_.resize(received * l_);
  received_y_.resize(received * l_);
  returned_.resize(max_rows * c.top_k * l_);
}

template <class T>
void AllToAllDispatcher<T>::run(std::function<void()> job) {
  if (!thread_) {
    const Timer t;
    job();
    traffic_.seconds += t.seconds();
    return;
  }
  // Waits for the jobs before it too (the backward's gradient sums): time the compute waited.
  traffic_.seconds += thread_->wait(thread_->submit(std::move(job)));
}

template <class T>
void AllToAllDispatcher<T>::exchange(const T* send, T* recv, bool forward) {
  MARIN_CHECK(part_ == parts_, "all-to-all: an exchange started before the experts took the last");
  const int64_t *sc = send_elems_.data(), *sd = send_displs_.data();
  const int64_t *rc = recv_elems_.data(), *rd = recv_displs_.data();
  if (!forward) std::swap(sc, rc), std::swap(sd, rd);
  const int P = ep_.size(), me = ep_.rank();
  // seam: adds up the bytes sent (integers)
  for (int q = 0; q < P; ++q)
    if (q != me) traffic_.bytes += sc[q] * int64_t(sizeof(T));
  auto in_one_go = [=, this] { run([=, this] { ep_.alltoallv(send, sc, sd, recv, rc, rd); }); };
  if (!forward) return in_one_go();     // back to the senders: nothing computes meanwhile
  part_ = 0, parts_ = thread_ ? P : 1;  // the parts next_part() hands to the experts
  if (parts_ == 1) return in_one_go();
  // Towards the owners: this rank's own rows at once (the experts start on them), then the other
  // sources in steps. A source at offset s sends to rank r + s (mod P) and receives from rank
  // r − s; step g covers a run of offsets, so each step is an all-to-all with those messages only
  // and the steps match on every rank of the group.
  std::copy_n(send + sd[me], sc[me], recv + rd[me]);
  steps_ = std::min(P - 1, kMaxSteps);
  for (int g = 0; g < steps_; ++g) {
    std::vector<int64_t>&n_send = step_send_[size_t(g)], &n_recv = step_recv_[size_t(g)];
    n_send.assign(size_t(P), 0), n_recv.assign(size_t(P), 0);
    for (int o = first_offset(g); o < first_offset(g + 1); ++o) {
      const int to = (me + o) % P, from = (me - o + P) % P;
      n_send[size_t(to)] = sc[to], n_recv[size_t(from)] = rc[from];
    }
    const int64_t *ns = n_send.data(), *nr = n_recv.data();
    tickets_[size_t(g)] = thread_->submit([=, this] { ep_.alltoallv(send, ns, sd, recv, nr, rd); });
  }
}

template <class T>
int AllToAllDispatcher<T>::first_offset(int g) const {
  return 1 + int(int64_t(g) * (ep_.size() - 1) / steps_);
}

template <class T>
bool AllToAllDispatcher<T>::next_part(i64& first, i64& last) {
  if (part_ == parts_) return false;
  const int P = ep_.size(), o = part_++;
  if (parts_ == 1) {
    first = 0, last = i64(P) * E_loc_;
    return true;
  }
  // Part o: the blocks of source r − o (mod P), once the step that brings them has run.
  int g = 0;
  while (o > 0 && o >= first_offset(g + 1)) ++g;
  if (o > 0) traffic_.seconds += thread_->wait(tickets_[size_t(g)]);
  const i64 source = (ep_.rank() - o + P) % P;
  first = source * E_loc_, last = (source + 1) * E_loc_;
  return true;
}

template <class T>
ExpertRows<T> AllToAllDispatcher<T>::dispatch(const Routing<T>& r, const T* z, i64 rows,
                                              const Dispatch& d, double capacity_factor) {
  // 1. The local plan: kept assignments grouped by global expert, hence by owner rank.
  MARIN_CHECK(part_ == parts_, "all-to-all: a dispatch before the experts took the last");
  sent_ = local_.dispatch(r, z, rows, d, capacity_factor);
  thread_ = d.thread;
  const int P = ep_.size();
  const int64_t* off = sent_.offsets;
  for (i64 e = 0; e < P * E_loc_; ++e) send_counts_[size_t(e)] = off[e + 1] - off[e];
  // 2. Counts: each owner learns how many rows of each of its experts every sender has.
  run([this] {
    ep_.alltoallv(send_counts_.data(), count_n_.data(), count_at_.data(), recv_counts_.data(),
                  count_n_.data(), count_at_.data());
  });
  traffic_.bytes += (P - 1) * E_loc_ * int64_t(sizeof(int64_t));
  // 3. Rows: block (source s, local expert e) arrives at blocks_[s·E_loc + e], source-major.
  blocks_[0] = 0;
  for (size_t b = 0; b < recv_counts_.size(); ++b) blocks_[b + 1] = blocks_[b] + recv_counts_[b];
  for (int q = 0; q < P; ++q) {
    const size_t first = size_t(q) * size_t(E_loc_), last = first + size_t(E_loc_);
    send_displs_[size_t(q)] = off[first] * l_;
    send_elems_[size_t(q)] = (off[last] - off[first]) * l_;
    recv_displs_[size_t(q)] = blocks_[first] * l_;
    recv_elems_[size_t(q)] = (blocks_[last] - blocks_[first]) * l_;
  }
  const i64 received = blocks_.back();
  MARIN_CHECK(received * l_ <= i64(received_x_.size()), "all-to-all: {} rows exceed the workspace",
              received);
  exchange(sent_.input, received_x_.data(), /*forward=*/true);
  return {blocks_.data(), i64(P) * E_loc_, received, received_x_.data(), received_y_.data()};
}

template <class T>
void AllToAllDispatcher<T>::combine(const Routing<T>& r, T* R) {
  // The outputs go back to their sender, in its order.
  exchange(received_y_.data(), sent_.output, /*forward=*/false);
  local_.combine(r, R);
}

template <class T>
const T* AllToAllDispatcher<T>::combine_backward(const Routing<T>& r, const T* dR, T* dw,
                                                 Arena<T>& arena) {
  const T* dy = local_.combine_backward(r, dR, dw, arena);
  // The experts' outputs are not needed any more: their buffer receives the output gradient.
  exchange(dy, received_y_.data(), /*forward=*/true);
  return received_y_.data();
}

template <class T>
void AllToAllDispatcher<T>::dispatch_backward(const T* dinput, T* dz) {
  exchange(dinput, returned_.data(), /*forward=*/false);
  local_.dispatch_backward(returned_.data(), dz);
}

template <class T>
DispatchTraffic AllToAllDispatcher<T>::take_traffic() {
  const auto t = traffic_;
  traffic_ = {};
  return t;
}

template class LocalDispatcher<float>;
template class LocalDispatcher<double>;
template class AllToAllDispatcher<float>;
template class AllToAllDispatcher<double>;

}  // namespace marin
