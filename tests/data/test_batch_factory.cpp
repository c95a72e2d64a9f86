// The data sources from their specs (data/batch_factory.hpp), without a Trainer: rows, a mixture
// over tokenized text, and specs refused naming the field at fault.
#include <gtest/gtest.h>

#include <fstream>

#include "cli_util.hpp"
#include "data/batch_factory.hpp"
#include "data/mixture.hpp"

using marin::testing::error_of;
using marin::testing::TempDir;
using nlohmann::json;

namespace {

marin::DataOptions tiny(const std::string& tokenizer = "") {
  marin::DataOptions o;
  o.seq_len = 64;
  o.vocab_size = 512;
  o.rows_per_step = 4;
  o.total_steps = 10;
  o.seed = 3;
  o.tokenizer = tokenizer;
  return o;
}

}  // namespace

TEST(BatchFactory, BuildsARowsSource) {
  TempDir tmp("batch-factory-rows");
  marin::testing::write_rows(tmp.str("rows.bin"), 12);
  EXPECT_EQ(marin::make_batch_source(json(), tiny()), nullptr);
  auto src = marin::make_batch_source(
      json::object({{"kind", "rows"}, {"path", tmp.str("rows.bin")}}), tiny());
  ASSERT_NE(src, nullptr);
  EXPECT_EQ(src->distinct_rows(), 12);
  std::vector<int32_t> tokens(4 * 64), labels(4 * 64), seg(4 * 64);
  src->next(4, tokens.data(), labels.data(), seg.data());
  for (int32_t t : tokens) EXPECT_LT(t, 512);
}

TEST(BatchFactory, BuildsAMixtureAndItsValidationSplit) {
  TempDir tmp("batch-factory-mixture");
  ASSERT_EQ(marin::testing::tokenize_fixture(tmp), "");
  const marin::MixtureConfig mix =
      marin::MixtureConfig::from_toml_text("weights = { bible_kjv = 1, fortunes = 1 }\n", "mix");
  const marin::DataOptions o = tiny(tmp.str("tok.json"));
  auto train = marin::make_batch_source(
      json::object(
          {{"kind", "mixture"}, {"tokens", tmp.str("tokens")}, {"mixture", mix.to_json()}}),
      o);
  ASSERT_NE(train, nullptr);
  std::vector<int32_t> tokens(4 * 64), labels(4 * 64), seg(4 * 64);
  train->next(4, tokens.data(), labels.data(), seg.data());
  EXPECT_TRUE(train->state().is_object());
  auto valid =
      marin::make_batch_source(json::object({{"kind", "valid"},
                                             {"tokens", tmp.str("tokens")},
                                             {"domains", json::array({"bible_kjv", "fortunes"})}}),
                               o);
  ASSERT_NE(valid, nullptr);
  valid->next(4, tokens.data(), labels.data(), seg.data());
}

TEST(BatchFactory, ABadSpecNamesTheField) {
  EXPECT_NE(error_of([] {
              marin::make_batch_source(json::object({{"kind", "rows"}}), tiny());
            }).find("missing field \"path\""),
            std::string::npos);
  EXPECT_NE(error_of([] {
              marin::make_batch_source(json::object({{"kind", "rows"}, {"path", 3}}), tiny());
            }).find("field \"path\" must be a string"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              marin::make_batch_source(
                  json::object({{"kind", "valid"}, {"tokens", "/nonexistent"}}), tiny());
            }).find("missing field \"domains\""),
            std::string::npos);
  EXPECT_NE(error_of([] {
              marin::make_batch_source(
                  json::object({{"kind", "mixture"}, {"tokens", "x"}, {"mixture", 1}}), tiny());
            }).find("field \"mixture\" must be an object"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              marin::make_batch_source(json::object({{"kind", "parquet"}}), tiny());
            }).find("unknown data source kind 'parquet'"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              marin::make_batch_source(json::array({1}), tiny());
            }).find("must be an object"),
            std::string::npos);
}
