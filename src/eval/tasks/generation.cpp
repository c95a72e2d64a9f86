// generate_until: greedy generation, the harness's filters and exact_match. See generation.hpp.
#define PCRE2_CODE_UNIT_WIDTH 8
#include "eval/tasks/generation.hpp"

#include <fmt/core.h>
#include <fmt/ranges.h>
#include <pcre2.h>
#include <utf8proc.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <optional>

#include "core/error.hpp"
#include "core/progress.hpp"
#include "core/utf8.hpp"
#include "data/tokenizer/tokenizer.hpp"
#include "eval/sampler.hpp"
#include "eval/tasks/task_items.hpp"
#include "eval/tasks/task_scorer.hpp"
#include "model/decode_cache.hpp"
#include "model/model.hpp"

namespace marin::eval {
using json = nlohmann::json;

namespace {

// ---- header fields ----

template <class F>
void for_each_key(const json& obj, const std::string& where, const std::string& what,
                  const std::vector<std::string>& known, F on_key) {
  if (!obj.is_object()) fail("{}: {} must be an object, got {}", where, what, obj.dump());
  for (const auto& [k, v] : obj.items()) {
    if (std::find(known.begin(), known.end(), k) == known.end())
      fail("{}: {}: key \"{}\" is not supported (supported: {})", where, what, k,
           fmt::format("{}", fmt::join(known, ", ")));
    on_key(k, v);
  }
}

std::string string_of(const json& v, const std::string& where, const std::string& what) {
  if (!v.is_string()) fail("{}: {} must be a string, got {}", where, what, v.dump());
  return v.get<std::string>();
}
int64_t int_of(const json& v, const std::string& where, const std::string& what) {
  if (!v.is_number_integer()) fail("{}: {} must be an integer, got {}", where, what, v.dump());
  return v.get<int64_t>();
}
bool bool_of(const json& v, const std::string& where, const std::string& what) {
  if (!v.is_boolean()) fail("{}: {} must be true or false, got {}", where, what, v.dump());
  return v.get<bool>();
}

// ---- PCRE2 with Python's findall/sub iteration ----

struct Regex {
  pcre2_code* code = nullptr;
  pcre2_match_data* md = nullptr;
  uint32_t groups = 0;
  explicit Regex(const std::string& pattern) {
    int err = 0;
    PCRE2_SIZE off = 0;
    // UCP: \d \w \s and case folding over Unicode, as Python's str patterns; MATCH_INVALID_UTF:
    // a response cut inside a character is still searched (Python sees U+FFFD there).
    code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                         PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &err, &off, nullptr);
    if (!code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      fail("regex {:?}: {} at offset {}", pattern, reinterpret_cast<const char*>(msg), off);
    }
    pcre2_pattern_info(code, PCRE2_INFO_CAPTURECOUNT, &groups);
    md = pcre2_match_data_create_from_pattern(code, nullptr);
  }
  ~Regex() {
    pcre2_match_data_free(md);
    pcre2_code_free(code);
  }
  Regex(const Regex&) = delete;
  Regex& operator=(const Regex&) = delete;

  // Calls f(ovector) for each match, left to right, non-overlapping; an empty match right where
  // the previous match ended is allowed only after a non-empty one (Python 3.7+).
  template <class F>
  void each(std::string_view s, F f) const {
    PCRE2_SIZE start = 0;
    uint32_t opts = 0;
    while (start <= s.size()) {
      const int rc = pcre2_match(code, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), start,
                                 opts, md, nullptr);
      if (rc == PCRE2_ERROR_NOMATCH) return;
      if (rc < 0) {
        PCRE2_UCHAR msg[256];
        pcre2_get_error_message(rc, msg, sizeof msg);
        fail("regex: matching failed: {}", reinterpret_cast<const char*>(msg));
      }
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      f(ov);
      opts = ov[0] == ov[1] ? PCRE2_NOTEMPTY_ATSTART : 0;
      start = ov[1];
    }
  }
};

std::string lower_or_upper(std::string_view s, bool upper) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = 0;
    const size_t n = utf8::decode(s, i, cp);
    if (n == 0) {  // an invalid byte stays as it is
      out += s[i++];
      continue;
    }
    utf8::append(out, uint32_t(upper ? utf8proc_toupper(utf8proc_int32_t(cp))
                                     : utf8proc_tolower(utf8proc_int32_t(cp))));
    i += n;
  }
  return out;
}

std::string remove_chars(std::string_view s, std::string_view chars) {
  std::string out;
  for (char c : s)
    if (chars.find(c) == std::string_view::npos) out += c;
  return out;
}

}  // namespace

// ---- fields ----

GenerationConfig read_generation_fields(const json& h, const std::string& where) {
  GenerationConfig g;
  const json kw = h.value("generation_kwargs", json::object());
  bool do_sample = false;
  double temperature = 0;
  for_each_key(kw, where, "generate_until: generation_kwargs",
               {"until", "max_gen_toks", "do_sample", "temperature", "top_p", "top_k"},
               [&](const std::string& k, const json& v) {
                 const std::string what = "generate_until: generation_kwargs." + k;
                 if (k == "until") {
                   for (const json& u : v.is_array() ? v : json::array({v}))
                     g.kwargs.until.push_back(string_of(u, where, what));
                 } else if (k == "max_gen_toks") {
                   g.kwargs.max_gen_toks = int_of(v, where, what);
                   if (g.kwargs.max_gen_toks < 1)
                     fail("{}: {} must be ≥ 1, got {}", where, what, v.dump());
                 } else if (k == "do_sample") {
                   do_sample = bool_of(v, where, what);
                 } else if (k == "temperature") {
                   if (!v.is_number())
                     fail("{}: {} must be a number, got {}", where, what, v.dump());
                   temperature = v.get<double>();
                 }
                 // top_p / top_k: no effect on greedy decoding (as in HF generate).
               });
  if (do_sample)
    fail("{}: generate_until: generation_kwargs.do_sample true is not supported (greedy only)",
         where);
  if (temperature > 0)
    fail(
        "{}: generate_until: generation_kwargs.temperature {} is not supported (greedy only: 0 "
        "or absent)",
        where, temperature);

  const json fl = h.value(
      "filter_list", json::array({{{"name", "none"}, {"filter", {{{"function", "take_first"}}}}}}));
  if (!fl.is_array() || fl.empty())
    fail("{}: generate_until: filter_list must be a non-empty list, got {}", where, fl.dump());
  for (const json& p : fl) {
    FilterPipeline pipe;
    if (!p.is_object() || !p.contains("name") || !p.contains("filter") || !p["filter"].is_array())
      fail("{}: generate_until: filter_list entry {} needs \"name\" and a \"filter\" list", where,
           p.dump());
    pipe.name = string_of(p["name"], where, "filter_list.name");
    for (const json& f : p["filter"]) {
      FilterStep s;
      if (!f.is_object() || !f.contains("function"))
        fail("{}: filter_list \"{}\": step {} has no \"function\"", where, pipe.name, f.dump());
      s.function = string_of(f["function"], where, "filter_list.function");
      std::vector<std::string> keys{"function"};
      if (s.function == "regex")
        keys.insert(keys.end(), {"regex_pattern", "group_select", "fallback"});
      else if (s.function == "take_first_k")
        keys.push_back("k");
      else if (s.function != "take_first" && s.function != "remove_whitespace" &&
               s.function != "lowercase" && s.function != "uppercase" &&
               s.function != "majority_vote")
        fail(
            "{}: filter_list \"{}\": filter function \"{}\" is not supported (regex, take_first, "
            "take_first_k, remove_whitespace, lowercase, uppercase, majority_vote)",
            where, pipe.name, s.function);
      const std::string what = fmt::format("filter_list \"{}\" {}", pipe.name, s.function);
      for_each_key(f, where, what, keys, [&](const std::string& k, const json& v) {
        if (k == "regex_pattern") s.regex_pattern = string_of(v, where, what + " regex_pattern");
        if (k == "group_select") s.group_select = int_of(v, where, what + " group_select");
        if (k == "fallback") s.fallback = string_of(v, where, what + " fallback");
        if (k == "k") s.k = int_of(v, where, what + " k");
      });
      if (s.function == "regex") {
        try {
          Regex check(s.regex_pattern);
        } catch (const Error& e) {
          fail("{}: {}: {}", where, what, e.what());
        }
      }
      if (s.function == "take_first_k" && s.k < 1)
        fail("{}: {}: k must be ≥ 1, got {}", where, what, s.k);
      pipe.steps.push_back(std::move(s));
    }
    g.filters.push_back(std::move(pipe));
  }

  for (const json& m : h.value("metric_list", json::array())) {
    if (!m.is_object() || !m.contains("metric"))
      fail("{}: generate_until: metric_list entry {} has no \"metric\"", where, m.dump());
    const std::string name = string_of(m["metric"], where, "metric_list.metric");
    if (name != "exact_match")
      fail("{}: generate_until: metric \"{}\" is not supported (exact_match)", where, name);
    for_each_key(
        m, where, "metric_list exact_match",
        {"metric", "aggregation", "higher_is_better", "ignore_case", "ignore_punctuation",
         "ignore_numbers", "regexes_to_ignore"},
        [&](const std::string& k, const json& v) {
          const std::string what = "metric_list exact_match." + k;
          auto& o = g.exact_match;
          if (k == "aggregation" && string_of(v, where, what) != "mean")
            fail("{}: {} \"{}\" is not supported (mean)", where, what, v.get<std::string>());
          if (k == "higher_is_better" && !bool_of(v, where, what))
            fail("{}: {} false is not supported (exact_match is higher-better)", where, what);
          if (k == "ignore_case") o.ignore_case = bool_of(v, where, what);
          if (k == "ignore_punctuation") o.ignore_punctuation = bool_of(v, where, what);
          if (k == "ignore_numbers") o.ignore_numbers = bool_of(v, where, what);
          if (k == "regexes_to_ignore") {
            for (const json& r : v.is_array() ? v : json::array({v})) {
              o.regexes_to_ignore.push_back(string_of(r, where, what));
              try {
                Regex check(o.regexes_to_ignore.back());
              } catch (const Error& e) {
                fail("{}: {}: {}", where, what, e.what());
              }
            }
          }
        });
  }
  if (h.contains("repeats")) {
    g.repeats = int_of(h["repeats"], where, "repeats");
    if (g.repeats < 1) fail("{}: repeats must be ≥ 1, got {}", where, g.repeats);
  }
  return g;
}

std::vector<std::string> read_generation_targets(const json& line, const std::string& where) {
  if (!line.contains("target")) fail("{}: \"target\" is missing", where);
  const json& t = line["target"];
  std::vector<std::string> out;
  for (const json& x : t.is_array() ? t : json::array({t}))
    out.push_back(string_of(x, where, "\"target\" (a string or a list of strings)"));
  if (out.empty()) fail("{}: \"target\" is an empty list", where);
  return out;
}

// ---- generation ----

namespace {

// One prompt on its way through the decoder: its tokens, how many have been run, what it has
// generated so far.
struct Stream {
  size_t item = 0;
  std::vector<int32_t> prompt;
  size_t fed = 0;
  std::vector<uint32_t> gen;
  std::string text;
  size_t cut = std::string::npos;  // where the first `until` string starts in text
  int32_t next = 0;                // the generated token to run next

  int32_t input() const { return fed < prompt.size() ? prompt[fed] : next; }
  // After a token of this stream ran: true once its logits predict a generated token.
  bool ran() {
    if (fed < prompt.size()) ++fed;
    return fed == prompt.size();
  }
  // Takes the chosen token; true when the response is complete (EOS, an `until` string, or
  // max_gen_toks tokens).
  bool take(int32_t token, std::optional<uint32_t> eos, const Tokenizer& tok,
            const GenerationKwargs& g) {
    if (eos && uint32_t(token) == *eos) return true;
    gen.push_back(uint32_t(token));
    text = tok.decode(gen);
    for (const std::string& u : g.until)
      if (!u.empty()) cut = std::min(cut, text.find(u));
    next = token;
    return cut != std::string::npos || int64_t(gen.size()) >= g.max_gen_toks;
  }
  std::string response() {
    if (cut != std::string::npos) text.resize(cut);
    // Bytes that are not UTF-8 (a token ending inside a character) become U+FFFD, as the
    // harness's decode(errors="replace") gives them; the response is then valid JSON text.
    return utf8::sanitize(text);
  }
};

}  // namespace

std::vector<std::string> generate_greedy(Model<float>& m, const Tokenizer& tok,
                                         const std::vector<std::string>& contexts,
                                         const GenerationKwargs& g, int64_t batch,
                                         const std::function<void(uint64_t)>& items_done) {
  const int64_t S = m.config().seq_len, V = m.config().vocab_size;
  const int64_t max_ctx = S - g.max_gen_toks;
  MARIN_CHECK(max_ctx >= 1,
              "generate_until: max_gen_toks {} leaves no room for the context (seq_len {})",
              g.max_gen_toks, S);
  MARIN_CHECK(batch >= 1, "generate_until: the batch must be ≥ 1, got {}", batch);
  MARIN_CHECK(g.max_gen_toks >= 1, "generate_until: max_gen_toks must be ≥ 1, got {}",
              g.max_gen_toks);
  const int64_t prefix = prefix_token(tok);
  const std::optional<uint32_t> eos = tok.eos();
  // Ids the tokenizer has no text for (a model vocabulary padded beyond it) are never chosen.
  std::vector<uint8_t> allowed(size_t(V), 0);
  for (int64_t i = 0; i < V && i < int64_t(tok.vocab_size()); ++i)
    allowed[size_t(i)] = tok.has_token(uint32_t(i));
  Rng unused(0);  // greedy sample_token draws nothing

  // Up to `batch` prompts decode together, one token of each per forward (its next prompt token
  // or its last generated one), so prompts of any lengths share every step; a finished prompt's
  // slot takes the next waiting prompt.
  const int64_t slots = std::min({batch, int64_t(contexts.size()), m.max_batch() * S});
  std::vector<std::unique_ptr<DecodeCache<float>>> cache;
  for (int64_t s = 0; s < slots; ++s)
    cache.push_back(std::make_unique<DecodeCache<float>>(m.config()));
  std::vector<std::optional<Stream>> slot(static_cast<size_t>(slots));
  std::vector<std::string> out(contexts.size());
  size_t waiting = 0;
  std::vector<int32_t> tokens;
  std::vector<DecodeCache<float>*> running;
  std::vector<size_t> which;
  for (;;) {
    for (size_t s = 0; s < slot.size(); ++s) {
      if (slot[s] || waiting == contexts.size()) continue;
      std::vector<uint32_t> ids = tok.template_prefix();  // as continuation_request starts one
      tok.encode_into(contexts[waiting], ids);
      if (ids.empty()) ids = {uint32_t(prefix)};
      if (int64_t(ids.size()) > max_ctx) ids.erase(ids.begin(), ids.end() - max_ctx);
      slot[s].emplace();
      slot[s]->item = waiting++;
      slot[s]->prompt.assign(ids.begin(), ids.end());
      cache[s]->reset();
    }
    tokens.clear();
    running.clear();
    which.clear();
    for (size_t s = 0; s < slot.size(); ++s)
      if (slot[s]) {
        tokens.push_back(slot[s]->input());
        running.push_back(cache[s].get());
        which.push_back(s);
      }
    if (which.empty()) break;
    m.decode(tokens.data(), running.data(), int64_t(which.size()));
    for (size_t s : which) {
      Stream& st = *slot[s];
      if (!st.ran()) continue;
      const int32_t next = sample_token(cache[s]->logits.data(), V, SamplingOptions{0.0, 0, 1.0},
                                        unused, allowed.data());
      if (!st.take(next, eos, tok, g)) continue;
      out[st.item] = st.response();
      slot[s].reset();
      if (items_done) items_done(1);
    }
  }
  return out;
}

// ---- filters ----

json Filtered::to_json() const {
  return single ? json(values.at(0)) : json(values);
}

std::vector<std::vector<std::string>> regex_findall(const std::string& pattern,
                                                    std::string_view text) {
  const Regex re(pattern);
  std::vector<std::vector<std::string>> out;
  re.each(text, [&](const PCRE2_SIZE* ov) {
    std::vector<std::string> m;
    const uint32_t first = re.groups == 0 ? 0 : 1;
    for (uint32_t g = first; g <= re.groups; ++g) {
      const PCRE2_SIZE a = ov[2 * g], b = ov[2 * g + 1];
      m.push_back(a == PCRE2_UNSET ? std::string() : std::string(text.substr(a, b - a)));
    }
    out.push_back(std::move(m));
  });
  return out;
}

std::string regex_remove(const std::string& pattern, std::string_view text) {
  const Regex re(pattern);
  std::string out;
  size_t last = 0;
  re.each(text, [&](const PCRE2_SIZE* ov) {
    out.append(text.substr(last, ov[0] - last));
    last = ov[1];
  });
  out.append(text.substr(last));
  return out;
}

namespace {

std::string python_strip(std::string s) {  // str.strip() for ASCII whitespace
  const char* ws = " \t\n\r\f\v";
  const size_t a = s.find_first_not_of(ws);
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(ws) - a + 1);
}

// The harness's RegexFilter on one response: findall, the group_select-th match (negative counts
// from the end), a match of several groups gives its first non-empty group, stripped.
std::string regex_filter(const FilterStep& s, const std::string& resp) {
  const auto matches = regex_findall(s.regex_pattern, resp);
  if (matches.empty()) return s.fallback;
  const int64_t n = int64_t(matches.size());
  const int64_t i = s.group_select < 0 ? n + s.group_select : s.group_select;
  // Python raises IndexError here (the harness stops); the fallback keeps the run going.
  if (i < 0 || i >= n) return s.fallback;
  const auto& m = matches[size_t(i)];
  if (m.size() == 1) return python_strip(m[0]);
  for (const std::string& g : m)
    if (!g.empty()) return python_strip(g);
  return s.fallback;  // every group empty: Python raises IndexError
}

}  // namespace

Filtered apply_filter(const FilterPipeline& p, const std::vector<std::string>& responses) {
  Filtered f{responses, false};
  for (const FilterStep& s : p.steps) {
    MARIN_CHECK(!f.single, "filter_list \"{}\": {} after take_first (a single response)", p.name,
                s.function);
    auto& v = f.values;
    if (s.function == "take_first") {
      MARIN_CHECK(!v.empty(), "filter_list \"{}\": take_first of no responses", p.name);
      v.resize(1);
      f.single = true;
    } else if (s.function == "take_first_k") {
      if (int64_t(v.size()) > s.k) v.resize(size_t(s.k));
    } else if (s.function == "regex") {
      for (auto& r : v) r = regex_filter(s, r);
    } else if (s.function == "remove_whitespace") {
      for (auto& r : v)  // the harness removes one leading space, nothing else
        if (!r.empty() && r[0] == ' ') r.erase(0, 1);
    } else if (s.function == "lowercase" || s.function == "uppercase") {
      for (auto& r : v) r = lower_or_upper(r, s.function == "uppercase");
    } else if (s.function == "majority_vote") {
      // Counter(resps).most_common(1): the most frequent, the first seen among equals.
      std::map<std::string, size_t> count;
      for (const auto& r : v) ++count[r];
      std::string best;
      size_t n = 0;
      for (const auto& r : v)
        if (count[r] > n) best = r, n = count[r];
      v = {best};
    } else {
      fail("filter_list \"{}\": unknown filter function \"{}\"", p.name, s.function);
    }
  }
  return f;
}

// ---- exact_match ----

double exact_match(std::string pred, std::string ref, const ExactMatchOptions& o) {
  for (const std::string& r : o.regexes_to_ignore) {
    pred = regex_remove(r, pred);
    ref = regex_remove(r, ref);
  }
  if (o.ignore_case) pred = lower_or_upper(pred, false), ref = lower_or_upper(ref, false);
  if (o.ignore_punctuation) {
    constexpr std::string_view punct = "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~";  // string.punctuation
    pred = remove_chars(pred, punct), ref = remove_chars(ref, punct);
  }
  if (o.ignore_numbers)
    pred = remove_chars(pred, "0123456789"), ref = remove_chars(ref, "0123456789");
  return pred == ref ? 1.0 : 0.0;
}

double item_exact_match(const Filtered& f, const std::vector<std::string>& targets,
                        const ExactMatchOptions& o) {
  if (f.values.empty()) return 0.0;
  double sum = 0;
  for (const std::string& v : f.values) {
    double hit = 0;
    for (const std::string& t : targets) hit = std::max(hit, exact_match(v, t, o));
    sum += hit;
  }
  return sum / double(f.values.size());
}

// ---- scoring ----

namespace {

// The responses of the first n items. Under a group of R ranks, rank q generates items q, q + R,
// … (interleaved, so long and short prompts spread evenly) and every rank gets them all.
std::vector<std::string> generate_over_ranks(Model<float>& m, const Tokenizer& tok,
                                             const TaskItems& t, size_t n,
                                             const GenerationConfig& g, const TaskOptions& o) {
  const size_t ranks = o.group ? size_t(o.group->size()) : 1;
  const size_t rank = o.group ? size_t(o.group->rank()) : 0;
  std::vector<std::string> contexts;
  for (size_t i = rank; i < n; i += ranks) contexts.push_back(t.items[i].context);
  // Progress: each rank decodes every ranks-th item at the same pace, so one of this rank's
  // responses stands for `ranks` items of the task.
  Progress bar(o.progress ? n : 0, "task " + t.name);
  std::vector<std::string> mine = generate_greedy(m, tok, contexts, g.kwargs, o.generation_batch,
                                                  [&](uint64_t k) { bar.add(k * ranks); });
  bar.finish();
  if (ranks == 1) return mine;
  const std::vector<std::string> all = o.group->allgather(json(mine).dump());
  std::vector<std::string> out(n);
  for (size_t q = 0; q < ranks; ++q) {
    const std::vector<std::string> theirs = json::parse(all[q]).get<std::vector<std::string>>();
    for (size_t k = 0; k < theirs.size(); ++k) out[q + k * ranks] = theirs[k];
  }
  return out;
}

}  // namespace

TaskResult score_generation_task(Model<float>& m, const Tokenizer& tok, const TaskItems& t,
                                 const TaskOptions& o) {
  const auto t0 = std::chrono::steady_clock::now();
  MARIN_CHECK(t.generation, "{}: internal: a generate_until task without its fields", t.file);
  const GenerationConfig& g = *t.generation;
  TaskResult r;
  r.task = t.name;
  r.version = t.version;
  r.config = t.header.is_object() ? t.header.value("config", json::object()) : json::object();
  r.num_fewshot = t.num_fewshot;
  for (const auto& p : g.filters) r.metrics.push_back("exact_match," + p.name);
  r.original = t.items.size();
  r.effective = o.limit ? std::min<uint64_t>(o.limit, t.items.size()) : t.items.size();
  r.items_hash = t.items_hash(r.effective);

  const std::vector<std::string> resp = generate_over_ranks(m, tok, t, r.effective, g, o);
  r.requests = r.effective * uint64_t(g.repeats);

  // score[f][i]: item i's exact_match under filter f; filtered[f][i] for the samples.
  std::vector<std::vector<double>> score(g.filters.size());
  std::vector<std::vector<Filtered>> filtered(g.filters.size());
  for (size_t f = 0; f < g.filters.size(); ++f)
    for (size_t i = 0; i < r.effective; ++i) {
      // repeats: the harness runs the request `repeats` times; greedy gives the same response.
      const std::vector<std::string> resps(size_t(g.repeats), resp[i]);
      filtered[f].push_back(apply_filter(g.filters[f], resps));
      score[f].push_back(item_exact_match(filtered[f].back(), t.items[i].targets, g.exact_match));
    }
  auto metrics_of = [&](const std::vector<size_t>& which) {
    std::map<std::string, MetricValue> out;
    if (which.empty()) return out;
    for (size_t f = 0; f < g.filters.size(); ++f) {
      std::vector<double> x;
      for (size_t i : which) x.push_back(score[f][i]);
      out[r.metrics[f]] = mean_metric(x);
    }
    return out;
  };
  split_metrics_by_audit(t, o, r, metrics_of);
  if (o.log_samples) {
    for (size_t i = 0; i < r.effective; ++i) {
      const TaskItem& it = t.items[i];
      json j = {{"doc_id", it.doc_id}, {"id", it.id}, {"context", it.context}};
      if (!it.doc.is_null()) j["doc"] = it.doc;
      j["target"] = it.targets.size() == 1 ? json(it.targets[0]) : json(it.targets);
      j["resps"] = json::array({std::vector<std::string>(size_t(g.repeats), resp[i])});
      json fr = json::object(), per = json::object();
      for (size_t f = 0; f < g.filters.size(); ++f) {
        fr[g.filters[f].name] = filtered[f][i].to_json();
        per[r.metrics[f]] = score[f][i];
      }
      j["filtered_resps"] = fr;
      j["metrics"] = per;
      add_audit_fields(j, r, i);
      r.samples.push_back(std::move(j));
    }
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace marin::eval
