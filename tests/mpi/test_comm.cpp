// The communicator and the pieces built on it, run under real mpirun (np 1, 2 and 4; see
// tests/CMakeLists.txt): every collective against what it must compute, the ZeRO-1 optimizer
// shards (a partition of the table; gather/load round trip), and the capacity-limited dispatcher
// over a group dropping exactly what one process drops for the same routing.
#include <gtest/gtest.h>

#include <numeric>

#include "dist/comm.hpp"
#include "model/config.hpp"
#include "model/moe/dispatcher.hpp"
#include "model/params.hpp"
#include "optim/optimizer.hpp"

using namespace marin;
using dist::Comm;

namespace {
Comm& W() {
  return dist::world();
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
  EXPECT_EQ(W().allreduce(int64_t(r), dist::Op::Max), n - 1);
  EXPECT_EQ(W().allreduce(float(r) + 0.5f, dist::Op::Min), 0.5f);
}

TEST(Comm, BroadcastString) {
  std::string s = W().is_root() ? std::string(5000, 'x') + "end" : "";
  W().broadcast(s);
  EXPECT_EQ(s.size(), 5003u);
  EXPECT_EQ(s.substr(5000), "end");
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

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  int rc = RUN_ALL_TESTS();
  // A failure on any rank fails every rank's exit code (mpirun reports the first non-zero one).
  rc = dist::world().allreduce(rc, dist::Op::Max);
  dist::finalize();
  return rc;
}
