#pragma once
// Pre-tokenization: the split regex (GPT-4/cl100k, Llama 3, ...) compiled with PCRE2 (JIT, UTF,
// UCP, MATCH_INVALID_UTF). split() cuts any byte string into pieces whose concatenation is the
// input: the regex matches, plus every run of bytes that is not valid UTF-8 (PCRE2 never lets a
// match cross or include such bytes) as a piece of its own. Thread-safe: match data is per thread.
#include <cstddef>
#include <string>
#include <string_view>

struct pcre2_real_code_8;

namespace marin {

class SplitRegex {
 public:
  explicit SplitRegex(const std::string& pattern);  // throws marin::Error on a bad pattern
  ~SplitRegex();
  SplitRegex(const SplitRegex&) = delete;
  SplitRegex& operator=(const SplitRegex&) = delete;

  const std::string& pattern() const { return pattern_; }
  bool jit() const { return jit_; }

  // Next match at or after `pos`: true and [start, end) set, false when there is none.
  bool find(std::string_view text, size_t pos, size_t& start, size_t& end) const;

  // Calls f(std::string_view piece) for each piece, in order; pieces tile `text` exactly.
  template <class F>
  void split(std::string_view text, F&& f) const {
    size_t pos = 0, ms = 0, me = 0;
    while (pos < text.size()) {
      if (!find(text, pos, ms, me)) {
        f(text.substr(pos));  // trailing bytes no alternative matches (invalid UTF-8)
        return;
      }
      if (ms > pos) f(text.substr(pos, ms - pos));  // a gap: invalid UTF-8 bytes
      if (me == ms) me = ms + 1;                    // an empty match: emit one byte, move on
      f(text.substr(ms, me - ms));
      pos = me;
    }
  }

 private:
  std::string pattern_;
  pcre2_real_code_8* code_ = nullptr;
  bool jit_ = false;
};

}  // namespace marin
