// Mixture config: parsing (TOML via its JSON form, or JSON), validation, schedule lookup.
#include "data/mixture.hpp"

#include <fmt/core.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <sstream>

#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/json_file.hpp"
#include "core/limits.hpp"
#include "core/toml_file.hpp"
#include "data/shards.hpp"

namespace marin {

using nlohmann::json;

namespace {

void only_keys(const json& j, std::initializer_list<const char*> keys, const std::string& where) {
  for (auto it = j.begin(); it != j.end(); ++it)
    if (std::none_of(keys.begin(), keys.end(), [&](const char* k) { return it.key() == k; }))
      fail("{}: unknown field '{}' (expected one of: {})", where, it.key(), fmt::join(keys, ", "));
}

double number(const json& v, const std::string& where) {
  if (!v.is_number()) fail("{}: expected a number, got {}", where, v.dump());
  return v.get<double>();
}

}  // namespace

MixtureConfig MixtureConfig::from_json(const json& j, const std::string& origin) {
  MixtureConfig c;
  c.origin = origin;
  if (!j.is_object()) fail("mixture {}: expected a table/object at the top level", origin);
  only_keys(j, {"sources", "weights", "phase", "phases"}, "mixture " + origin);
  std::map<std::string, MixtureSource> sources;
  if (j.contains("sources")) {
    const json& s = j["sources"];
    if (!s.is_object())
      fail("mixture {}: 'sources' must be a table of name = {{domain, split}}", origin);
    for (auto it = s.begin(); it != s.end(); ++it) {
      const std::string where = fmt::format("mixture {}: sources.{}", origin, it.key());
      MixtureSource src{it.key(), it.key(), "train"};
      if (it->is_string()) {
        src.domain = it->get<std::string>();
      } else if (it->is_object()) {
        only_keys(*it, {"domain", "split"}, where);
        if (it->contains("domain")) {
          if (!(*it)["domain"].is_string()) fail("{}.domain: expected a string", where);
          src.domain = (*it)["domain"].get<std::string>();
        }
        if (it->contains("split")) {
          if (!(*it)["split"].is_string()) fail("{}.split: expected a string", where);
          src.split = (*it)["split"].get<std::string>();
        }
      } else {
        fail("{}: expected a domain name or {{domain = ..., split = ...}}", where);
      }
      if (src.split != "train" && src.split != "valid")
        fail("{}.split: '{}' must be train or valid", where, src.split);
      sources[src.name] = src;
    }
  }
  // Phases as name → weight maps first; sources are all names seen, sorted.
  struct RawPhase {
    int64_t start_step = 0;
    double start_fraction = -1;
    std::map<std::string, double> w;
  };
  std::vector<RawPhase> raw;
  auto read_weights = [&](const json& w, const std::string& where) {
    if (!w.is_object() || w.empty())
      fail("{}: expected a non-empty table of source = weight", where);
    std::map<std::string, double> out;
    for (auto it = w.begin(); it != w.end(); ++it)
      out[it.key()] = number(*it, where + "." + it.key());
    return out;
  };
  const bool has_phases = j.contains("phase") || j.contains("phases");
  if (j.contains("phase") && j.contains("phases"))
    fail("mixture {}: give 'phase' or 'phases', not both", origin);
  if (has_phases && j.contains("weights"))
    fail("mixture {}: give top-level 'weights' (one phase) or [[phase]] tables, not both", origin);
  if (has_phases) {
    const json& ps = j.contains("phase") ? j["phase"] : j["phases"];
    if (!ps.is_array() || ps.empty()) fail("mixture {}: 'phase' must be a non-empty array", origin);
    for (size_t i = 0; i < ps.size(); ++i) {
      const std::string where = fmt::format("mixture {}: phase[{}]", origin, i);
      const json& p = ps[i];
      if (!p.is_object()) fail("{}: expected a table", where);
      only_keys(p, {"start_step", "start_fraction", "weights"}, where);
      RawPhase r;
      if (p.contains("start_step") && p.contains("start_fraction"))
        fail("{}: give start_step or start_fraction, not both", where);
      if (p.contains("start_step")) {
        if (!p["start_step"].is_number_integer() || p["start_step"].get<int64_t>() < 0)
          fail("{}.start_step: expected an integer ≥ 0", where);
        r.start_step = p["start_step"].get<int64_t>();
      } else if (p.contains("start_fraction")) {
        r.start_fraction = number(p["start_fraction"], where + ".start_fraction");
        if (!(r.start_fraction >= 0.0 && r.start_fraction < 1.0))
          fail("{}.start_fraction: {} must be in [0, 1)", where, r.start_fraction);
      } else if (i > 0) {
        fail("{}: needs start_step or start_fraction", where);
      }
      if (!p.contains("weights")) fail("{}: missing 'weights'", where);
      r.w = read_weights(p["weights"], where + ".weights");
      raw.push_back(std::move(r));
    }
  } else {
    if (!j.contains("weights")) fail("mixture {}: no 'weights' and no [[phase]] tables", origin);
    RawPhase r;
    r.w = read_weights(j["weights"], fmt::format("mixture {}: weights", origin));
    raw.push_back(std::move(r));
  }
  for (const RawPhase& r : raw)
    for (const auto& [name, w] : r.w)
      if (!sources.count(name)) {
        if (j.contains("sources")) {
          std::vector<std::string> have;
          for (const auto& kv : sources) have.push_back(kv.first);
          fail("mixture {}: weights name source '{}' which is not in [sources] (have: {})", origin,
               name, fmt::join(have, ", "));
        }
        sources[name] = MixtureSource{name, name, "train"};
      }
  for (const auto& [name, s] : sources) c.sources.push_back(s);
  for (const RawPhase& r : raw) {
    MixturePhase p;
    p.start_step = r.start_step;
    p.start_fraction = r.start_fraction;
    p.weights.assign(c.sources.size(), 0.0);
    for (const auto& [name, w] : r.w) p.weights[c.source_index(name)] = w;
    c.phases.push_back(std::move(p));
  }
  c.validate();
  return c;
}

MixtureConfig MixtureConfig::from_toml_text(const std::string& text, const std::string& origin) {
  return from_json(TomlFile::parse(text, origin).json(), origin);
}

MixtureConfig MixtureConfig::load(const std::string& path) {
  const std::string text = read_file(path);
  const bool is_json = path.size() >= 5 && path.substr(path.size() - 5) == ".json";
  if (is_json) {
    return from_json(parse_json(text, "mixture " + path), path);
  }
  return from_toml_text(text, path);
}

MixtureConfig MixtureConfig::uniform(const std::vector<std::string>& domains) {
  json w = json::object();
  for (const auto& d : domains) w[d] = 1.0;
  return from_json({{"weights", w}}, "<uniform>");
}

json MixtureConfig::to_json() const {
  json s = json::object();
  for (const auto& src : sources) s[src.name] = {{"domain", src.domain}, {"split", src.split}};
  json ps = json::array();
  for (const auto& p : phases) {
    json w = json::object();
    for (size_t i = 0; i < sources.size(); ++i) w[sources[i].name] = p.weights[i];
    json pj = {{"weights", w}};
    if (p.start_fraction >= 0)
      pj["start_fraction"] = p.start_fraction;
    else
      pj["start_step"] = p.start_step;
    ps.push_back(pj);
  }
  return {{"sources", s}, {"phase", ps}};
}

namespace {
constexpr double kMinWeight = 1e-6, kMaxWeight = 1e6;
}  // namespace

void MixtureConfig::validate() const {
  if (sources.empty()) fail("mixture {}: no sources", origin);
  if (sources.size() > kMaxMixtureSources)
    fail("mixture {}: {} sources, more than the limit of {}", origin, sources.size(),
         kMaxMixtureSources);
  if (phases.empty()) fail("mixture {}: no phases", origin);
  std::set<std::string> names;
  for (const auto& s : sources)
    if (!names.insert(s.name).second) fail("mixture {}: source '{}' defined twice", origin, s.name);
  for (size_t i = 0; i < phases.size(); ++i) {
    const MixturePhase& p = phases[i];
    if (p.weights.size() != sources.size())
      fail("mixture {}: phase[{}] has {} weights for {} sources", origin, i, p.weights.size(),
           sources.size());
    double sum = 0;
    for (size_t k = 0; k < p.weights.size(); ++k) {
      const double w = p.weights[k];
      if (!std::isfinite(w))
        fail("mixture {}: phase[{}] weight of '{}' is not finite", origin, i, sources[k].name);
      if (w < 0)
        fail("mixture {}: phase[{}] weight of '{}' is negative ({}); weights must be ≥ 0", origin,
             i, sources[k].name, w);
      // Weights are relative; beyond this range their sum overflows or rounds the others away
      // (two weights of 1e308 sum to inf, and 1e308 next to 1 picks one source only).
      if (w != 0 && !(w >= kMinWeight && w <= kMaxWeight))
        fail("mixture {}: phase[{}] weight of '{}' is {}; a weight is 0 or in [{:g}, {:g}]", origin,
             i, sources[k].name, w, kMinWeight, kMaxWeight);
      sum += w;
    }
    if (!(sum > 0))
      fail("mixture {}: phase[{}] weights are all zero; at least one must be positive", origin, i);
  }
  if (phases[0].start_fraction > 0 || (phases[0].start_fraction < 0 && phases[0].start_step != 0))
    fail("mixture {}: the first phase must start at step 0", origin);
  // Starts increase; fractions and steps can only be compared after resolution, so compare
  // within each kind here.
  for (size_t i = 1; i < phases.size(); ++i) {
    const MixturePhase &a = phases[i - 1], &b = phases[i];
    const bool both_steps = a.start_fraction < 0 && b.start_fraction < 0;
    const bool both_frac = a.start_fraction >= 0 && b.start_fraction >= 0;
    if ((both_steps && b.start_step <= a.start_step) ||
        (both_frac && b.start_fraction <= a.start_fraction))
      fail("mixture {}: phase[{}] must start after phase[{}]", origin, i, i - 1);
  }
}

void MixtureConfig::check_against(const TokenManifest& m) const {
  const std::vector<std::string> have = m.domains();
  for (const auto& s : sources) {
    if (std::find(have.begin(), have.end(), s.domain) == have.end())
      fail(
          "mixture {}: source '{}' names domain '{}', which is not in {}/manifest.json (domains: "
          "{})",
          origin, s.name, s.domain, m.dir, fmt::join(have, ", "));
    if (m.find(s.domain, s.split).empty())
      fail("mixture {}: source '{}': domain '{}' has no {} shards in {}", origin, s.name, s.domain,
           s.split, m.dir);
  }
}

bool MixtureConfig::needs_total_steps() const {
  return std::any_of(phases.begin(), phases.end(),
                     [](const MixturePhase& p) { return p.start_fraction >= 0; });
}

MixtureConfig MixtureConfig::resolved(int64_t total_steps) const {
  MixtureConfig c = *this;
  if (!needs_total_steps()) return c;
  if (total_steps <= 0)
    fail("mixture {}: phases given as start_fraction need the run's total steps", origin);
  for (auto& p : c.phases) {
    if (p.start_fraction >= 0)
      p.start_step = static_cast<int64_t>(std::floor(p.start_fraction * double(total_steps)));
    p.start_fraction = -1;
  }
  for (size_t i = 1; i < c.phases.size(); ++i)
    if (c.phases[i].start_step <= c.phases[i - 1].start_step)
      fail(
          "mixture {}: with {} total steps phase[{}] (step {}) does not start after phase[{}] "
          "(step {})",
          origin, total_steps, i, c.phases[i].start_step, i - 1, c.phases[i - 1].start_step);
  return c;
}

int MixtureConfig::phase_at(int64_t step) const {
  int k = 0;
  for (size_t i = 1; i < phases.size(); ++i)
    if (phases[i].start_step <= step) k = int(i);
  return k;
}

int MixtureConfig::source_index(const std::string& name) const {
  for (size_t i = 0; i < sources.size(); ++i)
    if (sources[i].name == name) return int(i);
  return -1;
}

}  // namespace marin
