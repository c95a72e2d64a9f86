// marin bench: timed forward+backward of a preset (after warm-up), reported as tokens/s and model
// GFLOP/s by the §6 estimator (3·F_fwd per token for forward+backward) against this machine's
// peak; `marin bench tokenizer` times the BPE encoder.
#include <fmt/core.h>
#include <omp.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "cli/options.hpp"
#include "core/rng.hpp"
#include "core/timer.hpp"
#include "data/tokenizer/bench.hpp"
#include "model/accounting.hpp"
#include "model/model.hpp"
#include "optim/hparams.hpp"
#include "optim/newton_schulz.hpp"
#include "optim/optimizer.hpp"

namespace marin::cli {
namespace {

// Single-core fp32 FMA peak of this machine class (design.md: ~117 GFLOP/s on Zen 4 AVX-512).
constexpr double kPeakGflopsPerCore = 117.0;

struct BenchOptions {
  std::string what = "model";
  ModelOptions model;
  int batch = 8, iters = 5, warmup = 2, threads = 0;
  bool json = false, train = false;
  std::string vocab;
  std::vector<std::string> files;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int bench_model(BenchOptions o) {
  if (o.model.preset.empty() && o.model.config.empty()) o.model.preset = "cpu-small";
  const ModelConfig c = o.model.resolve();
  if (o.threads > 0) omp_set_num_threads(o.threads);
  const int threads = omp_get_max_threads();
  Model<float> m(c, o.batch);
  m.init(1);
  const int64_t n = int64_t(o.batch) * c.seq_len;
  std::vector<int32_t> tok(n), lab(n), seg(n);
  Rng rng(3);
  for (int64_t i = 0; i < n; ++i) {
    tok[i] = int32_t(rng.next_u64() % c.vocab_size);
    lab[i] = int32_t(rng.next_u64() % c.vocab_size);
    seg[i] = int32_t((i % c.seq_len) / 200);  // a few packed documents per row
  }
  const Batch b{o.batch, tok.data(), lab.data(), seg.data()};
  // --train: the full step (forward, backward, optimizer), and Newton–Schulz alone on the same
  // gradients so its share of the step is measured, not estimated.
  OptimConfig oc;
  const HyperParams h = heuristic_hparams(c.hidden_dim, o.batch, c.seq_len, 1000);
  oc.muonh_lr = h.muonh_lr;
  oc.adam_lr = h.adam_lr;
  oc.beta2 = h.beta2;
  oc.eps = h.eps;
  oc.total_steps = 1000;
  std::unique_ptr<Optimizer> opt;
  Buffer<float> ns_work, ns_out;
  if (o.train) {
    opt = std::make_unique<Optimizer>(m.table(), oc);
    i64 w = 1, out = 1;
    for (auto& p : m.table().params())
      if (p.group == OptGroup::MuonH) {
        w = std::max(w, optim::ns_workspace_size(p.rows(), p.cols()));
        out = std::max(out, p.size);
      }
    ns_work.resize(w);
    ns_out.resize(out);
  }
  std::vector<double> fwd, total, opt_t, ns_t;
  for (int i = 0; i < o.warmup + o.iters; ++i) {
    Timer t;
    m.forward(b);
    const double tf = t.seconds();
    m.backward();
    double tt = t.seconds();
    if (opt) {
      Timer tn;
      for (auto& p : m.table().params())
        if (p.group == OptGroup::MuonH)
          optim::newton_schulz_batched(m.grads().data() + p.offset, ns_out.data(), p.num_mats,
                                       p.rows(), p.cols(), ns_work.data());
      const double ns = tn.seconds();
      Timer to;
      opt->step(m.params().data(), m.grads().data(), i);
      const double ot = to.seconds();
      tt += ot;
      if (i >= o.warmup) opt_t.push_back(ot), ns_t.push_back(ns);
    }
    if (i >= o.warmup) fwd.push_back(tf), total.push_back(tt);
  }
  const double F = double(forward_flops_per_token(c));
  const double t_med = median(total), f_med = median(fwd);
  const double gflops = 3.0 * F * double(n) / t_med / 1e9;
  const double peak = kPeakGflopsPerCore * threads;
  nlohmann::json j = {{"preset", o.model.preset},
                      {"batch", o.batch},
                      {"seq_len", c.seq_len},
                      {"threads", threads},
                      {"iters", o.iters},
                      {"fwd_bwd_seconds_median", t_med},
                      {"fwd_seconds_median", f_med},
                      {"tokens_per_second", double(n) / t_med},
                      {"model_gflops", gflops},
                      {"peak_gflops", peak},
                      {"fraction_of_peak", gflops / peak}};
  if (opt) {
    j["optimizer_seconds_median"] = median(opt_t);
    j["newton_schulz_seconds_median"] = median(ns_t);
    j["newton_schulz_fraction_of_step"] = median(ns_t) / t_med;
  }
  if (o.json) {
    fmt::print("{}\n", j.dump());
    return 0;
  }
  fmt::print("{} batch {}×{} on {} thread(s): {} median {:.1f} ms (forward {:.1f} ms)\n",
             o.model.preset, o.batch, c.seq_len, threads,
             opt ? "forward+backward+optimizer" : "forward+backward", t_med * 1e3, f_med * 1e3);
  if (opt)
    fmt::print("  optimizer {:.1f} ms, of which Newton–Schulz {:.1f} ms = {:.1f}% of the step\n",
               median(opt_t) * 1e3, median(ns_t) * 1e3, 100 * median(ns_t) / t_med);
  fmt::print(
      "  {:.0f} tokens/s, {:.1f} GFLOP/s of model FLOPs = {:.1f}% of the {:.0f} GFLOP/s fp32 "
      "peak\n",
      double(n) / t_med, gflops, 100 * gflops / peak, peak);
  return 0;
}

int bench_tokenizer(const BenchOptions& o) {
  std::vector<std::string> files = o.files;
  if (files.empty()) fail("marin bench tokenizer: give --in FILE... (text or .jsonl)");
  if (o.vocab.empty()) fail("marin bench tokenizer: give --vocab (a .tiktoken or tokenizer.json)");
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

MARIN_COMMAND(bench, "bench", "Benchmark forward+backward of a model (default) or the tokenizer",
              [](CLI::App& app) -> Runner {
                auto o = std::make_shared<BenchOptions>();
                app.add_option("what", o->what, "model (default) or tokenizer")
                    ->check(CLI::IsMember({"model", "tokenizer"}));
                o->model.add(app);
                app.add_option("--batch", o->batch, "sequences per step")->default_val(8);
                app.add_option("--iters", o->iters, "timed iterations")->default_val(5);
                app.add_option("--warmup", o->warmup, "untimed iterations first")->default_val(2);
                app.add_option("--threads", o->threads, "OpenMP threads (default: all)");
                app.add_option("--vocab", o->vocab, "tokenizer bench: vocabulary file");
                app.add_option("--in", o->files, "tokenizer bench: input files");
                app.add_flag("--json", o->json, "print one JSON object");
                app.add_flag("--train", o->train,
                             "time the full training step (with the optimizer) and Newton–Schulz");
                return
                    [o] { return o->what == "tokenizer" ? bench_tokenizer(*o) : bench_model(*o); };
              });

}  // namespace marin::cli
