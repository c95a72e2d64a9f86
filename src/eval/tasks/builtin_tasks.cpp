// Built-in tasks from held-out corpus text. See builtin_tasks.hpp and docs/evaluation.md.
#include "eval/tasks/builtin_tasks.hpp"

#include <fmt/core.h>
#include <fmt/ranges.h>
#include <xxhash.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <regex>
#include <set>

#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/hash.hpp"
#include "core/rng.hpp"
#include "eval/contamination.hpp"

namespace marin::eval {
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

struct Doc {
  std::string domain, id, text;
};

// Every document of the `valid` shards of the domains that have them; the shards read are
// appended to `sources` (ROOT-relative).
std::vector<Doc> held_out(const std::string& root, const std::vector<std::string>& domains,
                          std::vector<std::string>& sources) {
  std::vector<Doc> docs;
  for (const std::string& d : domains) {
    for (const std::string& f : corpus_shards(root, d, "valid")) {
      sources.push_back(fs::relative(f, root).string());
      for_each_jsonl_document(f, [&](const text_corpus::Document& doc) {
        docs.push_back({d, doc.id(std::to_string(doc.line)), doc.text});
      });
    }
  }
  return docs;
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  for (std::string_view l : split_lines(text)) out.emplace_back(l);
  return out;
}

std::vector<std::string> words_of(std::string_view s) {
  std::vector<std::string> w;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i;
    size_t j = i;
    while (j < s.size() && !std::isspace(static_cast<unsigned char>(s[j]))) ++j;
    if (j > i) w.emplace_back(s.substr(i, j - i));
    i = j;
  }
  return w;
}

std::string join(const std::vector<std::string>& w, size_t a, size_t b, const char* sep = " ") {
  std::string s;
  for (size_t i = a; i < b; ++i) s += (i > a ? sep : "") + w[i];
  return s;
}

uint64_t key(uint64_t seed, const std::string& task, const std::string& id) {
  return mix_seed(seed, XXH64(task.data(), task.size(), 0) ^ XXH64(id.data(), id.size(), 1));
}

// A multiple-choice item: gold and 3 distractors drawn from the 8 candidates nearest in length.
struct Candidate {
  std::string id, context, answer, group;  // group: distractors come from the same group
  json extra;
};

struct McItem {
  std::string id;
  std::string context;
  std::vector<std::string> choices;
  int gold = 0;
  json extra;
};

std::vector<McItem> make_choices(const std::vector<Candidate>& cands, const std::string& task,
                                 uint64_t seed) {
  std::map<std::string, std::vector<size_t>> by_group;  // indices sorted by answer length
  for (size_t i = 0; i < cands.size(); ++i) by_group[cands[i].group].push_back(i);
  for (auto& [g, v] : by_group)
    std::stable_sort(v.begin(), v.end(), [&](size_t a, size_t b) {
      return cands[a].answer.size() < cands[b].answer.size();
    });
  std::vector<size_t> pos_of(cands.size());
  for (const auto& [g, v] : by_group)
    for (size_t p = 0; p < v.size(); ++p) pos_of[v[p]] = p;
  std::vector<McItem> out;
  for (size_t i = 0; i < cands.size(); ++i) {
    const Candidate& c = cands[i];
    if (c.id.empty()) continue;  // a distractor only
    const auto& v = by_group[c.group];
    const size_t pos = pos_of[i];
    std::vector<size_t> near;  // the 8 nearest others by length, distinct answers
    std::set<std::string> seen{c.answer};
    for (size_t d = 1; near.size() < 8 && (d <= pos || pos + d < v.size()); ++d) {
      if (pos + d < v.size() && seen.insert(cands[v[pos + d]].answer).second)
        near.push_back(v[pos + d]);
      if (near.size() < 8 && d <= pos && seen.insert(cands[v[pos - d]].answer).second)
        near.push_back(v[pos - d]);
    }
    if (near.size() < 3) continue;
    Rng rng(key(seed, task, c.id));
    for (size_t k = 0; k < 3; ++k)  // a partial Fisher–Yates draw of 3 of them
      std::swap(near[k], near[k + rng.next_u64() % (near.size() - k)]);
    McItem it{c.id, c.context, {}, int(rng.next_u64() % 4), c.extra};
    for (size_t k = 0, d = 0; k < 4; ++k)
      it.choices.push_back(int(k) == it.gold ? c.answer : cands[near[d++]].answer);
    out.push_back(std::move(it));
  }
  return out;
}

// A seeded subset of at most n items, in their original order.
template <class T>
std::vector<T> subset(std::vector<T> items, uint64_t n, uint64_t seed, const std::string& task) {
  if (n == 0 || items.size() <= n) return items;
  std::vector<std::pair<uint64_t, size_t>> order;
  for (size_t i = 0; i < items.size(); ++i)
    order.push_back({key(seed, task + "#subset", items[i].id), i});
  std::sort(order.begin(), order.end());
  std::vector<size_t> keep;
  for (size_t k = 0; k < n; ++k) keep.push_back(order[k].second);
  std::sort(keep.begin(), keep.end());
  std::vector<T> out;
  for (size_t i : keep) out.push_back(std::move(items[i]));
  return out;
}

const std::set<std::string>& function_words() {
  static const std::set<std::string> w{
      "the",   "a",     "an",     "and",   "or",    "but", "of",    "to",   "in",  "on",
      "at",    "by",    "for",    "with",  "from",  "as",  "is",    "was",  "are", "were",
      "be",    "been",  "it",     "its",   "he",    "she", "they",  "them", "his", "her",
      "their", "him",   "i",      "me",    "my",    "we",  "us",    "our",  "you", "your",
      "that",  "this",  "these",  "those", "which", "who", "whom",  "what", "not", "no",
      "so",    "if",    "then",   "there", "had",   "has", "have",  "do",   "did", "will",
      "would", "shall", "should", "can",   "could", "may", "might", "all",  "one", "up",
      "out",   "into",  "when",   "said"};
  return w;
}

// --- the four tasks ---

struct Written {
  std::vector<json> docs;
  std::string yaml_body;  // after task/dataset lines
  double chance = 0;
  json baselines = json::object();
  uint64_t candidates = 0;
};

std::string q(const std::string& s) {  // a YAML double-quoted scalar (JSON's syntax)
  return json(s).dump();
}

std::string mc_yaml(const std::string& doc_to_text, const std::string& delim) {
  return fmt::format(
      "output_type: multiple_choice\ndoc_to_text: {}\ndoc_to_choice: choices\ndoc_to_target: "
      "gold\ntarget_delimiter: {}\nmetric_list:\n  - metric: acc\n    aggregation: mean\n    "
      "higher_is_better: true\n  - metric: acc_norm\n    aggregation: mean\n    "
      "higher_is_better: true\n",
      q(doc_to_text), q(delim));
}

Written write_mc(std::vector<McItem> items, uint64_t candidates, const BuildTasksOptions& o,
                 const std::string& task, const std::string& doc_to_text, const std::string& delim,
                 const char* context_field) {
  items = subset(std::move(items), o.max_items, o.seed, task);
  Written w;
  w.candidates = candidates;
  for (const McItem& it : items) {
    json d = it.extra;
    d["id"] = it.id;
    d[context_field] = it.context;
    d["choices"] = it.choices;
    d["gold"] = it.gold;
    w.docs.push_back(d);
    w.chance += 1.0 / double(it.choices.size());
  }
  if (!items.empty()) w.chance /= double(items.size());
  w.yaml_body = mc_yaml(doc_to_text, delim);
  return w;
}

Written lambada_style(const std::vector<Doc>& docs, const BuildTasksOptions& o) {
  struct P {
    std::string id, text, domain;
  };
  std::vector<P> ps;
  for (const Doc& d : docs) {
    const std::vector<std::string> lines = lines_of(d.text);
    std::vector<std::string> acc;
    size_t start = 0;
    for (size_t i = 0; i < lines.size(); ++i) {
      if (acc.empty()) start = i;
      for (auto& w : words_of(lines[i])) acc.push_back(w);
      if (int(acc.size()) < o.lambada_min_words) continue;
      if (int(acc.size()) > o.lambada_max_words) {
        acc.clear();
        continue;
      }
      // The passage ends at its last word: trailing punctuation is dropped.
      std::string last = acc.back();
      while (!last.empty() && !std::isalpha(static_cast<unsigned char>(last.back())))
        last.pop_back();
      const bool word = last.size() >= 2 && std::all_of(last.begin(), last.end(), [](char c) {
                          return std::isalpha(static_cast<unsigned char>(c));
                        });
      if (word) {
        std::vector<std::string> ctx_words(acc.begin(), acc.end() - 1);
        const std::string context = join(ctx_words, 0, ctx_words.size());
        const auto earlier = normalize_words(context);
        const auto target = normalize_words(last);
        if (target.size() == 1 &&
            std::find(earlier.begin(), earlier.end(), target[0]) != earlier.end())
          ps.push_back(
              {fmt::format("{}/{}#{}", d.domain, d.id, start + 1), context + " " + last, d.domain});
      }
      acc.clear();
    }
  }
  Written w;
  w.candidates = ps.size();
  ps = subset(std::move(ps), o.max_items, o.seed, "lambada_style");
  uint64_t hits = 0;
  for (const P& p : ps) {
    const size_t sp = p.text.rfind(' ');
    const std::string ctx = p.text.substr(0, sp), target = p.text.substr(sp + 1);
    const auto t = normalize_words(target);
    hits += !t.empty() && most_frequent_earlier_word(ctx) == t[0];
    w.docs.push_back({{"id", p.id}, {"domain", p.domain}, {"text", p.text}});
  }
  w.baselines["most_frequent_earlier_word"] = ps.empty() ? 0.0 : double(hits) / double(ps.size());
  // LAMBADA's own task definition (lambada_openai.yaml).
  w.yaml_body =
      "output_type: loglikelihood\n"
      "doc_to_text: \"{{text.split(' ')[:-1]|join(' ')}}\"\n"
      "doc_to_target: \"{{' '+text.split(' ')[-1]}}\"\n"
      "target_delimiter: \"\"\n"
      "metric_list:\n  - metric: perplexity\n    aggregation: perplexity\n    "
      "higher_is_better: false\n  - metric: acc\n    aggregation: mean\n    "
      "higher_is_better: true\n";
  return w;
}

std::string collapse(std::string_view s) {
  return join(words_of(s), 0, words_of(s).size());
}

// Whether the normalised words of `head` occur, in order and adjacent, in those of `text`.
bool mentions(const std::string& text, const std::string& head) {
  const auto t = normalize_words(text), h = normalize_words(head);
  if (h.empty() || h.size() > t.size()) return false;
  return std::search(t.begin(), t.end(), h.begin(), h.end()) != t.end();
}

Written cloze_definitions(const std::vector<Doc>& docs, const BuildTasksOptions& o) {
  static const std::regex devil_head(R"(^([^,\n]+),\s*((?:[a-zA-Z]+\.\s*,?\s*)+))");
  static const std::regex sense(R"(^(?:\d+\.\s+)?(?:(?:[a-z]+\.,?)+\s+)?(?:\[[^\]]*\]\s*)?)");
  std::vector<Candidate> cands;
  for (const Doc& d : docs) {
    const auto paras = split_paragraphs(d.text);
    if (paras.empty()) continue;
    std::string head, def;
    std::smatch m;
    const std::string first(paras[0]);
    if (d.domain == "dict_devil") {
      if (!std::regex_search(first, m, devil_head)) continue;
      head = m[1].str();
      for (char& c : head) c = char(std::tolower(static_cast<unsigned char>(c)));
      def = first.substr(size_t(m[0].length()));
    } else {
      head = std::string(split_lines(first)[0]);
      if (paras.size() > 1) {
        def = std::string(paras[1]);
      } else {
        const size_t nl = first.find('\n');
        if (nl == std::string::npos) continue;
        def = first.substr(nl + 1);
      }
    }
    def = collapse(def);
    def = std::regex_replace(def, sense, "");
    std::vector<std::string> w = words_of(def);
    size_t cut = std::min<size_t>(w.size(), 30);
    for (size_t i = 5; i < cut; ++i)
      if (w[i].back() == '.') {
        cut = i + 1;
        break;
      }
    def = join(w, 0, cut);
    head = collapse(head);
    // A definition that names its headword gives the answer away: such entries are left out
    // (masking it would mark the gold choice instead).
    if (words_of(def).size() < 3 || head.empty() || mentions(def, head)) continue;
    cands.push_back({d.domain + "/" + d.id, head, def, d.domain, {{"domain", d.domain}}});
  }
  const uint64_t n = cands.size();
  return write_mc(make_choices(cands, "cloze_definitions", o.seed), n, o, "cloze_definitions",
                  "{{headword}}:", " ", "headword");
}

Written verse_completion(const std::vector<Doc>& docs, const BuildTasksOptions& o) {
  std::vector<Candidate> cands;
  for (const Doc& d : docs) {
    const auto lines = lines_of(d.text);
    for (size_t i = 0; i < lines.size(); ++i) {
      const auto w = words_of(lines[i]);
      if (w.size() < 12 || w.size() > 60) continue;
      const size_t h = w.size() / 2;
      cands.push_back({fmt::format("{}:{}", d.id, i + 1),
                       join(w, 0, h),
                       join(w, h, w.size()),
                       d.domain,
                       {{"domain", d.domain}}});
    }
  }
  const uint64_t n = cands.size();
  return write_mc(make_choices(cands, "verse_completion", o.seed), n, o, "verse_completion",
                  "{{context}}", " ", "context");
}

Written code_completion(const std::vector<Doc>& docs, const BuildTasksOptions& o) {
  std::vector<Candidate> cands;
  auto indent = [](const std::string& l) { return l.find_first_not_of(" \t"); };
  auto meaningful = [](const std::string& l) {
    const size_t a = l.find_first_not_of(" \t");
    if (a == std::string::npos || l.size() - a < 8) return false;
    const std::string_view t(l.c_str() + a);
    return !(t.starts_with("#") || t.starts_with("//"));
  };
  for (const Doc& d : docs) {
    const bool py = d.domain == "code_python";
    const auto lines = lines_of(d.text);
    for (size_t i = 0; i < lines.size(); ++i) {
      const std::string& l = lines[i];
      const size_t ind = indent(l);
      if (ind == std::string::npos) continue;
      const std::string_view t(l.c_str() + ind);
      if (!(py ? t.starts_with("def ") : (ind == 0 && t.starts_with("func ")))) continue;
      size_t end = i + 1;  // one past the function's last line
      for (; end < lines.size(); ++end) {
        const size_t e = indent(lines[end]);
        if (py ? (e != std::string::npos && e <= ind) : lines[end] == "}") break;
      }
      if (!py && end < lines.size()) ++end;
      std::vector<size_t> targets;
      for (size_t k = i + 2; k < end; ++k)
        if (meaningful(lines[k])) targets.push_back(k);
      if (targets.empty()) continue;
      const std::string id = fmt::format("{}/{}:{}", d.domain, d.id, i + 1);
      Rng rng(key(o.seed, "code_completion#line", id));
      const size_t k = targets[rng.next_u64() % targets.size()];
      std::string ctx;  // the function from its first line, at most 40 lines before the target
      const size_t from = std::max(i, k > 40 ? k - 40 : 0);
      for (size_t j = from; j < k; ++j) ctx += (j == from ? "" : "\n") + lines[j];
      cands.push_back({id, ctx, lines[k], d.domain + "/" + d.id, {{"domain", d.domain}}});
    }
  }
  // Distractors from the same file: the file's other meaningful lines are candidates too.
  std::vector<Candidate> pool = cands;
  std::set<std::pair<std::string, std::string>> have;
  for (const auto& c : cands) have.insert({c.group, c.answer});
  for (const Doc& d : docs)
    for (const std::string& l : lines_of(d.text))
      if (meaningful(l) && have.insert({d.domain + "/" + d.id, l}).second)
        pool.push_back({"", "", l, d.domain + "/" + d.id, {}});
  return write_mc(make_choices(pool, "code_completion", o.seed), cands.size(), o, "code_completion",
                  "{{context}}", "\n", "context");
}

struct Spec {
  std::string name;
  std::vector<std::string> domains;
  Written (*make)(const std::vector<Doc>&, const BuildTasksOptions&);
};

const std::vector<Spec>& specs() {
  static const std::vector<Spec> s{
      {"lambada_style", {"brown_fiction", "bible_web_modern"}, lambada_style},
      {"cloze_definitions",
       {"dict_gcide", "dict_foldoc", "dict_jargon", "dict_devil"},
       cloze_definitions},
      {"verse_completion", {"bible_web_modern"}, verse_completion},
      {"code_completion", {"code_python", "code_go"}, code_completion}};
  return s;
}

}  // namespace

std::string most_frequent_earlier_word(const std::string& context) {
  const auto w = normalize_words(context);
  std::map<std::string, std::pair<int, size_t>> count;  // word → (count, last position)
  for (size_t i = 0; i < w.size(); ++i) {
    if (function_words().count(w[i])) continue;
    auto& c = count[w[i]];
    ++c.first, c.second = i;
  }
  std::string best;
  std::pair<int, size_t> top{0, 0};
  for (const auto& [word, c] : count)
    if (c > top) top = c, best = word;
  return best;
}

const std::vector<std::string>& builtin_task_names() {
  static const std::vector<std::string> n = [] {
    std::vector<std::string> v;
    for (const auto& s : specs()) v.push_back(s.name);
    return v;
  }();
  return n;
}

std::vector<BuiltTask> build_tasks(const BuildTasksOptions& o) {
  MARIN_CHECK(fs::is_directory(o.corpus), "tasks build: --corpus {}: not a directory", o.corpus);
  MARIN_CHECK(!o.out.empty(), "tasks build: --out is required");
  for (const auto& t : o.tasks)
    if (std::find(builtin_task_names().begin(), builtin_task_names().end(), t) ==
        builtin_task_names().end())
      fail("tasks build: unknown task '{}' (built-in tasks: {})", t,
           fmt::format("{}", fmt::join(builtin_task_names(), ", ")));
  fs::create_directories(o.out);
  std::vector<BuiltTask> out;
  json manifest = {{"format", "marin-builtin-tasks/1"},
                   {"corpus", o.corpus},
                   {"split", "valid"},
                   {"seed", o.seed},
                   {"max_items", o.max_items},
                   {"tasks", json::object()}};
  for (const Spec& s : specs()) {
    const bool asked = std::find(o.tasks.begin(), o.tasks.end(), s.name) != o.tasks.end();
    if (!o.tasks.empty() && !asked) continue;
    BuiltTask b;
    b.name = s.name;
    const std::vector<Doc> docs = held_out(o.corpus, s.domains, b.sources);
    if (docs.empty()) {
      if (asked)
        fail("tasks build: {}: none of its domains has valid shards under {} (looked for {})",
             s.name, o.corpus, fmt::format("{}", fmt::join(s.domains, ", ")));
      fmt::print(stderr, "marin: tasks build: skipping {}: no valid shards of {} under {}\n",
                 s.name, fmt::format("{}", fmt::join(s.domains, ", ")), o.corpus);
      continue;
    }
    Written w = s.make(docs, o);
    MARIN_CHECK(!w.docs.empty(), "tasks build: {}: no items could be made from {}", s.name,
                fmt::format("{}", fmt::join(b.sources, ", ")));
    b.candidates = w.candidates;
    b.items = w.docs.size();
    b.chance = w.chance;
    b.baselines = w.baselines;
    std::string jsonl;
    for (const json& d : w.docs) jsonl += d.dump() + "\n";
    write_file_atomic((fs::path(o.out) / (s.name + ".jsonl")).string(), jsonl);
    const std::string yaml = fmt::format(
        "# Built by marin tasks build from the valid split of {} (seed {}); docs/evaluation.md.\n"
        "# The harness resolves data_files against its working directory: run it from here.\n"
        "task: {}\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {}.jsonl\n"
        "test_split: test\n{}metadata:\n  version: 1.0\n",
        fmt::format("{}", fmt::join(b.sources, ", ")), o.seed, s.name, s.name, w.yaml_body);
    write_file_atomic((fs::path(o.out) / (s.name + ".yaml")).string(), yaml);
    manifest["tasks"][s.name] = {{"sources", b.sources},     {"candidates", b.candidates},
                                 {"items", b.items},         {"chance", b.chance},
                                 {"baselines", b.baselines}, {"jsonl_xxh64", xxh64_hex(jsonl)}};
    out.push_back(std::move(b));
  }
  MARIN_CHECK(!out.empty(), "tasks build: no task could be built from {}", o.corpus);
  write_file_atomic((fs::path(o.out) / "tasks.json").string(), manifest.dump(2) + "\n");
  return out;
}

}  // namespace marin::eval
