// generate_until (src/eval/tasks/generation.*): greedy responses against an independent
// token-by-token argmax of the full forward, `until` and max_gen_toks, left truncation, thread
// independence, the harness's filters and exact_match options (expected values are what the
// harness's Python computes: lm_eval/filters/*.py, HF evaluate's exact_match), a rendered task
// scored into the results layout, and the refusals.
#include <gtest/gtest.h>
#include <omp.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "cli_util.hpp"
#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/utf8.hpp"
#include "data/tokenizer/tokenizer.hpp"
#include "eval/contamination.hpp"
#include "eval/tasks/generation.hpp"
#include "eval/tasks/task_items.hpp"
#include "eval/tasks/task_scorer.hpp"
#include "model/model.hpp"

namespace marin {
namespace {
namespace fs = std::filesystem;
using json = nlohmann::json;

const std::string kFixture = std::string(MARIN_SOURCE_DIR) + "/data/fixture";

struct TinySetup {
  ModelConfig cfg = ModelConfig::preset("tiny");
  Tokenizer tok;
  std::vector<std::string> texts;
  std::unique_ptr<Model<float>> model;
  TinySetup() {
    eval::for_each_jsonl_document(kFixture + "/bible_kjv/train-00000.jsonl",
                                  [&](const text_corpus::Document& d) { texts.push_back(d.text); });
    tok = Tokenizer::train(texts, 512);
    model = std::make_unique<Model<float>>(cfg, 1, ModelUse::Inference);
    model->init(11);
  }
};
TinySetup& setup() {
  static TinySetup s;
  return s;
}

// Written independently of generation.cpp: the whole sequence through Model::forward after each
// token, argmax of the last position's logits over the ids the tokenizer has.
std::vector<uint32_t> brute_greedy(const std::string& context, int64_t max_gen) {
  TinySetup& s = setup();
  const int64_t S = s.cfg.seq_len, V = s.cfg.vocab_size;
  std::vector<uint32_t> seq = s.tok.encode(context);
  if (int64_t(seq.size()) > S - max_gen) seq.erase(seq.begin(), seq.end() - (S - max_gen));
  std::vector<uint32_t> gen;
  for (int64_t k = 0; k < max_gen; ++k) {
    std::vector<int32_t> tokens(size_t(S), 0), labels(size_t(S), -1);
    for (size_t i = 0; i < seq.size(); ++i) tokens[i] = int32_t(seq[i]);
    labels[seq.size() - 1] = 0;
    s.model->forward({1, tokens.data(), labels.data(), nullptr});
    const float* z = s.model->logits() + (seq.size() - 1) * size_t(V);
    int64_t best = -1;
    for (int64_t v = 0; v < V; ++v)
      if (v < int64_t(s.tok.vocab_size()) && s.tok.has_token(uint32_t(v)) &&
          (best < 0 || z[v] > z[best]))
        best = v;
    if (uint32_t(best) == *s.tok.eos()) break;
    gen.push_back(uint32_t(best));
    seq.push_back(uint32_t(best));
  }
  return gen;
}

// Python's bytes.decode("utf-8", errors="replace") for one stray byte per invalid position.
std::string replaced(const std::string& t) {
  std::string out;
  for (size_t i = 0; i < t.size();) {
    uint32_t cp = 0;
    const size_t n = utf8::decode(t, i, cp);
    out += n ? t.substr(i, n) : std::string("\xEF\xBF\xBD");
    i += n ? n : 1;
  }
  return out;
}

std::vector<std::string> contexts() {
  const auto& t = setup().texts;
  // Short prompts and one longer than seq_len − max_gen_toks (left-truncated).
  return {t[0].substr(0, 40), t[1].substr(0, 25), "And God said", t[2] + " " + t[3]};
}

TEST(Generation, GreedyEqualsArgmaxOfTheFullForward) {
  TinySetup& s = setup();
  eval::GenerationKwargs g;
  g.max_gen_toks = 12;
  const auto ctx = contexts();
  ASSERT_GT(s.tok.encode(ctx[3]).size(), size_t(s.cfg.seq_len));
  const auto got = eval::generate_greedy(*s.model, s.tok, ctx, g);
  ASSERT_EQ(got.size(), ctx.size());
  for (size_t i = 0; i < ctx.size(); ++i) {
    const auto want = brute_greedy(ctx[i], g.max_gen_toks);
    EXPECT_EQ(got[i], replaced(s.tok.decode(want))) << "context " << i;
    EXPECT_LE(want.size(), size_t(g.max_gen_toks));
  }
}

TEST(Generation, MaxGenToksAndUntilCut) {
  TinySetup& s = setup();
  const std::string ctx = contexts()[0];
  const auto full = brute_greedy(ctx, 16);
  ASSERT_GE(full.size(), 8u) << "the tiny model stopped at EOS early";
  eval::GenerationKwargs g;
  g.max_gen_toks = 5;
  EXPECT_EQ(eval::generate_greedy(*s.model, s.tok, {ctx}, g)[0],
            replaced(s.tok.decode(std::vector<uint32_t>(full.begin(), full.begin() + 5))));
  // A stop string taken from the middle of the 16-token response: the response is cut before
  // its first occurrence; an earlier second stop string wins.
  const std::string text = replaced(s.tok.decode(full));
  ASSERT_GE(text.size(), 8u);
  g.max_gen_toks = 16;
  g.until = {text.substr(text.size() / 2, 2)};
  std::string want = text.substr(0, text.find(g.until[0]));
  EXPECT_EQ(eval::generate_greedy(*s.model, s.tok, {ctx}, g)[0], want);
  g.until.push_back(text.substr(1, 1));
  want = text.substr(0, std::min(text.find(g.until[0]), text.find(g.until[1])));
  EXPECT_EQ(eval::generate_greedy(*s.model, s.tok, {ctx}, g)[0], want);
}

// Batched decoding: more prompts than the batch, of different lengths, finishing at different
// steps (a stop string ends some early), so slots are refilled while others run; every batch size
// gives the responses of one prompt at a time and of the full forward's argmax.
TEST(Generation, EveryBatchSizeGivesTheResponsesOfOnePromptAtATime) {
  TinySetup& s = setup();
  eval::GenerationKwargs g;
  g.max_gen_toks = 9;
  std::vector<std::string> ctx = contexts();
  const auto& t = s.texts;
  for (size_t i = 0; i < 5; ++i) ctx.push_back(t[i % t.size()].substr(i * 7, 10 + 6 * i));
  const auto first = brute_greedy(ctx[4], g.max_gen_toks);
  ASSERT_GE(first.size(), 4u);
  g.until = {replaced(s.tok.decode(first)).substr(3, 1)};  // some prompts stop early
  const auto one = eval::generate_greedy(*s.model, s.tok, ctx, g, 1);
  ASSERT_EQ(one.size(), ctx.size());
  std::set<size_t> lengths;
  for (const std::string& r : one) lengths.insert(r.size());
  EXPECT_GE(lengths.size(), 3u) << "responses of too few lengths to exercise refilled slots";
  for (int64_t batch : {2, 3, 32})
    EXPECT_EQ(eval::generate_greedy(*s.model, s.tok, ctx, g, batch), one) << "batch " << batch;
}

TEST(Generation, SameResponsesAtAnyThreadCount) {
  TinySetup& s = setup();
  eval::GenerationKwargs g;
  g.max_gen_toks = 10;
  const int before = omp_get_max_threads();
  omp_set_num_threads(1);
  const auto one = eval::generate_greedy(*s.model, s.tok, contexts(), g);
  omp_set_num_threads(2);
  const auto two = eval::generate_greedy(*s.model, s.tok, contexts(), g);
  omp_set_num_threads(before);
  EXPECT_EQ(one, two);
}

TEST(Generation, RegexFilterFollowsTheHarness) {
  auto regex = [](std::string pattern, int64_t group, std::string resp) {
    eval::FilterPipeline p{"x", {}};
    eval::FilterStep st;
    st.function = "regex";
    if (!pattern.empty()) st.regex_pattern = pattern;
    st.group_select = group;
    p.steps.push_back(st);
    return eval::apply_filter(p, {resp}).values.at(0);
  };
  const std::string r = "a #### 12 b #### -3,4";
  EXPECT_EQ(regex("", 0, r), "12");  // the default pattern: gsm8k's "#### (\-?[0-9\.\,]+)"
  EXPECT_EQ(regex("", 1, r), "-3,4");
  EXPECT_EQ(regex("", -1, r), "-3,4");
  EXPECT_EQ(regex("", 0, "no answer"), "[invalid]");
  EXPECT_EQ(regex("(a)|(b)", 0, "xbx"), "b");                 // a tuple: its first non-empty group
  EXPECT_EQ(regex("answer:(.*)", 0, "answer:  42  "), "42");  // stripped
  EXPECT_EQ(regex("\\d+", 0,
                  "\xd9\xa3"
                  "4 x"),
            "\xd9\xa3"
            "4");  // \d is Unicode, as in Python
  // Python's findall for empty matches (3.7+): re.findall('x*', 'axb') == ['', 'x', '', ''].
  const auto m = eval::regex_findall("x*", "axb");
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[0][0], "");
  EXPECT_EQ(m[1][0], "x");
  EXPECT_EQ(eval::regex_remove("\\s*", "a b"), "ab");  // re.sub(r'\s*', '', 'a b')
}

TEST(Generation, OtherFilters) {
  auto run = [](std::vector<std::string> fns, std::vector<std::string> resps) {
    eval::FilterPipeline p{"x", {}};
    for (auto& f : fns) p.steps.push_back({f});
    return eval::apply_filter(p, resps);
  };
  auto f = run({"remove_whitespace", "take_first"}, {"  two spaces"});
  EXPECT_TRUE(f.single);
  EXPECT_EQ(f.values[0], " two spaces");  // the harness removes one leading space
  EXPECT_EQ(run({"lowercase"}, {"ÉCOLE Ab"}).values[0], "école ab");
  EXPECT_EQ(run({"uppercase"}, {"école ab"}).values[0], "ÉCOLE AB");
  // majority_vote: Counter.most_common(1), the first seen among equal counts; a list of one.
  f = run({"majority_vote"}, {"b", "a", "a", "b", "c"});
  EXPECT_FALSE(f.single);
  EXPECT_EQ(f.values, std::vector<std::string>{"b"});
  EXPECT_EQ(run({"majority_vote", "take_first"}, {"x", "y", "y"}).to_json(), json("y"));
}

TEST(Generation, ExactMatchOptionsAsHfEvaluate) {
  eval::ExactMatchOptions o;
  EXPECT_EQ(eval::exact_match("Hello", "hello", o), 0.0);
  o.ignore_case = true;
  EXPECT_EQ(eval::exact_match("Hello", "hello", o), 1.0);
  EXPECT_EQ(eval::exact_match("ÉCOLE", "école", o), 1.0);  // str.lower, Unicode
  // regexes_to_ignore run before lowercasing: "ABC" is removed from the reference only.
  o.regexes_to_ignore = {"ABC"};
  EXPECT_EQ(eval::exact_match("abc", "ABC", o), 0.0);
  eval::ExactMatchOptions p;
  p.ignore_punctuation = true;
  EXPECT_EQ(eval::exact_match("hello, world!", "hello world", p), 1.0);
  EXPECT_EQ(eval::exact_match("a\xe2\x80\x94"
                              "b",
                              "ab", p),
            0.0);  // string.punctuation: ASCII
  eval::ExactMatchOptions n;
  n.ignore_numbers = true;
  EXPECT_EQ(eval::exact_match("abc123", "abc", n), 1.0);
  eval::ExactMatchOptions gsm;  // gsm8k's metric_list
  gsm.ignore_case = gsm.ignore_punctuation = false;
  gsm.regexes_to_ignore = {",", "\\$", "(?s).*#### ", "\\.$"};
  EXPECT_EQ(eval::exact_match("$1,000.", "1000", gsm), 1.0);
  EXPECT_EQ(eval::exact_match("so #### 72", "72", gsm), 1.0);
  // A list target: any one matching counts.
  eval::Filtered f{{"Paris"}, true};
  EXPECT_EQ(eval::item_exact_match(f, {"London", "Paris"}, {}), 1.0);
  EXPECT_EQ(eval::item_exact_match(f, {"London"}, {}), 0.0);
}

json gen_header() {
  return {
      {"format", "marin-tasks/2"},
      {"task", "gen_tiny"},
      {"output_type", "generate_until"},
      {"num_fewshot", 0},
      {"metrics", {"exact_match"}},
      {"generation_kwargs", {{"until", {"\n\n"}}, {"max_gen_toks", 6}, {"do_sample", false}}},
      {"filter_list",
       {{{"name", "strict-match"},
         {"filter",
          {{{"function", "regex"}, {"regex_pattern", "(\\w+)"}}, {{"function", "take_first"}}}}},
        {{"name", "vote"},
         {"filter", {{{"function", "majority_vote"}}, {{"function", "take_first"}}}}}}},
      {"metric_list", {{{"metric", "exact_match"}, {"ignore_case", true}}}},
      {"repeats", 3}};
}

std::string task_file(const json& header, const std::vector<json>& docs) {
  const std::string path = ::testing::TempDir() + "gen_tiny.jsonl";
  std::string text = header.dump() + "\n";
  for (const json& d : docs) text += d.dump() + "\n";
  marin::testing::write_text(path, text);
  return path;
}

TEST(Generation, RenderedTaskIsScoredPerFilterInTheResultsLayout) {
  TinySetup& s = setup();
  const auto ctx = contexts();
  eval::GenerationKwargs g{{"\n\n"}, 6};
  const auto resp = eval::generate_greedy(*s.model, s.tok, {ctx[0], ctx[1]}, g);
  // Item 0's target is the first word of its own response (any case): a hit under strict-match;
  // item 1's list target holds the whole response: a hit under vote.
  const auto w0 = eval::regex_findall("(\\w+)", resp[0]);
  ASSERT_FALSE(w0.empty()) << resp[0];
  std::string upper;
  for (char c : w0[0][0]) upper += char(std::toupper(static_cast<unsigned char>(c)));
  const std::string file = task_file(
      gen_header(), {{{"doc_id", 0}, {"context", ctx[0]}, {"target", upper}, {"doc", {{"q", 1}}}},
                     {{"doc_id", 1}, {"context", ctx[1]}, {"target", {"nothing", resp[1]}}}});
  const eval::TaskItems t = eval::read_task_items(file);
  ASSERT_EQ(t.type, eval::OutputType::GenerateUntil);
  eval::TaskOptions o;
  o.log_samples = true;
  o.progress = false;
  const eval::TaskResults r = eval::score_tasks(*s.model, s.tok, {t}, o);
  const json j = r.to_json();
  const json& res = j["results"]["gen_tiny"];
  const double strict0 = 1.0,
               strict1 = eval::exact_match(eval::regex_findall("(\\w+)", resp[1]).empty()
                                               ? "[invalid]"
                                               : eval::regex_findall("(\\w+)", resp[1])[0][0],
                                           resp[1], {true, false, false, {}});
  EXPECT_DOUBLE_EQ(res["exact_match,strict-match"].get<double>(), (strict0 + strict1) / 2);
  const double vote0 = eval::exact_match(resp[0], upper, {true, false, false, {}});
  EXPECT_DOUBLE_EQ(res["exact_match,vote"].get<double>(), (vote0 + 1.0) / 2);
  EXPECT_TRUE(res.contains("exact_match_stderr,vote"));
  EXPECT_EQ(j["higher_is_better"]["gen_tiny"]["exact_match"], true);
  const json& smp = j["samples"]["gen_tiny"][0];
  EXPECT_EQ(smp["resps"], json::array({{resp[0], resp[0], resp[0]}}));  // repeats 3
  EXPECT_EQ(smp["filtered_resps"]["vote"], resp[0]);
  EXPECT_EQ(smp["doc"], json({{"q", 1}}));
}

// Under mpirun the ranks split the items (rank q takes q, q + R, …) and gather the responses: the
// results and samples at 3 ranks (7 items: uneven shares) are those of one process.
TEST(Generation, RanksSplitTheItemsAndGiveTheOneProcessResults) {
  marin::testing::TempDir d("gen-ranks");
  ASSERT_EQ(marin::testing::tiny_checkpoint_with_tokenizer(d), "");
  const auto ctx = contexts();
  std::vector<json> docs;
  for (int i = 0; i < 7; ++i)
    docs.push_back({{"doc_id", i},
                    {"context", ctx[size_t(i) % ctx.size()] + std::to_string(i)},
                    {"target", "x"}});
  const std::string file = task_file(gen_header(), docs);
  auto eval_json = [&](const std::string& launcher, const std::string& out) {
    const auto r = marin::testing::run_shell(
        launcher + " eval --checkpoint " + d.str("ck") + " --tasks " + file +
        " --no-audit --quiet --log-samples --gen-batch 2 --json " + d.str(out));
    EXPECT_EQ(r.code, 0) << r.out;
    json j = json::parse(marin::read_file(d.str(out)));
    return json{{"results", j["results"]}, {"samples", j["samples"]}};
  };
  const json one = eval_json(MARIN_BIN, "one.json");
  ASSERT_EQ(one["samples"]["gen_tiny"].size(), 7u);
  // --log-samples' harness file: a line per item and filter, with the filter's response.
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(d.path)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("samples_gen_tiny_", 0) != 0) continue;
    ++files;
    std::ifstream in(e.path());
    std::vector<json> lines;
    for (std::string l; std::getline(in, l);) lines.push_back(json::parse(l));
    ASSERT_EQ(lines.size(), 14u);
    EXPECT_EQ(lines[1]["filter"], "vote");
    EXPECT_EQ(lines[1]["filtered_resps"][0],
              one["samples"]["gen_tiny"][0]["filtered_resps"]["vote"]);
    EXPECT_EQ(lines[0]["arguments"]["gen_args_0"]["arg_0"],
              one["samples"]["gen_tiny"][0]["context"]);
  }
  EXPECT_EQ(files, 1);
  EXPECT_EQ(eval_json(marin::testing::mpirun_command(3), "three.json"), one);
  // Off a terminal, the task's progress is a plain line (issue 42); under 3 ranks rank 0 decodes
  // every third item and counts each as three, up to the task's 7.
  for (const std::string& launcher : {std::string(MARIN_BIN), marin::testing::mpirun_command(3)}) {
    const auto r =
        marin::testing::run_shell(launcher + " eval --checkpoint " + d.str("ck") + " --tasks " +
                                  file + " --no-audit --gen-batch 2 --progress-every 0.000001");
    EXPECT_EQ(r.code, 0) << r.out;
    EXPECT_NE(r.out.find("task gen_tiny 7/7 (100.0%)"), std::string::npos) << launcher << r.out;
  }
}

TEST(Generation, RefusalsNameTheField) {
  auto refusal = [](json h) {
    const std::string file = task_file(h, {{{"doc_id", 0}, {"context", "x"}, {"target", "y"}}});
    return marin::testing::error_of([&] { eval::read_task_items(file); });
  };
  json h = gen_header();
  h["generation_kwargs"]["do_sample"] = true;
  EXPECT_NE(refusal(h).find("generate_until: generation_kwargs.do_sample true is not supported "
                            "(greedy only)"),
            std::string::npos);
  h = gen_header();
  h["generation_kwargs"]["temperature"] = 0.7;
  EXPECT_NE(refusal(h).find("temperature 0.7 is not supported"), std::string::npos);
  h = gen_header();
  h["generation_kwargs"]["temperature"] = 0.0;  // greedy: accepted
  EXPECT_EQ(refusal(h), "");
  h = gen_header();
  h["filter_list"][0]["filter"][0]["function"] = "cot_filter";
  const std::string e = refusal(h);
  EXPECT_NE(e.find("gen_tiny.jsonl:1"), std::string::npos) << e;
  EXPECT_NE(e.find("filter function \"cot_filter\" is not supported"), std::string::npos) << e;
  h = gen_header();
  h["metric_list"][0]["metric"] = "f1";
  EXPECT_NE(refusal(h).find("metric \"f1\" is not supported"), std::string::npos);
  h = gen_header();
  h["filter_list"][0]["filter"][0]["regex_pattern"] = "(";
  EXPECT_NE(refusal(h).find("regex"), std::string::npos);
}

}  // namespace
}  // namespace marin
