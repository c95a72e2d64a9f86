// The shared parsers of core/ and data/ (one copy each, used by every reader): UTF-8
// (core/utf8.hpp), TOML (core/toml_file), JSON (core/json_file), and the text corpus's shard names
// and document lines (data/text_corpus).
#include <gtest/gtest.h>

#include <fstream>
#include <string>

#include "cli_util.hpp"
#include "core/fileio.hpp"
#include "core/json_file.hpp"
#include "core/toml_file.hpp"
#include "core/utf8.hpp"
#include "data/mixture.hpp"
#include "data/text_corpus.hpp"
#include "model/config.hpp"
#include "plan/cluster_hw.hpp"
#include "scaling/ladder.hpp"

namespace utf8 = marin::utf8;
using marin::TomlFile;
using marin::testing::error_of;

namespace {

void expect_has(const std::string& text, const std::string& part) {
  EXPECT_NE(text.find(part), std::string::npos) << "'" << part << "' not in: " << text;
}

}  // namespace

TEST(Utf8, DecodesEveryLengthAtItsBounds) {
  const struct {
    std::string bytes;
    uint32_t cp;
  } good[] = {{"\x00", 0},
              {"\x7F", 0x7F},
              {"\xC2\x80", 0x80},
              {"\xDF\xBF", 0x7FF},
              {"\xE0\xA0\x80", 0x800},
              {"\xED\x9F\xBF", 0xD7FF},
              {"\xEE\x80\x80", 0xE000},
              {"\xEF\xBF\xBF", 0xFFFF},
              {"\xF0\x90\x80\x80", 0x10000},
              {"\xF4\x8F\xBF\xBF", 0x10FFFF}};
  for (const auto& g : good) {
    const std::string s = g.bytes.empty() ? std::string(1, '\0') : g.bytes;
    uint32_t cp = 0xFFFFFFFF;
    EXPECT_EQ(utf8::decode(s, 0, cp), s.size()) << g.cp;
    EXPECT_EQ(cp, g.cp);
    std::string back;
    utf8::append(back, g.cp);
    EXPECT_EQ(back, s);
    EXPECT_TRUE(utf8::valid(s));
  }
}

TEST(Utf8, RefusesMalformedOverlongAndSurrogateSequences) {
  const std::string bad[] = {
      "\x80",              // a continuation byte alone
      "\xBF",              //
      "\xC3",              // truncated 2-byte sequence
      "\xE2\x82",          // truncated 3-byte sequence
      "\xF0\x9F\x98",      // truncated 4-byte sequence
      "\xC3\x41",          // lead byte followed by ASCII
      "\xE2\x28\xA1",      // bad second byte
      "\xC0\xAF",          // overlong '/'
      "\xC1\xBF",          // overlong U+7F
      "\xE0\x80\xAF",      // overlong '/' in 3 bytes
      "\xE0\x9F\xBF",      // overlong U+7FF
      "\xF0\x80\x80\xAF",  // overlong '/' in 4 bytes
      "\xF0\x8F\xBF\xBF",  // overlong U+FFFF
      "\xED\xA0\x80",      // surrogate U+D800
      "\xED\xBF\xBF",      // surrogate U+DFFF
      "\xF4\x90\x80\x80",  // U+110000
      "\xF5\x80\x80\x80",  // lead byte above F4
      "\xFE",              //
      "\xFF",              //
  };
  for (const std::string& b : bad) {
    uint32_t cp = 7;
    EXPECT_EQ(utf8::decode(b, 0, cp), 0u) << testing::PrintToString(b);
    EXPECT_EQ(cp, 7u);
    EXPECT_FALSE(utf8::valid(b));
    EXPECT_FALSE(utf8::valid("ok " + b + " ok"));
    EXPECT_EQ(utf8::first_invalid("ok " + b), 3u);
  }
  EXPECT_EQ(utf8::first_invalid("caf\xC3\xA9 \xE9t\xC3\xA9"), 6u);
  EXPECT_EQ(utf8::first_invalid("plain"), std::string::npos);
}

TEST(Utf8, CompletePrefixHoldsBackOnlyAnUnfinishedSequence) {
  EXPECT_EQ(utf8::complete_prefix("a\xE2\x82"), 1u);
  EXPECT_EQ(utf8::complete_prefix("a\xE2\x82\xAC"), 4u);
  EXPECT_EQ(utf8::complete_prefix("\xF0\x9F"), 0u);
  EXPECT_EQ(utf8::complete_prefix("\x80\x80"), 2u);
}

TEST(TomlFile, ParseErrorsNameFileLineAndColumn) {
  expect_has(error_of([] { TomlFile::parse("a = 1\nb = = 2\n", "cfg.toml"); }), "cfg.toml:2:");
  expect_has(error_of([] { TomlFile::parse("a = 1\nb = = 2\n", "cfg.toml"); }), ": TOML error: ");
  expect_has(error_of([] { TomlFile::parse("a = 1\n\n[t\n", "x/y.toml"); }), "x/y.toml:3:");
  expect_has(error_of([] { TomlFile::parse("a = 1\na = 2\n", "dup.toml"); }), "dup.toml:2:");
  const marin::testing::TempDir tmp("toml-file");
  expect_has(error_of([&] { TomlFile::load(tmp.str("missing.toml")); }), "missing.toml");
}

TEST(JsonFile, EveryRefusalIsAMarinErrorNamingTheFile) {
  expect_has(error_of([] { marin::parse_json("{\"a\": ", "s.json"); }),
             "s.json: not valid JSON: parse error at line 1, column 7");
  // nlohmann's exception id ("[json.exception.parse_error.101]") is left out of the message.
  EXPECT_EQ(error_of([] { marin::parse_json("[", "s.json"); }).find("json.exception"),
            std::string::npos);
  // A number past a double's range is nlohmann's out_of_range (406), not a parse_error: the
  // config reader once let it escape as an internal error (a fuzzer's find).
  expect_has(error_of([] { marin::parse_json(R"({"hidden_dim": 200E00000733})", "c.json"); }),
             "c.json: not valid JSON: number overflow parsing '200E00000733'");
  expect_has(error_of([] { marin::parse_json("[\"\xff\"]", "u.json"); }),
             "u.json: not valid JSON: ");
  expect_has(error_of([] { marin::parse_json("{", "t.json", "expected a tokenizer"); }),
             "t.json: not valid JSON (expected a tokenizer): ");
  EXPECT_EQ(marin::parse_json(R"({"a": [1, 2.5]})", "ok.json")["a"][1].get<double>(), 2.5);
  EXPECT_FALSE(marin::try_parse_json("{\"step\": 3").has_value());
  EXPECT_FALSE(marin::try_parse_json("1e999").has_value());
  EXPECT_EQ(marin::try_parse_json(R"({"step": 3})")->at("step").get<int>(), 3);
  const marin::testing::TempDir tmp("json-file");
  expect_has(error_of([&] { marin::load_json(tmp.str("missing.json")); }), "missing.json");
  marin::write_file_atomic(tmp.str("bad.json"), "{\"x\": 1e400}");
  expect_has(error_of([&] { marin::load_json(tmp.str("bad.json")); }),
             tmp.str("bad.json") + ": not valid JSON: number overflow");
}

// The one reading policy (docs/reliability.md, "Untrusted input"): nesting and duplicate keys
// are refused at parse time, for documents and JSON lines alike, whatever file they come from.
TEST(JsonFile, DeepNestingAndDuplicateKeysAreRefusedByName) {
  const auto nested = [](size_t depth, char open, char close) {
    return std::string(depth, open) + std::string(depth, close);
  };
  // 100,000 levels would overflow the stack of any recursive walk; the parser is iterative and
  // the limit stops it before a walk could start.
  expect_has(error_of([&] { marin::parse_json(nested(100000, '[', ']'), "deep.json"); }),
             "deep.json: not valid JSON: nested deeper than 256 levels");
  std::string objects;
  for (int i = 0; i < 100000; ++i) objects += "{\"a\":";
  objects += "1" + std::string(100000, '}');
  expect_has(error_of([&] { marin::parse_json(objects, "m.jsonl:3"); }),
             "m.jsonl:3: not valid JSON: nested deeper than 256 levels");
  EXPECT_FALSE(marin::try_parse_json(nested(100000, '[', ']')).has_value());
  // The limit itself: 256 levels (depths 0..255) are read, 257 are not.
  EXPECT_NO_THROW(marin::parse_json(nested(256, '[', ']'), "ok.json"));
  expect_has(error_of([&] { marin::parse_json(nested(257, '[', ']'), "x.json"); }),
             "x.json: not valid JSON: nested deeper than 256 levels");
  // A key written twice in one object, at any depth, names the key; the same key in two
  // objects is fine.
  expect_has(error_of([] { marin::parse_json(R"({"a": 1, "b": 2, "a": 3})", "d.json"); }),
             "d.json: not valid JSON: duplicate key \"a\" in one object");
  expect_has(error_of([] { marin::parse_json(R"({"v": {"x": 1, "x": 1}})", "v.json"); }),
             "duplicate key \"x\"");
  EXPECT_FALSE(marin::try_parse_json(R"({"a": 1, "a": 2})").has_value());
  EXPECT_EQ(marin::parse_json(R"([{"a": 1}, {"a": 2}])", "ok.json")[1]["a"], 2);
}

TEST(TomlFile, TypedGettersNameFileLineKeyAndRange) {
  const TomlFile f = TomlFile::parse(
      "name = \"x\"\nsteps = 5\n\n[opt]\nlr = 0.5\nwarm = 3\nbad = \"s\"\nsites = [\"k\", 2]\n"
      "big = 100\nnan = nan\n",
      "f.toml");
  EXPECT_EQ(f.string("name"), "x");
  EXPECT_EQ(f.integer("steps", 1, 10), 5);
  EXPECT_DOUBLE_EQ(f.number("opt.lr", 0, 1), 0.5);
  EXPECT_DOUBLE_EQ(f.number("opt.warm", 0, 10), 3.0);  // an integer is a number
  EXPECT_FALSE(f.integer_if("absent", 0, 1).has_value());
  EXPECT_EQ(f.kind("opt"), TomlFile::Kind::Table);
  EXPECT_EQ(f.kind("opt.lr"), TomlFile::Kind::Real);
  EXPECT_EQ(f.kind("nope"), TomlFile::Kind::Missing);
  EXPECT_EQ(f.keys("opt"), (std::vector<std::string>{"bad", "big", "lr", "nan", "sites", "warm"}));
  EXPECT_EQ(f.where("opt.bad"), "f.toml:7");
  expect_has(error_of([&] { f.integer("opt.lr", 0, 9); }),
             "f.toml:5: field 'opt.lr' must be an integer in [0, 9], got 0.5");
  expect_has(error_of([&] { f.integer("opt.big", 0, 99); }),
             "f.toml:9: field 'opt.big' must be an integer in [0, 99], got 100");
  expect_has(error_of([&] { f.number("opt.bad", 0, 1); }),
             "f.toml:7: field 'opt.bad' must be a number");
  expect_has(error_of([&] { f.number("opt.nan", -1e300, 1e300); }), "f.toml:10: field 'opt.nan'");
  expect_has(error_of([&] { f.string("steps"); }),
             "f.toml:2: field 'steps' must be a string, got 5");
  expect_has(error_of([&] { f.strings("opt.sites"); }),
             "f.toml:8: field 'opt.sites' must be a list of strings, got 2");
  expect_has(error_of([&] { f.integer("opt.absent", 0, 1); }),
             "f.toml: missing field 'opt.absent'");
  const nlohmann::json j = f.json("opt");
  EXPECT_TRUE(j["warm"].is_number_integer());
  EXPECT_TRUE(j["lr"].is_number_float());
  EXPECT_EQ(j["sites"][0], "k");
}

TEST(TomlFile, EveryTomlReaderReportsTheLine) {
  const marin::testing::TempDir tmp("toml-readers");
  const std::string cfg = tmp.str("model.toml");
  std::ofstream(cfg) << "hidden_dim = 64\nnum_layers = \"two\"\n";
  expect_has(error_of([&] { marin::ModelConfig::from_toml_file(cfg); }),
             cfg + ":2: field 'num_layers' has an unsupported type");
  expect_has(error_of([] { marin::MixtureConfig::from_toml_text("[sources\n", "mix.toml"); }),
             "mix.toml:1:");
  expect_has(
      error_of([] { marin::scaling::LadderConfig::from_toml_text("x = = 1\n", "lad.toml"); }),
      "lad.toml:1:");
  expect_has(error_of([] { marin::ClusterHardware::from_toml_text("name = 1\n", "hw.toml"); }),
             "hw.toml:1: field 'name' must be a string");
}

TEST(TextCorpus, ShardNamesRoundTrip) {
  namespace tc = marin::text_corpus;
  EXPECT_EQ(tc::shard_name("train", 3), "train-00003.jsonl");
  EXPECT_EQ(tc::shard_split("train-00003.jsonl"), "train");
  EXPECT_EQ(tc::shard_split("valid-7.jsonl"), "valid");
  for (const char* no : {"train-.jsonl", "train-0a.jsonl", "test-00000.jsonl", "train-00000.json",
                         "xtrain-00000.jsonl", "train_00000.jsonl", "train-00000.jsonl.tmp"})
    EXPECT_FALSE(tc::shard_split(no).has_value()) << no;
  EXPECT_EQ(tc::token_shard_file("bible", "train-00003"), "bible/train-00003.tok");
  EXPECT_EQ(tc::text_shard_name("bible/train-00003.tok"), "train-00003.jsonl");
}

TEST(TextCorpus, DocumentLinesFollowOneRule) {
  namespace tc = marin::text_corpus;
  std::vector<std::pair<uint64_t, std::string>> seen;
  std::vector<std::string> ids;
  tc::for_each_document("{\"id\":\"a\",\"text\":\"one\"}\n \t\r\n\n{\"text\":\"t\\u00e9\"}\n",
                        "s.jsonl", [&](const tc::Document& d) {
                          seen.emplace_back(d.line, d.text);
                          ids.push_back(d.id("line " + std::to_string(d.line)));
                        });
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], (std::pair<uint64_t, std::string>{1, "one"}));
  EXPECT_EQ(seen[1], (std::pair<uint64_t, std::string>{4, "t\xC3\xA9"}));
  // The id is the document's own string "id", else the caller's fallback.
  EXPECT_EQ(ids, (std::vector<std::string>{"a", "line 4"}));
  const auto err = [](const std::string& data) {
    return error_of([&] { tc::for_each_document(data, "s.jsonl", [](const tc::Document&) {}); });
  };
  expect_has(err("{\"text\":\"ok\"}\n{\"text\":\"caf\xE9\"}\n"),
             "s.jsonl:2: not valid UTF-8 (byte 0xe9 at column 13)");
  expect_has(err("{\"text\":\"\xED\xA0\x80\"}\n"), "s.jsonl:1: not valid UTF-8");
  expect_has(err("{\"text\": 1}\n"), "s.jsonl:1: expected an object with a string field \"text\"");
  expect_has(err("[\"text\"]\n"), "s.jsonl:1: expected an object");
  expect_has(err("\n\n{\"text\":\n"), "s.jsonl:3: not valid JSON");
}
