// The communicator and the pieces built on it, run under real mpirun (np 1, 2 and 4; see
// tests/CMakeLists.txt): every collective against what it must compute, the ZeRO-1 optimizer
// shards (a partition of the table; gather/load round trip), and the capacity-limited dispatcher
// over a group dropping exactly what one process drops for the same routing; expert parallelism:
// the pooled transport's drops with S > 1 shards against a brute-force simulation of its rule,
// the expert shards' layout round trip, and a whole expert-parallel model (all-to-all dispatch,
// zero-row experts, a skewed router) against the one-process model, bit for bit.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <numeric>
#include <thread>

#include "model/config.hpp"
#include "model/expert_shard.hpp"
#include "model/model.hpp"
#include "model/moe/drop_rule.hpp"
#include "model/params.hpp"
#include "model/pooled_capacity.hpp"
#include "optim/optimizer.hpp"
#include "parallel/comm.hpp"
#include "parallel/comm_thread.hpp"
#include "parallel/exact_sum.hpp"

using namespace marin;
using parallel::Comm;

namespace {
Comm& W() {
  return parallel::world();
}
}  // namespace

TEST(Comm, LaunchedByMpirunIsMpi) {
  EXPECT_EQ(W().backend(), "mpi");
  EXPECT_GE(W().size(), 1);
  EXPECT_LT(W().rank(), W().size());
}

TEST(Comm, AllreduceSumMaxMinInPlace) {
  const int r = W().rank(), n = W().size();
  std::vector<double> x(1000);
  for (size_t i = 0; i < x.size(); ++i) x[i] = double(r + 1) * double(i);
  W().allreduce(x.data(), int64_t(x.size()));
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(x[i], double(n * (n + 1) / 2) * double(i));
  EXPECT_EQ(W().allreduce(int64_t(r), parallel::Op::Max), n - 1);
  EXPECT_EQ(W().allreduce(float(r) + 0.5f, parallel::Op::Min), 0.5f);
}

TEST(Comm, BroadcastString) {
  std::string s = W().is_root() ? std::string(5000, 'x') + "end" : "";
  W().broadcast(s);
  EXPECT_EQ(s.size(), 5003u);
  EXPECT_EQ(s.substr(5000), "end");
}

// Strings of every rank, of different lengths (rank 1's empty), with a zero byte inside.
TEST(Comm, AllgatherStrings) {
  const int r = W().rank();
  const std::string mine = r == 1 ? "" : std::string(size_t(3 * r + 1), char('a' + r)) + '\0' + "z";
  const std::vector<std::string> all = W().allgather(mine);
  ASSERT_EQ(all.size(), size_t(W().size()));
  for (int q = 0; q < W().size(); ++q)
    EXPECT_EQ(all[size_t(q)],
              q == 1 ? "" : std::string(size_t(3 * q + 1), char('a' + q)) + '\0' + "z");
}

TEST(Comm, AllgathervGathervAndInPlace) {
  const int r = W().rank(), n = W().size();
  std::vector<int64_t> counts(static_cast<size_t>(n)), displs(static_cast<size_t>(n));
  int64_t total = 0;
  for (int q = 0; q < n; ++q) counts[size_t(q)] = q + 1, displs[size_t(q)] = total, total += q + 1;
  std::vector<float> mine(size_t(r + 1), float(r)), all(size_t(total), -1);
  W().allgatherv(mine.data(), r + 1, all.data(), counts.data(), displs.data());
  for (int q = 0; q < n; ++q)
    for (int k = 0; k <= q; ++k) EXPECT_EQ(all[size_t(displs[size_t(q)] + k)], float(q));
  // In place: the contribution already sits in the receive buffer.
  std::vector<float> inplace(size_t(total), -1);
  for (int k = 0; k <= r; ++k) inplace[size_t(displs[size_t(r)] + k)] = float(10 * r);
  W().allgatherv(inplace.data() + displs[size_t(r)], r + 1, inplace.data(), counts.data(),
                 displs.data());
  for (int q = 0; q < n; ++q) EXPECT_EQ(inplace[size_t(displs[size_t(q)])], float(10 * q));
  std::vector<float> root(W().is_root() ? size_t(total) : 0);
  W().gatherv(mine.data(), r + 1, root.data(), counts.data(), displs.data());
  if (W().is_root()) {
    for (int q = 0; q < n; ++q) EXPECT_EQ(root[size_t(displs[size_t(q)])], float(q));
  }
}

TEST(Comm, AlltoallvWithEmptyMessages) {
  const int r = W().rank(), n = W().size();
  // Rank r sends q elements (value 100r + q) to rank q: rank 0 receives nothing.
  std::vector<int64_t> sc(static_cast<size_t>(n)), sd(static_cast<size_t>(n)),
      rc(static_cast<size_t>(n)), rd(static_cast<size_t>(n));
  std::vector<int32_t> send;
  for (int q = 0; q < n; ++q) {
    sc[size_t(q)] = q, sd[size_t(q)] = int64_t(send.size());
    for (int k = 0; k < q; ++k) send.push_back(100 * r + q);
  }
  int64_t total = 0;
  for (int q = 0; q < n; ++q) rc[size_t(q)] = r, rd[size_t(q)] = total, total += r;
  std::vector<int32_t> recv(size_t(total) + 1, -1);
  W().alltoallv(send.data(), sc.data(), sd.data(), recv.data(), rc.data(), rd.data());
  for (int q = 0; q < n; ++q)
    for (int k = 0; k < r; ++k) EXPECT_EQ(recv[size_t(rd[size_t(q)] + k)], 100 * q + r);
}

TEST(Comm, ReduceScatterAndExscan) {
  const int r = W().rank(), n = W().size();
  std::vector<int64_t> counts(static_cast<size_t>(n));
  for (int q = 0; q < n; ++q) counts[size_t(q)] = 3 + q;
  const int64_t total = std::accumulate(counts.begin(), counts.end(), int64_t(0));
  std::vector<float> x(static_cast<size_t>(total));
  for (int64_t i = 0; i < total; ++i) x[size_t(i)] = float(i * (r + 1));
  W().reduce_scatter(x.data(), counts.data());
  int64_t begin = 0;
  for (int q = 0; q < r; ++q) begin += counts[size_t(q)];
  for (int64_t i = begin; i < begin + counts[size_t(r)]; ++i)
    EXPECT_EQ(x[size_t(i)], float(i * n * (n + 1) / 2));
  int64_t e[2] = {r + 1, 1};
  W().exscan_sum(e, 2);
  EXPECT_EQ(e[0], int64_t(r) * (r + 1) / 2);
  EXPECT_EQ(e[1], r);
}

// The exact sum in ranges on a communication thread (StepEngine's overlap), the ranges in the
// backward's order (last first), gives reduce()'s bits; a NaN in one range fails the whole sum on
// every rank.
TEST(ExactSum, RangesOnACommThreadEqualOneReduce) {
  const int r = W().rank(), n = W().size();
  // Five tensors with gaps between them (the table's 16-float alignment).
  const std::vector<parallel::Segment> segs = {{0, 40}, {48, 7}, {64, 100}, {176, 33}, {224, 61}};
  const int64_t total = 285;
  std::vector<parallel::Range> shards;
  for (int q = 0; q < n; ++q) shards.push_back(parallel::split_evenly(total, n, q));
  const std::vector<parallel::SumRegion> regions = {{{0, total}, &W(), shards}};
  std::vector<std::vector<float>> data(2, std::vector<float>(size_t(total), 0.f));
  for (size_t u = 0; u < 2; ++u)
    for (const auto& g : segs)
      for (int64_t i = g.offset; i < g.offset + g.size; ++i)
        data[u][size_t(i)] = std::sin(float(i * 7 + int64_t(u) * 3 + r * 11)) * float(1 + i % 5);
  const std::vector<parallel::Partial> parts = {{data[0].data(), {0, total}},
                                                {data[1].data(), {0, total}}};
  const std::vector<parallel::Range> ranges = {{176, total}, {48, 176}, {0, 48}};
  std::vector<float> whole(static_cast<size_t>(total)), pieces(static_cast<size_t>(total));
  parallel::ExactSum a(segs, total, regions), b(segs, total, regions);
  ASSERT_TRUE(a.reduce(parts, 2 * n, W(), whole.data()));
  {
    parallel::CommThread thread;
    for (const parallel::Range& g : ranges)
      thread.submit([&, g] { b.sum_range(g, parts, 2 * n, W()); });
    thread.wait();
  }
  ASSERT_TRUE(b.finish(pieces.data()));
  for (int64_t i = shards[size_t(r)].begin; i < shards[size_t(r)].end; ++i)
    EXPECT_EQ(whole[size_t(i)], pieces[size_t(i)]) << i;
  // A NaN on the last rank in the middle range: every rank's finish() says so.
  const float original = data[1][70];
  if (r == n - 1) data[1][70] = std::nanf("");
  for (const parallel::Range& g : ranges) b.sum_range(g, parts, 2 * n, W());
  EXPECT_FALSE(b.finish(pieces.data()));
  data[1][70] = original;
  for (const parallel::Range& g : ranges) b.sum_range(g, parts, 2 * n, W());
  EXPECT_TRUE(b.finish(pieces.data()));  // the next step starts clean
  // reduce() alike (in one process it sums chunk by chunk without the accumulator).
  if (r == n - 1) data[1][70] = std::nanf("");
  std::vector<float> again = whole;
  EXPECT_FALSE(a.reduce(parts, 2 * n, W(), again.data()));
  data[1][70] = original;
  ASSERT_TRUE(a.reduce(parts, 2 * n, W(), again.data()));
  for (int64_t i = shards[size_t(r)].begin; i < shards[size_t(r)].end; ++i)
    EXPECT_EQ(whole[size_t(i)], again[size_t(i)]) << i;
}

// wait(ticket) returns once that job and every job before it have run, not the ones after
// (--shard-params waits for one unit's gather while the later gradient sums go on).
TEST(CommThread, ATicketWaitsForItsJobAndTheOnesBefore) {
  parallel::CommThread thread;
  std::atomic<int> done{0};
  std::atomic<bool> go{false};
  const uint64_t first = thread.submit([&] { ++done; });
  const uint64_t second = thread.submit([&] { ++done; });
  thread.submit([&] {
    while (!go) std::this_thread::yield();
    ++done;
  });
  EXPECT_EQ(second, first + 1);
  thread.wait(second);
  EXPECT_EQ(done.load(), 2);  // the third is still blocked
  go = true;
  thread.wait();
  EXPECT_EQ(done.load(), 3);
}

TEST(Comm, SplitIntoGroups) {
  const int r = W().rank();
  auto g = W().split(r % 2, r);
  EXPECT_EQ(g->rank(), r / 2);
  EXPECT_EQ(g->allreduce(1), (W().size() + 1 - r % 2) / 2);
}

TEST(Optimizer, ShardsPartitionTheTableAndStateRoundTrips) {
  const ModelConfig c = ModelConfig::preset("tiny");
  const ParamTable t(c);
  OptimConfig oc;
  Optimizer opt(t, oc, &W());
  const auto& sh = opt.regions().at(0).shards;
  ASSERT_EQ(int(sh.size()), W().size());
  EXPECT_EQ(sh.front().begin, 0);
  EXPECT_EQ(sh.back().end, t.total());
  for (size_t q = 1; q < sh.size(); ++q) EXPECT_EQ(sh[q].begin, sh[q - 1].end);
  // Each shard boundary is the start of a tensor.
  for (auto& r : sh) {
    bool starts = r.begin == 0 || r.size() == 0;
    for (auto& p : t.params()) starts = starts || p.offset == r.begin;
    EXPECT_TRUE(starts) << r.begin;
  }
  std::vector<float> m(size_t(t.total())), v(size_t(t.total()));
  for (size_t i = 0; i < m.size(); ++i) m[i] = float(i), v[i] = float(i) * 0.5f;
  opt.load_state(m.data(), v.data());
  Buffer<float> gm, gv;
  opt.gather_state(gm, gv);
  if (W().is_root()) {
    ASSERT_EQ(gm.size(), m.size());
    for (size_t i = 0; i < m.size(); ++i) ASSERT_EQ(gm[i], m[i]);
    for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(gv[i], v[i]);
  }
}

TEST(Dispatcher, CapacityOverWavesOfRanksDropsWhatOneForwardDrops) {
  const int r = W().rank(), n = W().size();
  const int64_t E = 6, K = 2, micro = 19, waves = 2, rows = micro * n * waves;
  // A skewed routing: expert 0 is asked for far more than its share; expert 5 never.
  std::vector<int32_t> expert(size_t(rows * K));
  uint64_t x = 7;
  for (auto& e : expert) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    const uint64_t u = (x >> 33) % 100;
    e = u < 40 ? 0 : int32_t(1 + u % 4);
  }
  // One forward over all rows: the reference.
  DispatchPlan whole;
  whole.reserve(rows, E, K);
  whole.build(expert.data(), rows, Transport::Capacity, 1.0);
  EXPECT_GT(whole.dropped, 0);
  // The step as waves of micro-batches: in wave w, rank r computes micro-batch w·n + r.
  DispatchPlan mine;
  mine.reserve(micro, E, K);
  mine.begin_step(rows);
  int64_t dropped = 0;
  for (int64_t w = 0; w < waves; ++w) {
    const int64_t mb = w * n + r;
    mine.build(expert.data() + mb * micro * K, micro, Dispatch{Transport::Capacity, 3, &W()}, 1.0);
    dropped += mine.dropped;
    for (int64_t a = 0; a < micro * K; ++a)
      EXPECT_EQ(mine.slot_row[a] < 0, whole.slot_row[mb * micro * K + a] < 0) << mb << " " << a;
  }
  EXPECT_EQ(W().allreduce(dropped), whole.dropped);
}

// A skewed routing of `rows` tokens (K distinct experts each): expert 0 is wanted by 40 %.
std::vector<int32_t> skewed_routing(int64_t rows, int64_t E, int64_t K, uint64_t seed) {
  std::vector<int32_t> expert;
  uint64_t x = seed;
  for (int64_t t = 0; t < rows; ++t) {
    std::vector<int32_t> picked;
    while (int64_t(picked.size()) < K) {
      x = x * 6364136223846793005ull + 1442695040888963407ull;
      const uint64_t u = (x >> 33) % 100;
      const int32_t e = u < 40 ? 0 : int32_t(u % uint64_t(E));
      if (std::find(picked.begin(), picked.end(), e) == picked.end()) picked.push_back(e);
    }
    expert.insert(expert.end(), picked.begin(), picked.end());
  }
  return expert;
}

TEST(Dispatcher, PooledOverExpertShardsMatchesTheRuleSimulated) {
  // Every rank is a sender; the experts are split over all ranks (S = n shards).
  const int r = W().rank(), n = W().size();
  const int64_t E = 4 * n, K = 2, rows = 37 + 5 * r, W_ = 3;
  const double cf = 1.0;
  const auto mine = skewed_routing(rows, E, K, 11 + uint64_t(r));
  DispatchPlan plan;
  plan.reserve(rows, E, K);
  plan.build(mine.data(), rows, Dispatch{Transport::Pooled, W_, nullptr, &W()}, cf);
  // Brute force over every sender's routing, in the rule's words.
  std::vector<int64_t> all_rows = W().allgather(rows);
  std::vector<int64_t> counts, displs;
  int64_t total = 0;
  for (int64_t q : all_rows) counts.push_back(q * K), displs.push_back(total), total += q * K;
  std::vector<int32_t> all(static_cast<size_t>(total));
  W().allgatherv(mine.data(), rows * K, all.data(), counts.data(), displs.data());
  const int64_t E_loc = E / n;
  std::vector<int64_t> arrivals(static_cast<size_t>(E * W_), 0);  // per (expert, wave)
  int64_t sender_drops = 0, receiver_drops = 0;
  std::vector<int> kept_mine;
  for (int q = 0; q < n; ++q) {
    const PooledCapacity cap = pooled_capacity(all_rows[size_t(q)], K, n, E_loc, W_, cf);
    std::vector<int64_t> rank_in_shard(static_cast<size_t>(n), 0);
    for (int64_t a = 0; a < counts[size_t(q)]; ++a) {
      const int32_t e = all[size_t(displs[size_t(q)] + a)];
      const int64_t i = rank_in_shard[size_t(e / E_loc)]++;
      bool kept = i / W_ < cap.sender_rows;
      if (!kept) {
        ++sender_drops;
      } else if (arrivals[size_t(e * W_ + i % W_)]++ >= cap.receiver_rows) {
        kept = false, ++receiver_drops;
      }
      if (q == r) kept_mine.push_back(kept);
    }
  }
  EXPECT_GT(sender_drops + receiver_drops, 0) << "the skew must make the rule drop";
  EXPECT_EQ(W().allreduce(plan.sender_dropped), sender_drops);
  EXPECT_EQ(W().allreduce(plan.receiver_dropped), receiver_drops);
  for (int64_t a = 0; a < rows * K; ++a)
    EXPECT_EQ(plan.slot_row[a] >= 0, kept_mine[size_t(a)] != 0) << "assignment " << a;
}

TEST(ExpertShard, TakeAndGatherRoundTripTheFullLayout) {
  ModelConfig c = ModelConfig::preset("tiny");
  c.num_experts = 4 * W().size();
  const ParamTable full(c), local(c, {W().size(), W().rank()});
  EXPECT_LE(local.total(), full.total());
  std::vector<float> x(static_cast<size_t>(full.total()));
  std::iota(x.begin(), x.end(), 0.0f);
  std::vector<float> mine(static_cast<size_t>(local.total()));
  take_shard(full, x.data(), local, mine.data());
  const auto& w = local.at("layers.0.moe.experts.w_up");
  EXPECT_EQ(w.shape[0], 4);
  EXPECT_EQ(w.first_expert, 4 * W().rank());
  EXPECT_EQ(mine[size_t(w.offset)],
            x[size_t(full.at(w.name).offset + w.first_expert * w.size / 4)]);
  std::vector<float> back(W().is_root() ? x.size() : 0);
  gather_shards(local, mine.data(), full, back.data(), W());
  if (W().is_root()) {
    for (auto& p : full.params())
      for (int64_t i = 0; i < p.size; ++i)
        ASSERT_EQ(back[size_t(p.offset + i)], x[size_t(p.offset + i)]) << p.name;
  }
  // Initialisation draws each stack's stream whole: a shard starts as its slice.
  std::vector<float> init_full(x.size()), init_local(mine.size()), sliced(mine.size());
  full.initialize(init_full.data(), 3);
  local.initialize(init_local.data(), 3);
  take_shard(full, init_full.data(), local, sliced.data());
  EXPECT_EQ(init_local, sliced);
}

// One forward/backward of an expert-parallel model against the one-process model on every
// rank's micro-batch, with a router biased so hard towards experts 0 and 1 that every other
// expert — every expert of every rank but the first — receives zero rows. `threaded`: the
// all-to-alls run on a communication thread beside the experts (the training step's overlap).
void expect_expert_parallel_equals_one_process(bool skewed, bool threaded = false) {
  const int r = W().rank(), n = W().size();
  ModelConfig c = ModelConfig::preset("tiny");
  c.num_experts = 4 * n;
  c.seq_len = 32;
  c.sliding_window = 16;
  const int B = 2;
  Model<float> ep(c, B, &W()), one(c, B);
  parallel::CommThread thread;
  if (threaded) ep.set_dispatch({Transport::Dropless, 3, nullptr, &thread});
  one.init(9);
  take_shard(one.table(), one.params().data(), ep.table(), ep.params().data());
  if (skewed)
    for (int64_t l = 0; l < c.num_layers; ++l) {
      const std::string bias = fmt::format("layers.{}.moe.router_bias", l);
      for (Model<float>* m : {&ep, &one}) m->param(bias)[0] = m->param(bias)[1] = 50.0f;
    }
  auto batch = [&](int q, std::vector<int32_t>& tok, std::vector<int32_t>& lab) {
    tok.resize(size_t(B * c.seq_len)), lab.resize(tok.size());
    for (size_t i = 0; i < tok.size(); ++i)
      tok[i] = int32_t((7 * i + 13 * size_t(q)) % size_t(c.vocab_size)),
      lab[i] = int32_t((5 * i + 3 * size_t(q)) % size_t(c.vocab_size));
  };
  std::vector<int32_t> tok, lab;
  batch(r, tok, lab);
  const LossStats s = ep.forward({B, tok.data(), lab.data(), nullptr, 0});
  ep.backward();
  const ParamTable& lt = ep.table();
  const int64_t R = ep.expert_region_size();
  for (int q = 0; q < n; ++q) {
    std::vector<int32_t> t2, l2;
    batch(q, t2, l2);
    const LossStats s1 = one.forward({B, t2.data(), l2.data(), nullptr, 0});
    one.backward();
    if (q == r) {
      EXPECT_EQ(s.loss, s1.loss);
      for (auto& p : lt.params()) {
        if (p.routed_expert) continue;
        for (int64_t i = 0; i < p.size; ++i)
          ASSERT_EQ(ep.grads()[size_t(p.offset + i)],
                    one.grads()[size_t(one.table().at(p.name).offset + i)])
              << p.name;
      }
    }
    // The gradient of this rank's experts from source q's rows (one rank: its own gradients).
    std::vector<float> sliced(size_t(lt.total()));
    take_shard(one.table(), one.grads().data(), lt, sliced.data());
    for (auto& p : lt.params()) {
      if (!p.routed_expert) continue;
      const float* got = n == 1 ? ep.grads().data() + p.offset
                                : ep.source_grads().data() + q * R + (p.offset - lt.expert_begin());
      for (int64_t i = 0; i < p.size; ++i)
        ASSERT_EQ(got[i], sliced[size_t(p.offset + i)]) << p.name << " from source " << q;
    }
  }
  if (skewed) {
    // Every assignment went to experts 0 and 1, which rank 0 holds: every other rank's experts
    // (and, with 2+ ranks, every other rank) received nothing.
    for (int64_t l = 0; l < c.num_layers; ++l) {
      const DispatchPlan& plan = ep.block(l).moe().plan();
      EXPECT_EQ(plan.requested[0] + plan.requested[1], plan.kept) << "layer " << l;
      EXPECT_GT(plan.kept, 0);
    }
  }
}

TEST(ExpertParallel, ForwardAndBackwardEqualOneProcess) {
  expect_expert_parallel_equals_one_process(false);
}

TEST(ExpertParallel, ZeroRowExpertsAndASkewedRouterEqualOneProcess) {
  expect_expert_parallel_equals_one_process(true);
}

TEST(ExpertParallel, AllToAllsOnACommThreadEqualOneProcess) {
  ASSERT_TRUE(parallel::comm_thread_supported());
  expect_expert_parallel_equals_one_process(false, /*threaded=*/true);
  expect_expert_parallel_equals_one_process(true, /*threaded=*/true);
}

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  int rc = RUN_ALL_TESTS();
  // A failure on any rank fails every rank's exit code (mpirun reports the first non-zero one).
  rc = parallel::world().allreduce(rc, parallel::Op::Max);
  parallel::finalize();
  return rc;
}
