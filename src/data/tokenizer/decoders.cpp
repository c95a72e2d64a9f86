// Decoders of a tokenizer.json: ByteLevel, Metaspace, ByteFallback, Fuse, Strip, Replace and
// Sequence, each a decode_chain over the tokens' text as in huggingface/tokenizers'
// src/decoders. Token text here is already bytes for a byte-level vocabulary, so ByteLevel is
// the identity.
#include <fmt/core.h>

#include "core/error.hpp"
#include "core/utf8.hpp"
#include "data/tokenizer/pipeline.hpp"
#include "data/tokenizer/split_regex.hpp"

namespace marin::tok {

void parse_pattern(const json& j, const std::string& path, std::string& literal,
                   std::unique_ptr<SplitRegex>& regex);
std::unique_ptr<Normalizer> parse_normalizer(const json& j, const std::string& path, int depth);

namespace {

class Identity : public Decoder {
 public:
  void decode_chain(std::vector<std::string>&) const override {}
};

class Fuse : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& t) const override {
    std::string all;
    for (const auto& s : t) all += s;
    t.assign(1, std::move(all));
  }
};

class ByteFallback : public Decoder {
 public:
  void decode_chain(std::vector<std::string>& tokens) const override {
    std::vector<std::string> out;
    std::string bytes;
    size_t nbytes = 0;
    auto flush = [&] {
      if (nbytes == 0) return;
      if (utf8::valid(bytes))
        out.push_back(bytes);
      else
        for (size_t i = 0; i < nbytes; ++i) out.emplace_back("\xEF\xBF\xBD");
      bytes.clear();
      nbytes = 0;
    };
    for (auto& t : tokens) {
      int v = -1;
      if (t.size() == 6 && t.compare(0, 3, "<0x") == 0 && t[5] == '>') {
        auto hex = [](char c) {
          return c >= '0' && c <= '9'   ? c - '0'
                 : c >= 'A' && c <= 'F' ? c - 'A' + 10
                 : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                        : -1;
        };
        const int hi = hex(t[3]), lo = hex(t[4]);
        if (hi >= 0 && lo >= 0) v = hi * 16 + lo;
      }
      if (v >= 0) {
        bytes += char(v);
        ++nbytes;
      } else {
        flush();
        out.push_back(std::move(t));
      }
    }
    flush();
    tokens.swap(out);
  }
};

class Metaspace : public Decoder {
 public:
  Metaspace(std::string rep, bool strip_first) : rep_(std::move(rep)), strip_first_(strip_first) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (size_t i = 0; i < tokens.size(); ++i) {
      std::string out;
      const std::string& t = tokens[i];
      for (size_t k = 0; k < t.size();) {
        if (t.compare(k, rep_.size(), rep_) == 0) {
          if (!(i == 0 && strip_first_)) out += ' ';
          k += rep_.size();
        } else {
          out += t[k++];
        }
      }
      tokens[i].swap(out);
    }
  }

 private:
  std::string rep_;
  bool strip_first_;
};

class Strip : public Decoder {
 public:
  Strip(std::string content, size_t start, size_t stop)
      : content_(std::move(content)), start_(start), stop_(stop) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (auto& t : tokens) {
      size_t b = 0, e = t.size();
      for (size_t i = 0; i < start_ && t.compare(b, content_.size(), content_) == 0; ++i)
        b += content_.size();
      for (size_t i = 0; i < stop_ && e >= b + content_.size() &&
                         t.compare(e - content_.size(), content_.size(), content_) == 0;
           ++i)
        e -= content_.size();
      t = t.substr(b, e - b);
    }
  }

 private:
  std::string content_;
  size_t start_, stop_;
};

class Replace : public Decoder {
 public:
  explicit Replace(std::unique_ptr<Normalizer> n) : n_(std::move(n)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (auto& t : tokens) n_->apply(t);
  }

 private:
  std::unique_ptr<Normalizer> n_;  // the Replace normalizer: the same rule, token by token
};

class Sequence : public Decoder {
 public:
  explicit Sequence(std::vector<std::unique_ptr<Decoder>> steps) : steps_(std::move(steps)) {}
  void decode_chain(std::vector<std::string>& tokens) const override {
    for (const auto& d : steps_) d->decode_chain(tokens);
  }

 private:
  std::vector<std::unique_ptr<Decoder>> steps_;
};

size_t get_size(const json& j, const char* key, const std::string& path) {
  if (!j.contains(key)) return 0;
  if (!j[key].is_number_unsigned())
    fail("{}.{}: expected a count, found {}", path, key, j[key].dump());
  return j[key].get<size_t>();
}

}  // namespace

std::unique_ptr<Decoder> parse_decoder(const json& j, const std::string& path, int depth) {
  check_depth(path, depth);
  if (!j.is_object() || !j.contains("type") || !j["type"].is_string())
    fail("{}: expected an object with a \"type\", found {}", path, j.dump().substr(0, 200));
  const std::string type = j["type"].get<std::string>();
  if (type == "ByteLevel") return std::make_unique<Identity>();
  if (type == "Fuse") return std::make_unique<Fuse>();
  if (type == "ByteFallback") return std::make_unique<ByteFallback>();
  if (type == "Metaspace") {
    const json rep = j.value("replacement", json("\xE2\x96\x81"));
    if (!rep.is_string()) fail("{}.replacement: expected a string, found {}", path, rep.dump());
    bool strip_first = j.value("prepend_scheme", json("always")) != "never";
    if (!j.contains("prepend_scheme") && j.contains("add_prefix_space"))
      strip_first = j.value("add_prefix_space", true);
    return std::make_unique<Metaspace>(rep.get<std::string>(), strip_first);
  }
  if (type == "Strip") {
    const json c = j.value("content", json(" "));
    if (!c.is_string()) fail("{}.content: expected a character, found {}", path, c.dump());
    return std::make_unique<Strip>(c.get<std::string>(), get_size(j, "start", path),
                                   get_size(j, "stop", path));
  }
  if (type == "Replace") return std::make_unique<Replace>(parse_normalizer(j, path, depth));
  if (type == "Sequence") {
    if (!j.contains("decoders") || !j["decoders"].is_array())
      fail("{}.decoders: expected an array", path);
    std::vector<std::unique_ptr<Decoder>> steps;
    for (size_t i = 0; i < j["decoders"].size(); ++i)
      steps.push_back(
          parse_decoder(j["decoders"][i], fmt::format("{}.decoders[{}]", path, i), depth + 1));
    return std::make_unique<Sequence>(std::move(steps));
  }
  unsupported(path + ".type", j["type"]);
}

}  // namespace marin::tok
