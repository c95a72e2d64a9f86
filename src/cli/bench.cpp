// marin bench: timed forward+backward of a preset (after warm-up), or with --train the full
// training step as `marin train` runs it (data parallel under mpirun), reported as tokens/s and
// model GFLOP/s by the §6 estimator (3·F_fwd per token for forward+backward) against this
// machine's FMA peak, measured at start-up; with --decode, incremental decoding as `marin sample`
// runs it (tokens/s of the prompt and of the generated tokens); `marin bench tokenizer` times the
// BPE encoder.
#include <fmt/core.h>
#include <omp.h>

#include <unistd.h>

#include <algorithm>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli/options.hpp"
#include "core/limits.hpp"
#include "core/profile.hpp"
#include "core/rng.hpp"
#include "core/timer.hpp"
#include "data/tokenizer/bench.hpp"
#include "eval/sampler.hpp"
#include "kernels/kernels.hpp"
#include "model/accounting.hpp"
#include "model/model.hpp"
#include "optim/hparams.hpp"
#include "optim/newton_schulz.hpp"
#include "optim/optimizer.hpp"
#include "parallel/comm.hpp"
#include "train/rank_memory.hpp"
#include "train/trainer.hpp"

namespace marin::cli {
namespace {
namespace fs = std::filesystem;

// "model name" of /proc/cpuinfo (the first core), for the record.
std::string cpu_model_name() {
  std::ifstream f("/proc/cpuinfo");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  return "unknown CPU";
}

struct BenchOptions {
  std::string what = "model";
  ModelOptions model;
  DtypeOption dtype;
  int batch = 8, micro_batch = 0, iters = 5, warmup = 2, threads = 0, ep = 1;
  int64_t prompt_tokens = 0, max_tokens = 0;  // --decode; 0: 64 and 256, less if seq_len is short
  int64_t gen_batch = 1;                      // --decode: sequences decoded together
  bool json = false, train = false, decode = false, profile = false;
  std::string vocab, ns_dtype = OptimConfig{}.ns_dtype;
  bool no_overlap = false;    // --train: as marin train --no-overlap
  bool shard_params = false;  // --train: as marin train --shard-params
  std::vector<std::string> files;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Random token ids, labels and a few packed documents per row.
void random_batch(const ModelConfig& c, int64_t n, std::vector<int32_t>& tok,
                  std::vector<int32_t>& lab, std::vector<int32_t>& seg) {
  tok.resize(size_t(n)), lab.resize(size_t(n)), seg.resize(size_t(n));
  Rng rng(3);
  for (int64_t i = 0; i < n; ++i) {
    tok[size_t(i)] = int32_t(rng.next_u64() % c.vocab_size);
    lab[size_t(i)] = int32_t(rng.next_u64() % c.vocab_size);
    seg[size_t(i)] = int32_t((i % c.seq_len) / 200);
  }
}

// The full training step exactly as `marin train` runs it (Trainer::train_step: micro-batches,
// exact gradient sum, sharded optimizer, QB, metrics), on random rows, under mpirun data parallel
// over the job's ranks; plus Newton–Schulz alone on the last gradients, so its share is measured.
// CPU seconds used by this process so far (all its threads). On a machine shared with other
// work, a single-threaded step's CPU time is what it would take alone; the wall clock also
// counts the time the scheduler gave to others.
double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return double(ts.tv_sec) + 1e-9 * double(ts.tv_nsec);
}

nlohmann::json bench_train(const BenchOptions& o, const ModelConfig& c) {
  parallel::Comm& world = parallel::world();
  std::string dir = world.is_root() ? fmt::format("{}/marin-bench-{}",
                                                  fs::temp_directory_path().string(), getpid())
                                    : "";
  world.broadcast(dir);
  const std::string rows = dir + "/rows.bin";
  if (world.is_root()) {
    fs::create_directories(dir);
    std::vector<int32_t> tok, lab, seg;
    random_batch(c, int64_t(o.batch) * (c.seq_len + 1), tok, lab, seg);
    std::ofstream(rows, std::ios::binary)
        .write(reinterpret_cast<const char*>(tok.data()), std::streamsize(tok.size() * 4));
  }
  world.barrier();
  TrainOptions t;
  t.model = c;
  t.batch = o.batch;
  t.micro_batch = o.micro_batch;
  t.ep = o.ep;
  t.dtype = kernels::dtype_name(kernels::compute_dtype());  // resolved once by bench_model
  t.optim.ns_dtype = o.ns_dtype;
  t.overlap = !o.no_overlap;
  t.shard_params = o.shard_params;
  t.steps = 1000;
  t.seed = 1;
  t.data = {{"kind", "rows"}, {"path", rows}};
  std::vector<double> step, step_cpu, comm, ns, a2a;
  int64_t bytes = 0, a2a_bytes = 0;
  std::vector<profile::Row> profile_rows;
  {
    Trainer trainer(t, dir + "/run", "", &world);
    for (int i = 0; i < o.warmup + o.iters; ++i) {
      if (o.profile && i == o.warmup) profile::enable(true);  // the timed steps only
      const Timer timer;
      const double c0 = process_cpu_seconds();
      const StepResult r = trainer.train_step();
      if (i < o.warmup) continue;
      step.push_back(timer.seconds()), comm.push_back(r.comm_seconds), bytes = r.comm_bytes;
      a2a.push_back(r.all_to_all_seconds), a2a_bytes = r.all_to_all_bytes;
      step_cpu.push_back(process_cpu_seconds() - c0);
    }
    profile_rows = profile::rows();
    profile::enable(false);
    // Newton–Schulz of every MuonH tensor on the last gradients (all of them, on one rank).
    Model<float>& m = trainer.model();
    const auto ns_products = t.optim.ns_products();
    i64 w = 1, out = 1;
    for (auto& p : m.table().params())
      if (p.group == OptGroup::MuonH)
        w = std::max(w, optim::ns_batched_workspace_size(p.num_mats, p.rows(), p.cols())),
        out = std::max(out, p.size);
    Buffer<float> ns_work(static_cast<size_t>(w)), ns_out(static_cast<size_t>(out));
    for (int i = 0; i < 3; ++i) {
      const Timer tn;
      for (auto& p : m.table().params())
        if (p.group == OptGroup::MuonH)
          optim::newton_schulz_batched(m.grads().data() + p.offset, ns_out.data(), p.num_mats,
                                       p.rows(), p.cols(), ns_work.data(), ns_products);
      ns.push_back(tn.seconds());
    }
    t = trainer.options();
  }
  const int64_t peak_rss = world.allreduce(peak_rss_bytes(), parallel::Op::Max);
  const RankMemory planned =
      rank_memory(t, world.size(), kernels::compute_dtype() == kernels::Dtype::bf16);
  world.barrier();
  if (world.is_root()) fs::remove_all(dir);
  const double t_med = median(step);
  nlohmann::json ops = nlohmann::json::array();
  for (const profile::Row& r : profile_rows)
    ops.push_back({{"op", r.name},
                   {"seconds_per_step", r.seconds / o.iters},
                   {"calls_per_step", double(r.calls) / o.iters},
                   {"flops_per_step", r.flops / o.iters}});
  nlohmann::json out = {{"step_seconds_median", t_med},
                        {"cpu_seconds_median", median(step_cpu)},
                        {"comm_seconds_median", median(comm)},
                        {"comm_fraction", median(comm) / t_med},
                        {"comm_bytes_per_rank", bytes},
                        {"micro_batch", t.micro_batch},
                        {"ep", t.ep},
                        {"all_to_all_seconds_median", median(a2a)},
                        {"all_to_all_bytes_per_rank", a2a_bytes},
                        {"newton_schulz_seconds_median", median(ns)},
                        {"newton_schulz_fraction_of_step", median(ns) / t_med},
                        {"ns_dtype", t.optim.ns_dtype},
                        {"overlap", t.overlap},
                        {"shard_params", t.shard_params},
                        {"peak_rss_bytes", peak_rss},  // the largest rank's
                        {"planned_bytes_per_rank", planned.json()}};
  if (o.profile) {
    out["profile"] = ops;
    double sum = 0;
    for (double s : step) sum += s;
    out["step_seconds_mean"] = sum / double(step.size());  // what the op rows add up to
  }
  return out;
}

// --profile: where the step goes, op by op (self time; the products' FLOPs each op ran), as
// shares of the mean timed step, against the peak the step is judged by (bf16's for a bf16 step,
// although Newton–Schulz's products in optimizer.update run in fp32 under --ns-dtype fp32).
void print_profile(const nlohmann::json& ops, double step_seconds, double peak, bool bf16) {
  fmt::print("\nper-op profile (rank 0; mean of the timed steps; self time):\n");
  fmt::print("  {:<26} {:>7} {:>10} {:>7} {:>9} {:>9}\n", "op", "calls", "ms/step", "step",
             "GFLOP/s", bf16 ? "% bf16" : "% fp32");
  double timed = 0;
  for (const auto& r : ops) {
    const double s = r["seconds_per_step"], f = r["flops_per_step"];
    timed += s;
    const double g = s > 0 ? f / s / 1e9 : 0;
    fmt::print("  {:<26} {:>7.0f} {:>10.1f} {:>6.1f}% {:>9} {:>9}\n", r["op"].get<std::string>(),
               r["calls_per_step"].get<double>(), s * 1e3, 100 * s / step_seconds,
               f > 0 ? fmt::format("{:.1f}", g) : "-",
               f > 0 ? fmt::format("{:.1f}%", 100 * g / peak) : "-");
  }
  fmt::print("  {:<26} {:>7} {:>10.1f} {:>6.1f}%\n", "(outside every op)", "",
             (step_seconds - timed) * 1e3, 100 * (step_seconds - timed) / step_seconds);
}

// Incremental decoding as `marin sample` (one sequence) and generate_until (--gen-batch
// sequences together) run it: Model::decode over an inference model, a prompt of random ids per
// sequence, then max_tokens greedy tokens, each iteration from empty caches. Random weights decode
// at the speed of trained ones (same shapes, same work).
nlohmann::json bench_decode(BenchOptions o, const ModelConfig& c) {
  if (o.prompt_tokens == 0) o.prompt_tokens = std::min<int64_t>(64, c.seq_len / 4);
  if (o.max_tokens == 0) o.max_tokens = std::min<int64_t>(256, c.seq_len - o.prompt_tokens);
  if (o.prompt_tokens < 1 || o.max_tokens < 1 || o.prompt_tokens + o.max_tokens > c.seq_len)
    fail(
        "marin bench --decode: --prompt-tokens ({}) and --max-tokens ({}) must be >= 1 and fit in "
        "the context together (seq_len {})",
        o.prompt_tokens, o.max_tokens, c.seq_len);
  const int64_t n = o.gen_batch;
  if (n < 1 || n > c.seq_len)
    fail("marin bench --decode: --gen-batch must be in [1, seq_len {}], got {}", c.seq_len, n);
  Model<float> m(c, 1, ModelUse::Inference);
  m.init(1);
  std::vector<std::unique_ptr<DecodeCache<float>>> caches;
  std::vector<DecodeCache<float>*> at;
  for (int64_t s = 0; s < n; ++s) {
    caches.push_back(std::make_unique<DecodeCache<float>>(c));
    at.push_back(caches.back().get());
  }
  Rng rng(1);
  std::vector<int32_t> prompt(static_cast<size_t>(n * o.prompt_tokens)),
      step(static_cast<size_t>(n));
  for (int32_t& t : prompt) t = int32_t(rng.next_u64() % uint64_t(c.vocab_size));
  std::vector<double> prefill, decode, cpu;
  for (int i = 0; i < o.warmup + o.iters; ++i) {
    for (auto& cache : caches) cache->reset();
    const double c0 = process_cpu_seconds();
    const Timer tp;
    for (int64_t t = 0; t < o.prompt_tokens; ++t) {
      for (int64_t s = 0; s < n; ++s) step[size_t(s)] = prompt[size_t(s * o.prompt_tokens + t)];
      m.decode(step.data(), at.data(), n);
    }
    const double t_prefill = tp.seconds();
    const Timer td;
    for (int64_t k = 0; k < o.max_tokens; ++k) {
      for (int64_t s = 0; s < n; ++s)
        step[size_t(s)] =
            sample_token(at[size_t(s)]->logits.data(), c.vocab_size, SamplingOptions{0, 0, 1}, rng);
      m.decode(step.data(), at.data(), n);
    }
    if (i < o.warmup) continue;
    prefill.push_back(t_prefill), decode.push_back(td.seconds());
    cpu.push_back(process_cpu_seconds() - c0);
  }
  const double t_dec = median(decode);
  const double tokens_per_second = double(n * o.max_tokens) / t_dec;
  return {{"prompt_tokens", o.prompt_tokens},
          {"max_tokens", o.max_tokens},
          {"gen_batch", n},
          {"prefill_tokens_per_second", double(n * o.prompt_tokens) / median(prefill)},
          {"decode_tokens_per_second", tokens_per_second},
          {"decode_ms_per_step", 1e3 * t_dec / double(o.max_tokens)},
          {"cpu_seconds_median", median(cpu)},
          {"decode_state_bytes", n * caches[0]->state_bytes()},
          // Forward FLOPs by the §6 estimator (attention over the whole context: an upper bound
          // for the short contexts of decoding).
          {"model_gflops", double(forward_flops_per_token(c)) * tokens_per_second / 1e9}};
}

// The machine line every report starts with.
void print_machine(const nlohmann::json& j, int ranks, int threads, double job_peak,
                   double job_bf16_peak) {
  fmt::print(
      "{} (kernels: {}, gemm: {}, dtype: {}), {} rank(s) × {} thread(s): measured fp32 FMA "
      "peak {:.1f} GFLOP/s",
      j["cpu"].get<std::string>(), j["isa"].get<std::string>(), j["gemm"].get<std::string>(),
      j["dtype"].get<std::string>(), ranks, threads, job_peak);
  if (job_bf16_peak > 0)
    fmt::print(", bf16 dot-product peak {:.1f} GFLOP/s\n", job_bf16_peak);
  else
    fmt::print(" (no avx512_bf16)\n");
}

void print_decode_report(const BenchOptions& o, const nlohmann::json& j) {
  fmt::print(
      "{} decoding, {} sequence(s) together: prompts of {} tokens at {:.0f} tokens/s, then {} "
      "tokens each at {:.1f} tokens/s ({:.2f} ms a step, {:.1f} GFLOP/s of model FLOPs); "
      "decoding state {:.1f} MB\n",
      o.model.preset, j["gen_batch"].get<int64_t>(), j["prompt_tokens"].get<int64_t>(),
      j["prefill_tokens_per_second"].get<double>(), j["max_tokens"].get<int64_t>(),
      j["decode_tokens_per_second"].get<double>(), j["decode_ms_per_step"].get<double>(),
      j["model_gflops"].get<double>(), double(j["decode_state_bytes"].get<int64_t>()) / 1e6);
}

// The forward and backward pass alone (no optimizer, one process): its medians into `j`;
// returns the median time of both.
double bench_forward_backward(const BenchOptions& o, const ModelConfig& c, int64_t n,
                              nlohmann::json& j) {
  Model<float> m(c, o.batch);
  m.init(1);
  std::vector<int32_t> tok, lab, seg;
  random_batch(c, n, tok, lab, seg);
  const Batch b{o.batch, tok.data(), lab.data(), seg.data()};
  std::vector<double> fwd, total, cpu;
  for (int i = 0; i < o.warmup + o.iters; ++i) {
    const Timer t;
    const double c0 = process_cpu_seconds();
    m.forward(b);
    const double tf = t.seconds();
    m.backward();
    if (i >= o.warmup)
      fwd.push_back(tf), total.push_back(t.seconds()), cpu.push_back(process_cpu_seconds() - c0);
  }
  const double t_med = median(total);
  j["cpu_seconds_median"] = median(cpu);
  j["fwd_bwd_seconds_median"] = t_med;
  j["fwd_seconds_median"] = median(fwd);
  return t_med;
}

// The report of a training or forward+backward benchmark, after the machine line. `peak` is
// the ceiling the step is judged against (bf16's or fp32's).
void print_step_report(const BenchOptions& o, const ModelConfig& c, const nlohmann::json& j,
                       int64_t n, double t_med, double gflops, double peak, bool bf16) {
  if (o.train) {
    fmt::print(
        "{} batch {}×{} (micro-batch {}): training step median {:.1f} ms, of which "
        "exposed communication {:.1f} ms ({:.1f}%, {:.1f} MB per rank) and Newton–Schulz {:.1f}% "
        "(its products in {})\n",
        o.model.preset, o.batch, c.seq_len, j["micro_batch"].get<int>(), t_med * 1e3,
        j["comm_seconds_median"].get<double>() * 1e3, 100 * j["comm_fraction"].get<double>(),
        double(j["comm_bytes_per_rank"].get<int64_t>()) / 1e6,
        100 * j["newton_schulz_fraction_of_step"].get<double>(),
        o.ns_dtype == "fp32" ? "fp32" : kernels::dtype_name(kernels::compute_dtype()));
    fmt::print(
        "peak resident memory {:.2f} GiB on the largest rank{} (marin plan's parts: {:.2f} GiB)\n",
        double(j["peak_rss_bytes"].get<int64_t>()) / (1 << 30),
        j["shard_params"].get<bool>() ? ", parameters sharded" : "",
        double(j["planned_bytes_per_rank"]["total"].get<int64_t>()) / (1 << 30));
    if (j["ep"].get<int>() > 1)
      fmt::print(
          "expert parallelism {}: all-to-all median {:.1f} ms per step, {:.1f} MB sent per rank\n",
          j["ep"].get<int>(), j["all_to_all_seconds_median"].get<double>() * 1e3,
          double(j["all_to_all_bytes_per_rank"].get<int64_t>()) / 1e6);
  } else {
    fmt::print("{} batch {}×{}: forward+backward median {:.1f} ms (forward {:.1f} ms)\n",
               o.model.preset, o.batch, c.seq_len, t_med * 1e3,
               j["fwd_seconds_median"].get<double>() * 1e3);
  }
  fmt::print("  {:.0f} tokens/s, {:.1f} GFLOP/s of model FLOPs = {:.1f}% of the measured {} peak\n",
             double(n) / t_med, gflops, 100 * gflops / peak, bf16 ? "bf16" : "fp32");
  fmt::print("  process CPU time per step {:.1f} ms ({:.2f} CPU-seconds per wall second)\n",
             j["cpu_seconds_median"].get<double>() * 1e3,
             j["cpu_seconds_median"].get<double>() / t_med);
}

int bench_model(BenchOptions o) {
  if (o.model.preset.empty() && o.model.config.empty()) o.model.preset = "cpu-small";
  if (o.train && o.decode) fail("marin bench: give --train or --decode, not both");
  if (o.profile && !o.train) fail("marin bench: --profile profiles the training step: add --train");
  const ModelConfig c = o.model.resolve();
  if (o.threads > 0) omp_set_num_threads(o.threads);
  const int threads = omp_get_max_threads();
  parallel::Comm& world = parallel::world();
  // The ceiling: this machine's measured FMA peak, on every rank at once (so that ranks sharing
  // cores measure what they share).
  const kernels::PeakResult peak = kernels::measure_fma_peak(threads);
  const double job_peak = world.allreduce(peak.gflops);
  // The bf16 dot-product peak where the CPU has avx512_bf16 (0 elsewhere): the ceiling of a
  // bf16 step, reported next to the fp32 one.
  const double job_bf16_peak = world.allreduce(kernels::measure_bf16_peak(threads).gflops);
  const int64_t n = int64_t(o.batch) * c.seq_len;  // tokens per step (global under mpirun)
  // The compute dtype as the trainer resolves it (the fallback's message once, on rank 0).
  const kernels::DtypeChoice dtype = kernels::resolve_dtype(o.dtype.dtype);
  if (!dtype.message.empty() && world.is_root()) fmt::print(stderr, "{}\n", dtype.message);
  kernels::set_compute_dtype(dtype.dtype);
  nlohmann::json j = {{"preset", o.model.preset},
                      {"cpu", cpu_model_name()},
                      {"isa", kernels::isa_name()},
                      {"gemm", kernels::gemm_library_name(kernels::gemm_library())},
                      {"dtype", kernels::dtype_name(dtype.dtype)},
                      {"dtype_requested", o.dtype.dtype},
                      {"fp32_lanes", peak.lanes},
                      {"batch", o.batch},
                      {"seq_len", c.seq_len},
                      {"ranks", world.size()},
                      {"threads", threads},
                      {"iters", o.iters},
                      {"peak_gflops", job_peak},
                      {"bf16_peak_gflops", job_bf16_peak}};
  double t_med = 0;
  if (o.decode) {
    if (world.size() > 1) fail("marin bench --decode: one process (decoding is not distributed)");
    j.update(bench_decode(o, c));
    if (o.json) {
      fmt::print("{}\n", j.dump());
      return 0;
    }
    print_machine(j, world.size(), threads, job_peak, job_bf16_peak);
    print_decode_report(o, j);
    return 0;
  }
  if (o.train) {
    j.update(bench_train(o, c));
    t_med = j["step_seconds_median"].get<double>();
  } else {
    if (world.size() > 1) fail("marin bench: under mpirun, use --train (the data-parallel step)");
    t_med = bench_forward_backward(o, c, n, j);
  }
  const double gflops = 3.0 * double(forward_flops_per_token(c)) * double(n) / t_med / 1e9;
  j["tokens_per_second"] = double(n) / t_med;
  j["model_gflops"] = gflops;
  j["fraction_of_peak"] = gflops / job_peak;
  // A bf16 step is judged against the bf16 dot-product peak (the emulation runs fp32 FMAs).
  const bool bf16 = dtype.dtype == kernels::Dtype::bf16 && job_bf16_peak > 0;
  if (bf16) j["fraction_of_bf16_peak"] = gflops / job_bf16_peak;
  if (!world.is_root()) return 0;
  if (o.json) {
    fmt::print("{}\n", j.dump());
    return 0;
  }
  print_machine(j, world.size(), threads, job_peak, job_bf16_peak);
  print_step_report(o, c, j, n, t_med, gflops, bf16 ? job_bf16_peak : job_peak, bf16);
  if (o.profile)
    print_profile(j["profile"], j["step_seconds_mean"], bf16 ? job_bf16_peak : job_peak, bf16);
  return 0;
}

int bench_tokenizer(const BenchOptions& o) {
  std::vector<std::string> files = o.files;
  if (files.empty()) fail("marin bench tokenizer: give --in FILE... (text or .jsonl)");
  if (o.vocab.empty())
    fail("marin bench tokenizer: give --tokenizer (a .tiktoken or tokenizer.json)");
  const TokenizerBench r = bench_tokenizer_encode(o.vocab, files);
  nlohmann::json j = {{"mb_per_s", r.mb_per_s}, {"bytes", r.bytes},   {"tokens", r.tokens},
                      {"docs", r.docs},         {"passes", r.passes}, {"seconds", r.seconds}};
  if (o.json)
    fmt::print("{}\n", j.dump());
  else
    fmt::print("tokenizer encode: {:.2f} MB/s single-threaded ({} docs, {} bytes, {} tokens)\n",
               r.mb_per_s, r.docs, r.bytes, r.tokens);
  return 0;
}

}  // namespace

MARIN_COMMAND(
    bench, "bench",
    "Benchmark a model (forward+backward; --train the step, --decode decoding) or the "
    "tokenizer",
    [](CLI::App& app) -> Runner {
      auto o = std::make_shared<BenchOptions>();
      app.add_option("what", o->what, "model (default) or tokenizer")
          ->check(CLI::IsMember({"model", "tokenizer"}));
      o->model.add(app);
      o->dtype.add(app);
      app.add_option("--batch", o->batch, "sequences per step (global under mpirun)")
          ->default_val(8);
      app.add_option("--micro-batch", o->micro_batch,
                     "--train: rows per forward (default as marin train)");
      app.add_option("--ep", o->ep, "--train: expert parallelism (as marin train)");
      app.add_option("--ns-dtype", o->ns_dtype,
                     "--train: Newton–Schulz products in the compute dtype (default) or fp32 (as "
                     "marin train)")
          ->check(CLI::IsMember({"fp32", "compute"}));
      app.add_flag("--no-overlap", o->no_overlap,
                   "--train under mpirun: sum the gradients after the backward and run the "
                   "all-to-alls in line (as marin train)");
      app.add_flag("--shard-params", o->shard_params,
                   "--train under mpirun: shard the dense parameters and gradients over the ranks "
                   "(as marin train)");
      app.add_option("--iters", o->iters, "timed iterations")->default_val(5);
      app.add_option("--warmup", o->warmup, "untimed iterations first")->default_val(2);
      app.add_option("--threads", o->threads,
                     "compute threads of this process (default: the idle cores)");
      app.add_option("--tokenizer", o->vocab, "tokenizer bench: tokenizer.json or .tiktoken file");
      add_deprecated(app, "--vocab", "--tokenizer", o->vocab);
      app.add_option("--in", o->files, "tokenizer bench: input files");
      app.add_flag("--json", o->json, "print one JSON object");
      app.add_flag("--train", o->train,
                   "time the full training step as marin train runs it (data parallel "
                   "under mpirun) and Newton–Schulz");
      app.add_flag("--profile", o->profile,
                   "--train: each op's time per step, share of the step, GFLOP/s of its "
                   "products and % of the peak (docs/benchmarks.md)");
      app.add_flag("--decode", o->decode,
                   "time incremental decoding as marin sample runs it (one sequence), or "
                   "generate_until (--gen-batch sequences together)");
      app.add_option("--gen-batch", o->gen_batch,
                     "--decode: sequences decoded together, one token of each per forward")
          ->capture_default_str();
      app.add_option("--prompt-tokens", o->prompt_tokens,
                     "--decode: prompt length in tokens (default 64, at most a quarter of "
                     "seq_len)");
      app.add_option("--max-tokens", o->max_tokens,
                     "--decode: tokens generated after the prompt (default 256, at most what "
                     "fits)");
      return [o] { return o->what == "tokenizer" ? bench_tokenizer(*o) : bench_model(*o); };
    });

}  // namespace marin::cli
