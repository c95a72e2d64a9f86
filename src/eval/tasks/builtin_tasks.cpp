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
  std::string shard;  // ROOT-relative
};

// Every document of the corpus's `valid` shards, domain by domain (sorted), and the domains read.
struct HeldOut {
  std::vector<std::string> domains;
  std::vector<Doc> docs;
};

HeldOut held_out(const std::string& root) {
  HeldOut h;
  h.domains = corpus_domains(root, "valid");
  for (const std::string& d : h.domains) {
    for (const std::string& f : corpus_shards(root, d, "valid")) {
      const std::string shard = fs::relative(f, root).string();
      for_each_jsonl_document(f, [&](const text_corpus::Document& doc) {
        h.docs.push_back({d, doc.id(std::to_string(doc.line)), doc.text, shard});
      });
    }
  }
  return h;
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

// --- the kinds of text the tasks need: one predicate each, on one held-out document ---
// A task reads the documents of every domain that pass its predicate, so a corpus of any domain
// names works (docs/evaluation.md, "Built-in tasks"); the thresholds are set from the fixture's
// domains, whose prose, dictionaries and code they separate without an error.

// The extension of a document id that names a file (`encodings/cp856.py` → "py"), lower case;
// "" when the id's last path component has none.
std::string id_extension(const std::string& id) {
  const size_t slash = id.rfind('/'), dot = id.rfind('.');
  if (dot == std::string::npos || (slash != std::string::npos && dot < slash) ||
      dot + 1 == id.size())
    return "";
  std::string e = id.substr(dot + 1);
  std::transform(e.begin(), e.end(), e.begin(),
                 [](char c) { return char(std::tolower(static_cast<unsigned char>(c))); });
  return e;
}

// Extensions of source files. `marin corpus build` keys a code domain's documents by their path
// in the source tree, so this is the corpus's own record of which documents are code.
const std::set<std::string>& code_extensions() {
  static const std::set<std::string> e{"c",  "h",  "cc",    "cpp", "cxx",   "hpp", "hh",  "go",
                                       "py", "rs", "java",  "js",  "ts",    "kt",  "cs",  "rb",
                                       "pl", "sh", "swift", "php", "scala", "lua", "jl",  "hs",
                                       "ml", "m",  "mm",    "r",   "sql",   "zig", "dart"};
  return e;
}

// A token of running text: letters (a non-ASCII byte counts as one, so accented and non-Latin
// words do) with apostrophes or hyphens inside, and punctuation only around it.
bool is_plain_word(std::string_view t) {
  const size_t a = t.find_first_not_of("\"'([{"), b = t.find_last_not_of("\"'.,;:!?)]}");
  if (a == std::string_view::npos || b == std::string_view::npos || b < a) return false;
  t = t.substr(a, b + 1 - a);
  auto letter = [](char c) {
    const auto u = static_cast<unsigned char>(c);
    return u >= 0x80 || std::isalpha(u);
  };
  return letter(t.front()) && std::all_of(t.begin(), t.end(), [&](char c) {
           return letter(c) || c == '\'' || c == '-';
         });
}

double plain_word_fraction(std::string_view text) {
  const std::vector<std::string> w = words_of(text);
  if (w.empty()) return 0;
  const auto n =
      std::count_if(w.begin(), w.end(), [](const std::string& t) { return is_plain_word(t); });
  return double(n) / double(w.size());
}

// A line shaped like code: it ends in a bracket, `;` or `:`, or opens with a definition or an
// import, and at most half its tokens are plain words (prose ends lines in `;` and `:` too).
bool is_code_line(std::string_view l) {
  const size_t a = l.find_first_not_of(" \t"), b = l.find_last_not_of(" \t\r");
  if (a == std::string_view::npos) return false;
  const std::string_view t = l.substr(a, b + 1 - a);
  const bool shape = std::string_view("{}();:").find(t.back()) != std::string_view::npos ||
                     t.starts_with("#include") || t.starts_with("def ") || t.starts_with("func ") ||
                     t.starts_with("import ") || t.starts_with("package ") ||
                     t.starts_with("class ");
  return shape && plain_word_fraction(t) <= 0.5;
}

// Source code (code_completion): by the file extension of the document's id where it is a
// source file's; otherwise by content — at least 3 non-blank lines, and at least a fifth of them
// shaped like code (the fixture's code files: 20–90 %; its prose: under 1 %).
bool is_source_code(const Doc& d) {
  if (code_extensions().count(id_extension(d.id))) return true;
  const std::vector<std::string_view> lines = split_lines(d.text);
  const auto nonblank = std::count_if(lines.begin(), lines.end(), [](std::string_view l) {
    return l.find_first_not_of(" \t\r") != std::string_view::npos;
  });
  const auto code = std::count_if(lines.begin(), lines.end(), is_code_line);
  return nonblank >= 3 && 5 * code >= nonblank;
}

// "HEADWORD, n.  Its definition." (The Devil's Dictionary's shape): a headword of at most 60
// characters, a comma, then parts of speech (`n.`, `v.t.`, `adj.`, …) and the definition.
const std::regex& headword_and_pos() {
  static const std::regex r(
      R"(^([^,\n]{1,60}),\s*((?:(?:n|v|t|i|p|pp|pl|adj|adv|prep|pron|conj|interj)\.\s*,?\s*)+)\s)");
  return r;
}

// A dictd entry's shape (the Jargon File, FOLDOC, GCIDE): a headword line of at most 6 words
// that is not indented and does not end in sentence punctuation, over an indented body (on the
// next line or after a blank line).
bool is_headword_over_body(std::string_view text) {
  const std::vector<std::string_view> paras = split_paragraphs(text);
  if (paras.empty()) return false;
  const std::vector<std::string_view> first = split_lines(paras[0]);
  const std::string_view head = first[0];
  const size_t end = head.find_last_not_of(" \t\r");
  if (head.empty() || std::isspace(static_cast<unsigned char>(head[0])) ||
      end == std::string_view::npos || words_of(head).size() > 6 || head.size() > 60)
    return false;
  const char last = head[end];
  if (!(std::isalnum(static_cast<unsigned char>(last)) || last == '+' || last == ')')) return false;
  const std::string_view body = paras.size() > 1 ? paras[1] : first.size() > 1 ? first[1] : "";
  return !body.empty() && (body[0] == ' ' || body[0] == '\t');
}

// A dictionary entry (cloze_definitions): a headword and its definition, in either shape; code
// is never one.
bool is_dictionary_entry(const Doc& d) {
  if (is_source_code(d)) return false;
  const std::string start = d.text.substr(0, 200);  // the headword and its parts of speech
  return std::regex_search(start, headword_and_pos()) || is_headword_over_body(d.text);
}

// Running natural-language text (lambada_style): neither code nor a dictionary entry, and at
// least 85 % of its tokens plain words (the fixture's prose: 94–100 % at the median; code about
// 50 %; reStructuredText with inline markup about 80 %).
bool is_prose(const Doc& d) {
  return !is_source_code(d) && !is_dictionary_entry(d) && plain_word_fraction(d.text) >= 0.85;
}

// Verse-like text (verse_completion: half a line is the context, the other half its
// completion): prose with one verse or sentence a line, i.e. at least 70 % of its lines of 4 or
// more words end in punctuation. Prose wrapped at a fixed width ends most lines mid-sentence.
bool is_one_verse_a_line(const Doc& d) {
  if (!is_prose(d)) return false;
  const std::vector<std::string_view> lines = split_lines(d.text);
  auto ends_unit = [](std::string_view l) {
    const size_t b = l.find_last_not_of(" \t\r");
    return std::string_view(".,;:!?\"')").find(l[b]) != std::string_view::npos ||
           l.substr(0, b + 1).ends_with("\u201d") || l.substr(0, b + 1).ends_with("\u2019");
  };
  const auto long_lines = std::count_if(lines.begin(), lines.end(),
                                        [](std::string_view l) { return words_of(l).size() >= 4; });
  const auto ended = std::count_if(lines.begin(), lines.end(), [&](std::string_view l) {
    return words_of(l).size() >= 4 && ends_unit(l);
  });
  return long_lines > 0 && 10 * ended >= 7 * long_lines;
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
  static const std::regex sense(R"(^(?:\d+\.\s+)?(?:(?:[a-z]+\.,?)+\s+)?(?:\[[^\]]*\]\s*)?)");
  std::vector<Candidate> cands;
  for (const Doc& d : docs) {
    const auto paras = split_paragraphs(d.text);
    if (paras.empty()) continue;
    std::string head, def;
    std::smatch m;
    const std::string first(paras[0]);
    if (std::regex_search(first, m, headword_and_pos())) {  // "HEADWORD, n.  definition"
      head = m[1].str();
      for (char& c : head) c = char(std::tolower(static_cast<unsigned char>(c)));
      def = first.substr(size_t(m[0].length()));
    } else {  // a headword line over an indented body
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
      cands.push_back({fmt::format("{}/{}:{}", d.domain, d.id, i + 1),
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

// Whether a code document's functions are Python's indented `def` blocks (a `.py` id, or an id of
// no source extension with a `def name(…):` line); otherwise they are brace-delimited.
bool indented_blocks(const Doc& d) {
  const std::string e = id_extension(d.id);
  if (e == "py") return true;
  if (code_extensions().count(e)) return false;
  const std::vector<std::string_view> lines = split_lines(d.text);
  return std::any_of(lines.begin(), lines.end(), [](std::string_view l) {
    const size_t a = l.find_first_not_of(" \t"), b = l.find_last_not_of(" \t\r");
    if (a == std::string_view::npos) return false;
    const std::string_view t = l.substr(a, b + 1 - a);
    return t.starts_with("def ") && t.ends_with(":") && t.find('(') != std::string_view::npos;
  });
}

// A top-level line that opens a brace-delimited function, which ends at the next line that is
// `}` alone: Go's `func …`, or a header with a parameter list that ends in `{` (C, Java, JS, Rust).
bool opens_brace_function(std::string_view t) {
  if (t.starts_with("func ")) return true;
  if (t.starts_with("//") || t.starts_with("/*") || t.starts_with("#")) return false;
  const size_t b = t.find_last_not_of(" \t\r");
  return b != std::string_view::npos && t[b] == '{' && t.find('(') < b;
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
    const bool py = indented_blocks(d);
    const auto lines = lines_of(d.text);
    for (size_t i = 0; i < lines.size(); ++i) {
      const std::string& l = lines[i];
      const size_t ind = indent(l);
      if (ind == std::string::npos) continue;
      const std::string_view t(l.c_str() + ind);
      if (!(py ? t.starts_with("def ") : (ind == 0 && opens_brace_function(t)))) continue;
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
  std::string needs;  // the kind of text, as reported when a corpus has none
  bool (*accepts)(const Doc&);
  Written (*make)(const std::vector<Doc>&, const BuildTasksOptions&);
};

const std::vector<Spec>& specs() {
  static const std::vector<Spec> s{
      {"lambada_style",
       "prose (running text of at least 85 % plain words, not code or dictionary entries) "
       "with passages of consecutive lines of 40-120 words",
       is_prose, lambada_style},
      {"cloze_definitions",
       "dictionary entries ('HEADWORD, n.  definition', or a short headword line over an "
       "indented definition), at least 4 in one domain",
       is_dictionary_entry, cloze_definitions},
      {"verse_completion",
       "verse-like prose (one verse or sentence a line: 70 % of lines end in punctuation) "
       "with lines of 12-60 words, at least 4 in one domain",
       is_one_verse_a_line, verse_completion},
      {"code_completion",
       "source code (a source file extension in the document id, else code-shaped lines) "
       "with functions (Python 'def' blocks or top-level brace-delimited functions)",
       is_source_code, code_completion}};
  return s;
}

// The distinct values of field f of docs, in their order (docs come grouped by domain and shard).
std::vector<std::string> distinct(const std::vector<Doc>& docs, std::string Doc::*f) {
  std::vector<std::string> out;
  for (const Doc& d : docs)
    if (out.empty() || out.back() != d.*f) out.push_back(d.*f);
  return out;
}

// Writes OUT/NAME.jsonl and OUT/NAME.yaml of one task and its entry of the manifest.
void write_task(const BuildTasksOptions& o, const BuiltTask& b, const Written& w, json& manifest) {
  std::string jsonl;
  // seam: text assembly (one JSON line per item), not tensor math
  for (const json& d : w.docs) jsonl += d.dump() + "\n";
  write_file_atomic((fs::path(o.out) / (b.name + ".jsonl")).string(), jsonl);
  const std::string yaml = fmt::format(
      "# Built by marin tasks build from the valid split of {} (seed {}); docs/evaluation.md.\n"
      "# The harness resolves data_files against its working directory: run it from here.\n"
      "task: {}\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: {}.jsonl\n"
      "test_split: test\n{}metadata:\n  version: 1.0\n",
      fmt::format("{}", fmt::join(b.sources, ", ")), o.seed, b.name, b.name, w.yaml_body);
  write_file_atomic((fs::path(o.out) / (b.name + ".yaml")).string(), yaml);
  manifest["tasks"][b.name] = {{"needs", b.needs},         {"domains", b.domains},
                               {"sources", b.sources},     {"candidates", b.candidates},
                               {"items", b.items},         {"chance", b.chance},
                               {"baselines", b.baselines}, {"jsonl_xxh64", xxh64_hex(jsonl)}};
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

BuiltTasks build_tasks(const BuildTasksOptions& o) {
  MARIN_CHECK(fs::is_directory(o.corpus), "tasks build: --corpus {}: not a directory", o.corpus);
  MARIN_CHECK(!o.out.empty(), "tasks build: --out is required");
  for (const auto& t : o.tasks)
    if (std::find(builtin_task_names().begin(), builtin_task_names().end(), t) ==
        builtin_task_names().end())
      fail("tasks build: unknown task '{}' (built-in tasks: {})", t,
           fmt::format("{}", fmt::join(builtin_task_names(), ", ")));
  const HeldOut all = held_out(o.corpus);
  const std::string looked = all.domains.empty()
                                 ? std::string("no domain has valid-NNNNN.jsonl shards")
                                 : fmt::format("domains {}", fmt::join(all.domains, ", "));
  fs::create_directories(o.out);
  BuiltTasks out;
  json manifest = {{"format", "marin-builtin-tasks/1"},
                   {"corpus", o.corpus},
                   {"split", "valid"},
                   {"seed", o.seed},
                   {"max_items", o.max_items},
                   {"tasks", json::object()},
                   {"skipped", json::object()}};
  for (const Spec& s : specs()) {
    const bool asked = std::find(o.tasks.begin(), o.tasks.end(), s.name) != o.tasks.end();
    if (!o.tasks.empty() && !asked) continue;
    std::vector<Doc> docs;
    std::copy_if(all.docs.begin(), all.docs.end(), std::back_inserter(docs), s.accepts);
    const Written w = docs.empty() ? Written{} : s.make(docs, o);
    if (w.docs.empty()) {
      SkippedTask k{s.name, s.needs, all.domains,
                    docs.empty()
                        ? fmt::format("no such text in the valid split ({})", looked)
                        : fmt::format("{} documents of that kind (domains {}) gave no item",
                                      docs.size(), fmt::join(distinct(docs, &Doc::domain), ", "))};
      if (asked)
        fail("tasks build: {} cannot be built from {}: it needs {}; {}", s.name, o.corpus, s.needs,
             k.reason);
      manifest["skipped"][s.name] = {{"needs", k.needs}, {"reason", k.reason}};
      out.skipped.push_back(std::move(k));
      continue;
    }
    BuiltTask b;
    b.name = s.name;
    b.needs = s.needs;
    // What the items came from: a domain with the kind of text may still give none (a code
    // file without functions).
    std::set<std::string> from;
    for (const json& d : w.docs) from.insert(d["domain"].get<std::string>());
    b.domains.assign(from.begin(), from.end());
    std::erase_if(docs, [&](const Doc& d) { return !from.count(d.domain); });
    b.sources = distinct(docs, &Doc::shard);
    b.candidates = w.candidates;
    b.items = w.docs.size();
    b.chance = w.chance;
    b.baselines = w.baselines;
    write_task(o, b, w, manifest);
    out.built.push_back(std::move(b));
  }
  if (out.built.empty()) {
    std::vector<std::string> why;
    for (const SkippedTask& k : out.skipped)
      why.push_back(fmt::format("{} needs {}: {}", k.name, k.needs, k.reason));
    fail("tasks build: no task could be built from {} (valid split; {}):\n  {}", o.corpus, looked,
         fmt::join(why, "\n  "));
  }
  write_file_atomic((fs::path(o.out) / "tasks.json").string(), manifest.dump(2) + "\n");
  return out;
}

}  // namespace marin::eval
