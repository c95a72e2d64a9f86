// marin: one binary, one subcommand per src/cli/*.cpp file. This file dispatches, after two
// process-wide settings (OpenMP's spin, glibc's freed memory) the user's environment may override.
#include <fmt/core.h>
#include <malloc.h>
#include <omp.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <set>
#include <string>

#include <unistd.h>

#include "cli/command.hpp"
#include "cli/options.hpp"
#include "core/error.hpp"
#include "core/progress.hpp"
#include "kernels/kernels.hpp"
#include "kernels/threads.hpp"
#include "parallel/comm.hpp"

namespace {
// OpenMP's default wait spins idle threads for up to 300,000 iterations (and forever under
// OMP_WAIT_POLICY=active); on a machine shared with other work that cost 10x. Passive waiting
// (sleeping at once) cost 1.8x on an idle machine instead: a cpu-small step at two threads took
// 2.41 s passive, 1.33 s with 20,000 spins, 1.27 s active (Zen 5), and on a busy Zen 3 20,000
// spins beat both (docs/benchmarks.md). So the binary's default is a short spin. libgomp reads
// its environment in its own constructor, which runs before main and even before the
// executable's .preinit_array (measured: a setenv there is not seen), and OpenMP has no call to
// change it later; so without a setting of the user's (either variable, which is kept) the
// binary sets GOMP_SPINCOUNT and executes itself again, once.
void exec_with_short_spin(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") || std::getenv("GOMP_SPINCOUNT")) return;
  setenv("GOMP_SPINCOUNT", "20000", /*overwrite=*/0);
  execv("/proc/self/exe", argv);  // returns only if it failed: run on with libgomp's default
}

// glibc serves an allocation from 128 KiB up (the threshold grows to at most 32 MiB as such blocks
// are freed) with fresh pages of its own mapping, and returns a freed heap top above 128 KiB to
// the kernel: the vectors a forward allocates at each call were then faulted in and zeroed by
// the kernel at every call, as a tuned PyTorch avoids with jemalloc's settings. `marin eval`
// of cpu-small on three fixture domains took 83,613 minor page faults and 4.2 s of system time,
// 63,845 and 1.8 s with these two settings (Zen 5, docs/benchmarks.md). A training run's peak
// memory is unchanged (measured, cpu-small).
void keep_freed_memory() {
  const char* tunables = std::getenv("GLIBC_TUNABLES");
  // A user's own settings are kept.
  if (std::getenv("MALLOC_MMAP_THRESHOLD_") || std::getenv("MALLOC_TRIM_THRESHOLD_") ||
      (tunables && std::strstr(tunables, "glibc.malloc.")))
    return;
  mallopt(M_MMAP_THRESHOLD, 32 << 20);  // glibc's largest: Buffer maps its own from 1 MiB up
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

// The default number of compute threads when neither --threads nor OMP_NUM_THREADS says: the
// cores that are idle by the 1-minute load average, at least one. On a 2-vCPU machine busy with
// other work, two OpenMP threads made a `tiny` forward+backward 30x slower than one (every
// parallel region waits for a descheduled thread; docs/benchmarks.md), whatever the wait policy.
int idle_cores() {
  const int cores = std::max(1, omp_get_num_procs());
  std::ifstream f("/proc/loadavg");
  double load = 0;
  if (!(f >> load)) return cores;
  return std::clamp(int(double(cores) - load + 0.5), 1, cores);
}

// Commands whose work is compute-bound: each gets --threads (the compute threads of the
// process) unless its own file already defines the option.
const std::set<std::string> kHeavy = {"bench",  "decontaminate", "eval",     "forecast", "ladder",
                                      "sample", "score",         "tokenize", "train"};
}  // namespace

namespace marin::cli {
std::vector<Command>& registry() {
  static std::vector<Command> r;
  return r;
}
}  // namespace marin::cli

int main(int argc, char** argv) {
  exec_with_short_spin(argv);
  keep_freed_memory();
  using namespace marin::cli;
  CLI::App app{
      "marin: pretrain, forecast and evaluate Mixture-of-Experts language models with the Marin "
      "535B-A23B recipe.\nRun `marin <command> --help` for the options of one command."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "marin.cpp 0.1");
  auto& cmds = registry();
  std::sort(cmds.begin(), cmds.end(), [](auto& a, auto& b) { return a.name < b.name; });
  std::map<CLI::App*, Runner> runners;
  int threads = 0;
  double progress_every = 30;
  for (auto& c : cmds) {
    CLI::App* sub = app.add_subcommand(c.name, c.help);
    runners[sub] = c.setup(*sub);
    if (kHeavy.count(c.name) && !sub->get_option_no_throw("--threads"))
      sub->add_option("--threads", threads,
                      "compute threads of this process (default: the idle cores)")
          ->check(threads_range());
    if (kHeavy.count(c.name))
      sub->add_option("--progress-every", progress_every,
                      "with stderr not a terminal (nohup, a batch job): a progress line (count, "
                      "rate, ETA) every this many seconds; 0: none (on a terminal the line is "
                      "redrawn in place)")
          ->default_str("30")
          ->type_name("SECONDS")
          ->check(in_range<double>(0, 1e9));
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  // --threads N means one thing on every command: N compute threads in this process. Where a
  // command's own option also sizes other work (eval's n-gram index, corpus domains), the same
  // number bounds the OpenMP kernels and OpenBLAS (its OpenMP build follows omp_set_num_threads).
  // OMP_NUM_THREADS is the user's choice too (libgomp has applied it already).
  bool threads_given = std::getenv("OMP_NUM_THREADS") != nullptr;
  int threads_now = omp_get_max_threads();
  for (auto& [sub, run] : runners) {
    if (!sub->parsed()) continue;
    if (const CLI::Option* opt = sub->get_option_no_throw("--threads"); opt && opt->count() > 0) {
      threads_now = opt->as<int>();
      threads_given = true;
    }
  }
  marin::kernels::set_compute_threads(threads_given ? threads_now : idle_cores(), threads_given);
  marin::Progress::set_plain_interval(progress_every);
  // Under mpirun a failure on one rank must end every rank (the others may be waiting in a
  // collective for it): print this rank's message and abort the whole job.
  namespace parallel = marin::parallel;
  auto failed = [](const char* kind, const char* what, int code) {
    const bool many = parallel::launched_by_mpi() && parallel::world().size() > 1;
    if (many)
      fmt::print(stderr, "marin: {} on rank {} of {}: {}\n", kind, parallel::world().rank(),
                 parallel::world().size(), what);
    else
      fmt::print(stderr, "marin: {}: {}\n", kind, what);
    if (many) parallel::world().abort(code);
    parallel::finalize();
    return code;
  };
  int rc = 0;
  try {
    marin::kernels::force_isa_from_env();
    for (auto& [sub, run] : runners)
      if (sub->parsed()) rc = run();
    // A report printed to stdout that did not reach it (a full disk, a closed pipe) is a failure,
    // not a silent success.
    if (std::fflush(stdout) != 0 || std::ferror(stdout))
      throw marin::Error(fmt::format("cannot write the output (stdout): {}", std::strerror(errno)));
  } catch (const marin::Error& e) {
    return failed("error", e.what(), 1);
  } catch (const std::exception& e) {
    return failed("internal error", e.what(), 2);
  }
  parallel::finalize();
  return rc;
}
