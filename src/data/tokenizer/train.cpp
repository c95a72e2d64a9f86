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

}  // namespace

Tokenizer Tokenizer::train(const std::vector<std::string>& documents, uint32_t vocab_size,
                           const std::vector<std::string>& specials, const std::string& pattern) {
  if (vocab_size < 256 + specials.size())
    fail(
        "tokenizer train: vocab size {} is too small: need at least 256 byte tokens + {} special "
        "tokens",
        vocab_size, specials.size());
  {
    std::unordered_set<std::string> seen;
    for (const auto& s : specials) {
      if (s.empty()) fail("tokenizer train: a special token is empty");
      if (!seen.insert(s).second) fail("tokenizer train: special token '{}' given twice", s);
    }
  }
  SplitRegex regex(pattern);

  // 1. Piece counts.
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

  std::vector<std::vector<uint32_t>> words(pieces.size());
  std::vector<int64_t> wcount(pieces.size());
  for (size_t w = 0; w < pieces.size(); ++w) {
    for (unsigned char c : pieces[w].first) words[w].push_back(c);
    wcount[w] = int64_t(pieces[w].second);
  }
  pieces.clear();
  pieces.shrink_to_fit();

  // 2. Initial pair counts and the pair -> words index.
  std::unordered_map<uint64_t, int64_t> pc;
  std::unordered_map<uint64_t, std::vector<uint32_t>> where;
  for (uint32_t w = 0; w < words.size(); ++w) {
    const auto& s = words[w];
    for (size_t i = 0; i + 1 < s.size(); ++i) {
      uint64_t k = pair_key(s[i], s[i + 1]);
      pc[k] += wcount[w];
      auto& v = where[k];
      if (v.empty() || v.back() != w) v.push_back(w);
    }
  }
  std::priority_queue<Cand, std::vector<Cand>, CandLess> heap;
  for (auto [k, c] : pc) heap.push(Cand{c, uint32_t(k >> 32), uint32_t(k)});

  auto m = std::make_unique<Impl>();
  m->pattern = pattern;
  m->ignore_merges = true;
  for (int b = 0; b < 256; ++b) m->tokens.emplace_back(1, char(b));
  std::unordered_map<std::string, uint32_t, StrHash, StrEq> token_ids;
  for (uint32_t b = 0; b < 256; ++b) token_ids.emplace(m->tokens[b], b);

  const size_t target = vocab_size - specials.size();
  constexpr int64_t kMinCount = 2;  // a pair seen once is not worth a token
  std::unordered_map<uint64_t, int64_t> delta;
  std::vector<uint32_t> ns;
  while (m->tokens.size() < target && !heap.empty()) {
    Cand top = heap.top();
    heap.pop();
    uint64_t key = pair_key(top.a, top.b);
    auto it = pc.find(key);
    if (it == pc.end() || it->second != top.count) continue;  // stale entry
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

    std::vector<uint32_t> ws = std::move(where[key]);
    where.erase(key);
    delta.clear();
    for (uint32_t w : ws) {
      auto& s = words[w];
      ns.clear();
      for (size_t i = 0; i < s.size();) {
        if (i + 1 < s.size() && s[i] == top.a && s[i + 1] == top.b) {
          ns.push_back(nid);
          i += 2;
        } else {
          ns.push_back(s[i]);
          i += 1;
        }
      }
      if (ns.size() == s.size()) continue;
      const int64_t c = wcount[w];
      for (size_t i = 0; i + 1 < s.size(); ++i) delta[pair_key(s[i], s[i + 1])] -= c;
      for (size_t i = 0; i + 1 < ns.size(); ++i) {
        uint64_t k = pair_key(ns[i], ns[i + 1]);
        delta[k] += c;
        if (ns[i] == nid || ns[i + 1] == nid) {
          auto& v = where[k];
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
      int64_t& c = pc[k];
      c += d;
      if (c <= 0) {
        pc.erase(k);
        where.erase(k);
      } else {
        heap.push(Cand{c, uint32_t(k >> 32), uint32_t(k)});
      }
    }
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
