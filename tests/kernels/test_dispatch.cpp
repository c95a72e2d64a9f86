// Runtime dispatch of the SIMD kernels: the best target this CPU supports is chosen by default,
// every target the CPU supports is listed and can be forced (the kernel tests run each one
// against the double path through isa_loop.hpp), and the measured peak runs on the chosen one.
// Also the threading defaults of the binary: a short OpenMP spin unless the user chose, and
// --threads on every heavy command.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "cli_util.hpp"
#include "core/error.hpp"
#include "kernels/kernels.hpp"
#include "kernels/threads.hpp"

namespace mk = marin::kernels;

namespace {
bool has(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}
// The portable baseline: Highway 1.0 builds "scalar" under g++ (its emu128 is marked broken
// there) and "emu128" (four lanes, plain C++) under clang, the sanitizer build's compiler.
std::string baseline() {
  return mk::isa_targets().back();
}
}  // namespace

TEST(Dispatch, DefaultIsTheBestSupportedTarget) {
  const auto targets = mk::isa_targets();
  ASSERT_FALSE(targets.empty());
  EXPECT_EQ(mk::isa_name(), targets.front());
  // The portable baseline is always there, last.
  EXPECT_TRUE(targets.back() == "scalar" || targets.back() == "emu128") << targets.back();
}

TEST(Dispatch, TargetsFollowTheCpu) {
  __builtin_cpu_init();
  const auto targets = mk::isa_targets();
  const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  const bool avx512 = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                      __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
  EXPECT_EQ(has(targets, "avx2"), avx2);
  EXPECT_EQ(has(targets, "avx512"), avx512);
  const std::string want = avx512 ? "avx512" : avx2 ? "avx2" : baseline();
  EXPECT_EQ(mk::isa_name(), want);
}

TEST(Dispatch, ForcingSwitchesAndRestores) {
  const std::string best = mk::isa_name();
  for (const std::string& isa : mk::isa_targets()) {
    mk::force_isa(isa);
    EXPECT_EQ(mk::isa_name(), isa);
  }
  mk::force_isa("");
  EXPECT_EQ(mk::isa_name(), best);
  EXPECT_THROW(mk::force_isa("no-such-isa"), marin::Error);
  EXPECT_EQ(mk::isa_name(), best);
}

TEST(Dispatch, PeakLoopRunsOnTheDispatchedWidth) {
  for (const std::string& isa : mk::isa_targets()) {
    mk::force_isa(isa);
    const mk::PeakResult p = mk::measure_fma_peak(1, 0.01);
    const int want = isa == "avx512" ? 16 : isa == "avx2" ? 8 : isa == "scalar" ? 1 : 4;
    EXPECT_EQ(p.lanes, want) << isa;
    EXPECT_EQ(p.threads, 1);
    EXPECT_GT(p.gflops, 0) << isa;
  }
  mk::force_isa("");
}

TEST(Dispatch, Bf16PeakOnlyWhereTheCpuHasIt) {
  const mk::PeakResult p = mk::measure_bf16_peak(1, 0.01);
  EXPECT_EQ(p.gflops > 0, mk::cpu_has_avx512_bf16());
}

// libgomp prints the settings it started with under OMP_DISPLAY_ENV=VERBOSE (the binary's first
// start prints libgomp's defaults, its second, after re-executing, the binary's): the binary's
// own default is a short spin (GOMP_SPINCOUNT 20000), and it keeps a user's choice.
std::string last_spin_count(const std::string& env) {
  const auto r = marin::testing::run_shell("env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT " + env +
                                           " OMP_DISPLAY_ENV=VERBOSE " + MARIN_BIN + " --version");
  EXPECT_EQ(r.code, 0) << r.out;
  const std::string key = "GOMP_SPINCOUNT = '";
  const size_t at = r.out.rfind(key);
  if (at == std::string::npos) return "(not displayed) " + r.out;
  return r.out.substr(at + key.size(), r.out.find('\'', at + key.size()) - at - key.size());
}

TEST(Threads, AShortSpinIsTheBinarysDefaultAndTheUsersChoiceIsKept) {
  EXPECT_EQ(last_spin_count(""), "20000");
  EXPECT_EQ(last_spin_count("GOMP_SPINCOUNT=5"), "5");
  EXPECT_EQ(last_spin_count("OMP_WAIT_POLICY=passive"), "0");
  EXPECT_NE(last_spin_count("OMP_WAIT_POLICY=active"), "20000");
}

// Independent tasks over the compute threads: every task runs once, on a slot below
// task_slots, no slot runs two at once; a task's error reaches the caller, not terminate().
TEST(Threads, ParallelTasksRunEachTaskOnceAndPassTheirErrorOn) {
  const int before = mk::compute_threads();
  const bool chosen = mk::compute_threads_chosen();
  for (int threads : {1, 2, 3}) {
    mk::set_compute_threads(threads, true);
    const int64_t tasks = 37;
    EXPECT_EQ(mk::task_slots(tasks), threads);
    EXPECT_EQ(mk::task_slots(1), 1);
    EXPECT_EQ(mk::task_slots(0), 1);
    const int slots = mk::task_slots(tasks);
    std::vector<std::atomic<int>> runs(tasks), busy(static_cast<size_t>(slots));
    std::atomic<bool> overlap{false}, bad_slot{false}, one_thread{true};
    mk::parallel_tasks(tasks, [&](int64_t t, int slot) {
      if (mk::compute_threads() != 1) one_thread = false;  // a task's kernels run on one thread
      if (slot < 0 || slot >= slots) return void(bad_slot = true);
      if (busy[size_t(slot)]++ != 0) overlap = true;
      runs[size_t(t)]++;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
      busy[size_t(slot)]--;
    });
    for (int64_t t = 0; t < tasks; ++t) EXPECT_EQ(runs[size_t(t)], 1) << "task " << t;
    EXPECT_FALSE(overlap) << threads << " threads";
    EXPECT_FALSE(bad_slot) << threads << " threads";
    EXPECT_TRUE(one_thread) << threads << " threads";
    EXPECT_EQ(mk::compute_threads(), threads) << "the tasks' one thread leaked out";
    try {
      mk::parallel_tasks(tasks, [&](int64_t t, int) {
        if (t == 5) marin::fail("task {} could not run", t);
      });
      ADD_FAILURE() << "no error at " << threads << " threads";
    } catch (const marin::Error& e) {
      EXPECT_STREQ(e.what(), "task 5 could not run");
    }
  }
  mk::set_compute_threads(before, chosen);
}

TEST(Threads, EveryHeavyCommandTakesThreads) {
  for (const char* cmd : {"train", "eval", "score", "sample", "bench", "ladder", "forecast",
                          "decontaminate", "tokenize"}) {
    const auto r = marin::testing::run(std::string(cmd) + " --help");
    EXPECT_NE(r.out.find("--threads"), std::string::npos) << cmd << ": " << r.out;
  }
  const auto bad = marin::testing::run("score --threads 0");
  EXPECT_NE(bad.code, 0) << bad.out;
  const auto b =
      marin::testing::run("bench --preset tiny --batch 2 --iters 1 --warmup 0 --threads 1 --json");
  ASSERT_EQ(b.code, 0) << b.out;
  const auto j = nlohmann::json::parse(b.out.substr(b.out.find('{')));
  EXPECT_EQ(j["threads"].get<int>(), 1);
  EXPECT_EQ(j["isa"].get<std::string>(), mk::isa_name());
  // Neither --threads nor OMP_NUM_THREADS: the idle cores by the load average, at least one.
  const auto d =
      marin::testing::run_shell("env -u OMP_NUM_THREADS " + std::string(MARIN_BIN) +
                                " bench --preset tiny --batch 2 --iters 1 --warmup 0 --json");
  ASSERT_EQ(d.code, 0) << d.out;
  const int t = nlohmann::json::parse(d.out.substr(d.out.find('{')))["threads"].get<int>();
  EXPECT_GE(t, 1);
  EXPECT_LE(t, int(std::thread::hardware_concurrency()));
}

// MARIN_ISA pins the kernels' target for a run (to compare targets on one machine).
TEST(Dispatch, MarinIsaPinsTheTargetOfARun) {
  const auto r = marin::testing::run_shell(
      "MARIN_ISA=" + baseline() + " " + std::string(MARIN_BIN) +
      " bench --preset tiny --batch 2 --iters 1 --warmup 0 --threads 1 --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  EXPECT_EQ(j["isa"].get<std::string>(), baseline());
  EXPECT_EQ(j["fp32_lanes"].get<int>(), baseline() == "scalar" ? 1 : 4);
  const auto bad = marin::testing::run_shell("MARIN_ISA=bogus " + std::string(MARIN_BIN) +
                                             " plan --preset tiny");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("'bogus' is not a target"), std::string::npos) << bad.out;
  // and names the ones that are
  EXPECT_NE(bad.out.find("expected one of: " + marin::kernels::isa_targets().front()),
            std::string::npos)
      << bad.out;
}

// MARIN_GEMM chooses the fp32 GEMMs' library for a run (oneDNN by default): bench names it, a
// tiny training run computes the same model on either (the order of the sums differs, so within
// a tolerance, not bit for bit), and an unknown name is refused naming the variable.
TEST(Dispatch, MarinGemmChoosesTheLibraryAndBothTrainTheSameModel) {
  using marin::testing::run_shell;
  const std::string bin = MARIN_BIN;
  for (const std::string lib : {"", "onednn", "openblas"}) {
    const auto r = run_shell("MARIN_GEMM=" + lib + " " + bin +
                             " bench --preset tiny --batch 2 --iters 1 --warmup 0 --threads 1 "
                             "--dtype fp32 --json");
    ASSERT_EQ(r.code, 0) << r.out;
    const auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
    EXPECT_EQ(j["gemm"].get<std::string>(), lib.empty() ? "onednn" : lib);
  }
  marin::testing::TempDir tmp("gemm-lib");
  marin::testing::write_rows(tmp.str("rows.bin"), 16);
  double loss[2];
  for (int i = 0; i < 2; ++i) {
    const std::string lib = i == 0 ? "onednn" : "openblas";
    const auto r =
        run_shell("MARIN_GEMM=" + lib + " " + bin +
                  " train --preset tiny --batch 4 --steps 5 --seed 2 --dtype fp32 --rows " +
                  tmp.str("rows.bin") + " --out " + tmp.str(lib));
    ASSERT_EQ(r.code, 0) << r.out;
    loss[i] = marin::testing::metrics(tmp.str(lib)).back()["loss"].get<double>();
  }
  EXPECT_NEAR(loss[0], loss[1], 1e-4 * loss[1]);
  const auto bad =
      run_shell("MARIN_GEMM=mkl " + bin +
                " bench --preset tiny --batch 2 --iters 1 --warmup 0 --threads 1 --dtype fp32");
  EXPECT_NE(bad.code, 0);
  EXPECT_NE(bad.out.find("MARIN_GEMM=mkl: expected onednn or openblas"), std::string::npos)
      << bad.out;
}
