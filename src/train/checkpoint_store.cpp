#include "train/checkpoint_store.hpp"

#include <fmt/core.h>

#include <algorithm>
#include <filesystem>
#include <numeric>

#include "core/error.hpp"
#include "kernels/threads.hpp"
#include "train/run_state_check.hpp"
#include "train/step_engine.hpp"
#include "train/train_option_table.hpp"

namespace marin {
namespace fs = std::filesystem;

namespace {

// The compute threads of a resumed run (kernels/threads.hpp): the count its checkpoint
// records, unless the user chose one; a chosen count that differs runs, with `warning` saying
// what it costs. Returns the resume line's words for it.
std::string resume_threads(const std::string& ckpt_dir, int recorded, std::string& warning) {
  if (recorded > 0 && !kernels::compute_threads_chosen())
    kernels::set_compute_threads(recorded, /*chosen=*/false);
  const int now = kernels::compute_threads();
  if (recorded > 0 && now != recorded)
    warning = fmt::format(
        "{} was written at {} compute threads and this process has {} (--threads, "
        "OMP_NUM_THREADS): the run goes on, but not bit-identically to an uninterrupted one "
        "(oneDNN's fp32 GEMMs sum in an order that depends on the thread count); --threads {} "
        "continues it bit-identically",
        ckpt_dir, recorded, now, recorded);
  return fmt::format(
      "{} compute thread{}{}", now, now > 1 ? "s" : "",
      recorded > 0 && !kernels::compute_threads_chosen() ? ", the checkpoint's" : "");
}

// The settings that depend on the rank count, fitted to `ranks` (ResumeChanges::ranks): the
// expert split (re-derived unless given; `warnings` gets a line when it changes) and the batch's
// split over the ranks (fixed by the run: refused). Every failure is a SettingsError.
void fit_to_ranks(TrainOptions& o, bool ep_given, int ranks, std::vector<std::string>& warnings) {
  const int experts = o.model.num_experts;
  const auto fits = [&](int ep) { return ep >= 1 && ranks % ep == 0 && experts % ep == 0; };
  if (!fits(o.ep)) {
    if (ep_given)
      throw SettingsError(fmt::format(
          "--ep {} must be at least 1 and divide the number of ranks ({}) and num_experts ({})",
          o.ep, ranks, experts));
    // The largest split not above the stored one that these ranks and experts allow.
    const int g = std::gcd(ranks, experts);
    int ep = std::clamp(o.ep, 1, std::max(g, 1));
    while (ep > 1 && g % ep != 0) --ep;
    warnings.push_back(fmt::format(
        "--ep {} of the checkpoint does not divide {} rank{}{}; resuming with --ep {}", o.ep, ranks,
        ranks == 1 ? "" : "s",
        o.ep >= 1 && experts % o.ep != 0 ? fmt::format(" and num_experts ({})", experts) : "", ep));
    o.ep = ep;
  }
  TrainOptions shaped = o;
  try {
    StepEngine::check_shape(shaped, ranks);
  } catch (const SettingsError&) {
    throw;
  } catch (const Error& e) {
    throw SettingsError(e.what());
  }
}

}  // namespace

std::string CheckpointStore::write(const RunState& state, const ParamTable& table,
                                   const float* params, const float* m, const float* v,
                                   int64_t keep_every) const {
  const std::string dir =
      save_run_checkpoint(run_dir_, state, state.options.model, table, params, m, v);
  prune(dir, keep_every);
  return dir;
}

std::string CheckpointStore::write_sharded(const RunState& state, const ParamTable& full,
                                           const std::vector<StatePiece>& pieces, const Mesh& mesh,
                                           parallel::Comm& comm, int64_t keep_every) const {
  const std::string dir =
      save_sharded_checkpoint(run_dir_, state, state.options.model, full, pieces, mesh, comm);
  if (comm.is_root()) prune(dir, keep_every);
  return dir;
}

void CheckpointStore::load(const std::string& dir, const ParamTable& table, Buffer<float>& params,
                           Buffer<float>& m, Buffer<float>& v) {
  load_run_checkpoint(dir, table, params, m, v);
}

std::string CheckpointStore::latest_link() const {
  std::error_code ec;
  const fs::path target = fs::read_symlink(fs::path(run_dir_) / "checkpoints" / "latest", ec);
  return ec ? std::string() : target.string();
}

void CheckpointStore::require_checkpoint() const {
  if (list().empty()) fail("{}: no complete checkpoint to resume from", run_dir_);
}

void CheckpointStore::resume(const ResumeChanges& changes, bool root,
                             const std::function<void(const ResumePoint&)>& start) const {
  require_checkpoint();
  const std::vector<std::string> ckpts = list();
  std::string newest_error;
  for (const std::string& ckpt : ckpts) {
    try {
      start(resume_point(ckpt, changes));
      return;
    } catch (const SettingsError& e) {
      // Not the checkpoint's fault: an older one would not do better (or would silently lose
      // the steps after it), so the resume stops here.
      fail("{}: cannot resume from {}: {} (a setting, not damage: no older checkpoint is tried)",
           run_dir_, ckpt, e.what());
    } catch (const Error& e) {
      if (newest_error.empty()) newest_error = e.what();
      if (root) fmt::print(stderr, "marin: warning: skipping checkpoint {}: {}\n", ckpt, e.what());
    }
  }
  fail("{}: no checkpoint passes the checks for a resume; the newest: {}", run_dir_, newest_error);
}

ResumePoint CheckpointStore::resume_point(const std::string& ckpt, const ResumeChanges& changes) {
  ResumePoint p;
  p.dir = ckpt;
  p.state = read_run_state(ckpt);
  RunState& st = p.state;
  check_run_state(ckpt, st);
  std::string threads_warning;
  p.threads_note = resume_threads(ckpt, st.threads, threads_warning);
  if (!threads_warning.empty()) p.warnings.push_back(threads_warning);
  st.options.time_limit_s = 0;  // each invocation's own (--time-limit, applied by the edit)
  const TrainOptions before = st.options;
  if (changes.edit) changes.edit(st.options);
  if (!st.options.forecast.empty())
    for (const TrainOption& s : train_option_table())
      if (s.on_resume == OnResume::NotWithForecast && s.get(st.options) != s.get(before))
        throw SettingsError(fmt::format(
            "{} cannot change on --resume of a run tracked against a forecast ({}: it binds them)",
            s.flag, st.options.forecast));
  if (st.options.steps != before.steps) {
    if (st.options.steps < st.step)
      throw SettingsError(
          fmt::format("--steps {}: {} has already done {} steps", st.options.steps, ckpt, st.step));
    st.options.optim.total_steps = st.options.steps;  // the schedule's horizon moves with it
  }
  if (changes.ranks > 0) {
    const bool ep_given =
        std::find(changes.given.begin(), changes.given.end(), "--ep") != changes.given.end();
    fit_to_ranks(st.options, ep_given, changes.ranks, p.warnings);
  }
  if (st.options.transport != before.transport || st.options.waves != before.waves ||
      st.options.ep != before.ep) {
    if (!st.lineage.is_object()) st.lineage = nlohmann::json::object();
    st.lineage["switches"].push_back({{"at_step", st.step},
                                      {"transport", transport_name(st.options.transport)},
                                      {"waves", st.options.waves},
                                      {"ep", st.options.ep},
                                      {"from", transport_name(before.transport)},
                                      {"from_ep", before.ep}});
  }
  return p;
}

ResumePoint CheckpointStore::fork_point(const std::string& ckpt, const TrainOptions& changed) {
  const RunState parent = read_run_state(ckpt);
  if (changed.model.to_json() != parent.options.model.to_json()) {
    // Only non-structural model fields may change on a fork (capacity factor, z-loss, ...).
    ModelConfig a = changed.model, b = parent.options.model;
    a.capacity_factor = b.capacity_factor;
    a.z_loss = b.z_loss;
    if (a.to_json() != b.to_json())
      fail("--fork-from {}: a fork cannot change the model's shape", ckpt);
  }
  ResumePoint p;
  p.dir = ckpt;
  p.state = parent;
  p.state.options = changed;
  p.state.options.optim.total_steps = changed.steps;
  // The data position carries over when the data is the same; a changed mixture starts fresh.
  p.restore_data = changed.data == parent.options.data;
  p.state.lineage = {{"forked_from", fs::absolute(ckpt).string()},
                     {"at_step", parent.step},
                     {"parent_options", parent.options.to_json()},
                     {"parent_lineage", parent.lineage}};
  return p;
}

}  // namespace marin
