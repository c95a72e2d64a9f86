// Markup stripping and text normalisation for the corpus sources (see corpus.hpp).
#include <array>
#include <cctype>
#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/fileio.hpp"
#include "core/utf8.hpp"
#include "data/corpus/corpus.hpp"

namespace marin::corpus {

namespace {

// Windows-1252 for 0x80..0x9F (0 = undefined); other bytes >= 0xA0 are Latin-1.
constexpr std::array<std::uint16_t, 32> kCp1252 = {
    0x20AC, 0,      0x201A, 0x0192, 0x201E, 0x2026, 0x2020, 0x2021, 0x02C6, 0x2030, 0x0160,
    0x2039, 0x0152, 0,      0x017D, 0,      0,      0x2018, 0x2019, 0x201C, 0x201D, 0x2022,
    0x2013, 0x2014, 0x02DC, 0x2122, 0x0161, 0x203A, 0x0153, 0,      0x017E, 0x0178};

bool is_space(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f';
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
  return s;
}

// Removes trailing spaces before each newline and collapses runs of more than one blank line.
std::string tidy_lines(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  int newlines = 0;
  for (std::string_view line : split_lines(s)) {
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
    if (line.empty()) {
      ++newlines;
      continue;
    }
    if (!out.empty()) out.append(newlines >= 1 ? "\n\n" : "\n");
    newlines = 0;
    out.append(line);
  }
  return out;
}

}  // namespace

std::string clean_text(std::string_view raw, CleanStats& stats) {
  std::string fixed;
  fixed.reserve(raw.size());
  std::uint64_t bad = 0, ctrl = 0;
  for (std::size_t i = 0; i < raw.size();) {
    const unsigned char c = static_cast<unsigned char>(raw[i]);
    if (c < 0x80) {
      if (c == '\r') {
        ++ctrl;
        if (i + 1 >= raw.size() || raw[i + 1] != '\n') fixed += '\n';  // old Mac line end
      } else if (c == '\n' || c == '\t' || (c >= 0x20 && c != 0x7F)) {
        fixed += static_cast<char>(c);
      } else {
        ++ctrl;
      }
      ++i;
      continue;
    }
    std::uint32_t decoded;
    std::size_t len = utf8::decode(raw, i, decoded);
    if (len > 0) {
      fixed.append(raw.substr(i, len));
      i += len;
      continue;
    }
    ++bad;
    std::uint32_t cp = c < 0xA0 ? kCp1252[c - 0x80] : c;
    if (cp != 0) utf8::append(fixed, cp);
    ++i;
  }
  stats.invalid_utf8_bytes += bad;
  stats.control_chars += ctrl;
  if (bad + ctrl > 0) ++stats.documents_repaired;

  // Trailing whitespace of lines, and blank lines at both ends (runs inside are kept: code and
  // prose use them).
  std::string out;
  out.reserve(fixed.size());
  std::size_t pending_newlines = 0;
  for (std::string_view line : split_lines(fixed)) {
    while (!line.empty() && (line.back() == ' ' || line.back() == '\t')) line.remove_suffix(1);
    if (line.empty()) {
      ++pending_newlines;
      continue;
    }
    if (!out.empty()) out.append(pending_newlines + 1, '\n');
    pending_newlines = 0;
    out.append(line);
  }
  return out;
}

std::string decode_entities(std::string_view s) {
  static const std::unordered_map<std::string_view, std::uint32_t> named = {
      {"amp", '&'},       {"lt", '<'},       {"gt", '>'},       {"quot", '"'},
      {"apos", '\''},     {"nbsp", ' '},     {"mdash", 0x2014}, {"ndash", 0x2013},
      {"hellip", 0x2026}, {"copy", 0xA9},    {"reg", 0xAE},     {"trade", 0x2122},
      {"lsquo", 0x2018},  {"rsquo", 0x2019}, {"ldquo", 0x201C}, {"rdquo", 0x201D},
      {"laquo", 0xAB},    {"raquo", 0xBB},   {"eacute", 0xE9},  {"egrave", 0xE8},
      {"aacute", 0xE1},   {"agrave", 0xE0},  {"ouml", 0xF6},    {"uuml", 0xFC},
      {"auml", 0xE4},     {"ccedil", 0xE7},  {"ntilde", 0xF1},  {"szlig", 0xDF},
      {"deg", 0xB0},      {"middot", 0xB7},  {"times", 0xD7},   {"bull", 0x2022},
      {"shy", 0},         {"zwj", 0x200D},   {"zwnj", 0x200C},  {"para", 0xB6},
      {"sect", 0xA7},     {"frac12", 0xBD},  {"iexcl", 0xA1},   {"iquest", 0xBF}};
  std::string out;
  out.reserve(s.size());
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] != '&') {
      out += s[i];
      continue;
    }
    std::size_t semi = s.find(';', i + 1);
    if (semi == std::string_view::npos || semi - i > 12) {
      out += '&';
      continue;
    }
    std::string_view name = s.substr(i + 1, semi - i - 1);
    std::uint32_t cp = 0;
    bool ok = false;
    if (name.size() >= 2 && name[0] == '#') {
      ok = true;
      bool hex = name[1] == 'x' || name[1] == 'X';
      for (std::size_t k = hex ? 2 : 1; k < name.size() && ok; ++k) {
        char c = name[k];
        int v = std::isdigit(static_cast<unsigned char>(c)) ? c - '0'
                : hex && std::isxdigit(static_cast<unsigned char>(c))
                    ? std::tolower(static_cast<unsigned char>(c)) - 'a' + 10
                    : -1;
        if (v < 0 || cp > 0x10FFFF) ok = false;
        cp = cp * (hex ? 16 : 10) + static_cast<std::uint32_t>(v);
      }
      if (name.size() == (hex ? 2u : 1u)) ok = false;
      if (cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) ok = false;
    } else if (auto it = named.find(name); it != named.end()) {
      ok = true;
      cp = it->second;
    }
    if (!ok) {
      out += '&';
      continue;
    }
    if (cp != 0) utf8::append(out, cp);
    i = semi;
  }
  return out;
}

// ---- Brown
// ---------------------------------------------------------------------------------------

std::string brown_to_text(std::string_view tagged) {
  std::string out;
  for (std::string_view line : split_lines(tagged)) {
    line = trim(line);
    if (line.empty()) continue;
    std::string sentence;
    bool glue_next = true;  // no space before the first token
    std::size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && is_space(line[i])) ++i;
      std::size_t j = i;
      while (j < line.size() && !is_space(line[j])) ++j;
      if (j == i) break;
      std::string_view tok = line.substr(i, j - i);
      i = j;
      std::size_t slash = tok.rfind('/');
      std::string_view word =
          (slash == std::string_view::npos || slash == 0) ? tok : tok.substr(0, slash);
      bool open_quote = word == "``";
      bool close_quote = word == "''";
      if (open_quote || close_quote) word = "\"";
      bool attach_left = close_quote || word == "." || word == "," || word == ";" || word == ":" ||
                         word == "!" || word == "?" || word == ")" || word == "]" || word == "'" ||
                         word == "'s";
      if (word == "." && !sentence.empty() && sentence.back() == '.') continue;  // "Jr. ."
      if (!glue_next && !attach_left) sentence += ' ';
      sentence.append(word);
      glue_next = open_quote || word == "(" || word == "[";
    }
    if (sentence.empty()) continue;
    if (!out.empty()) out += '\n';
    out += sentence;
  }
  return out;
}

// ---- GCIDE and the other dictd databases
// ----------------------------------------------------------

namespace {

// Precomposed forms of the GCIDE accent escapes for the letters that have one.
std::uint32_t compose(char mark, char letter) {
  static const std::unordered_map<std::string_view, std::uint32_t> table = {
      {"\"a", 0xE4}, {"\"e", 0xEB}, {"\"i", 0xEF}, {"\"o", 0xF6}, {"\"u", 0xFC},  {"\"y", 0xFF},
      {"\"A", 0xC4}, {"\"E", 0xCB}, {"\"I", 0xCF}, {"\"O", 0xD6}, {"\"U", 0xDC},  {"'a", 0xE1},
      {"'e", 0xE9},  {"'i", 0xED},  {"'o", 0xF3},  {"'u", 0xFA},  {"'y", 0xFD},   {"'A", 0xC1},
      {"'E", 0xC9},  {"'I", 0xCD},  {"'O", 0xD3},  {"'U", 0xDA},  {"`a", 0xE0},   {"`e", 0xE8},
      {"`i", 0xEC},  {"`o", 0xF2},  {"`u", 0xF9},  {"`A", 0xC0},  {"`E", 0xC8},   {"^a", 0xE2},
      {"^e", 0xEA},  {"^i", 0xEE},  {"^o", 0xF4},  {"^u", 0xFB},  {"^A", 0xC2},   {"^E", 0xCA},
      {"^O", 0xD4},  {"~a", 0xE3},  {"~n", 0xF1},  {"~o", 0xF5},  {"~N", 0xD1},   {",c", 0xE7},
      {",C", 0xC7},  {"=a", 0x101}, {"=e", 0x113}, {"=i", 0x12B}, {"=o", 0x14D},  {"=u", 0x16B},
      {"=A", 0x100}, {"=E", 0x112}, {"=I", 0x12A}, {"=O", 0x14C}, {"=U", 0x16A},  {"-a", 0x101},
      {"-e", 0x113}, {"-i", 0x12B}, {"-o", 0x14D}, {"-u", 0x16B}, {"~e", 0x1EBD}, {".a", 0x227},
      {"*a", 0xE5},  {"*u", 0x16F}, {"a^", 0x103}, {"e^", 0x115}, {"i^", 0x12D},  {"o^", 0x14F},
      {"u^", 0x16D}};
  char key[2] = {mark, letter};
  auto it = table.find(std::string_view(key, 2));
  return it == table.end() ? 0 : it->second;
}

std::uint32_t combining(char mark) {
  switch (mark) {
    case '"':
      return 0x308;  // diaeresis
    case '\'':
      return 0x301;  // acute
    case '`':
      return 0x300;  // grave
    case '^':
      return 0x302;  // circumflex
    case '~':
      return 0x303;  // tilde
    case ',':
      return 0x327;  // cedilla
    case '=':
      return 0x304;  // macron
    case '-':
      return 0x304;  // macron (short form)
    case '.':
      return 0x307;  // dot above
    case '*':
      return 0x30A;  // ring
    default:
      return 0;
  }
}

// GCIDE named symbols ("[thorn]", "[imac]", ...); strings, some are two code points.
const char* gcide_named(std::string_view name) {
  static const std::unordered_map<std::string_view, const char*> table = {
      {"ae", "\u00e6"},    {"AE", "\u00c6"},     {"oe", "\u0153"},     {"OE", "\u0152"},
      {"thorn", "\u00fe"}, {"eth", "\u00f0"},    {"yogh", "\u021d"},   {"ng", "\u014b"},
      {"imac", "\u012b"},  {"=ae", "\u01e3"},    {"=oo", "o\u035eo"},  {"oo^", "o\u035do"},
      {"=y", "\u0233"},    {"add", "\u00e4"},    {"udd", "\u00fc"},    {"aum", "\u00e4"},
      {"asl", "a"},        {"als", "a"},         {"deg", "\u00b0"},    {"root", "\u221a"},
      {"hand", "\u261e"},  {"sharp", "\u266f"},  {"flat", "\u266d"},   {"middot", "\u00b7"},
      {"phi", "\u03c6"},   {"pi", "\u03c0"},     {"nbsp", " "},        {"ldqo", "\u201c"},
      {"rdqo", "\u201d"},  {"sec", "\u2033"},    {"bprime", "\u2033"}, {"sect", "\u00a7"},
      {"male", "\u2642"},  {"female", "\u2640"}, {"th", "th"}};
  auto it = table.find(name);
  return it == table.end() ? nullptr : it->second;
}

bool is_alpha(char c) {
  return std::isalpha(static_cast<unsigned char>(c)) != 0;
}
bool is_alnum(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || static_cast<unsigned char>(c) >= 0x80;
}

// One GCIDE text line: escapes, braces, pronunciations.
std::string gcide_line(std::string_view line) {
  std::string out;
  out.reserve(line.size());
  for (std::size_t i = 0; i < line.size(); ++i) {
    char c = line[i];
    if (c == '\\') {  // pronunciation \Al"lo*cate\ on one line: dropped
      std::size_t end = line.find('\\', i + 1);
      if (end != std::string_view::npos) {
        i = end;
        const char next = i + 1 < line.size() ? line[i + 1] : '\n';
        if (next == ' ' || next == ',' || next == ';' || next == '.' || next == '\n')
          while (!out.empty() && out.back() == ' ') out.pop_back();
        continue;
      }
      continue;
    }
    if (c == '{' || c == '}') continue;
    if (c == '[') {
      std::size_t end = line.find(']', i + 1);
      if (end != std::string_view::npos && end - i <= 6) {
        std::string_view in = line.substr(i + 1, end - i - 1);
        if (in.size() == 2 && combining(in[0]) && is_alpha(in[1])) {  // ['e], [=a], ...
          if (std::uint32_t cp = compose(in[0], in[1])) {
            utf8::append(out, cp);
          } else {
            out += in[1];
            utf8::append(out, combining(in[0]));
          }
          i = end;
          continue;
        }
        if (in.size() == 2 && is_alpha(in[0]) && in[1] == '^') {  // [i^]: breve
          if (std::uint32_t cp = compose(in[0], '^')) {
            utf8::append(out, cp);
          } else {
            out += in[0];
            utf8::append(out, 0x306);
          }
          i = end;
          continue;
        }
        if (const char* named = gcide_named(in)) {
          out += named;
          i = end;
          continue;
        }
        // Other lowercase symbols glued to a word ("[ecer]") are letter variants: their base
        // letter is kept.
        bool glued = (!out.empty() && is_alpha(out.back())) ||
                     (end + 1 < line.size() && is_alpha(line[end + 1]));
        bool symbol = !in.empty() && std::islower(static_cast<unsigned char>(in[0]));
        for (char k : in)
          if (!is_alpha(k)) symbol = false;
        if (glued && symbol) {
          out += in[0];
          i = end;
          continue;
        }
      }
    }
    out += c;
  }
  return out;
}

bool is_source_note(std::string_view line) {
  line = trim(line);
  if (line.size() < 3 || line.front() != '[' || line.back() != ']') return false;
  return line.find("Webster") != std::string_view::npos ||
         line.find("WordNet") != std::string_view::npos ||
         line.find("PJC") != std::string_view::npos ||
         line.find("Century Dict") != std::string_view::npos ||
         line.find("Chambers") != std::string_view::npos;
}

}  // namespace

std::string gcide_to_text(std::string_view entry) {
  std::string out;
  for (std::string_view line : split_lines(entry)) {
    if (is_source_note(line)) continue;
    std::string l = gcide_line(line);
    // Inline "[1913 Webster]" after text.
    for (std::string_view note : {" [1913 Webster]", " [WordNet 1.5]", " [PJC]"}) {
      std::size_t p;
      while ((p = l.find(note)) != std::string::npos) l.erase(p, note.size());
    }
    out += l;
    out += '\n';
  }
  return tidy_lines(out);
}

std::string dict_to_text(std::string_view entry) {
  std::string out;
  out.reserve(entry.size());
  for (char c : entry)
    if (c != '{' && c != '}') out += c;
  return tidy_lines(out);
}

// ---- HTML
// ------------------------------------------------------------------------------------------

namespace {

struct Tag {
  std::string name;  // lowercase, without '/'
  bool closing = false;
  std::string_view attrs;
  std::size_t end = 0;  // index after '>'
};

// Parses the tag starting at s[i] == '<'; returns false when it is not a tag.
bool parse_tag(std::string_view s, std::size_t i, Tag& t) {
  std::size_t k = i + 1;
  t.closing = k < s.size() && s[k] == '/';
  if (t.closing) ++k;
  std::size_t name_start = k;
  while (k < s.size() && (std::isalnum(static_cast<unsigned char>(s[k])) || s[k] == ':')) ++k;
  if (k == name_start) return false;
  t.name.clear();
  for (std::size_t n = name_start; n < k; ++n)
    t.name += static_cast<char>(std::tolower(static_cast<unsigned char>(s[n])));
  char quote = 0;
  std::size_t a = k;
  for (; k < s.size(); ++k) {
    char c = s[k];
    if (quote) {
      if (c == quote) quote = 0;
    } else if (c == '"' || c == '\'') {
      quote = c;
    } else if (c == '>') {
      break;
    }
  }
  t.attrs = s.substr(a, k - a);
  t.end = k < s.size() ? k + 1 : s.size();
  return true;
}

// Index after the element opened by `open` (matching close tag, counting nesting).
std::size_t skip_element(std::string_view s, const Tag& open) {
  int depth = 1;
  std::size_t i = open.end;
  Tag t;
  while (i < s.size()) {
    std::size_t lt = s.find('<', i);
    if (lt == std::string_view::npos) return s.size();
    if (parse_tag(s, lt, t)) {
      if (t.name == open.name) depth += t.closing ? -1 : 1;
      if (depth == 0) return t.end;
      i = t.end;
    } else {
      i = lt + 1;
    }
  }
  return s.size();
}

bool has_class(std::string_view attrs, std::string_view cls) {
  std::string lower;
  for (char c : attrs) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  std::size_t p = lower.find("class=");
  if (p == std::string::npos) return false;
  return lower.find(cls, p) != std::string::npos;
}

}  // namespace

std::string html_to_text(std::string_view html) {
  static const std::vector<std::string_view> block = {
      "p",      "div",    "br",  "h1",     "h2",      "h3",      "h4",    "h5",      "h6",
      "li",     "ul",     "ol",  "dl",     "dt",      "dd",      "tr",    "table",   "blockquote",
      "hr",     "title",  "pre", "th",     "td",      "tbody",   "thead", "section", "article",
      "header", "footer", "nav", "center", "address", "caption", "figure"};
  std::string out;
  out.reserve(html.size() / 2);
  int pre = 0;
  auto newline = [&](int n) {
    while (!out.empty() && out.back() == ' ') out.pop_back();
    int have = 0;
    for (auto it = out.rbegin(); it != out.rend() && *it == '\n'; ++it) ++have;
    if (out.empty()) return;
    for (; have < n; ++have) out += '\n';
  };
  std::string text;  // pending raw text (entities decoded when flushed)
  auto flush = [&]() {
    if (text.empty()) return;
    std::string decoded = decode_entities(text);
    text.clear();
    for (char c : decoded) {
      if (pre > 0) {
        out += c;
      } else if (is_space(c)) {
        if (!out.empty() && out.back() != ' ' && out.back() != '\n') out += ' ';
      } else {
        out += c;
      }
    }
  };
  Tag t;
  for (std::size_t i = 0; i < html.size();) {
    char c = html[i];
    if (c != '<') {
      text += c;
      ++i;
      continue;
    }
    if (html.substr(i, 4) == "<!--") {
      std::size_t end = html.find("-->", i + 4);
      i = end == std::string_view::npos ? html.size() : end + 3;
      continue;
    }
    if (i + 1 < html.size() && (html[i + 1] == '!' || html[i + 1] == '?')) {  // doctype, pi
      std::size_t end = html.find('>', i);
      i = end == std::string_view::npos ? html.size() : end + 1;
      continue;
    }
    if (!parse_tag(html, i, t)) {
      text += c;
      ++i;
      continue;
    }
    flush();
    if (!t.closing && (t.name == "script" || t.name == "style" || t.name == "head" ||
                       ((t.name == "div" || t.name == "table") &&
                        (has_class(t.attrs, "navheader") || has_class(t.attrs, "navfooter"))))) {
      i = skip_element(html, t);
      continue;
    }
    if (t.name == "pre") {
      newline(2);
      pre = t.closing ? std::max(0, pre - 1) : pre + 1;
    } else if (t.name == "p" || t.name == "table" || t.name == "blockquote" ||
               (t.name.size() == 2 && t.name[0] == 'h' && std::isdigit((unsigned char)t.name[1]))) {
      newline(2);
    } else if (t.name == "td" || t.name == "th") {
      if (!out.empty() && out.back() != '\n' && out.back() != ' ') out += ' ';
    } else {
      for (auto b : block)
        if (t.name == b) {
          newline(1);
          break;
        }
    }
    i = t.end;
  }
  flush();
  return tidy_lines(out);
}

// ---- OSIS (SWORD)
// --------------------------------------------------------------------------------

std::string osis_to_text(std::string_view osis) {
  std::string out;
  out.reserve(osis.size() / 4);
  Tag t;
  std::string text;
  auto flush = [&]() {
    if (text.empty()) return;
    for (char c : decode_entities(text)) {
      if (is_space(c)) {
        if (!out.empty() && out.back() != ' ') out += ' ';
      } else {
        out += c;
      }
    }
    text.clear();
  };
  for (std::size_t i = 0; i < osis.size();) {
    if (osis[i] != '<' || !parse_tag(osis, i, t)) {
      text += osis[i++];
      continue;
    }
    flush();
    bool self_closing = !t.attrs.empty() && t.attrs.back() == '/';
    if (!t.closing && !self_closing && (t.name == "note" || t.name == "title")) {
      i = skip_element(osis, t);
      // A note glued between two words ("God<note>..</note>created") leaves them apart.
      if (!out.empty() && is_alnum(out.back()) && i < osis.size() &&
          (is_alnum(osis[i]) || osis[i] == '<'))
        out += ' ';
      continue;
    }
    if (t.name == "l" || t.name == "lb" || t.name == "p" || t.name == "lg") {
      if (!out.empty() && out.back() != ' ') out += ' ';
    }
    i = t.end;
  }
  flush();
  std::string_view v = trim(out);
  // A space that the note rule put before punctuation ("God ,") is taken back.
  std::string res;
  res.reserve(v.size());
  for (std::size_t k = 0; k < v.size(); ++k) {
    if (v[k] == ' ' && k + 1 < v.size() &&
        (v[k + 1] == ',' || v[k + 1] == '.' || v[k + 1] == ';' || v[k + 1] == ':' ||
         v[k + 1] == '?' || v[k + 1] == '!' || v[k + 1] == ' '))
      continue;
    res += v[k];
  }
  return res;
}

// ---- fortunes
// ---------------------------------------------------------------------------------------

std::vector<std::string> split_fortunes(std::string_view file) {
  std::vector<std::string> records;
  std::string cur;
  auto close = [&]() {
    std::string_view r = cur;
    while (!r.empty() && (r.front() == '\n')) r.remove_prefix(1);
    while (!r.empty() && is_space(r.back())) r.remove_suffix(1);
    if (!trim(r).empty()) records.emplace_back(r);
    cur.clear();
  };
  for (std::string_view line : split_lines(file)) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line == "%") {
      close();
      continue;
    }
    cur.append(line);
    cur += '\n';
  }
  close();
  return records;
}

}  // namespace marin::corpus
