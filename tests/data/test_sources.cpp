// The document seam (data/sources/): gzip and zstd written by the system tools, JSONL and text
// readers, bad input, input enumeration, and `marin tokenize --in` against the `--corpus` path.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include <fmt/ranges.h>
#include <xxhash.h>
#include "cli_util.hpp"

#include "core/fileio.hpp"
#include "core/hash.hpp"
#include "core/json_file.hpp"
#include "data/shards.hpp"
#include "data/sources/byte_stream.hpp"
#include "data/sources/document_source.hpp"
#include "data/sources/inputs.hpp"
#include "data/sources/jsonl_fast.hpp"
#include "data/sources/jsonl_source.hpp"
#include "data/tokenizer/documents.hpp"
#include "data/tokenizer/tokenizer.hpp"

namespace fs = std::filesystem;
using marin::testing::error_of;
using marin::testing::run;
using marin::testing::run_shell;
using marin::testing::TempDir;

namespace {

const std::string kFixture = std::string(MARIN_SOURCE_DIR) + "/data/fixture";

// `tool -c in > out` with the system's gzip or zstd.
void compress(const std::string& tool, const std::string& in, const std::string& out) {
  const auto r = run_shell(tool + " -c -q " + in + " > " + out);
  ASSERT_EQ(r.code, 0) << r.out;
}

std::string decoded(const std::string& path) {
  auto s = marin::data::open_byte_stream(path);
  return marin::data::read_all(*s, uint64_t(1) << 32);
}

std::vector<marin::data::Document> documents(const std::string& path,
                                             marin::data::SourceOptions o = {},
                                             std::map<std::string, uint64_t>* skipped = nullptr) {
  auto src = marin::data::open_source(path, "auto", o);
  std::vector<marin::data::Document> out;
  marin::data::Document d;
  while (src->next(d)) out.push_back(d);
  if (skipped) *skipped = src->skipped();
  return out;
}

// Text with several lines, long enough for more than one read buffer of the decoders.
std::string sample_text(int lines, const std::string& tag) {
  std::string s;
  for (int i = 0; i < lines; ++i) s += tag + " line " + std::to_string(i * 7919 % 1000) + " é ü\n";
  return s;
}

}  // namespace

TEST(ByteStream, GzipAndZstdFromTheSystemToolsReadBackByteForByteWithConcatenation) {
  TempDir t("src-codec");
  const std::string a = sample_text(40000, "alpha"), b = sample_text(30000, "beta");
  marin::testing::write_text(t.str("a"), a);
  marin::testing::write_text(t.str("b"), b);
  for (const std::string tool : {"gzip", "zstd"}) {
    const std::string ext = tool == "gzip" ? ".gz" : ".zst";
    compress(tool, t.str("a"), t.str("a" + ext));
    compress(tool, t.str("b"), t.str("b" + ext));
    EXPECT_EQ(decoded(t.str("a" + ext)), a) << tool;
    // Two members (gzip) / two frames (zstd), one after the other: both texts, in order.
    ASSERT_EQ(
        run_shell("cat " + t.str("a" + ext) + " " + t.str("b" + ext) + " > " + t.str("ab" + ext))
            .code,
        0);
    EXPECT_EQ(decoded(t.str("ab" + ext)), a + b) << tool;
    // Chosen by magic number, not by name: the same bytes named .jsonl decode too.
    fs::copy_file(t.str("ab" + ext), t.str(tool + "-named.jsonl"));
    auto s = marin::data::open_byte_stream(t.str(tool + "-named.jsonl"));
    EXPECT_EQ(marin::data::codec_name(s->codec()), tool);
    EXPECT_EQ(marin::data::read_all(*s, uint64_t(1) << 32), a + b);
    // The raw file's xxh64 is the hash of the compressed bytes.
    EXPECT_EQ(s->raw_xxh64(), XXH64(marin::read_file(t.str("ab" + ext)).data(),
                                    fs::file_size(t.str("ab" + ext)), 0));
  }
}

TEST(ByteStream, TruncatedAndCorruptStreamsAreErrorsNamingTheFileAndOffset) {
  TempDir t("src-bad");
  marin::testing::write_text(t.str("a"), sample_text(20000, "gamma"));
  for (const std::string tool : {"gzip", "zstd"}) {
    const std::string ext = tool == "gzip" ? ".gz" : ".zst";
    compress(tool, t.str("a"), t.str("a" + ext));
    const std::string bytes = marin::read_file(t.str("a" + ext));
    marin::testing::write_text(t.str("cut" + ext), bytes.substr(0, bytes.size() / 2));
    std::string e = error_of([&] { decoded(t.str("cut" + ext)); });
    EXPECT_NE(e.find(t.str("cut" + ext) + ": truncated " + tool + " stream"), std::string::npos)
        << e;
    // The last few bytes gone: the member's trailer / the frame's checksum is missing.
    marin::testing::write_text(t.str("tail" + ext), bytes.substr(0, bytes.size() - 3));
    e = error_of([&] { decoded(t.str("tail" + ext)); });
    EXPECT_NE(e.find("truncated " + tool + " stream"), std::string::npos) << e;
    std::string bad = bytes;
    for (size_t i = bytes.size() / 3; i < bytes.size() / 3 + 64; ++i) bad[i] ^= 0x5a;
    marin::testing::write_text(t.str("bad" + ext), bad);
    e = error_of([&] { decoded(t.str("bad" + ext)); });
    EXPECT_NE(e.find(t.str("bad" + ext) + ": corrupt " + tool + " stream near byte"),
              std::string::npos)
        << e;
    // Garbage after a complete gzip member is refused, not ignored.
    if (tool == "gzip") {
      marin::testing::write_text(t.str("trail.gz"), bytes + "junk");
      e = error_of([&] { decoded(t.str("trail.gz")); });
      EXPECT_NE(e.find("is not the start of another member"), std::string::npos) << e;
    }
  }
}

TEST(Jsonl, DottedTextFieldIdFieldAndCountedSkips) {
  TempDir t("src-jsonl");
  marin::testing::write_text(t.str("d.jsonl"),
                             "{\"meta\": {\"body\": \"first\"}, \"doc\": {\"id\": \"a1\"}}\n"
                             "\n"
                             "{\"meta\": {\"body\": null}}\n"
                             "{\"meta\": {}}\n"
                             "{\"other\": 1}\n"
                             "{\"meta\": {\"body\": \"second\"}, \"doc\": {\"id\": 7}}\n");
  marin::data::SourceOptions o;
  o.text_field = "meta.body";
  o.id_field = "doc.id";
  std::map<std::string, uint64_t> skipped;
  const auto docs = documents(t.str("d.jsonl"), o, &skipped);
  ASSERT_EQ(docs.size(), 2u);
  EXPECT_EQ(docs[0].text, "first");
  EXPECT_EQ(docs[0].id, "a1");
  EXPECT_EQ(docs[0].line, 1u);
  EXPECT_EQ(docs[1].text, "second");
  EXPECT_EQ(docs[1].id, "7");
  EXPECT_EQ(docs[1].line, 6u);
  EXPECT_EQ(skipped, (std::map<std::string, uint64_t>{{"missing field", 2}, {"null text", 1}}));
  o.text_field = "meta..body";
  EXPECT_NE(error_of([&] { documents(t.str("d.jsonl"), o); }).find("--text-field 'meta..body'"),
            std::string::npos);
}

// The fast path (simdjson) decides a line as the rule does or declines it; it takes the common
// lines itself (else it would be no faster) and declines every line the policy refuses or reads
// differently. fuzz_jsonl_fast checks the same on mutated lines.
TEST(Jsonl, TheFastPathDecidesAsTheRuleOrDeclines) {
  marin::data::JsonlFastPath fast;
  const std::vector<std::string> text = {"text"}, nested = {"meta", "body"}, id = {"id"};
  using R = marin::data::JsonlFastPath::Result;
  auto decide = [&](const std::string& line, const std::vector<std::string>& path) {
    std::string t, i;
    marin::data::JsonlSkip skip;
    return fast.decide(line, path, id, t, i, skip);
  };
  const std::string taken[] = {
      R"({"text": "plain", "id": "a"})",
      R"({"id": "x", "text": "caf\u00e9 \ud83d\ude00 \"q\" \\ \/ \b\f\n\r\t \u0000 end"})",
      R"({"text": "é 漢字 😀", "meta": {"n": [1, 2.5, -0, 1e300, true, null, {"k": []}]}})",
      R"(  {"text": ""}  )",
      R"({"text": null, "id": "n"})",
      R"({"other": 1})",
      R"({"text": "t", "id": null})",
      R"({"meta": {"body": "deep"}, "text": 3})",
      R"({"a": {"x": 1}, "b": {"x": 2}, "text": "same key in two objects"})"};
  for (const std::string& line : taken) {
    for (const auto* path : {&text, &nested}) {
      const std::string why = marin::data::jsonl_fast_disagreement(fast, line, *path, id);
      EXPECT_EQ(why, "") << line;
    }
  }
  for (const std::string& line : {taken[0], taken[1], taken[2], taken[3], taken[4], taken[5]})
    EXPECT_NE(decide(line, text), R::declined) << line;
  EXPECT_EQ(decide(taken[7], nested), R::text);

  std::string deep = R"({"text": "d", "x": )", deep_end = "}";
  for (size_t i = 0; i < marin::kMaxJsonDepth + 4; ++i) deep += "[", deep_end = "]" + deep_end;
  const std::string declined[] = {R"({"text": "dup", "text": "twice"})",
                                  R"({"text": "x", "m": [{"k": 1, "k": 2}]})",
                                  R"({"text": 5})",
                                  R"({"text": "x", "id": 12})",
                                  R"({"text": "x", "id": {"a": 1}})",
                                  R"(["text", "array"])",
                                  "\"just a string\"",
                                  R"({"text": "lone \udc00 surrogate"})",
                                  R"({"text": "x", "n": 1e400})",
                                  R"({"text": "x", "n": 123456789012345678901234567890})",
                                  "{\"text\": \"raw\ttab\"}",
                                  "{\"text\": \"bad \xff utf8\"}",
                                  R"({"text": "x"} {"text": "y"})",
                                  R"({"text": "unterminated)",
                                  deep + "1" + deep_end};
  for (const std::string& line : declined) {
    EXPECT_EQ(decide(line, text), R::declined) << line;
    EXPECT_EQ(marin::data::jsonl_fast_disagreement(fast, line, text, id), "") << line;
  }
  // Nesting within the policy's limit is taken.
  std::string ok = R"({"text": "d", "x": )", ok_end = "}";
  for (int i = 0; i < 200; ++i) ok += "[", ok_end = "]" + ok_end;
  EXPECT_EQ(decide(ok + "1" + ok_end, text), R::text);
}

TEST(Jsonl, BadLinesAreErrorsNamingFileAndLine) {
  TempDir t("src-jsonl-bad");
  marin::testing::write_text(t.str("arr.jsonl"), "{\"text\": \"ok\"}\n[1, 2]\n");
  std::string e = error_of([&] { documents(t.str("arr.jsonl")); });
  EXPECT_NE(e.find(t.str("arr.jsonl") + ":2: expected an object with a string field \"text\", "
                                        "found a JSON array"),
            std::string::npos)
      << e;
  marin::testing::write_text(t.str("num.jsonl"), "{\"text\": 5}\n");
  e = error_of([&] { documents(t.str("num.jsonl")); });
  EXPECT_NE(e.find(":1: expected an object with a string field \"text\", found a JSON number"),
            std::string::npos)
      << e;
  marin::testing::write_text(t.str("syntax.jsonl"), "{\"text\": \"a\"\n");
  e = error_of([&] { documents(t.str("syntax.jsonl")); });
  EXPECT_NE(e.find(t.str("syntax.jsonl") + ":1: not valid JSON"), std::string::npos) << e;
  // Invalid UTF-8: today's policy, an error naming the byte and column.
  marin::testing::write_text(t.str("latin1.jsonl"), "{\"text\": \"caf\xe9\"}\n");
  e = error_of([&] { documents(t.str("latin1.jsonl")); });
  EXPECT_NE(e.find(":1: not valid UTF-8 (byte 0xe9 at column 14)"), std::string::npos) << e;
  // A line longer than --max-doc-bytes names the file, the line and its offset.
  marin::testing::write_text(t.str("long.jsonl"),
                             "{\"text\": \"a\"}\n{\"text\": \"" + std::string(5000, 'x') + "\"}\n");
  marin::data::SourceOptions o;
  o.max_doc_bytes = 1000;
  e = error_of([&] { documents(t.str("long.jsonl"), o); });
  EXPECT_NE(e.find(t.str("long.jsonl") + ": line 2 (decoded byte offset 14) is longer than the "
                                         "limit of 1000 bytes (--max-doc-bytes)"),
            std::string::npos)
      << e;
}

TEST(TextSource, OneFileOneDocumentEmptyCountedBinaryRefused) {
  TempDir t("src-text");
  marin::testing::write_text(t.str("a.md"), "# Title\n\nbody\n");
  auto docs = documents(t.str("a.md"));
  ASSERT_EQ(docs.size(), 1u);
  EXPECT_EQ(docs[0].text, "# Title\n\nbody\n");
  marin::testing::write_text(t.str("e.txt"), "");
  std::map<std::string, uint64_t> skipped;
  EXPECT_TRUE(documents(t.str("e.txt"), {}, &skipped).empty());
  EXPECT_EQ(skipped, (std::map<std::string, uint64_t>{{"empty file", 1}}));
  marin::testing::write_text(t.str("e.jsonl"), "");
  EXPECT_TRUE(documents(t.str("e.jsonl")).empty());
  marin::testing::write_text(t.str("bin.txt"), std::string("ab\0cd", 5));
  EXPECT_NE(error_of([&] {
              documents(t.str("bin.txt"));
            }).find("a NUL byte at decoded offset 2: a binary file, not text"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              marin::data::open_source(t.str("a.md"), "parquet", {});
            }).find("a.md: not a Parquet file: expected the magic 'PAR1'"),
            std::string::npos);
  EXPECT_NE(error_of([&] {
              marin::data::open_source(t.str("a.md"), "csv", {});
            }).find("--format 'csv': expected auto or one of parquet, llmc, megatron, jsonl, text"),
            std::string::npos);
}

TEST(ReadDocuments, CompressedJsonlIsDecodedNotReadAsText) {
  TempDir t("src-readdocs");
  marin::testing::write_text(t.str("d.jsonl"), "{\"text\": \"one\"}\n{\"text\": \"two\"}\n");
  compress("gzip", t.str("d.jsonl"), t.str("d.jsonl.gz"));
  compress("zstd", t.str("d.jsonl"), t.str("d.jsonl.zst"));
  const std::vector<std::string> want = {"one", "two"};
  EXPECT_EQ(marin::read_documents({t.str("d.jsonl.gz")}), want);
  EXPECT_EQ(marin::read_documents({t.str("d.jsonl.zst")}), want);
  // A directory: walked in sorted order, files of no known format passed over.
  fs::create_directories(t.str("dir/sub"));
  fs::copy_file(t.str("d.jsonl.zst"), t.str("dir/sub/b.jsonl.zst"));
  marin::testing::write_text(t.str("dir/a.txt"), "zero");
  marin::testing::write_text(t.str("dir/notes.csv"), "x,y");
  EXPECT_EQ(marin::read_documents({t.str("dir")}),
            (std::vector<std::string>{"zero", "one", "two"}));
}

TEST(Inputs, WalkIsSortedAndNamesSymlinkLoopsFifosAndDevices) {
  TempDir t("src-inputs");
  marin::testing::write_text(t.str("r/b/2.txt"), "x");
  marin::testing::write_text(t.str("r/a.txt"), "y");
  marin::testing::write_text(t.str("r/b/10.txt"), "z");
  fs::create_symlink("loop1", t.str("r/loop2"));
  fs::create_symlink("loop2", t.str("r/loop1"));
  ASSERT_EQ(::mkfifo(t.str("r/pipe.txt").c_str(), 0600), 0);
  const auto in = marin::data::list_inputs({t.str("r")});
  std::vector<std::string> rels;
  for (const auto& f : in.files) rels.push_back(f.rel);
  EXPECT_EQ(rels, (std::vector<std::string>{"a.txt", "b/10.txt", "b/2.txt"}));
  const std::string rejected = fmt::format("{}", fmt::join(in.rejected, "|"));
  EXPECT_NE(rejected.find("loop1: symlink loop"), std::string::npos) << rejected;
  EXPECT_NE(rejected.find("pipe.txt: a FIFO, not a regular file"), std::string::npos) << rejected;
  // Named directly, a FIFO is an error (never opened, so nothing blocks).
  EXPECT_NE(error_of([&] { marin::data::list_inputs({t.str("r/pipe.txt")}); }).find("a FIFO"),
            std::string::npos);
  EXPECT_NE(error_of([&] { marin::data::list_inputs({"/dev/null"}); }).find("a device"),
            std::string::npos);
  // Globs, sorted.
  const auto g = marin::data::list_inputs({t.str("r/b/*.txt")});
  ASSERT_EQ(g.files.size(), 2u);
  EXPECT_EQ(g.files[0].rel, "10.txt");
  EXPECT_NE(error_of([&] {
              marin::data::list_inputs({t.str("r/nothing*")});
            }).find("no such file or directory, and no file matches it as a glob"),
            std::string::npos);
  // Unreadable files: as root, permissions do not stop a read, so this is checked only when the
  // test runs as another user.
  if (::geteuid() != 0) {
    marin::testing::write_text(t.str("secret.txt"), "s");
    ::chmod(t.str("secret.txt").c_str(), 0);
    EXPECT_NE(error_of([&] { documents(t.str("secret.txt")); }).find("secret.txt"),
              std::string::npos);
  }
}

TEST(Inputs, HubSplitNames) {
  using marin::data::hub_split;
  EXPECT_EQ(hub_split("data/train-00000-of-00002.jsonl.zst"), "train");
  EXPECT_EQ(hub_split("data/validation-00000-of-00001.parquet"), "valid");
  EXPECT_EQ(hub_split("valid.jsonl"), "valid");
  EXPECT_EQ(hub_split("test/x.txt"), "test");
  EXPECT_EQ(hub_split("training_notes.txt"), "");
  EXPECT_EQ(hub_split("d/doc.txt"), "");
}

// ---- marin tokenize --in -----------------------------------------------------------------------

namespace {

// Every document of a token directory's shards of `split`, in manifest order.
std::vector<std::vector<uint32_t>> token_documents(const std::string& dir,
                                                   const std::string& split = "train") {
  const marin::TokenManifest m = marin::TokenManifest::load(dir);
  std::vector<std::vector<uint32_t>> out;
  for (const auto& s : m.shards) {
    if (s.split != split) continue;
    const marin::TokenShard sh = m.open(s, m.tokenizer_hash);
    for (uint64_t d = 0; d < sh.documents(); ++d) out.push_back(sh.document(d));
  }
  return out;
}

struct Fixture {
  TempDir t{"src-cli"};
  std::string tok = t.str("tok.json");
  Fixture() {
    const auto r = run("tokenizer train --vocab-size 512 --in " + kFixture +
                       "/bible_kjv/train-00000.jsonl --out " + tok);
    EXPECT_EQ(r.code, 0) << r.out;
  }
};

}  // namespace

TEST(TokenizeIn, EveryLayoutMakesTheDocumentsOfTheCorpusPathAndTrains) {
  Fixture f;
  const TempDir& t = f.t;
  // One corpus domain's training shard, through --corpus ...
  const std::string shard = kFixture + "/fortunes/train-00000.jsonl";
  fs::create_directories(t.str("corpus/d"));
  fs::copy_file(shard, t.str("corpus/d/train-00000.jsonl"));
  auto r = run("tokenize --tokenizer " + f.tok + " --corpus " + t.str("corpus") + " --out " +
               t.str("want"));
  ASSERT_EQ(r.code, 0) << r.out;
  const auto want = token_documents(t.str("want"));
  ASSERT_GT(want.size(), 10u);
  // ... and as the layouts users hold: JSONL, JSONL.gz, JSONL.zst and a tree of text files.
  fs::copy_file(shard, t.str("in.jsonl"));
  compress("gzip", t.str("in.jsonl"), t.str("in.jsonl.gz"));
  compress("zstd", t.str("in.jsonl"), t.str("in.jsonl.zst"));
  size_t i = 0;
  for (const std::string& line : [&] {
         std::vector<std::string> v;
         const std::string text = marin::read_file(shard);  // the lines are views into it
         for (auto l : marin::split_lines(text))
           if (!l.empty()) v.emplace_back(l);
         return v;
       }())
    marin::testing::write_text(t.str(fmt::format("tree/{:05d}.txt", i++)),
                               marin::parse_json(line, "fixture")["text"].get<std::string>());
  for (const std::string in : {"in.jsonl", "in.jsonl.gz", "in.jsonl.zst", "tree"}) {
    const std::string out = t.str("out-" + in);
    r = run("tokenize --tokenizer " + f.tok + " --in " + t.str(in) +
            " --domain d --valid-fraction 0 --threads 2 --out " + out);
    ASSERT_EQ(r.code, 0) << in << ": " << r.out;
    EXPECT_EQ(token_documents(out), want) << in;
    EXPECT_TRUE(token_documents(out, "valid").empty()) << in;
  }
  // The manifest lists each source with its size and xxh64.
  const nlohmann::json m = marin::load_json(t.str("out-in.jsonl.zst/manifest.json"));
  ASSERT_EQ(m["sources"].size(), 1u);
  EXPECT_EQ(m["sources"][0]["size"], fs::file_size(t.str("in.jsonl.zst")));
  EXPECT_EQ(m["sources"][0]["xxh64"], marin::xxh64_hex(marin::read_file(t.str("in.jsonl.zst"))));
  EXPECT_EQ(m["sources"][0]["documents"], want.size());
  std::ofstream(t.str("mix.toml")) << "weights = { d = 1 }\n";
  // And training reads such a result (with a validation split, which training needs).
  r = run("tokenize --tokenizer " + f.tok + " --in " + t.str("in.jsonl.zst") +
          " --domain d --valid-fraction 0.2 --out " + t.str("split"));
  ASSERT_EQ(r.code, 0) << r.out;
  r = run("train --preset tiny --batch 4 --steps 2 --data " + t.str("mix.toml") + " --token-dir " +
          t.str("split") + " --tokenizer " + f.tok + " --out " + t.str("run"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_TRUE(fs::exists(t.str("run/checkpoints/latest")));
}

TEST(TokenizeIn, HubSplitsDomainFromDirSkipsAndWhatDidNotMatch) {
  Fixture f;
  const TempDir& t = f.t;
  marin::testing::write_text(
      t.str("hub/news/data/train-00000-of-00001.jsonl"),
      "{\"text\": \"a\"}\n{\"text\": null}\n{\"x\": 1}\n{\"text\": \"b\"}\n");
  marin::testing::write_text(t.str("hub/news/data/validation-00000-of-00001.jsonl"),
                             "{\"text\": \"c\"}\n");
  marin::testing::write_text(t.str("hub/news/data/test-00000-of-00001.jsonl"),
                             "{\"text\": \"d\"}\n");
  marin::testing::write_text(t.str("hub/web/doc.md"), "hello");
  marin::testing::write_text(t.str("hub/web/image.png"), "\x89PNG");
  auto r = run("tokenize --tokenizer " + f.tok + " --in " + t.str("hub") +
               " --domain-from dir --valid-fraction 1 --out " + t.str("o"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("3 document(s) skipped"), std::string::npos) << r.out;
  const marin::TokenManifest m = marin::TokenManifest::load(t.str("o"));
  std::map<std::string, uint64_t> docs;
  for (const auto& s : m.shards) docs[s.domain + "/" + s.split] += s.documents;
  // The Hub names override --valid-fraction 1; the unsplit doc.md follows it.
  EXPECT_EQ(docs, (std::map<std::string, uint64_t>{
                      {"news/train", 2}, {"news/valid", 1}, {"web/valid", 1}}));
  EXPECT_EQ(m.skipped,
            (std::map<std::string, uint64_t>{
                {"missing field", 1}, {"null text", 1}, {"test split (not tokenized)", 1}}));
  EXPECT_EQ(m.sources.size(), 4u);
  // Nothing matched: every file seen, and why.
  r = run("tokenize --tokenizer " + f.tok + " --in " + t.str("hub/web/image.png") +
          " --domain x --out " + t.str("o2"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("no input file matched:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("image.png: 'image.png' is no known format"), std::string::npos) << r.out;
  r = run("tokenize --tokenizer " + f.tok + " --in " + t.str("hub") +
          " --domain x --format parquet --out " + t.str("o3"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find(": not a Parquet file: expected the magic 'PAR1'"), std::string::npos)
      << r.out;
}

TEST(TokenizeIn, OneSplitKeepsTheOtherSplitsShardsCorpusAndIn) {
  Fixture f;
  const TempDir& t = f.t;
  // --corpus: train, then valid, into one directory (issue 37: the second run dropped train).
  auto r = run("tokenize --tokenizer " + f.tok + " --corpus " + kFixture + " --split train --out " +
               t.str("c"));
  ASSERT_EQ(r.code, 0) << r.out;
  const auto train = token_documents(t.str("c"), "train");
  r = run("tokenize --tokenizer " + f.tok + " --corpus " + kFixture + " --split valid --out " +
          t.str("c"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(token_documents(t.str("c"), "train"), train);
  EXPECT_FALSE(token_documents(t.str("c"), "valid").empty());
  r = run("tokenize --tokenizer " + f.tok + " --corpus " + kFixture + " --out " + t.str("both"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(marin::load_json(t.str("c/manifest.json"))["totals"],
            marin::load_json(t.str("both/manifest.json"))["totals"]);
  // --in likewise.
  // (Copied to a name without a Hub split word: "train-00000.jsonl" would say train.)
  const std::string in = t.str("fortunes.jsonl");
  fs::copy_file(kFixture + "/fortunes/train-00000.jsonl", in);
  r = run("tokenize --tokenizer " + f.tok + " --in " + in +
          " --domain d --valid-fraction 0.3 --split valid --out " + t.str("i"));
  ASSERT_EQ(r.code, 0) << r.out;
  r = run("tokenize --tokenizer " + f.tok + " --in " + in +
          " --domain d --valid-fraction 0.3 --split train --out " + t.str("i"));
  ASSERT_EQ(r.code, 0) << r.out;
  const auto valid = token_documents(t.str("i"), "valid"),
             tr = token_documents(t.str("i"), "train");
  EXPECT_FALSE(valid.empty());
  EXPECT_FALSE(tr.empty());
  r = run("tokenize --tokenizer " + f.tok + " --in " + in +
          " --domain d --valid-fraction 0 --out " + t.str("all"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(valid.size() + tr.size(), token_documents(t.str("all")).size());
}

TEST(TokenizeIn, AKilledRunContinuesFromItsFinishedFiles) {
  Fixture f;
  const TempDir& t = f.t;
  fs::create_directories(t.str("in"));
  fs::copy_file(kFixture + "/fortunes/train-00000.jsonl", t.str("in/a.jsonl"));
  fs::copy_file(kFixture + "/dict_devil/train-00000.jsonl", t.str("in/b.jsonl"));
  const std::string cmd = "tokenize --tokenizer " + f.tok + " --in " + t.str("in") +
                          " --domain d --valid-fraction 0.1 --out " + t.str("o");
  auto r = run(cmd);
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string manifest = marin::read_file(t.str("o/manifest.json"));
  // The state a run killed during the second file leaves: the first file's shards and record,
  // no record of the second and no manifest.
  struct stat first {};
  ASSERT_EQ(::stat(t.str("o/d/train-00000-0000.tok").c_str(), &first), 0);
  fs::remove(t.str("o/manifest.json"));
  fs::remove(t.str("o/.tokenize/00001.json"));
  fs::remove(t.str("o/d/train-00001-0000.tok"));
  r = run(cmd);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(marin::read_file(t.str("o/manifest.json")), manifest);
  struct stat again {};
  ASSERT_EQ(::stat(t.str("o/d/train-00000-0000.tok").c_str(), &again), 0);
  EXPECT_EQ(again.st_ino, first.st_ino);  // not rewritten
  EXPECT_TRUE(fs::exists(t.str("o/d/train-00001-0000.tok")));
}

// Under mpirun the ranks share the input files (largest first, each to the least loaded rank),
// and rank 0 writes the one manifest: the same shards and manifest, byte for byte, as one process
// makes. A later one-process run continues from the ranks' finished files without redoing them.
TEST(TokenizeIn, RanksShareTheFilesAndWriteTheManifestOneProcessWrites) {
  Fixture f;
  const TempDir& t = f.t;
  fs::create_directories(t.str("in"));
  const char* domains[] = {"fortunes", "dict_devil", "bible_kjv", "code_python"};
  for (const char* d : domains)
    fs::copy_file(kFixture + "/" + d + "/train-00000.jsonl",
                  t.str(std::string("in/") + d + ".jsonl"));
  const std::string args = " tokenize --tokenizer " + f.tok + " --in " + t.str("in") +
                           " --domain d --valid-fraction 0.1 --threads 1 --out ";
  auto r = run(args.substr(1) + t.str("one"));
  ASSERT_EQ(r.code, 0) << r.out;
  for (int np : {2, 3}) {
    const std::string out = t.str(fmt::format("np{}", np));
    r = marin::testing::run_shell(marin::testing::mpirun_command(np) + args + out);
    ASSERT_EQ(r.code, 0) << r.out;
    std::string want = marin::read_file(t.str("one/manifest.json"));
    std::string got = marin::read_file(out + "/manifest.json");
    // The manifest names its own directory; the rest is the same.
    size_t at;
    while ((at = want.find(t.str("one"))) != std::string::npos)
      want.replace(at, t.str("one").size(), out);
    EXPECT_EQ(got, want) << np;
    for (const auto& s : marin::TokenManifest::load(out).shards)
      EXPECT_EQ(marin::read_file(out + "/" + s.file), marin::read_file(t.str("one/" + s.file)))
          << np << " " << s.file;
  }
  struct stat first {};
  ASSERT_EQ(::stat(t.str("np2/d/train-00000-0000.tok").c_str(), &first), 0);
  r = run(args.substr(1) + t.str("np2"));
  ASSERT_EQ(r.code, 0) << r.out;
  struct stat again {};
  ASSERT_EQ(::stat(t.str("np2/d/train-00000-0000.tok").c_str(), &again), 0);
  EXPECT_EQ(again.st_ino, first.st_ino);  // finished by a rank, not redone
  // The formats the rank split does not cover are refused under mpirun, not written twice.
  r = marin::testing::run_shell(marin::testing::mpirun_command(2) + " tokenize --tokenizer " +
                                f.tok + " --corpus " + kFixture + " --out " + t.str("corpus"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("tokenize --corpus: runs in one process"), std::string::npos) << r.out;
}
