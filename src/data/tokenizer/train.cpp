// Byte-level BPE training: count pre-tokenized pieces, then repeatedly merge the most frequent
// adjacent pair, keeping pair counts up to date incrementally (a max-heap with lazy deletion and
// a pair -> words index, so each merge only touches the words that contain the pair).
#include <algorithm>
#include <queue>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "core/error.hpp"
#include "data/tokenizer/impl.hpp"

namespace marin {
namespace {

struct StrHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return bytes_hash(s); }
};
struct StrEq {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const { return a == b; }
};

uint64_t pair_key(uint32_t a, uint32_t b) {
  return (uint64_t(a) << 32) | b;
}

struct Cand {
  int64_t count;
  uint32_t a, b;
};
// Max-heap order: higher count first; ties go to the smaller (left, right) id pair, so training
// is a pure function of the input.
struct CandLess {
  bool operator()(const Cand& x, const Cand& y) const {
    if (x.count != y.count) return x.count < y.count;
    if (x.a != y.a) return x.a > y.a;
    return x.b > y.b;
  }
};

// The words being merged (pieces as token ids) with their counts, the counts of adjacent pairs,
// which words hold each pair, and the heap of candidate merges.
struct MergeState {
  std::vector<std::vector<uint32_t>> words;
  std::vector<int64_t> wcount;
  std::unordered_map<uint64_t, int64_t> pc;
  std::unordered_map<uint64_t, std::vector<uint32_t>> where;
  std::priority_queue<Cand, std::vector<Cand>, CandLess> heap;
  std::unordered_map<uint64_t, int64_t> delta;  // scratch of merge_pair, kept between merges
  std::vector<uint32_t> ns;                     // likewise
};

void check_train_args(uint32_t vocab_size, const std::vector<std::string>& specials) {
  if (vocab_size < 256 + specials.size())
    fail(
        "tokenizer train: vocab size {} is too small: need at least 256 byte tokens + {} special "
        "tokens",
        vocab_size, specials.size());
  std::unordered_set<std::string> seen;
  for (const auto& s : specials) {
    if (s.empty()) fail("tokenizer train: a special token is empty");
    if (!seen.insert(s).second) fail("tokenizer train: special token '{}' given twice", s);
  }
}

// 1. Piece counts: each distinct piece becomes a word of byte ids, in sorted order (so training
// does not depend on hash order).
void count_pieces(const std::vector<std::string>& documents, const SplitRegex& regex,
                  MergeState& st) {
  std::unordered_map<std::string, uint64_t, StrHash, StrEq> counts;
  for (const std::string& doc : documents) {
    regex.split(doc, [&](std::string_view p) {
      auto it = counts.find(p);
      if (it == counts.end())
        counts.emplace(std::string(p), 1);
      else
        ++it->second;
    });
  }
  std::vector<std::pair<std::string, uint64_t>> pieces(counts.begin(), counts.end());
  counts.clear();
  std::sort(pieces.begin(), pieces.end());

  st.words.resize(pieces.size());
  st.wcount.resize(pieces.size());
  for (size_t w = 0; w < pieces.size(); ++w) {
    for (unsigned char c : pieces[w].first) st.words[w].push_back(c);
    st.wcount[w] = int64_t(pieces[w].second);
  }
}

// 2. Initial pair counts, the pair -> words index and the heap.
void index_pairs(MergeState& st) {
  for (uint32_t w = 0; w < st.words.size(); ++w) {
    const auto& s = st.words[w];
    for (size_t i = 0; i + 1 < s.size(); ++i) {
      uint64_t k = pair_key(s[i], s[i + 1]);
      st.pc[k] += st.wcount[w];
      auto& v = st.where[k];
      if (v.empty() || v.back() != w) v.push_back(w);
    }
  }
  for (auto [k, c] : st.pc) st.heap.push(Cand{c, uint32_t(k >> 32), uint32_t(k)});
}

// Replaces the pair (a, b) by `nid` in every word that holds it and updates the pair counts,
// the index and the heap by the difference.
void merge_pair(MergeState& st, uint32_t a, uint32_t b, uint32_t nid) {
  const uint64_t key = pair_key(a, b);
  std::vector<uint32_t> ws = std::move(st.where[key]);
  st.where.erase(key);
  auto& delta = st.delta;
  auto& ns = st.ns;
  delta.clear();
  for (uint32_t w : ws) {
    auto& s = st.words[w];
    ns.clear();
    for (size_t i = 0; i < s.size();) {
      if (i + 1 < s.size() && s[i] == a && s[i + 1] == b) {
        ns.push_back(nid);
        i += 2;
      } else {
        ns.push_back(s[i]);
        i += 1;
      }
    }
    if (ns.size() == s.size()) continue;
    const int64_t c = st.wcount[w];
    for (size_t i = 0; i + 1 < s.size(); ++i) delta[pair_key(s[i], s[i + 1])] -= c;
    for (size_t i = 0; i + 1 < ns.size(); ++i) {
      uint64_t k = pair_key(ns[i], ns[i + 1]);
      delta[k] += c;
      if (ns[i] == nid || ns[i + 1] == nid) {
        auto& v = st.where[k];
        if (v.empty() || v.back() != w) v.push_back(w);
      }
    }
    s.swap(ns);
  }
  // Apply in key order so the heap sees the same sequence on every run.
  std::vector<std::pair<uint64_t, int64_t>> changes(delta.begin(), delta.end());
  std::sort(changes.begin(), changes.end());
  for (auto [k, d] : changes) {
    if (d == 0) continue;
    int64_t& c = st.pc[k];
    c += d;
    if (c <= 0) {
      st.pc.erase(k);
      st.where.erase(k);
    } else {
      st.heap.push(Cand{c, uint32_t(k >> 32), uint32_t(k)});
    }
  }
}

}  // namespace

Tokenizer Tokenizer::train(const std::vector<std::string>& documents, uint32_t vocab_size,
                           const std::vector<std::string>& specials, const std::string& pattern) {
  check_train_args(vocab_size, specials);
  SplitRegex regex(pattern);
  MergeState st;
  count_pieces(documents, regex, st);
  index_pairs(st);

  auto m = std::make_unique<Impl>();
  m->pattern = pattern;
  m->ignore_merges = true;
  for (int b = 0; b < 256; ++b) m->tokens.emplace_back(1, char(b));
  std::unordered_map<std::string, uint32_t, StrHash, StrEq> token_ids;
  for (uint32_t b = 0; b < 256; ++b) token_ids.emplace(m->tokens[b], b);

  const size_t target = vocab_size - specials.size();
  constexpr int64_t kMinCount = 2;  // a pair seen once is not worth a token
  while (m->tokens.size() < target && !st.heap.empty()) {
    Cand top = st.heap.top();
    st.heap.pop();
    auto it = st.pc.find(pair_key(top.a, top.b));
    if (it == st.pc.end() || it->second != top.count) continue;  // stale entry
    if (top.count < kMinCount) break;

    std::string cat = m->tokens[top.a] + m->tokens[top.b];
    uint32_t nid;
    if (auto t = token_ids.find(cat); t != token_ids.end()) {
      nid = t->second;  // the same bytes were already built by another pair
    } else {
      nid = uint32_t(m->tokens.size());
      m->tokens.push_back(cat);
      token_ids.emplace(cat, nid);
    }
    m->merges.emplace_back(top.a, top.b);
    merge_pair(st, top.a, top.b, nid);
  }

  m->kind.assign(m->tokens.size(), kNormal);
  for (const auto& s : specials) {
    // A special token whose text was also learned stays a separate id (matched only when
    // encode is asked for special tokens).
    m->tokens.push_back(s);
    m->kind.push_back(kSpecial);
  }
  m->finalize("tokenizer train");
  return Tokenizer(std::move(m));
}

}  // namespace marin
