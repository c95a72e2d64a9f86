// UTF-8, validated and decoded in one place: the tokenizer, the corpus cleaner, the contamination
// index, the JSONL document reader and the sampler's streaming printer all use these functions,
// so they agree on what a valid sequence is (RFC 3629: no overlong forms, no surrogates
// U+D800..U+DFFF, nothing above U+10FFFF, no truncated sequence).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace marin::utf8 {

// Decodes the sequence starting at s[i] (i < s.size()) into cp and returns its length (1..4), or
// returns 0 (cp untouched) when the bytes there are not a valid UTF-8 sequence.
inline size_t decode(std::string_view s, size_t i, uint32_t& cp) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = b(i);
  if (c < 0x80) return cp = c, 1;
  size_t len;
  uint32_t v;
  if (c >= 0xC2 && c <= 0xDF) {  // C0, C1 would only start overlong forms of ASCII
    len = 2;
    v = c & 0x1F;
  } else if (c >= 0xE0 && c <= 0xEF) {
    len = 3;
    v = c & 0x0F;
  } else if (c >= 0xF0 && c <= 0xF4) {  // F5.. would start code points above U+10FFFF
    len = 4;
    v = c & 0x07;
  } else {
    return 0;  // a continuation byte, or a byte that never occurs in UTF-8
  }
  if (len > s.size() - i) return 0;
  for (size_t k = 1; k < len; ++k) {
    if ((b(i + k) & 0xC0) != 0x80) return 0;
    v = (v << 6) | (b(i + k) & 0x3F);
  }
  if (len == 3 && (v < 0x800 || (v >= 0xD800 && v <= 0xDFFF))) return 0;  // overlong, surrogate
  if (len == 4 && (v < 0x10000 || v > 0x10FFFF)) return 0;                // overlong, too large
  cp = v;
  return len;
}

// The offset of the first byte that does not start a valid sequence, or npos when s is valid.
inline size_t first_invalid(std::string_view s) {
  uint32_t cp;
  for (size_t i = 0; i < s.size();) {
    const size_t n = decode(s, i, cp);
    if (n == 0) return i;
    i += n;
  }
  return std::string_view::npos;
}

inline bool valid(std::string_view s) {
  return first_invalid(s) == std::string_view::npos;
}

// Appends the encoding of code point cp (< 0x110000).
inline void append(std::string& out, uint32_t cp) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

// Length of the longest prefix of s that does not end inside a multi-byte sequence: what a
// streaming printer can write now (the rest waits for the next bytes). Only the lead byte of the
// last sequence is looked at; invalid bytes are passed through, never held back.
inline size_t complete_prefix(std::string_view s) {
  const size_t n = s.size();
  for (size_t back = 1; back <= 4 && back <= n; ++back) {
    const unsigned char c = static_cast<unsigned char>(s[n - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: keep looking for its lead
    size_t need = 1;
    if ((c & 0xE0) == 0xC0)
      need = 2;
    else if ((c & 0xF0) == 0xE0)
      need = 3;
    else if ((c & 0xF8) == 0xF0)
      need = 4;
    return back < need ? n - back : n;
  }
  return n;  // only continuation bytes (invalid UTF-8): nothing to wait for
}

// Replaces each maximal invalid UTF-8 subsequence with U+FFFD, as a JavaScript or Rust string of
// the same bytes would hold it (the tokenizer's Unicode components need valid UTF-8; generated
// responses must be valid JSON text); valid text comes back unchanged.
inline std::string sanitize(std::string_view s) {
  if (valid(s)) return std::string(s);
  std::string out;
  out.reserve(s.size() + 8);
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = 0;
    const size_t n = decode(s, i, cp);
    if (n == 0) {
      out += "\xEF\xBF\xBD";
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

}  // namespace marin::utf8
