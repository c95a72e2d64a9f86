// Pre-tokenizers of a tokenizer.json: Split (string or regex; Removed, Isolated,
// MergedWithPrevious, MergedWithNext, Contiguous; invert), ByteLevel, Metaspace, Digits,
// Punctuation, Whitespace, WhitespaceSplit and Sequence. Semantics of huggingface/tokenizers'
// src/pre_tokenizers and NormalizedString::split; input pieces are valid UTF-8.
#include <fmt/core.h>
#include <utf8proc.h>

#include <functional>

#include "core/error.hpp"
#include "core/utf8.hpp"
#include "data/tokenizer/pipeline.hpp"
#include "data/tokenizer/split_regex.hpp"
#include "data/tokenizer/tokenizer.hpp"

namespace marin::tok {

void parse_pattern(const json& j, const std::string& path, std::string& literal,
                   std::unique_ptr<SplitRegex>& regex);

namespace {

enum class Behavior { Removed, Isolated, MergedWithPrevious, MergedWithNext, Contiguous };

Behavior parse_behavior(const json& j, const std::string& path) {
  static const std::pair<const char*, Behavior> kNames[] = {
      {"Removed", Behavior::Removed},
      {"Isolated", Behavior::Isolated},
      {"MergedWithPrevious", Behavior::MergedWithPrevious},
      {"MergedWithNext", Behavior::MergedWithNext},
      {"Contiguous", Behavior::Contiguous}};
  if (j.is_string())
    for (auto [name, b] : kNames)
      if (j.get<std::string>() == name) return b;
  unsupported(path, j);
}

struct Range {
  size_t b, e;
  bool match;
};

// NormalizedString::split: `ranges` tile the piece; the behaviour decides what is kept/merged.
void apply_behavior(Piece&& in, std::vector<Range>& ranges, Behavior behavior,
                    std::vector<Piece>& out) {
  std::vector<Range> acc;
  acc.reserve(ranges.size());
  switch (behavior) {
    case Behavior::Isolated:
      acc = ranges;
      break;
    case Behavior::Removed:
      for (const Range& r : ranges)
        if (!r.match) acc.push_back(r);
      break;
    case Behavior::MergedWithPrevious: {
      bool prev_match = false;
      for (const Range& r : ranges) {
        if (r.match && !prev_match && !acc.empty())
          acc.back().e = r.e;
        else
          acc.push_back(r);
        prev_match = r.match;
      }
      break;
    }
    case Behavior::MergedWithNext: {
      bool prev_match = false;
      for (size_t k = ranges.size(); k-- > 0;) {
        const Range& r = ranges[k];
        if (r.match && !prev_match && !acc.empty())
          acc.back().b = r.b;
        else
          acc.push_back(r);
        prev_match = r.match;
      }
      std::reverse(acc.begin(), acc.end());
      break;
    }
    case Behavior::Contiguous: {
      bool prev_match = false;
      for (const Range& r : ranges) {
        if (r.match == prev_match && !acc.empty())
          acc.back().e = r.e;
        else
          acc.push_back(r);
        prev_match = r.match;
      }
      break;
    }
  }
  for (const Range& r : acc)
    if (r.e > r.b) out.push_back(Piece{in.text.substr(r.b, r.e - r.b), in.at_start && r.b == 0});
}

// Ranges of the matches of `find` and the gaps between them, tiling `s`.
template <class Find>
std::vector<Range> tile(std::string_view s, bool invert, Find&& find) {
  std::vector<Range> r;
  size_t pos = 0, prev = 0, ms, me;
  while (pos <= s.size() && find(s, pos, ms, me)) {
    if (me == ms) {  // an empty match splits nothing; step one character on
      pos = ms + 1;
      while (pos < s.size() && (static_cast<unsigned char>(s[pos]) & 0xC0) == 0x80) ++pos;
      continue;
    }
    if (ms > prev) r.push_back({prev, ms, invert});
    r.push_back({ms, me, !invert});
    prev = pos = me;
  }
  if (prev < s.size()) r.push_back({prev, s.size(), invert});
  return r;
}

// One range per character for which `pred` holds (char-predicate patterns of the Rust crate).
std::function<bool(std::string_view, size_t, size_t&, size_t&)> char_finder(
    std::function<bool(uint32_t)> pred, bool runs) {
  return [pred = std::move(pred), runs](std::string_view s, size_t pos, size_t& ms, size_t& me) {
    for (size_t i = pos; i < s.size();) {
      uint32_t cp = 0;
      size_t n = utf8::decode(s, i, cp);
      if (n == 0) n = 1;
      if (pred(cp)) {
        ms = i;
        me = i + n;
        while (runs && me < s.size()) {
          size_t m = utf8::decode(s, me, cp);
          if (m == 0 || !pred(cp)) break;
          me += m;
        }
        return true;
      }
      i += n;
    }
    return false;
  };
}

bool is_whitespace(uint32_t cp) {
  return (cp >= 0x9 && cp <= 0xD) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}
bool is_numeric(uint32_t cp) {  // Rust's char::is_numeric: Nd, Nl, No
  const auto c = utf8proc_category(utf8proc_int32_t(cp));
  return c == UTF8PROC_CATEGORY_ND || c == UTF8PROC_CATEGORY_NL || c == UTF8PROC_CATEGORY_NO;
}
bool is_punctuation(uint32_t cp) {  // ASCII punctuation or a Unicode P* category
  if (cp < 0x80)
    return (cp >= 0x21 && cp <= 0x2F) || (cp >= 0x3A && cp <= 0x40) || (cp >= 0x5B && cp <= 0x60) ||
           (cp >= 0x7B && cp <= 0x7E);
  const auto c = utf8proc_category(utf8proc_int32_t(cp));
  return c >= UTF8PROC_CATEGORY_PC && c <= UTF8PROC_CATEGORY_PO;
}

class Split : public PreTokenizer {
 public:
  using Finder = std::function<bool(std::string_view, size_t, size_t&, size_t&)>;
  Split(Finder find, Behavior behavior, bool invert)
      : find_(std::move(find)), behavior_(behavior), invert_(invert) {}
  void split(Piece&& in, std::vector<Piece>& out) const override {
    std::vector<Range> ranges = tile(in.text, invert_, find_);
    apply_behavior(std::move(in), ranges, behavior_, out);
  }

 private:
  Finder find_;
  Behavior behavior_;
  bool invert_;
};

Split::Finder regex_finder(std::shared_ptr<SplitRegex> re) {
  return [re](std::string_view s, size_t pos, size_t& ms, size_t& me) {
    return re->find(s, pos, ms, me);
  };
}
Split::Finder literal_finder(std::string lit) {
  return [lit](std::string_view s, size_t pos, size_t& ms, size_t& me) {
    ms = s.find(lit, pos);
    if (ms == std::string_view::npos) return false;
    me = ms + lit.size();
    return true;
  };
}

class ByteLevel : public PreTokenizer {
 public:
  ByteLevel(bool prefix, bool use_regex)
      : prefix_(prefix),
        regex_(use_regex ? std::make_shared<SplitRegex>(Tokenizer::kGpt2Pattern) : nullptr) {}
  void split(Piece&& in, std::vector<Piece>& out) const override {
    if (prefix_ && (in.text.empty() || in.text[0] != ' ')) in.text.insert(0, 1, ' ');
    if (!regex_) {
      if (!in.text.empty()) out.push_back(std::move(in));
      return;
    }
    std::vector<Range> ranges = tile(in.text, false, regex_finder(regex_));
    apply_behavior(std::move(in), ranges, Behavior::Isolated, out);
  }

 private:
  bool prefix_;
  std::shared_ptr<SplitRegex> regex_;
};

class Metaspace : public PreTokenizer {
 public:
  enum Scheme { kFirst, kAlways, kNever };
  Metaspace(std::string rep, Scheme scheme, bool split)
      : rep_(std::move(rep)), scheme_(scheme), split_(split) {}
  void split(Piece&& in, std::vector<Piece>& out) const override {
    std::string t;
    t.reserve(in.text.size() + rep_.size() * 4);
    for (char c : in.text) {
      if (c == ' ')
        t += rep_;
      else
        t += c;
    }
    const bool starts = t.compare(0, rep_.size(), rep_) == 0;
    if (!starts && (scheme_ == kAlways || (scheme_ == kFirst && in.at_start))) t.insert(0, rep_);
    Piece p{std::move(t), in.at_start};
    if (!split_) {
      if (!p.text.empty()) out.push_back(std::move(p));
      return;
    }
    std::vector<Range> ranges = tile(p.text, false, literal_finder(rep_));
    apply_behavior(std::move(p), ranges, Behavior::MergedWithNext, out);
  }

 private:
  std::string rep_;
  Scheme scheme_;
  bool split_;
};

class Sequence : public PreTokenizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<PreTokenizer>> steps) : steps_(std::move(steps)) {}
  void split(Piece&& in, std::vector<Piece>& out) const override {
    std::vector<Piece> cur, next;
    cur.push_back(std::move(in));
    for (const auto& s : steps_) {
      next.clear();
      for (Piece& p : cur) s->split(std::move(p), next);
      cur.swap(next);
    }
    for (Piece& p : cur) out.push_back(std::move(p));
  }

 private:
  std::vector<std::unique_ptr<PreTokenizer>> steps_;
};

bool get_bool(const json& j, const char* key, bool dflt, const std::string& path) {
  if (!j.contains(key) || j[key].is_null()) return dflt;
  if (!j[key].is_boolean())
    fail("{}.{}: expected true or false, found {}", path, key, j[key].dump());
  return j[key].get<bool>();
}

}  // namespace

std::unique_ptr<PreTokenizer> parse_pre_tokenizer(const json& j, const std::string& path,
                                                  PreTokenizerInfo& info, int depth) {
  check_depth(path, depth);
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    fail("{}: expected an object with a \"type\", found {}", path, j.dump().substr(0, 200));
  const std::string type = j["type"].get<std::string>();
  if (type == "Sequence") {
    if (!j.contains("pretokenizers") || !j["pretokenizers"].is_array())
      fail("{}.pretokenizers: expected an array", path);
    std::vector<std::unique_ptr<PreTokenizer>> steps;
    for (size_t i = 0; i < j["pretokenizers"].size(); ++i)
      steps.push_back(parse_pre_tokenizer(
          j["pretokenizers"][i], fmt::format("{}.pretokenizers[{}]", path, i), info, depth + 1));
    return std::make_unique<Sequence>(std::move(steps));
  }
  if (type == "Split") {
    if (!j.contains("pattern")) fail("{}.pattern: missing", path);
    std::string literal;
    std::unique_ptr<SplitRegex> regex;
    parse_pattern(j["pattern"], path + ".pattern", literal, regex);
    const Behavior b = parse_behavior(j.value("behavior", json("Isolated")), path + ".behavior");
    const bool invert = get_bool(j, "invert", false, path);
    Split::Finder f = regex ? regex_finder(std::shared_ptr<SplitRegex>(std::move(regex)))
                            : literal_finder(literal);
    return std::make_unique<Split>(std::move(f), b, invert);
  }
  if (type == "ByteLevel") {
    info.byte_level = true;
    return std::make_unique<ByteLevel>(get_bool(j, "add_prefix_space", true, path),
                                       get_bool(j, "use_regex", true, path));
  }
  if (type == "Metaspace") {
    const json rep_j = j.value("replacement", json("\xE2\x96\x81"));
    uint32_t cp = 0;
    if (!rep_j.is_string() || utf8::decode(rep_j.get<std::string>(), 0, cp) == 0 ||
        utf8::decode(rep_j.get<std::string>(), 0, cp) != rep_j.get<std::string>().size())
      fail("{}.replacement: expected one character, found {}", path, rep_j.dump());
    const std::string rep = rep_j.get<std::string>();
    Metaspace::Scheme scheme = Metaspace::kAlways;
    if (j.contains("prepend_scheme")) {
      const json& s = j["prepend_scheme"];
      if (s == "first")
        scheme = Metaspace::kFirst;
      else if (s == "always")
        scheme = Metaspace::kAlways;
      else if (s == "never")
        scheme = Metaspace::kNever;
      else
        unsupported(path + ".prepend_scheme", s);
    } else if (!get_bool(j, "add_prefix_space", true, path)) {
      scheme = Metaspace::kNever;
    }
    return std::make_unique<Metaspace>(rep, scheme, get_bool(j, "split", true, path));
  }
  if (type == "Digits")
    return std::make_unique<Split>(
        char_finder(is_numeric, !get_bool(j, "individual_digits", false, path)), Behavior::Isolated,
        false);
  if (type == "Punctuation")
    return std::make_unique<Split>(
        char_finder(is_punctuation, false),
        parse_behavior(j.value("behavior", json("Isolated")), path + ".behavior"), false);
  if (type == "Whitespace")
    // `\w+|[^\w\s]+` with Rust regex's \w and \s (Alphabetic, marks, decimal digits,
    // connector punctuation, joiners; White_Space): PCRE2's own \w lacks marks and Other_Alphabetic
    // (Devanagari vowel signs, circled letters), its \s has U+180E.
    return std::make_unique<Split>(
        regex_finder(std::make_shared<SplitRegex>(
            R"([\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}]+)"
            R"(|[^\p{Alphabetic}\p{M}\p{Nd}\p{Pc}\x{200C}\x{200D}\p{White_Space}]+)")),
        Behavior::Removed, true);
  if (type == "WhitespaceSplit")
    return std::make_unique<Split>(char_finder(is_whitespace, false), Behavior::Removed, false);
  unsupported(path + ".type", j["type"]);
}

}  // namespace marin::tok
