#include "train/trainer.hpp"

#include <fmt/core.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <optional>
#include <set>

#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/timer.hpp"
#include "data/loader.hpp"
#include "data/mixture.hpp"
#include "data/shards.hpp"
#include "data/tokenizer/tokenizer.hpp"
#include "eval/domain_eval.hpp"
#include "eval/macro_metric.hpp"
#include "model/moe/router_stats.hpp"
#include "scaling/forecast.hpp"
#include "train/checkpoint.hpp"

namespace marin {
namespace fs = std::filesystem;

namespace {

std::atomic<bool> g_interrupted{false};
void on_sigint(int) {
  g_interrupted = true;
}

std::string format_duration(double s) {
  if (!(s >= 0) || s > 1e7) return "?";
  const int64_t t = int64_t(s);
  if (t >= 3600) return fmt::format("{}h{:02d}m", t / 3600, (t % 3600) / 60);
  if (t >= 60) return fmt::format("{}m{:02d}s", t / 60, t % 60);
  return fmt::format("{}s", t);
}

// Sum of squares of a strided set of tensors, per optimizer group.
struct GroupNorms {
  double sq[4] = {0, 0, 0, 0};
  nlohmann::json json() const {
    return {{"muonh", std::sqrt(sq[0])}, {"adamh", std::sqrt(sq[1])}, {"adam", std::sqrt(sq[2])}};
  }
};

GroupNorms group_norms(const ParamTable& t, const float* x) {
  GroupNorms g;
  for (auto& p : t.params()) {
    double s = 0;
    for (int64_t i = 0; i < p.size; ++i) s += double(x[p.offset + i]) * x[p.offset + i];
    g.sq[int(p.group)] += s;
  }
  return g;
}

}  // namespace

std::unique_ptr<BatchSource> make_batch_source(const nlohmann::json& spec, const TrainOptions& o) {
  if (spec.is_null()) return nullptr;
  const ModelConfig& c = o.model;
  const std::string kind = spec.value("kind", "");
  if (kind == "rows")
    return make_rows_source(spec.at("path").get<std::string>(), c.seq_len, c.vocab_size);
  if (kind == "mixture") {
    LoaderOptions lo;
    lo.token_dir = spec.at("tokens").get<std::string>();
    lo.seq_len = c.seq_len;
    lo.rows_per_step = o.batch;
    lo.total_steps = o.steps;
    lo.seed = o.seed;
    lo.vocab_size = uint32_t(c.vocab_size);
    if (!o.tokenizer.empty()) lo.tokenizer_hash = Tokenizer::load(o.tokenizer).hash();
    return std::make_unique<MixtureLoader>(MixtureConfig::from_json(spec.at("mixture"), "mixture"),
                                           lo);
  }
  if (kind == "valid") {
    // The validation split of the given domains, in order (the same rows at every evaluation).
    const std::string dir = spec.at("tokens").get<std::string>();
    const TokenManifest m = TokenManifest::load(dir);
    std::vector<std::string> paths;
    for (auto& d : spec.at("domains"))
      for (auto& sh : m.find(d.get<std::string>(), "valid")) paths.push_back(m.path(sh));
    if (paths.empty())
      fail("{}: no validation shards for domains {}", dir, spec.at("domains").dump());
    const uint64_t hash =
        o.tokenizer.empty() ? m.tokenizer_hash : Tokenizer::load(o.tokenizer).hash();
    return std::make_unique<ValidationSource>(paths, c.seq_len, hash, uint32_t(c.vocab_size));
  }
  fail("unknown data source kind '{}' in {}", kind, spec.dump());
}

void Trainer::setup(const TrainOptions& o, const std::string& run_dir) {
  opt_ = o;
  run_dir_ = run_dir;
  std::error_code ec;
  fs::create_directories(run_dir, ec);
  if (ec) fail("{}: cannot create run directory: {}", run_dir, ec.message());
  model_ = std::make_unique<Model<float>>(o.model, o.batch);
  model_->transport = o.transport;
  optimizer_ = std::make_unique<Optimizer>(model_->table(), o.optim);
  data_ = make_batch_source(o.data, o);
  if (!data_) fail("no training data given (--tokens or --data)");
  valid_ = make_batch_source(o.valid, o);
  qb_ = QBBalancer(o.model.qb_bins);
  const size_t n = size_t(o.batch) * o.model.seq_len;
  tokens_.resize(n);
  labels_.resize(n);
  seg_.resize(n);
}

Trainer::Trainer(const TrainOptions& o, const std::string& run_dir, const std::string& init_dir) {
  TrainOptions opts = o;
  opts.resolve_hparams();
  setup(opts, run_dir);
  if (!init_dir.empty()) {
    const ModelConfig c = load_config(init_dir);
    if (c.to_json() != opts.model.to_json())
      fail("{}/config.json does not match the run's model configuration", init_dir);
    load_params(init_dir, model_->table(), model_->params().data());
    lineage_ = {{"init", init_dir}};
  } else {
    model_->init(opts.seed);
  }
}

std::unique_ptr<Trainer> Trainer::resume(const std::string& run_dir) {
  auto ckpt = latest_checkpoint(run_dir);
  if (!ckpt) fail("{}: no complete checkpoint to resume from", run_dir);
  RunState st = read_run_state(*ckpt);
  std::unique_ptr<Trainer> t(new Trainer());
  t->setup(st.options, run_dir);
  load_run_checkpoint(*ckpt, *t->model_, *t->optimizer_);
  t->data_->restore(st.data_state);
  t->step_ = st.step;
  t->lineage_ = st.lineage;
  fmt::print(stderr, "resuming {} from {} (step {})\n", run_dir, *ckpt, st.step);
  return t;
}

std::unique_ptr<Trainer> Trainer::fork(const std::string& ckpt_dir, const std::string& run_dir,
                                       const TrainOptions& changed) {
  RunState st = read_run_state(ckpt_dir);
  if (changed.model.to_json() != st.options.model.to_json()) {
    // Only non-structural model fields may change on a fork (capacity factor, z-loss, ...).
    ModelConfig a = changed.model, b = st.options.model;
    a.capacity_factor = b.capacity_factor;
    a.z_loss = b.z_loss;
    if (a.to_json() != b.to_json())
      fail("--fork-from {}: a fork cannot change the model's shape", ckpt_dir);
  }
  TrainOptions o = changed;
  o.optim.total_steps = o.steps;
  std::unique_ptr<Trainer> t(new Trainer());
  t->setup(o, run_dir);
  load_run_checkpoint(ckpt_dir, *t->model_, *t->optimizer_);
  // The data position carries over when the data is the same; a changed mixture starts fresh.
  if (o.data == st.options.data) t->data_->restore(st.data_state);
  t->step_ = st.step;
  t->lineage_ = {{"forked_from", fs::absolute(ckpt_dir).string()},
                 {"at_step", st.step},
                 {"parent_options", st.options.to_json()},
                 {"parent_lineage", st.lineage}};
  write_file_atomic(run_dir + "/lineage.json", t->lineage_.dump(2) + "\n");
  return t;
}

Trainer::~Trainer() {
  if (metrics_) fclose(metrics_);
}

void Trainer::write_metrics(const nlohmann::json& j) {
  if (!metrics_) {
    metrics_ = fopen((run_dir_ + "/metrics.jsonl").c_str(), "a");
    if (!metrics_) fail("{}/metrics.jsonl: cannot open for append", run_dir_);
  }
  fmt::print(metrics_, "{}\n", j.dump());
  fflush(metrics_);
}

std::string Trainer::save_checkpoint() {
  RunState st{step_, opt_, data_->state(), lineage_};
  const std::string dir = save_run_checkpoint(run_dir_, st, *model_, *optimizer_);
  prune_checkpoints(run_dir_, dir, opt_.keep_every);
  return dir;
}

double Trainer::validate() {
  if (!valid_) return -1;
  const nlohmann::json saved = valid_->state();  // every validation reads the same rows
  const Transport t = model_->transport;
  model_->transport = Transport::Dropless;  // evaluation is always dropless
  double ce = 0;
  int64_t n = 0;
  for (int64_t i = 0; i < opt_.eval_batches; ++i) {
    valid_->next(opt_.batch, tokens_.data(), labels_.data(), seg_.data());
    const LossStats s = model_->forward({opt_.batch, tokens_.data(), labels_.data(), seg_.data()});
    ce += s.ce * double(s.tokens);
    n += s.tokens;
  }
  model_->transport = t;
  valid_->restore(saved);
  return n > 0 ? ce / double(n) : -1;
}

void Trainer::use_macro_metric(const eval::MacroMetric& metric) {
  const uint64_t hash = opt_.tokenizer.empty() ? 0 : Tokenizer::load(opt_.tokenizer).hash();
  macro_ = std::make_unique<eval::MacroEvaluator>(metric, hash);
}

nlohmann::json Trainer::evaluate_domains() {
  if (!macro_) {
    if (opt_.data.value("kind", "") != "mixture")
      fail("per-domain evaluation during training needs text data (--data with --token-dir)");
    eval::MacroMetric all;
    all.token_dir = opt_.data.at("tokens").get<std::string>();
    use_macro_metric(all);
  }
  return eval::summary(macro_->evaluate(*model_));
}

TrainResult Trainer::run() {
  TrainResult res;
  g_interrupted = false;
  auto old_handler = std::signal(SIGINT, on_sigint);
  write_file_atomic(
      run_dir_ + "/run.json",
      nlohmann::json({{"options", opt_.to_json()}, {"lineage", lineage_}}).dump(2) + "\n");
  const bool tty = isatty(fileno(stderr));
  // A pre-registered forecast: evaluate at its fractions and log predicted vs actual.
  std::optional<scaling::ForecastTracker> forecast;
  std::set<int64_t> forecast_steps;
  // A macro-loss forecast carries its metric's definition: the run is scored with exactly it.
  bool forecast_macro = false;
  if (!opt_.forecast.empty()) {
    forecast.emplace(opt_.forecast, opt_.steps);
    for (int64_t s : forecast->steps()) forecast_steps.insert(s);
    forecast_macro = forecast->metric() == "macro_loss";
    if (forecast_macro) {
      if (forecast->eval_spec().is_null())
        fail("{}: a macro_loss forecast without its metric (\"eval\")", opt_.forecast);
      use_macro_metric(
          eval::MacroMetric::from_json(forecast->eval_spec(), opt_.forecast + ":eval"));
    } else if (!valid_) {
      fail("--forecast needs validation data to measure the loss it predicts");
    }
  }
  const ModelConfig& c = opt_.model;
  const int64_t tokens_per_step = int64_t(opt_.batch) * c.seq_len;
  Timer wall;
  int64_t first_step = step_;
  int bad_in_row = 0;
  Buffer<float>& grads = model_->grads();
  while (step_ < opt_.steps) {
    Timer t;
    data_->next(opt_.batch, tokens_.data(), labels_.data(), seg_.data());
    const LossStats s = model_->forward({opt_.batch, tokens_.data(), labels_.data(), seg_.data()});
    model_->backward();
    for (int64_t bad : opt_.inject_nan_grad_steps)
      if (bad == step_) grads[0] = std::nanf("");
    const GroupNorms gn = group_norms(model_->table(), grads.data());
    const bool finite = std::isfinite(s.loss) && std::isfinite(gn.sq[0] + gn.sq[1] + gn.sq[2]);
    nlohmann::json m = {
        {"step", step_}, {"loss", s.loss}, {"ce", s.ce}, {"z", s.z}, {"tokens", s.tokens}};
    const LearningRates lr = optimizer_->rates(step_);
    m["lr"] = {{"muonh", lr.muonh}, {"adam", lr.adam}};
    if (finite) {
      bad_in_row = 0;
      // Router health of this step (before the bias moves).
      nlohmann::json routers = nlohmann::json::array();
      for (int64_t l = 0; l < c.num_layers; ++l) {
        const auto& moe = model_->block(l).moe();
        routers.push_back(to_json(router_stats(moe.router().routing(), moe.plan())));
      }
      m["router"] = routers;
      optimizer_->step(model_->params().data(), grads.data(), step_);
      if (opt_.qb) qb_.update(*model_);  // bias for the next step's forward pass
      m["grad_norm"] = gn.json();
      m["param_norm"] = group_norms(model_->table(), model_->params().data()).json();
    } else {
      ++bad_in_row;
      m["skipped"] = "non-finite loss or gradient";
      fmt::print(stderr,
                 "\nmarin: step {}: non-finite loss or gradient, update skipped ({} in a row)\n",
                 step_, bad_in_row);
    }
    ++step_;
    const double dt = t.seconds();
    m["step_seconds"] = dt;
    m["tokens_per_second"] = double(tokens_per_step) / dt;
    res.last_loss = s.loss;
    if (bad_in_row >= opt_.max_bad_steps) {
      write_metrics(m);
      std::signal(SIGINT, old_handler);
      auto last = latest_checkpoint(run_dir_);
      fail(
          "{} consecutive non-finite steps (last at step {}): stopping; the last good checkpoint "
          "is {}",
          bad_in_row, step_ - 1, last ? *last : std::string("(none written yet)"));
    }
    const bool eval_now = valid_ && ((opt_.eval_every > 0 && step_ % opt_.eval_every == 0) ||
                                     step_ == opt_.steps || forecast_steps.count(step_));
    if (eval_now) {
      res.last_valid_ce = validate();
      m["valid_ce"] = res.last_valid_ce;
      if (forecast && !forecast_macro)
        if (auto rec = forecast->observe(step_, res.last_valid_ce)) m["forecast"] = *rec;
    }
    const bool forecast_point = forecast_macro && forecast_steps.count(step_);
    if (forecast_point || (opt_.eval_domains_every > 0 &&
                           (step_ % opt_.eval_domains_every == 0 || step_ == opt_.steps))) {
      m["eval"] = res.last_eval = evaluate_domains();
      if (forecast_point) {
        const auto clean = res.last_eval.value("clean_macro_loss", nlohmann::json());
        if (auto rec = forecast->observe(
                step_, res.last_eval["macro_loss"].get<double>(),
                clean.is_number() ? std::optional(clean.get<double>()) : std::nullopt))
          m["forecast"] = *rec;
      }
    }
    write_metrics(m);
    const double elapsed = wall.seconds();
    const double rate = double(step_ - first_step) / elapsed;
    if (tty) {
      fmt::print(stderr, "\rstep {}/{} | loss {:.4f} | {:.0f} tok/s | {} elapsed | ETA {}{}   ",
                 step_, opt_.steps, s.loss, double(tokens_per_step) / dt, format_duration(elapsed),
                 format_duration(double(opt_.steps - step_) / rate),
                 eval_now ? fmt::format(" | valid {:.4f}", res.last_valid_ce) : "");
    } else if (step_ % 10 == 0 || step_ == opt_.steps || eval_now) {
      fmt::print(stderr, "step {}/{} loss {:.4f} {:.0f} tok/s{}\n", step_, opt_.steps, s.loss,
                 double(tokens_per_step) / dt,
                 eval_now ? fmt::format(" valid {:.4f}", res.last_valid_ce) : "");
    }
    const bool out_of_time = opt_.time_limit_s > 0 && elapsed >= opt_.time_limit_s;
    if (g_interrupted || out_of_time) {
      res.last_checkpoint = save_checkpoint();
      res.interrupted = true;
      fmt::print(stderr, "\n{}: saved {} at step {}\n",
                 g_interrupted ? "interrupted" : "time limit reached", res.last_checkpoint, step_);
      break;
    }
    if ((opt_.ckpt_every > 0 && step_ % opt_.ckpt_every == 0) ||
        (opt_.keep_every > 0 && step_ % opt_.keep_every == 0) || step_ == opt_.steps)
      res.last_checkpoint = save_checkpoint();
  }
  if (tty) fmt::print(stderr, "\n");
  if (forecast && step_ == opt_.steps && (forecast_macro || res.last_valid_ce >= 0)) {
    std::optional<double> loss = res.last_valid_ce, clean;
    if (forecast_macro) {
      loss = res.last_eval["macro_loss"].get<double>();
      if (res.last_eval.value("clean_macro_loss", nlohmann::json()).is_number())
        clean = res.last_eval["clean_macro_loss"].get<double>();
    }
    const nlohmann::json report = forecast->final_report(*loss, clean);
    write_file_atomic(run_dir_ + "/forecast_report.json", report.dump(2) + "\n");
    fmt::print(stderr, "forecast: predicted {:.4f}, actual {:.4f}: {} by {:+.4f} nats ({:+.2f}%)\n",
               report.value("predicted", 0.0), report.value("actual", 0.0),
               report.value("verdict", std::string("?")), report.value("diff_nats", 0.0),
               report.value("diff_percent", 0.0));
    if (report.contains("clean"))
      fmt::print(
          stderr,
          "forecast (clean-only documents, {}): predicted {:.4f}, actual {:.4f}: {} by "
          "{:+.4f} nats ({:+.2f}%)\n",
          report["clean"].value("against", std::string()), report["clean"].value("predicted", 0.0),
          report["clean"].value("actual", 0.0), report["clean"].value("verdict", std::string("?")),
          report["clean"].value("diff_nats", 0.0), report["clean"].value("diff_percent", 0.0));
  }
  std::signal(SIGINT, old_handler);
  res.steps_done = step_;
  return res;
}

}  // namespace marin
