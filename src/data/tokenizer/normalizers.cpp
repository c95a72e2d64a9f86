// Normalizers of a tokenizer.json: NFC/NFD/NFKC/NFKD (utf8proc), Lowercase, Strip, StripAccents,
// Replace (string or regex), Prepend and Sequence. Semantics of huggingface/tokenizers'
// src/normalizers; the input is valid UTF-8 (the encoder sanitizes it first).
#include <fmt/core.h>
#include <utf8proc.h>

#include <cstdlib>

#include "core/error.hpp"
#include "core/utf8.hpp"
#include "data/tokenizer/pipeline.hpp"
#include "data/tokenizer/split_regex.hpp"

namespace marin::tok {

void unsupported(const std::string& path, const json& value) {
  fail("{}: {} is not supported", path, value.dump());
}

void check_depth(const std::string& path, int depth) {
  if (depth > kMaxNesting)
    fail("{}: components nested deeper than {} levels are refused (limit kMaxNesting)", path,
         kMaxNesting);
}

namespace {

std::string get_string(const json& j, const char* key, const std::string& path) {
  if (!j.contains(key) || !j[key].is_string())
    fail("{}.{}: expected a string, found {}", path, key, j.contains(key) ? j[key].dump() : "none");
  return j[key].get<std::string>();
}

bool is_ascii(std::string_view s) {
  for (unsigned char c : s)
    if (c >= 0x80) return false;
  return true;
}

class UnicodeForm : public Normalizer {
 public:
  explicit UnicodeForm(int options) : options_(options) {}
  void apply(std::string& s) const override {
    if (is_ascii(s)) return;
    utf8proc_uint8_t* out = nullptr;
    const utf8proc_ssize_t n =
        utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(s.data()),
                     utf8proc_ssize_t(s.size()), &out, utf8proc_option_t(options_));
    if (n < 0) fail("Unicode normalization failed: {}", utf8proc_errmsg(n));
    s.assign(reinterpret_cast<const char*>(out), size_t(n));
    std::free(out);
  }
  bool ascii_identity() const override { return true; }

 private:
  int options_;
};

class Lowercase : public Normalizer {
 public:
  void apply(std::string& s) const override {
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
      const unsigned char c = static_cast<unsigned char>(s[i]);
      if (c < 0x80) {
        out += char(c >= 'A' && c <= 'Z' ? c + 32 : c);
        ++i;
        continue;
      }
      uint32_t cp = 0;
      const size_t n = utf8::decode(s, i, cp);
      i += n;
      if (cp == 0x130) {  // the one unconditional multi-character lowercase mapping (Rust's)
        out += "i\xCC\x87";
        continue;
      }
      utf8::append(out, uint32_t(utf8proc_tolower(utf8proc_int32_t(cp))));
    }
    s.swap(out);
  }
  bool ascii_identity() const override { return false; }
};

bool is_whitespace(uint32_t cp) {  // Rust's char::is_whitespace (White_Space property)
  return (cp >= 0x9 && cp <= 0xD) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
         (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F ||
         cp == 0x205F || cp == 0x3000;
}

class Strip : public Normalizer {
 public:
  Strip(bool left, bool right) : left_(left), right_(right) {}
  void apply(std::string& s) const override {
    size_t b = 0, e = s.size();
    if (left_)
      while (b < e) {
        uint32_t cp = 0;
        const size_t n = utf8::decode(s, b, cp);
        if (!is_whitespace(cp)) break;
        b += n;
      }
    if (right_)
      while (e > b) {
        size_t k = e - 1;
        while (k > b && (static_cast<unsigned char>(s[k]) & 0xC0) == 0x80) --k;
        uint32_t cp = 0;
        utf8::decode(s, k, cp);
        if (!is_whitespace(cp)) break;
        e = k;
      }
    s = s.substr(b, e - b);
  }
  bool ascii_identity() const override { return false; }

 private:
  bool left_, right_;
};

class StripAccents : public Normalizer {
 public:
  void apply(std::string& s) const override {
    if (is_ascii(s)) return;
    std::string out;
    out.reserve(s.size());
    for (size_t i = 0; i < s.size();) {
      uint32_t cp = 0;
      const size_t n = utf8::decode(s, i, cp);
      // Rust's is_combining_mark: General_Category Mark (Mn, Mc and Me, not Mn alone).
      const auto c = utf8proc_category(utf8proc_int32_t(cp));
      if (c != UTF8PROC_CATEGORY_MN && c != UTF8PROC_CATEGORY_MC && c != UTF8PROC_CATEGORY_ME)
        out.append(s, i, n);
      i += n;
    }
    s.swap(out);
  }
  bool ascii_identity() const override { return true; }
};

class Replace : public Normalizer {
 public:
  Replace(std::string literal, std::unique_ptr<SplitRegex> regex, std::string content)
      : literal_(std::move(literal)), regex_(std::move(regex)), content_(std::move(content)) {}
  void apply(std::string& s) const override {
    std::string out;
    out.reserve(s.size() + s.size() / 4);
    size_t pos = 0, ms = 0, me = 0;
    while (pos <= s.size()) {
      if (regex_) {
        if (!regex_->find(s, pos, ms, me)) break;
        if (me == ms) {  // an empty match replaces nothing; step past one character
          if (ms >= s.size()) break;
          size_t step = 1;
          while (ms + step < s.size() && (static_cast<unsigned char>(s[ms + step]) & 0xC0) == 0x80)
            ++step;
          out.append(s, pos, ms + step - pos);
          pos = ms + step;
          continue;
        }
      } else {
        ms = s.find(literal_, pos);
        if (ms == std::string::npos) break;
        me = ms + literal_.size();
      }
      out.append(s, pos, ms - pos);
      out += content_;
      pos = me;
    }
    if (pos < s.size()) out.append(s, pos, std::string::npos);
    s.swap(out);
  }
  bool ascii_identity() const override { return !regex_ && !is_ascii(literal_); }

 private:
  std::string literal_;
  std::unique_ptr<SplitRegex> regex_;
  std::string content_;
};

class Prepend : public Normalizer {
 public:
  explicit Prepend(std::string p) : p_(std::move(p)) {}
  void apply(std::string& s) const override {
    if (!s.empty()) s.insert(0, p_);
  }
  bool ascii_identity() const override { return false; }

 private:
  std::string p_;
};

class Sequence : public Normalizer {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Normalizer>> steps) : steps_(std::move(steps)) {}
  void apply(std::string& s) const override {
    for (const auto& n : steps_) n->apply(s);
  }
  bool ascii_identity() const override {
    for (const auto& n : steps_)
      if (!n->ascii_identity()) return false;
    return true;
  }

 private:
  std::vector<std::unique_ptr<Normalizer>> steps_;
};

}  // namespace

// A Replace/Split pattern: {"String": s} (literal) or {"Regex": r}.
void parse_pattern(const json& j, const std::string& path, std::string& literal,
                   std::unique_ptr<SplitRegex>& regex) {
  if (j.is_object() && j.size() == 1 && j.contains("String") && j["String"].is_string()) {
    literal = j["String"].get<std::string>();
    if (literal.empty()) fail("{}.String: an empty pattern is not supported", path);
  } else if (j.is_object() && j.size() == 1 && j.contains("Regex") && j["Regex"].is_string()) {
    regex = std::make_unique<SplitRegex>(j["Regex"].get<std::string>());
  } else {
    unsupported(path, j);
  }
}

std::unique_ptr<Normalizer> parse_normalizer(const json& j, const std::string& path, int depth) {
  check_depth(path, depth);
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    fail("{}: expected an object with a \"type\", found {}", path, j.dump().substr(0, 200));
  const std::string type = j["type"].get<std::string>();
  const std::string tpath = path + ".type";
  if (type == "NFC") return std::make_unique<UnicodeForm>(UTF8PROC_STABLE | UTF8PROC_COMPOSE);
  if (type == "NFD") return std::make_unique<UnicodeForm>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE);
  if (type == "NFKC")
    return std::make_unique<UnicodeForm>(UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT);
  if (type == "NFKD")
    return std::make_unique<UnicodeForm>(UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT);
  if (type == "Lowercase") return std::make_unique<Lowercase>();
  if (type == "StripAccents") return std::make_unique<StripAccents>();
  if (type == "Strip")
    return std::make_unique<Strip>(j.value("strip_left", true), j.value("strip_right", true));
  if (type == "Prepend") return std::make_unique<Prepend>(get_string(j, "prepend", path));
  if (type == "Replace") {
    std::string literal;
    std::unique_ptr<SplitRegex> regex;
    if (!j.contains("pattern")) fail("{}.pattern: missing", path);
    parse_pattern(j["pattern"], path + ".pattern", literal, regex);
    return std::make_unique<Replace>(std::move(literal), std::move(regex),
                                     get_string(j, "content", path));
  }
  if (type == "Sequence") {
    if (!j.contains("normalizers") || !j["normalizers"].is_array())
      fail("{}.normalizers: expected an array", path);
    std::vector<std::unique_ptr<Normalizer>> steps;
    for (size_t i = 0; i < j["normalizers"].size(); ++i)
      steps.push_back(parse_normalizer(j["normalizers"][i],
                                       fmt::format("{}.normalizers[{}]", path, i), depth + 1));
    return std::make_unique<Sequence>(std::move(steps));
  }
  unsupported(tpath, j["type"]);
}

}  // namespace marin::tok
