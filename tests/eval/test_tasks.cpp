// Downstream tasks (src/eval/tasks): the scorer against a brute-force forward per choice,
// acc_norm by characters, a hand-written harness YAML rendered by the real Jinja2 engine, the
// errors of unsupported keys and corrupt lines, and the built-in tasks' determinism and
// held-out sources.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_util.hpp"
#include "core/error.hpp"
#include "core/fileio.hpp"
#include "data/tokenizer/tokenizer.hpp"
#include "eval/contamination.hpp"
#include "eval/tasks/builtin_tasks.hpp"
#include "eval/tasks/generation.hpp"
#include "eval/tasks/task_items.hpp"
#include "eval/tasks/task_scorer.hpp"
#include "model/model.hpp"

namespace marin {
namespace {
namespace fs = std::filesystem;
using json = nlohmann::json;
using testing::TempDir;

const std::string kFixture = std::string(MARIN_SOURCE_DIR) + "/data/fixture";

struct TinySetup {
  ModelConfig cfg = ModelConfig::preset("tiny");
  Tokenizer tok;
  std::unique_ptr<Model<float>> model;  // max_batch 3: items are packed and split over forwards
  TinySetup() {
    std::vector<std::string> texts;
    eval::for_each_jsonl_document(kFixture + "/bible_kjv/train-00000.jsonl",
                                  [&](const text_corpus::Document& d) { texts.push_back(d.text); });
    tok = Tokenizer::train(texts, 512);
    model = std::make_unique<Model<float>>(cfg, 3);
    model->init(7);
  }
};
TinySetup& setup() {
  static TinySetup s;
  return s;
}

// Brute force, written independently of the scorer: the harness's rule spelled out, one forward
// of one row per (context, continuation), no packing.
struct Brute {
  double ll = 0;
  bool greedy = true;
};
Brute brute_force(const std::string& context, const std::string& continuation) {
  TinySetup& s = setup();
  const int64_t S = s.cfg.seq_len, V = s.cfg.vocab_size;
  std::string ctx = context, cont = continuation;
  while (!ctx.empty() && std::isspace(static_cast<unsigned char>(ctx.back()))) {
    cont.insert(cont.begin(), ctx.back());
    ctx.pop_back();
  }
  std::vector<uint32_t> whole, c;
  if (ctx.empty()) {
    whole = {*s.tok.eos()};
    c = s.tok.encode(cont);
    whole.insert(whole.end(), c.begin(), c.end());
  } else {
    whole = s.tok.encode(ctx + cont);
    const auto ce = s.tok.encode(ctx);
    c.assign(whole.begin() + int64_t(ce.size()), whole.end());
  }
  if (int64_t(whole.size()) > S + 1) whole.erase(whole.begin(), whole.end() - (S + 1));
  const int64_t n = int64_t(whole.size()) - 1;
  std::vector<int32_t> tok(size_t(S), 0), lab(size_t(S), -1);
  for (int64_t i = 0; i < n; ++i) tok[size_t(i)] = int32_t(whole[size_t(i)]);
  for (int64_t i = n - int64_t(c.size()); i < n; ++i)
    lab[size_t(i)] = int32_t(whole[size_t(i) + 1]);
  Model<float> one(s.cfg, 1);
  std::copy(s.model->params().data(), s.model->params().data() + s.model->table().total(),
            one.params().data());
  one.forward({1, tok.data(), lab.data(), nullptr});
  Brute b;
  for (int64_t i = 0; i < S; ++i) {
    if (lab[size_t(i)] < 0) continue;
    b.ll -= double(one.token_ce()[i]);
    const float* z = one.logits() + i * V;
    if (std::max_element(z, z + V) - z != lab[size_t(i)]) b.greedy = false;
  }
  return b;
}

eval::TaskItems mc_task() {
  eval::TaskItems t;
  t.name = "brute";
  t.type = eval::OutputType::MultipleChoice;
  t.metrics = {"acc", "acc_norm"};
  std::string long_ctx;
  for (int i = 0; i < 40; ++i) long_ctx += "And the LORD spake unto Moses, saying, ";
  t.items = {
      {0,
       "0",
       "In the beginning God created",
       {"the heaven", "the earth and", "light"},
       {0},
       "",
       "",
       {},
       {}},
      {1,
       "1",
       "And God said, Let there be ",
       {"light", "darkness", "a firmament"},
       {2},
       "",
       "",
       {},
       {}},
      {2, "2", "", {"Genesis", "Exodus"}, {1}, "", "", {}, {}},                    // empty context
      {3, "3", long_ctx, {"Speak unto the children", "Go"}, {0}, "", "", {}, {}},  // left
                                                                                   // truncation
      {4, "4", "Café ", {"crème", "thé"}, {0, 1}, "", "", {}, {}}};  // trailing space, UTF-8
  return t;
}

TEST(Tasks, ScorerEqualsBruteForcePerChoice) {
  TinySetup& s = setup();
  eval::TaskItems t = mc_task();
  eval::TaskOptions o;
  o.log_samples = true;
  o.progress = false;
  const eval::TaskResult r = eval::score_task(*s.model, s.tok, t, o);
  ASSERT_EQ(r.samples.size(), t.items.size());
  double acc = 0;
  for (size_t i = 0; i < t.items.size(); ++i) {
    const auto& it = t.items[i];
    std::vector<double> bl;
    for (size_t c = 0; c < it.choices.size(); ++c) {
      const Brute b = brute_force(it.context, " " + it.choices[c]);
      const double got = r.samples[i]["loglikelihoods"][c].get<double>();
      EXPECT_NEAR(got, b.ll, 2e-4 * std::max(1.0, std::abs(b.ll)))
          << "item " << i << " choice " << c;
      EXPECT_EQ(r.samples[i]["is_greedy"][c].get<bool>(), b.greedy) << "item " << i;
      EXPECT_LT(b.ll, 0);
      bl.push_back(b.ll);
    }
    const size_t pred = size_t(std::max_element(bl.begin(), bl.end()) - bl.begin());
    acc += std::find(it.gold.begin(), it.gold.end(), int(pred)) != it.gold.end();
  }
  EXPECT_DOUBLE_EQ(r.all.at("acc").value, acc / double(t.items.size()));
  ASSERT_TRUE(r.all.at("acc").stderr_);
  const double p = acc / double(t.items.size()), n = double(t.items.size());
  EXPECT_NEAR(*r.all.at("acc").stderr_, std::sqrt(p * (1 - p) * n / (n - 1) / n), 1e-12);
  EXPECT_EQ(r.effective, t.items.size());

  // --limit scores a prefix, and the items hash follows what was scored.
  o.limit = 2;
  const eval::TaskResult r2 = eval::score_task(*s.model, s.tok, t, o);
  EXPECT_EQ(r2.effective, 2u);
  EXPECT_EQ(r2.original, t.items.size());
  EXPECT_NE(r2.items_hash, r.items_hash);
  for (size_t c = 0; c < 3; ++c)  // other packing, same numbers up to float rounding
    EXPECT_NEAR(r2.samples[1]["loglikelihoods"][c].get<double>(),
                r.samples[1]["loglikelihoods"][c].get<double>(), 1e-4);
}

// The shared context through the decoding cache: every choice's log-likelihood and greedy flag
// equal the brute force (one full forward per choice); the item whose choices are cut differently
// by the left truncation (item 3) and the packed path give the same numbers too.
TEST(Tasks, SharedContextThroughTheDecodeCacheEqualsBruteForce) {
  TinySetup& s = setup();
  eval::TaskItems t = mc_task();
  eval::TaskOptions o;
  o.log_samples = true;
  o.progress = false;
  const eval::TaskResult packed = eval::score_task(*s.model, s.tok, t, o);
  o.shared_context = true;
  const eval::TaskResult shared = eval::score_task(*s.model, s.tok, t, o);
  for (size_t i = 0; i < t.items.size(); ++i) {
    for (size_t c = 0; c < t.items[i].choices.size(); ++c) {
      const Brute b = brute_force(t.items[i].context, " " + t.items[i].choices[c]);
      const double got = shared.samples[i]["loglikelihoods"][c].get<double>();
      EXPECT_NEAR(got, b.ll, 2e-4 * std::max(1.0, std::abs(b.ll))) << "item " << i << " " << c;
      EXPECT_NEAR(got, packed.samples[i]["loglikelihoods"][c].get<double>(),
                  2e-4 * std::max(1.0, std::abs(b.ll)));
      EXPECT_EQ(shared.samples[i]["is_greedy"][c].get<bool>(), b.greedy) << "item " << i;
    }
  }
  EXPECT_EQ(shared.all.at("acc").value, packed.all.at("acc").value);
  EXPECT_EQ(shared.all.at("acc_norm").value, packed.all.at("acc_norm").value);
  // Requests at the level of score_shared_context: two whose contexts agree (decoded from one
  // cache) and two whose contexts differ (the second's is one token longer: packed forwards),
  // as two items; both equal score_requests.
  const std::vector<int32_t> ctx = {5, 17, 99, 3, 42};
  auto req = [&](std::vector<int32_t> extra_ctx, std::vector<int32_t> cont) {
    eval::LLRequest r;
    r.seq = ctx;
    r.seq.insert(r.seq.end(), extra_ctx.begin(), extra_ctx.end());
    r.seq.insert(r.seq.end(), cont.begin(), cont.end());
    r.n_score = int64_t(cont.size());
    return r;
  };
  const std::vector<eval::LLRequest> reqs = {req({}, {7, 8}), req({}, {9}), req({}, {7, 8}),
                                             req({11}, {9})};
  const auto a = eval::score_requests(*s.model, reqs, {0, 2});
  const auto d = eval::score_shared_context(*s.model, reqs, {0, 2});
  for (size_t q = 0; q < reqs.size(); ++q) {
    EXPECT_NEAR(a[q].ll, d[q].ll, 1e-4) << q;
    EXPECT_EQ(a[q].greedy, d[q].greedy) << q;
  }
}

TEST(Tasks, ContinuationTokensFollowTheHarness) {
  TinySetup& s = setup();
  // The trailing space of the context goes to the continuation: encode("a b") after encode("a").
  const eval::LLRequest q = eval::continuation_request(s.tok, "And God ", "said", 64, 0);
  const auto whole = s.tok.encode("And God said"), ctx = s.tok.encode("And God");
  ASSERT_EQ(size_t(q.n_score), whole.size() - ctx.size());
  EXPECT_EQ(q.seq, std::vector<int32_t>(whole.begin(), whole.end()));
  // Left truncation keeps the last seq_len + 1 tokens.
  std::string longer;
  for (int i = 0; i < 30; ++i) longer += "and the earth was without form ";
  const eval::LLRequest t = eval::continuation_request(s.tok, longer, " void", 64, 0);
  EXPECT_EQ(t.seq.size(), 65u);
  const auto all = s.tok.encode(longer + " void");
  EXPECT_EQ(t.seq.back(), int32_t(all.back()));
  EXPECT_FALSE(t.cut);
  // A continuation longer than seq_len: its last seq_len tokens are scored, and it is counted.
  const eval::LLRequest c = eval::continuation_request(s.tok, "And", " " + longer, 64, 0);
  EXPECT_TRUE(c.cut);
  EXPECT_EQ(c.n_score, 64);
  EXPECT_EQ(c.seq.size(), 65u);
}

// A tokenizer whose template starts a document with BOS (Llama 3, Llama 2, Gemma) has the
// contexts of its task requests start with it too, as tokenize starts its training documents; an
// empty context is that BOS alone. Without a template, contexts are encoded bare and an empty one
// is EOS (the harness's prefix token).
TEST(Tasks, ContextsStartWithTheTemplatesBosAsTrainingDocumentsDo) {
  TinySetup& s = setup();
  json j = json::parse(s.tok.to_json());
  const uint32_t bos = *s.tok.bos();
  j["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", json::parse(R"([{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}},
                                 {"Sequence": {"id": "A", "type_id": 0}}])")},
      {"pair", json::array()},
      {"special_tokens",
       {{"<|begin_of_text|>",
         {{"id", "<|begin_of_text|>"}, {"ids", {bos}}, {"tokens", {"<|begin_of_text|>"}}}}}}};
  const Tokenizer with_bos = Tokenizer::from_json_text(j.dump());
  ASSERT_EQ(with_bos.template_prefix(), std::vector<uint32_t>{bos});
  EXPECT_EQ(eval::prefix_token(with_bos), int32_t(bos));
  EXPECT_EQ(eval::prefix_token(s.tok), int32_t(*s.tok.eos()));

  const eval::LLRequest q = eval::continuation_request(with_bos, "And God ", "said", 64, 0);
  const auto whole = s.tok.encode("And God said"), ctx = s.tok.encode("And God");
  std::vector<int32_t> want{int32_t(bos)};
  want.insert(want.end(), whole.begin(), whole.end());
  EXPECT_EQ(q.seq, want);
  EXPECT_EQ(size_t(q.n_score), whole.size() - ctx.size());
  const eval::LLRequest bare = eval::continuation_request(s.tok, "And God ", "said", 64, 0);
  EXPECT_EQ(bare.seq, std::vector<int32_t>(whole.begin(), whole.end()));

  const eval::LLRequest empty =
      eval::continuation_request(with_bos, "", "said", 64, eval::prefix_token(with_bos));
  ASSERT_FALSE(empty.seq.empty());
  EXPECT_EQ(empty.seq.front(), int32_t(bos));
  EXPECT_EQ(empty.seq.size(), 1 + s.tok.encode("said").size());
}

TEST(Tasks, RollingEqualsOneForwardWhenItFits) {
  TinySetup& s = setup();
  eval::TaskItems t;
  t.name = "roll";
  t.type = eval::OutputType::LoglikelihoodRolling;
  t.metrics = {"word_perplexity", "byte_perplexity", "bits_per_byte"};
  const std::string text = "In the beginning God created the heaven and the earth.";
  t.items = {{0, "0", "", {}, {}, text, text, {}, {}}};
  eval::TaskOptions o;
  o.progress = false;
  o.log_samples = true;
  const eval::TaskResult r = eval::score_task(*s.model, s.tok, t, o);
  const Brute b = brute_force("", text);  // prefix token, then every token of the text scored
  EXPECT_NEAR(r.samples[0]["loglikelihoods"][0].get<double>(), b.ll, 2e-4 * std::abs(b.ll));
  EXPECT_NEAR(r.all.at("bits_per_byte").value, -b.ll / double(text.size()) / std::log(2.0), 1e-3);
  EXPECT_NEAR(r.all.at("word_perplexity").value, std::exp(-b.ll / 10.0),
              1e-3 * std::exp(-b.ll / 10));
  EXPECT_FALSE(r.all.at("bits_per_byte").stderr_);  // the harness reports N/A

  // A text longer than seq_len: the windows predict every token exactly once.
  std::vector<int32_t> toks(150);
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = int32_t(i % 200);
  const auto w = eval::rolling_requests(toks, 9, 64);
  int64_t scored = 0;
  for (const auto& q : w) {
    scored += q.n_score;
    EXPECT_LE(q.seq.size(), 65u);
  }
  EXPECT_EQ(scored, 150);
  EXPECT_EQ(w.size(), 3u);
  EXPECT_EQ(w[0].seq.front(), 9);
  EXPECT_EQ(w.back().seq.back(), toks.back());
}

TEST(Tasks, AccNormDividesByCharactersNotTokensOrBytes) {
  eval::TaskItems t;
  t.type = eval::OutputType::MultipleChoice;
  t.metrics = {"acc", "acc_norm"};
  // "éé": 2 characters, 4 bytes; "abc": 3 characters, 3 bytes. By characters −3/2 < −4/3, so
  // acc_norm picks "abc" (gold); by bytes (−0.75 > −1.33) it would pick "éé".
  t.items = {{0, "0", "x", {"éé", "abc"}, {1}, "", "", {}, {}}};
  eval::ItemScores s;
  s.ll = {{-3.0, -4.0}};
  s.greedy = {{false, false}};
  const auto m = eval::task_metrics(t, s, {0}, {});
  EXPECT_EQ(m.at("acc").value, 0.0);       // raw: −3 > −4 picks "éé"
  EXPECT_EQ(m.at("acc_norm").value, 1.0);  // per character
  EXPECT_EQ(eval::char_length("éé"), 2u);
  EXPECT_EQ(eval::char_length("a→b"), 3u);
}

const char* kYaml = R"(task: hand_mc
dataset_path: json
dataset_kwargs:
  data_files:
    test: docs.jsonl
    train: shots.jsonl
test_split: test
training_split: train
output_type: multiple_choice
description: "Answer the question.\n\n"
doc_to_text: "Question: {{question}}\nAnswer:"
doc_to_choice: "{{options}}"
doc_to_target: "{{answer}}"
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
  - metric: acc_norm
metadata:
  version: 3.0
)";

void write_hand_task(const TempDir& d, const std::string& yaml = kYaml) {
  marin::testing::write_text(d.str("task.yaml"), yaml);
  marin::testing::write_text(
      d.str("docs.jsonl"),
      "{\"question\": \"Who created the heaven?\", \"options\": [\"God\", \"Moses\"], "
      "\"answer\": 0}\n\n"
      "{\"question\": \"What was upon the face of the deep?\", \"options\": [\"light\", "
      "\"darkness\", \"water\"], \"answer\": \"darkness\"}\n");
  marin::testing::write_text(
      d.str("shots.jsonl"),
      "{\"question\": \"Who spake unto Moses?\", \"options\": [\"the LORD\", \"Aaron\"], "
      "\"answer\": 0}\n");
}

TEST(Tasks, HandWrittenHarnessYamlIsRenderedAndScored) {
  TempDir d("tasks-yaml");
  write_hand_task(d);
  eval::RenderOptions ro;
  const eval::TaskItems t = eval::load_task(d.str("task.yaml"), ro);
  EXPECT_EQ(t.name, "hand_mc");
  EXPECT_EQ(t.version, json(3.0));
  ASSERT_EQ(t.items.size(), 2u);
  EXPECT_EQ(t.items[0].context,
            "Answer the question.\n\nQuestion: Who created the heaven?\nAnswer:");
  EXPECT_EQ(t.items[1].choices, (std::vector<std::string>{"light", "darkness", "water"}));
  EXPECT_EQ(t.items[1].gold, std::vector<int>{1});  // a string target is its index in the choices
  EXPECT_EQ(t.items[1].doc_id, 1u);                 // the blank line is not a document

  ro.num_fewshot = 1;
  const eval::TaskItems f = eval::load_task(d.str("task.yaml"), ro);
  EXPECT_EQ(f.num_fewshot, 1);
  EXPECT_EQ(f.items[0].context,
            "Answer the question.\n\nQuestion: Who spake unto Moses?\nAnswer: the LORD\n\n"
            "Question: Who created the heaven?\nAnswer:");

  TinySetup& s = setup();
  eval::TaskOptions o;
  o.progress = false;
  o.log_samples = true;
  const eval::TaskResults r = eval::score_tasks(*s.model, s.tok, {t}, o);
  const json j = r.to_json();
  EXPECT_TRUE(j["results"]["hand_mc"].contains("acc,none"));
  EXPECT_TRUE(j["results"]["hand_mc"].contains("acc_norm_stderr,none"));
  EXPECT_EQ(j["n-samples"]["hand_mc"]["effective"], 2);
  EXPECT_EQ(j["versions"]["hand_mc"], 3.0);
  EXPECT_EQ(j["marin"]["tasks"]["hand_mc"]["items_hash"], t.items_hash(2));
  for (size_t i = 0; i < 2; ++i) {
    const auto& it = t.items[i];
    for (size_t c = 0; c < it.choices.size(); ++c)
      EXPECT_NEAR(j["samples"]["hand_mc"][i]["loglikelihoods"][c].get<double>(),
                  brute_force(it.context, " " + it.choices[c]).ll, 1e-3);
  }
}

// Multi-input (winogrande-style): doc_to_text renders the index of the right context,
// doc_to_choice the contexts, doc_to_target the one continuation. Each context is scored with
// " " + continuation after it (the harness's construct_requests); acc is the argmax of those
// log-likelihoods, acc_norm the argmax of ll / len(context without the few-shot prefix).
TEST(Tasks, MultiInputScoresTheContinuationAfterEachContext) {
  TempDir d("tasks-multi");
  marin::testing::write_text(
      d.str("docs.jsonl"),
      "{\"sentence\": \"And God called the _ Day.\", \"option1\": \"light\", "
      "\"option2\": \"firmament\", \"answer\": \"1\"}\n"
      "{\"sentence\": \"In the beginning _ created the heaven.\", \"option1\": \"Moses\", "
      "\"option2\": \"God\", \"answer\": \"2\"}\n"
      "{\"sentence\": \"And the evening and the _ were the first day.\", \"option1\": "
      "\"morning\", \"option2\": \"night of the great deep\", \"answer\": \"1\"}\n");
  marin::testing::write_text(
      d.str("wino.yaml"),
      "task: wino\ndataset_path: json\ndataset_kwargs:\n  data_files:\n    test: docs.jsonl\n"
      "    train: docs.jsonl\ntest_split: test\ntraining_split: train\nnum_fewshot: 1\n"
      "fewshot_config:\n  sampler: first_n\noutput_type: multiple_choice\n"
      "doc_to_text: \"{{ {'1': 0, '2': 1}[answer] }}\"\n"
      "doc_to_choice: \"{{ [sentence.split('_')[0] ~ option1, sentence.split('_')[0] ~ "
      "option2] }}\"\n"
      "doc_to_target: \"{{ sentence.split('_')[1].strip() }}\"\n");
  const eval::TaskItems t = eval::load_task(d.str("wino.yaml"), {});
  ASSERT_TRUE(t.multi_input);
  ASSERT_EQ(t.items.size(), 3u);
  // first_n with the same split: the first document other than this one, its right context.
  EXPECT_EQ(t.items[1].contexts,
            (std::vector<std::string>{"And God called the light Day.\n\nIn the beginning Moses",
                                      "And God called the light Day.\n\nIn the beginning God"}));
  EXPECT_EQ(t.items[1].choices,
            (std::vector<std::string>{"In the beginning Moses", "In the beginning God"}));
  EXPECT_EQ(t.items[1].continuation, "created the heaven.");
  EXPECT_EQ(t.items[1].gold, std::vector<int>{1});

  TinySetup& s = setup();
  eval::TaskOptions o;
  o.progress = false;
  o.log_samples = true;
  const eval::TaskResult r = eval::score_task(*s.model, s.tok, t, o);
  double acc = 0, acc_norm = 0;
  for (size_t i = 0; i < t.items.size(); ++i) {
    const auto& it = t.items[i];
    std::vector<double> ll, norm;
    for (size_t c = 0; c < it.contexts.size(); ++c) {
      ll.push_back(brute_force(it.contexts[c], " " + it.continuation).ll);
      norm.push_back(ll.back() / double(eval::char_length(it.choices[c])));
      EXPECT_NEAR(r.samples[i]["loglikelihoods"][c].get<double>(), ll.back(),
                  2e-4 * std::abs(ll.back()));
    }
    acc += (std::max_element(ll.begin(), ll.end()) - ll.begin()) == it.gold[0];
    acc_norm += (std::max_element(norm.begin(), norm.end()) - norm.begin()) == it.gold[0];
  }
  EXPECT_DOUBLE_EQ(r.all.at("acc").value, acc / 3);
  EXPECT_DOUBLE_EQ(r.all.at("acc_norm").value, acc_norm / 3);
}

std::string load_error(const std::string& yaml_path) {
  try {
    eval::load_task(yaml_path, {});
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(Tasks, UnsupportedKeyIsAnErrorNamingIt) {
  TempDir d("tasks-key");
  write_hand_task(d, std::string(kYaml) + "process_results: !function utils.process\n");
  std::string e = load_error(d.str("task.yaml"));
  EXPECT_NE(e.find("!function"), std::string::npos) << e;
  write_hand_task(d, std::string(kYaml) + "use_prompt: x\n");
  e = load_error(d.str("task.yaml"));
  EXPECT_NE(e.find("key 'use_prompt' is not supported"), std::string::npos) << e;
  EXPECT_NE(e.find("task.yaml"), std::string::npos) << e;
  write_hand_task(d, std::string(kYaml) + "filter_list: []\n");
  e = load_error(d.str("task.yaml"));
  EXPECT_NE(e.find("filter_list: only with output_type generate_until"), std::string::npos) << e;
  // generate_until renders (TASK_FORMAT: marin-tasks/2 with the harness's default generation
  // arguments and filter), but keeps its metric_list to its own metrics.
  std::string y = kYaml;
  y.replace(y.find("multiple_choice"), 15, "generate_until");
  write_hand_task(d, y);
  e = load_error(d.str("task.yaml"));
  EXPECT_NE(e.find("metric 'acc' is not supported for output_type generate_until"),
            std::string::npos)
      << e;
  y = y.substr(0, y.find("metric_list:")) + "metadata:\n  version: 3.0\n";
  write_hand_task(d, y);
  const eval::TaskItems g = eval::load_task(d.str("task.yaml"), {});
  EXPECT_EQ(g.type, eval::OutputType::GenerateUntil);
  EXPECT_EQ(g.header["format"], "marin-tasks/2");
  EXPECT_EQ(g.header["generation_kwargs"], json({{"until", {"\n\n"}},
                                                 {"max_gen_toks", 256},
                                                 {"do_sample", false},
                                                 {"temperature", 0.0}}));
  EXPECT_EQ(g.header["filter_list"],
            json::parse(R"([{"name": "none", "filter": [{"function": "take_first"}]}])"));
  ASSERT_TRUE(g.generation);
  EXPECT_EQ(g.generation->kwargs.until, std::vector<std::string>{"\n\n"});
  EXPECT_EQ(g.generation->kwargs.max_gen_toks, 256);
  ASSERT_EQ(g.generation->filters.size(), 1u);
  EXPECT_EQ(g.generation->filters[0].name, "none");
  ASSERT_EQ(g.generation->filters[0].steps.size(), 1u);
  EXPECT_EQ(g.generation->filters[0].steps[0].function, "take_first");
  EXPECT_EQ(g.generation->repeats, 1);
  EXPECT_EQ(g.metrics, std::vector<std::string>{"exact_match"});
  EXPECT_EQ(g.items.at(1).targets, std::vector<std::string>{"darkness"});  // choices[gold]
  EXPECT_EQ(g.items.at(1).doc["question"], "What was upon the face of the deep?");
  y = kYaml;
  y.replace(y.find("- metric: acc_norm"), 18, "- metric: f1");
  write_hand_task(d, y);
  e = load_error(d.str("task.yaml"));
  EXPECT_NE(e.find("metric 'f1' is not supported"), std::string::npos) << e;
}

TEST(Tasks, CorruptJsonlLineNamesFileAndLine) {
  TempDir d("tasks-corrupt");
  write_hand_task(d);
  marin::testing::write_text(
      d.str("docs.jsonl"),
      "{\"question\": \"q\", \"options\": [\"a\", \"b\"], \"answer\": 0}\n\n{\"question\": \n");
  std::string e = load_error(d.str("task.yaml"));
  EXPECT_NE(e.find("docs.jsonl:3: not valid JSON"), std::string::npos) << e;
  // The rendered form the C++ reader takes.
  marin::testing::write_text(
      d.str("r.jsonl"),
      "{\"format\": \"marin-tasks/1\", \"task\": \"t\", \"output_type\": \"multiple_choice\"}\n"
      "{\"doc_id\": 0, \"context\": \"c\", \"choices\": [\"a\"], \"gold\": 0}\n"
      "{\"doc_id\": 1, \"context\": \"c\", \"choices\": [\"a\"], \"gold\": 3}\n");
  try {
    eval::read_task_items(d.str("r.jsonl"));
    ADD_FAILURE() << "gold out of range accepted";
  } catch (const Error& x) {
    EXPECT_NE(std::string(x.what()).find("r.jsonl:3: \"gold\" 3"), std::string::npos) << x.what();
  }
  marin::testing::write_text(
      d.str("r.jsonl"),
      "{\"format\": \"marin-tasks/1\", \"task\": \"t\", \"output_type\": \"multiple_choice\"}\n"
      "{\"doc_id\": 0, \"context\": \"c\", \"choi");
  try {
    eval::read_task_items(d.str("r.jsonl"));
    ADD_FAILURE() << "corrupt line accepted";
  } catch (const Error& x) {
    EXPECT_NE(std::string(x.what()).find("r.jsonl:2: not valid JSON"), std::string::npos)
        << x.what();
  }
}

std::string slurp_dir(const std::string& dir) {
  std::string all;
  std::vector<fs::path> files;
  for (const auto& f : fs::directory_iterator(dir)) files.push_back(f.path());
  std::sort(files.begin(), files.end());
  for (const auto& f : files) all += f.filename().string() + "\n" + read_file(f.string());
  return all;
}

TEST(Tasks, BuiltinTasksAreDeterministicAndHeldOut) {
  TempDir d("tasks-builtin");
  // A corpus whose dictionary and Python domains have marked train text next to the fixture's
  // valid shards: no marker may reach a task.
  const std::string corpus = d.str("corpus");
  for (const char* dom :
       {"dict_devil", "dict_jargon", "code_python", "brown_fiction", "bible_web_modern"}) {
    fs::create_directories(corpus + "/" + dom);
    fs::copy_file(kFixture + "/" + dom + "/valid-00000.jsonl",
                  corpus + "/" + dom + "/valid-00000.jsonl");
  }
  std::string train;
  for (int i = 0; i < 50; ++i)
    train += fmt::format(
        "{{\"id\":\"zz{}\",\"text\":\"ZZMARK{}, n.  A trainmarker word of the zzmark kind, "
        "trainmarker again.\"}}\n",
        i, i);
  marin::testing::write_text(corpus + "/dict_devil/train-00000.jsonl", train);
  marin::testing::write_text(
      corpus + "/code_python/train-00000.jsonl",
      "{\"id\":\"m.py\",\"text\":\"def trainmarker(x):\\n    y = trainmarker_value(x)\\n    "
      "return trainmarker(y)\\n\"}\n");
  eval::BuildTasksOptions o;
  o.corpus = corpus;
  o.out = d.str("a");
  const auto built = eval::build_tasks(o).built;
  ASSERT_EQ(built.size(), 4u);
  o.out = d.str("b");
  eval::build_tasks(o);
  const std::string a = slurp_dir(d.str("a")), b = slurp_dir(d.str("b"));
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.find("trainmarker"), std::string::npos);
  EXPECT_EQ(a.find("ZZMARK"), std::string::npos);
  for (const auto& t : built) {
    EXPECT_GT(t.items, 0u) << t.name;
    for (const auto& src : t.sources) EXPECT_NE(src.find("valid-"), std::string::npos) << src;
  }
  // Another seed draws other distractors.
  o.out = d.str("c");
  o.seed = 99;
  eval::build_tasks(o);
  EXPECT_NE(read_file(d.str("a/cloze_definitions.jsonl")),
            read_file(d.str("c/cloze_definitions.jsonl")));

  // LAMBADA's filter: every passage's last word occurs earlier in it.
  int n = 0;
  eval::for_each_jsonl_document(d.str("a/lambada_style.jsonl"),
                                [&](const text_corpus::Document& doc) {
                                  const std::string& text = doc.text;
                                  const size_t sp = text.rfind(' ');
                                  const auto ctx = eval::normalize_words(text.substr(0, sp));
                                  const auto last = eval::normalize_words(text.substr(sp + 1));
                                  ASSERT_EQ(last.size(), 1u);
                                  EXPECT_NE(std::find(ctx.begin(), ctx.end(), last[0]), ctx.end());
                                  ++n;
                                });
  EXPECT_GT(n, 10);
  // The harness YAML renders with the real engine, and the renderer agrees with the JSONL.
  const eval::TaskItems l = eval::load_task(d.str("a/lambada_style.yaml"), {});
  EXPECT_EQ(l.type, eval::OutputType::Loglikelihood);
  EXPECT_EQ(l.items.size(), size_t(n));
  EXPECT_EQ(l.items[0].target[0], ' ');
  const eval::TaskItems c = eval::load_task(d.str("a/cloze_definitions.yaml"), {});
  EXPECT_EQ(c.items[0].choices.size(), 4u);
  EXPECT_EQ(eval::most_frequent_earlier_word("the cat saw the cat and a dog"), "cat");
}

// The tasks find their text by kind, not by domain name: a user's corpus of one domain
// ("mydata": prose wrapped at 70 columns, a glossary and Python files, under ids of its own)
// builds the tasks whose text it has, and names the one it has no text for, what that task needs
// and the domains looked at.
TEST(Tasks, BuiltinTasksBuildFromAnyDomainWithTheirKindOfText) {
  TempDir d("tasks-anycorpus");
  std::string mydata;
  int n = 0;
  auto add = [&](const std::string& id, const std::string& text) {
    mydata += json({{"id", id}, {"text", text}}).dump() + "\n";
  };
  eval::for_each_jsonl_document(kFixture + "/brown_fiction/valid-00000.jsonl",
                                [&](const text_corpus::Document& doc) {
                                  std::string text, line, w;  // re-wrapped at 70 columns
                                  std::istringstream words(doc.text);
                                  while (words >> w) {
                                    if (line.size() + w.size() >= 70)
                                      text += line + "\n", line = "";
                                    line += (line.empty() ? "" : " ") + w;
                                  }
                                  add(fmt::format("story-{}", n++), text + line);
                                });
  eval::for_each_jsonl_document(
      kFixture + "/dict_devil/valid-00000.jsonl",
      [&](const text_corpus::Document& doc) { add(fmt::format("gloss-{}", n++), doc.text); });
  eval::for_each_jsonl_document(kFixture + "/code_python/valid-00000.jsonl",
                                [&](const text_corpus::Document& doc) {
                                  add("lib/" + fs::path(doc.id("")).filename().string(), doc.text);
                                });
  marin::testing::write_text(d.str("corpus/mydata/valid-00000.jsonl"), mydata);
  auto r = marin::testing::run("tasks build --corpus " + d.str("corpus") + " --out " +
                               d.str("tasks") + " --max-items 50");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("skipped verse_completion: needs verse-like prose"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("no such text in the valid split (domains mydata)"), std::string::npos)
      << r.out;
  EXPECT_FALSE(fs::exists(d.str("tasks/verse_completion.jsonl")));
  const json m = json::parse(read_file(d.str("tasks/tasks.json")));
  EXPECT_TRUE(m["skipped"].contains("verse_completion")) << m.dump();
  // Each built task read only its kind of document of mydata.
  const std::map<std::string, std::string> prefix{{"lambada_style", "mydata/story-"},
                                                  {"cloze_definitions", "mydata/gloss-"},
                                                  {"code_completion", "mydata/lib/"}};
  for (const auto& [task, p] : prefix) {
    EXPECT_EQ(m["tasks"][task]["domains"], json::array({"mydata"})) << task;
    int items = 0;
    const std::string jsonl = read_file(d.str("tasks/" + task + ".jsonl"));
    for (std::string_view line : split_lines(jsonl)) {
      if (line.empty()) continue;
      const std::string id = json::parse(line)["id"];
      EXPECT_EQ(id.rfind(p, 0), 0u) << task << ": " << id;
      ++items;
    }
    EXPECT_GT(items, 3) << task;
  }
  // Asked for by name, a task without its text is an error saying what it needs.
  r = marin::testing::run("tasks build --corpus " + d.str("corpus") + " --out " + d.str("v") +
                          " --tasks verse_completion");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("verse_completion cannot be built from " + d.str("corpus") +
                       ": it needs verse-like prose"),
            std::string::npos)
      << r.out;
  // A corpus with no task's text: one error naming the corpus and what each task needed.
  std::string numbers;
  for (int i = 0; i < 20; ++i)
    numbers += json({{"id", std::to_string(i)},
                     {"text", fmt::format("{} {} {}\n{} {}", i, i * 2, i * 3, i * 4, i * 5)}})
                   .dump() +
               "\n";
  marin::testing::write_text(d.str("numbers/table/valid-00000.jsonl"), numbers);
  r = marin::testing::run("tasks build --corpus " + d.str("numbers") + " --out " + d.str("n"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("no task could be built from " + d.str("numbers") +
                       " (valid split; domains table)"),
            std::string::npos)
      << r.out;
  for (const auto& t : eval::builtin_task_names())
    EXPECT_NE(r.out.find(t + " needs "), std::string::npos) << t << ": " << r.out;
}

// The fixture's domains still give all four tasks, each from the domains with its kind of text:
// the dictionaries and the code domains exactly, and the prose tasks from prose domains only.
TEST(Tasks, BuiltinTasksOnTheFixtureFindTheirDomainsByKind) {
  TempDir d("tasks-fixture-kinds");
  eval::BuildTasksOptions o;
  o.corpus = kFixture;
  o.out = d.str("t");
  const eval::BuiltTasks t = eval::build_tasks(o);
  ASSERT_EQ(t.built.size(), 4u);
  EXPECT_TRUE(t.skipped.empty());
  std::map<std::string, std::vector<std::string>> domains;
  for (const auto& b : t.built) {
    domains[b.name] = b.domains;
    EXPECT_GT(b.items, 0u) << b.name;
  }
  using V = std::vector<std::string>;
  EXPECT_EQ(domains["cloze_definitions"], (V{"dict_devil", "dict_jargon"}));
  EXPECT_EQ(domains["code_completion"], (V{"code_go", "code_python"}));
  for (const char* task : {"lambada_style", "verse_completion"}) {
    const V& v = domains[task];
    for (const char* want : {"bible_web_modern", "brown_fiction"})
      EXPECT_NE(std::find(v.begin(), v.end(), want), v.end()) << task << " " << want;
    for (const std::string& dom : v)
      EXPECT_TRUE(!dom.starts_with("code_") && !dom.starts_with("dict_")) << task << " " << dom;
  }
}

TEST(Tasks, ItemsAreTaggedByTheAudit) {
  TempDir d("tasks-audit");
  fs::create_directories(d.str("train/dom"));
  const std::string leaked =
      "one two three four five six seven eight nine ten eleven twelve thirteen fourteen";
  marin::testing::write_text(d.str("train/dom/train-00000.jsonl"),
                             json({{"id", "x"}, {"text", leaked}}).dump() + "\n");
  eval::IndexOptions io;
  io.progress = false;
  io.threads = 1;
  const eval::NgramIndex index =
      eval::build_ngram_index(eval::TrainText::of_domains(d.str("train"), {"dom"}), io);
  eval::TaskItems t = mc_task();
  t.items[1].audit_text = leaked;              // contaminated
  t.items[3].audit_text = t.items[3].context;  // clean, checked
  eval::TaskOptions o;
  o.progress = false;
  o.log_samples = true;
  o.index = &index;
  const eval::TaskResult r = eval::score_task(*setup().model, setup().tok, t, o);
  ASSERT_EQ(r.items.size(), t.items.size());
  EXPECT_TRUE(r.items[1].contaminated);
  EXPECT_DOUBLE_EQ(r.items[1].overlap.fraction(), 1.0);
  EXPECT_FALSE(r.items[3].contaminated);
  EXPECT_GT(r.items[3].overlap.ngrams, 0u);
  EXPECT_EQ(r.n_contaminated, 1u);
  EXPECT_EQ(r.n_clean, t.items.size() - 1);
  // The contaminated subset is item 1 alone: its metrics are that item's.
  EXPECT_EQ(r.contaminated.at("acc").value, r.samples[1]["metrics"]["acc"].get<double>());
  EXPECT_FALSE(r.contaminated.at("acc").stderr_);  // one item: no sample standard deviation
  eval::TaskResults all;
  all.tasks.push_back(r);
  all.audited = true;
  const json j = all.to_json();
  EXPECT_EQ(j["marin"]["tasks"]["brute"]["contaminated"]["n"], 1);
  EXPECT_EQ(j["marin"]["tasks"]["brute"]["items"][1]["contaminated"], true);
  EXPECT_EQ(j["marin"]["tasks"]["brute"]["items"][1]["id"], "1");
}

TEST(Tasks, CliBuildsAndScoresTasksInTheHarnessLayout) {
  TempDir d("tasks-cli");
  auto r = testing::run("init --preset tiny --seed 3 --out " + d.str("ck"));
  ASSERT_EQ(r.code, 0) << r.out;
  setup().tok.save_json(d.str("ck/tokenizer.json"));
  r = testing::run("tasks build --corpus " + kFixture + " --out " + d.str("tasks") +
                   " --tasks lambada_style,cloze_definitions --max-items 20");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("most_frequent_earlier_word"), std::string::npos) << r.out;
  r = testing::run("eval --checkpoint " + d.str("ck") + " --tasks lambada_style,cloze_definitions" +
                   " --task-dir " + d.str("tasks") + " --limit 6 --log-samples --train-corpus " +
                   kFixture + " --train-domains dict_jargon,dict_devil,bible_kjv --quiet --json " +
                   d.str("r.json") + " --bootstrap-iters 200");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("cloze_definitions"), std::string::npos) << r.out;
  const json j = json::parse(read_file(d.str("r.json")));
  for (const char* t : {"lambada_style", "cloze_definitions"}) {
    EXPECT_EQ(j["n-samples"][t]["effective"], 6) << t;
    EXPECT_EQ(j["n-samples"][t]["original"], 20) << t;
    EXPECT_EQ(j["versions"][t], 1.0) << t;
    EXPECT_EQ(j["samples"][t].size(), 6u) << t;
    EXPECT_EQ(j["marin"]["tasks"][t]["items"].size(), 6u) << t;
    EXPECT_EQ(j["marin"]["tasks"][t]["clean"]["n"].get<int>() +
                  j["marin"]["tasks"][t]["contaminated"]["n"].get<int>(),
              6);
  }
  EXPECT_TRUE(j["results"]["lambada_style"]["perplexity_stderr,none"].is_number());
  EXPECT_TRUE(j["results"]["cloze_definitions"]["acc_norm,none"].is_number());
  EXPECT_EQ(j["config"]["limit"], 6);
  // Off a terminal (the test's pipe), each task's progress is a plain line with its count, rate
  // and ETA (issue 42); --progress-every 0 prints none.
  const std::string again = "eval --checkpoint " + d.str("ck") +
                            " --tasks lambada_style --task-dir " + d.str("tasks") +
                            " --limit 6 --no-audit --bootstrap-iters 10 --progress-every ";
  r = testing::run(again + "0.000001");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("task lambada_style 6/6 (100.0%)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("ETA"), std::string::npos) << r.out;
  r = testing::run(again + "0");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.find("task lambada_style 6/6"), std::string::npos) << r.out;
  // A name that is not in the task directory.
  r = testing::run("eval --checkpoint " + d.str("ck") + " --tasks nosuch --task-dir " +
                   d.str("tasks") + " --quiet");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("no task, tag or group 'nosuch'"), std::string::npos) << r.out;
}

// marin train --tasks … --tasks-every N: the tasks are scored at every N steps and at the end,
// into the metrics line (metrics, stderr, clean / contaminated) and RUN/tasks/step-N.json; the
// end's scores are exactly `marin eval --tasks` on the final checkpoint with the same rows per
// forward (the trainer's micro-batch), since both run the same packed forwards.
TEST(Tasks, TrainScoresTasksEveryNStepsLikeEval) {
  TempDir d("tasks-train");
  ASSERT_EQ(testing::tokenize_fixture(d), "");
  auto r = testing::run("tasks build --corpus " + kFixture + " --out " + d.str("tasks") +
                        " --tasks cloze_definitions,verse_completion --max-items 12");
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string mix = std::string(MARIN_SOURCE_DIR) + "/configs/fixture_mixture.toml";
  const std::string train = "train --preset tiny --batch 4 --steps 4 --seed 2 --data " + mix +
                            " --token-dir " + d.str("tokens") + " --tokenizer " + d.str("tok.json");
  r = testing::run(train + " --tasks-every 3 --out " + d.str("bad"));
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--tasks-every 3 needs --tasks"), std::string::npos) << r.out;
  r = testing::run(train + " --tasks cloze_definitions,verse_completion --task-dir " +
                   d.str("tasks") + " --tasks-every 3 --out " + d.str("run"));
  ASSERT_EQ(r.code, 0) << r.out;
  const auto m = testing::metrics(d.str("run"));
  ASSERT_EQ(m.size(), 4u);
  EXPECT_FALSE(m[0].contains("tasks"));
  EXPECT_FALSE(m[1].contains("tasks"));
  ASSERT_TRUE(m[2].contains("tasks")) << m[2].dump();  // after step 3
  ASSERT_TRUE(m[3].contains("tasks"));                 // the end
  for (const json& line : {m[2], m[3]}) {
    const json& t = line["tasks"];
    EXPECT_TRUE(t["audited"].get<bool>());  // the manifest's corpus is here: audited
    for (const char* name : {"cloze_definitions", "verse_completion"}) {
      const json& x = t["tasks"][name];
      EXPECT_EQ(x["n"], 12) << name;
      for (const char* k : {"acc", "acc_norm", "acc_stderr", "acc_norm_stderr"}) {
        ASSERT_TRUE(x[k].is_number()) << name << " " << k << ": " << x.dump();
        EXPECT_GE(x[k].get<double>(), 0.0);
        EXPECT_LE(x[k].get<double>(), 1.0);
      }
      EXPECT_EQ(x["clean"]["n"].get<int>() + x["contaminated"]["n"].get<int>(), 12) << name;
    }
  }
  // The harness-layout files of both evaluations.
  ASSERT_TRUE(fs::exists(d.str("run/tasks/step-00000003.json")));
  const json full = json::parse(read_file(d.str("run/tasks/step-00000004.json")));
  EXPECT_EQ(full["config"]["step"], 4);
  EXPECT_EQ(full["marin"]["tasks"]["verse_completion"]["items"].size(), 12u);
  // The same checkpoint through marin eval, one row per forward as the trainer (batch 4 is four
  // micro-batches of 1): the same numbers, bit for bit.
  r = testing::run("eval --checkpoint " + d.str("run/checkpoints/step-00000004") +
                   " --tasks cloze_definitions,verse_completion --task-dir " + d.str("tasks") +
                   " --batch 1 --run " + d.str("run") + " --quiet --json " + d.str("e.json"));
  ASSERT_EQ(r.code, 0) << r.out;
  const json e = json::parse(read_file(d.str("e.json")));
  for (const char* name : {"cloze_definitions", "verse_completion"}) {
    for (const char* k : {"acc", "acc_norm"}) {
      EXPECT_EQ(e["results"][name][std::string(k) + ",none"].get<double>(),
                m[3]["tasks"]["tasks"][name][k].get<double>())
          << name << " " << k;
      EXPECT_EQ(e["results"][name][std::string(k) + ",none"],
                full["results"][name][std::string(k) + ",none"]);
    }
    EXPECT_EQ(e["marin"]["tasks"][name]["clean"], full["marin"]["tasks"][name]["clean"]) << name;
    EXPECT_EQ(e["marin"]["tasks"][name]["items_hash"], m[3]["tasks"]["tasks"][name]["items_hash"]);
  }
}

}  // namespace
}  // namespace marin
