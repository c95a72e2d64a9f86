// Hermetic checks of the tokenizer.json pipeline (no npm): refusals name the JSON path and value,
// the hash follows every part that changes ids, and the BPE model's options on a tiny vocabulary
// whose ids follow by hand from Hugging Face's BPE::merge_word. The components' semantics against
// the Rust library itself are in test_tokenizer_hf.cpp (HfVariant).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "cli_util.hpp"
#include "data/tokenizer/tokenizer.hpp"

using marin::Tokenizer;
using marin::testing::error_of;
using nlohmann::json;

namespace {

// a=0 b=1 ab=2 <unk>=3 c-byte=4 abb=5; merges a+b, ab+b.
json tiny() {
  return json::parse(R"({
    "model": {"type": "BPE", "unk_token": "<unk>", "fuse_unk": false, "byte_fallback": false,
              "vocab": {"a": 0, "b": 1, "ab": 2, "<unk>": 3, "<0x63>": 4, "abb": 5},
              "merges": ["a b", "ab b"]},
    "added_tokens": [], "normalizer": null, "pre_tokenizer": null, "post_processor": null,
    "decoder": null})");
}

Tokenizer load(const json& j) {
  return Tokenizer::from_json_text(j.dump(), "tiny.json");
}

std::vector<uint32_t> ids(std::initializer_list<uint32_t> v) {
  return v;
}

TEST(TokenizerComponents, BpeMergesInRankOrder) {
  const Tokenizer t = load(tiny());
  EXPECT_EQ(t.encode("ab"), ids({2}));
  EXPECT_EQ(t.encode("abb"), ids({5}));
  EXPECT_EQ(t.encode("aab"), ids({0, 2}));
  EXPECT_EQ(t.encode("ba"), ids({1, 0}));
}

TEST(TokenizerComponents, MergesAsPairsEqualMergesAsStrings) {
  json j = tiny();
  j["model"]["merges"] = json::parse(R"([["a", "b"], ["ab", "b"]])");
  EXPECT_EQ(load(j).encode("aabb"), load(tiny()).encode("aabb"));
  EXPECT_EQ(load(j).hash(), load(tiny()).hash());
}

TEST(TokenizerComponents, UnknownCharactersAndFuseUnk) {
  json j = tiny();
  EXPECT_EQ(load(j).encode("axxb"), ids({0, 3, 3, 1}));  // one <unk> per character
  j["model"]["fuse_unk"] = true;
  EXPECT_EQ(load(j).encode("axxb"), ids({0, 3, 1}));  // consecutive unknowns fused
}

TEST(TokenizerComponents, ByteFallbackBeforeUnk) {
  json j = tiny();
  j["model"]["byte_fallback"] = true;
  EXPECT_EQ(load(j).encode("acb"), ids({0, 4, 1}));  // 'c' as <0x63>
  EXPECT_EQ(load(j).encode("adb"), ids({0, 3, 1}));  // no <0x64>: unk
}

TEST(TokenizerComponents, IgnoreMergesTakesWholeTokens) {
  // "abb" merges a+b first, then ab+b: the same token either way here; with a vocabulary where the
  // merges cannot reach the word, ignore_merges emits the word's own token.
  json j = tiny();
  j["model"]["vocab"]["ba"] = 6;
  EXPECT_EQ(load(j).encode("ba"), ids({1, 0}));
  j["model"]["ignore_merges"] = true;
  EXPECT_EQ(load(j).encode("ba"), ids({6}));
}

TEST(TokenizerComponents, ContinuingSubwordPrefixAndEndOfWordSuffix) {
  // WordPiece-style BPE: characters after the first carry "##"; a merge's right part loses it.
  json p = json::parse(R"({
    "model": {"type": "BPE", "continuing_subword_prefix": "##",
              "vocab": {"a": 0, "##b": 1, "ab": 2, "##a": 3},
              "merges": ["a ##b"]}, "added_tokens": []})");
  EXPECT_EQ(load(p).encode("ab"), ids({2}));
  EXPECT_EQ(load(p).encode("aa"), ids({0, 3}));
  json s = json::parse(R"({
    "model": {"type": "BPE", "end_of_word_suffix": "</w>",
              "vocab": {"a": 0, "b</w>": 1, "ab</w>": 2, "b": 3},
              "merges": ["a b</w>"]}, "added_tokens": []})");
  EXPECT_EQ(load(s).encode("ab"), ids({2}));
}

TEST(TokenizerComponents, UnsupportedComponentsNameTheirPathAndValue) {
  auto refused = [](const char* field, const char* value) {
    json j = tiny();
    j[field] = json::parse(value);
    return error_of([&] { load(j); });
  };
  EXPECT_NE(
      refused("pre_tokenizer",
              R"({"type": "Sequence", "pretokenizers": [{"type": "WhitespaceSplit"},
                        {"type": "BertPreTokenizer"}]})")
          .find(R"(pre_tokenizer.pretokenizers[1].type: "BertPreTokenizer" is not supported)"),
      std::string::npos);
  EXPECT_NE(refused("normalizer", R"({"type": "BertNormalizer"})")
                .find(R"(normalizer.type: "BertNormalizer" is not supported)"),
            std::string::npos);
  EXPECT_NE(refused("decoder", R"({"type": "WordPiece"})")
                .find(R"(decoder.type: "WordPiece" is not supported)"),
            std::string::npos);
  EXPECT_NE(refused("pre_tokenizer", R"({"type": "Split", "pattern": {"Regex": " "},
                        "behavior": "Sideways", "invert": false})")
                .find(R"(pre_tokenizer.behavior: "Sideways" is not supported)"),
            std::string::npos);
  json m = tiny();
  m["model"]["type"] = "WordPiece";
  EXPECT_NE(error_of([&] { load(m); }).find(R"(model.type: "WordPiece" is not supported)"),
            std::string::npos);
}

TEST(TokenizerComponents, HashFollowsEveryPartThatChangesIds) {
  std::vector<json> variants(1, tiny());
  auto with = [&](auto edit) {
    json j = tiny();
    edit(j);
    variants.push_back(j);
  };
  with([](json& j) { j["normalizer"] = {{"type", "NFKC"}}; });
  with([](json& j) { j["normalizer"] = {{"type", "Lowercase"}}; });
  with([](json& j) { j["pre_tokenizer"] = {{"type", "WhitespaceSplit"}}; });
  with([](json& j) { j["pre_tokenizer"] = {{"type", "Digits"}, {"individual_digits", true}}; });
  with([](json& j) { j["model"]["fuse_unk"] = true; });
  with([](json& j) { j["model"]["byte_fallback"] = true; });
  with([](json& j) { j["model"]["ignore_merges"] = true; });
  with([](json& j) { j["model"]["merges"] = json::array({"a b"}); });
  with([](json& j) {
    j["added_tokens"] = json::parse(R"([{"id": 6, "content": "<s>", "special": true}])");
  });
  with([](json& j) {
    j["added_tokens"] = json::parse(
        R"([{"id": 6, "content": "<s>", "special": true, "lstrip": true, "normalized": false}])");
  });
  with([](json& j) {
    j["added_tokens"] = json::parse(R"([{"id": 3, "content": "<unk>", "special": true}])");
    j["post_processor"] = json::parse(R"({"type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<unk>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
        "pair": [], "special_tokens": {"<unk>": {"id": "<unk>", "ids": [3], "tokens": ["<unk>"]}}})");
  });
  std::set<uint64_t> hashes;
  for (const json& j : variants) hashes.insert(load(j).hash());
  EXPECT_EQ(hashes.size(), variants.size()) << "two pipelines that give different ids share a hash";
  EXPECT_EQ(load(tiny()).hash(), load(tiny()).hash());
}

}  // namespace
