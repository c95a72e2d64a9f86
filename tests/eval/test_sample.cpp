// Incremental decoding against the full-sequence forward (every position, local ring buffers
// wrapped, special tensors perturbed), token sampling, and `marin sample` end to end.
#include <gtest/gtest.h>

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "cli_util.hpp"
#include "core/error.hpp"
#include "eval/sampler.hpp"
#include "model/model.hpp"

using namespace marin;
namespace fs = std::filesystem;

namespace {

// Random init with every special tensor moved off its init (gains ≠ 1, head gate ≠ 0,
// SConv ≠ identity, as tests/model/test_gradcheck.cpp does) and a non-zero router bias.
template <class T>
void perturb(Model<T>& m, uint64_t seed) {
  m.init(seed);
  Rng rng(seed + 100);
  for (auto& t : m.table().params()) {
    const bool bias = t.name.find("router_bias") != std::string::npos;
    const double scale = bias ? 0.5 : (t.init == Init::Normal ? 0.0 : 0.3);
    for (int64_t i = 0; i < t.size; ++i) m.params()[t.offset + i] += T(scale * rng.normal());
  }
}

struct Compare {
  double max_abs = 0, max_logit = 0;
  double rel() const { return max_abs / std::max(1.0, max_logit); }
};

// Runs the full forward on B rows of seq_len tokens, then the decoder row by row (reset between
// rows), comparing the logits at every one of the first n positions of every row.
template <class T>
Compare check_incremental(const ModelConfig& c, int B, int64_t n, uint64_t seed) {
  Model<T> m(c, B);
  perturb(m, seed);
  const int64_t S = c.seq_len, V = c.vocab_size;
  Rng rng(seed * 7 + 1);
  std::vector<int32_t> tokens(size_t(B) * S), labels(size_t(B) * S);
  for (auto& t : tokens) t = int32_t(rng.next_u64() % V);
  for (size_t i = 0; i < labels.size(); ++i) labels[i] = tokens[(i + 1) % labels.size()];
  m.forward(Batch{B, tokens.data(), labels.data(), nullptr});
  const T* full = m.logits();
  Decoder<T> dec(m);
  Compare r;
  for (int b = 0; b < B; ++b) {
    dec.reset();
    for (int64_t t = 0; t < n; ++t) {
      const T* inc = dec.step(tokens[b * S + t]);
      const T* ref = full + (b * S + t) * V;
      for (int64_t v = 0; v < V; ++v) {
        r.max_abs = std::max(r.max_abs, std::abs(double(inc[v]) - double(ref[v])));
        r.max_logit = std::max(r.max_logit, std::abs(double(ref[v])));
      }
    }
  }
  return r;
}

ModelConfig tiny() {
  ModelConfig c = ModelConfig::preset("tiny");  // seq_len 64, window 32, layers 0-2 local, 3 global
  c.init_scale = 2.0;                           // logits of order 1-10, not all near zero
  return c;
}

}  // namespace

TEST(Decoder, MatchesFullForwardDouble) {
  const ModelConfig c = tiny();
  ASSERT_EQ(c.seq_len, 64);
  ASSERT_EQ(c.sliding_window, 32);
  const Compare r = check_incremental<double>(c, 2, c.seq_len, 1);
  fmt::print("double, tiny (S 64, W 32): max |Δlogit| {:.3g}, max |logit| {:.3g}\n", r.max_abs,
             r.max_logit);
  EXPECT_GT(r.max_logit, 1.0);
  EXPECT_LT(r.rel(), 1e-10);
}

TEST(Decoder, MatchesFullForwardFloat) {
  const ModelConfig c = tiny();
  const Compare r = check_incremental<float>(c, 2, c.seq_len, 2);
  fmt::print("float, tiny (S 64, W 32): max |Δlogit| {:.3g}, max |logit| {:.3g}\n", r.max_abs,
             r.max_logit);
  EXPECT_LT(r.rel(), 1e-4);
}

TEST(Decoder, MatchesFullForwardSmallWindowOtherSites) {
  // The ring wraps seven times; only the mlp SConv site; two global layers; kernel 3; GQA 4:1.
  ModelConfig c = tiny();
  c.sliding_window = 8;
  c.global_every = 2;
  c.sconv_sites = {"mlp"};
  c.sconv_kernel = 3;
  c.kv_heads_local = 2;
  c.kv_heads_global = 2;
  const Compare r = check_incremental<double>(c, 1, c.seq_len, 3);
  EXPECT_LT(r.rel(), 1e-10) << r.max_abs;
  // And a window as wide as the row (no wrap), k and attn sites only.
  c = tiny();
  c.seq_len = 32;
  c.sliding_window = 32;
  c.sconv_sites = {"k", "attn"};
  const Compare r2 = check_incremental<double>(c, 1, 32, 4);
  EXPECT_LT(r2.rel(), 1e-10) << r2.max_abs;
}

// Model::decode's batched form: five sequences that start at different steps (so every call
// mixes positions, rings wrapped and not, and sequences at position 0), one restarted midway,
// against each sequence decoded alone through its own Decoder.
template <class T>
Compare check_batched(const ModelConfig& c, uint64_t seed) {
  Model<T> m(c, 1);
  perturb(m, seed);
  const int64_t S = c.seq_len, V = c.vocab_size, n = 5;
  Rng rng(seed * 11 + 3);
  std::vector<std::unique_ptr<DecodeCache<T>>> cache;
  std::vector<std::unique_ptr<Decoder<T>>> alone;
  for (int64_t i = 0; i < n; ++i) {
    cache.push_back(std::make_unique<DecodeCache<T>>(c));
    alone.push_back(std::make_unique<Decoder<T>>(m));
  }
  Compare r;
  int64_t calls = 0;
  for (int64_t step = 0; step < S + 4 * 9; ++step) {
    std::vector<int32_t> tokens;
    std::vector<DecodeCache<T>*> running;
    std::vector<int64_t> which;
    for (int64_t i = 0; i < n; ++i) {
      if (step < 9 * i || cache[size_t(i)]->pos >= S) continue;  // not started, or full
      if (i == 2 && step == 40) {  // sequence 2 starts over while the others go on
        cache[size_t(i)]->reset();
        alone[size_t(i)]->reset();
      }
      tokens.push_back(int32_t(rng.next_u64() % uint64_t(V)));
      running.push_back(cache[size_t(i)].get());
      which.push_back(i);
    }
    if (which.empty()) continue;
    m.decode(tokens.data(), running.data(), int64_t(which.size()));
    ++calls;
    for (size_t j = 0; j < which.size(); ++j) {
      const T* ref = alone[size_t(which[j])]->step(tokens[j]);
      const T* got = running[j]->logits.data();
      for (int64_t v = 0; v < V; ++v) {
        r.max_abs = std::max(r.max_abs, std::abs(double(got[v]) - double(ref[v])));
        r.max_logit = std::max(r.max_logit, std::abs(double(ref[v])));
      }
    }
  }
  EXPECT_GT(calls, S);
  return r;
}

TEST(BatchedDecode, SequencesAtTheirOwnPositionsMatchEachDecodedAlone) {
  ModelConfig c = tiny();
  c.seq_len = 32;
  c.sliding_window = 8;  // the local rings wrap
  c.kv_heads_local = 2;
  c.kv_heads_global = 2;
  const Compare d = check_batched<double>(c, 21);
  EXPECT_GT(d.max_logit, 1.0);
  EXPECT_LT(d.rel(), 1e-10) << d.max_abs;
  c = tiny();
  c.seq_len = 32;
  c.sliding_window = 16;
  const Compare f = check_batched<float>(c, 22);
  EXPECT_LT(f.rel(), 1e-4) << f.max_abs;
}

TEST(BatchedDecode, RefusesMoreSequencesThanTheModelHoldsAndBadTokens) {
  ModelConfig c = tiny();
  c.seq_len = 8;
  c.sliding_window = 8;
  Model<float> m(c, 1, ModelUse::Inference);
  m.init(1);
  std::vector<std::unique_ptr<DecodeCache<float>>> cache;
  std::vector<DecodeCache<float>*> p;
  for (int i = 0; i < 9; ++i) {
    cache.push_back(std::make_unique<DecodeCache<float>>(c));
    p.push_back(cache.back().get());
  }
  std::vector<int32_t> tokens(9, 1);
  EXPECT_THROW(m.decode(tokens.data(), p.data(), 9), Error);  // 9 > max_batch · seq_len = 8
  tokens[3] = int32_t(c.vocab_size);
  try {
    m.decode(tokens.data(), p.data(), 4);
    ADD_FAILURE() << "an id outside the vocabulary was decoded";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("outside the vocabulary"), std::string::npos) << e.what();
  }
}

// What evaluation and `marin sample` build: the same forward and decoding, no gradient memory.
TEST(Decoder, InferenceModelHasNoGradientsAndTheSameLogits) {
  const ModelConfig c = tiny();
  Model<double> train(c, 1);
  perturb(train, 5);
  Model<double> infer(c, 1, ModelUse::Inference);
  std::copy(train.params().begin(), train.params().end(), infer.params().begin());
  EXPECT_EQ(infer.use(), ModelUse::Inference);
  EXPECT_EQ(infer.grads().size(), 0u);
  EXPECT_EQ(train.grads().size(), train.params().size());

  const int64_t S = c.seq_len, V = c.vocab_size;
  Rng rng(9);
  std::vector<int32_t> tokens(static_cast<size_t>(S)), labels(static_cast<size_t>(S));
  for (auto& t : tokens) t = int32_t(rng.next_u64() % V);
  for (int64_t i = 0; i < S; ++i) labels[i] = tokens[(i + 1) % S];
  const Batch b{1, tokens.data(), labels.data(), nullptr};
  EXPECT_EQ(train.forward(b).loss, infer.forward(b).loss);
  EXPECT_TRUE(std::equal(train.logits(), train.logits() + S * V, infer.logits()));
  Decoder<double> dt(train), di(infer);
  for (int64_t t = 0; t < 8; ++t) {
    const double* a = dt.step(tokens[t]);
    const double* z = di.step(tokens[t]);
    EXPECT_TRUE(std::equal(a, a + V, z)) << "position " << t;
  }
  try {
    infer.backward();
    ADD_FAILURE() << "backward() of an inference model ran";
  } catch (const std::exception& e) {
    EXPECT_NE(std::string(e.what()).find("inference"), std::string::npos) << e.what();
  }
}

// In bf16 (and its emulation) the GEMMs read a bf16 copy of the weights (kernels::WeightCopy):
// a forward after the weights changed computes with the new ones (a fresh model's bits), a
// batch that says its weights are the last forward's reuses the copy (so the copy is what is
// read), and a decoder converts at its first token, again after a reset.
TEST(WeightCopy, ForwardAndDecodingComputeWithTheWeightsOfTheMoment) {
  const ModelConfig c = tiny();
  std::vector<kernels::Dtype> dtypes = {kernels::Dtype::bf16_emulated};
  if (kernels::bf16_gemm_supported()) dtypes.push_back(kernels::Dtype::bf16);
  const int64_t S = c.seq_len, V = c.vocab_size;
  std::vector<int32_t> tokens(static_cast<size_t>(S)), labels(tokens.size());
  Rng rng(9);
  for (auto& t : tokens) t = int32_t(rng.next_u64() % V);
  for (size_t i = 0; i + 1 < tokens.size(); ++i) labels[i] = tokens[i + 1];
  labels.back() = -1;
  auto decoded = [&](Decoder<float>& dec) {
    dec.reset();
    std::vector<float> out;
    for (int t = 0; t < 5; ++t) {
      const float* l = dec.step(tokens[size_t(t)]);
      out.insert(out.end(), l, l + V);
    }
    return out;
  };
  for (const kernels::Dtype d : dtypes) {
    SCOPED_TRACE(kernels::dtype_name(d));
    const kernels::DtypeScope scope(d);
    Model<float> m(c, 1), fresh(c, 1);
    perturb(m, 3);
    Batch b{1, tokens.data(), labels.data(), nullptr};
    const double before = m.forward(b).loss;
    Decoder<float> dec(m);
    const std::vector<float> before_decoded = decoded(dec);
    // The weights change, as in an optimizer step: the LM head, which only GEMMs read (the
    // norms' gains, the router and the embedding read the fp32 weights themselves).
    const ParamInfo& head = m.table().at("lm_head");
    for (int64_t i = 0; i < head.size; ++i) m.params()[head.offset + i] *= -1.5f;
    std::copy(m.params().data(), m.params().data() + m.params().size(), fresh.params().data());
    b.same_weights = true;
    EXPECT_EQ(m.forward(b).loss, before) << "same_weights did not reuse the copy";
    b.same_weights = false;
    const double after = m.forward(b).loss;
    EXPECT_NE(after, before);
    EXPECT_EQ(after, fresh.forward(b).loss) << "the forward computed with stale weights";
    Decoder<float> fresh_dec(fresh);
    const std::vector<float> after_decoded = decoded(dec);
    EXPECT_NE(after_decoded, before_decoded);
    EXPECT_EQ(after_decoded, decoded(fresh_dec)) << "the decoder computed with stale weights";
  }
}

// The copy's memory is counted before the model allocates (Model::weight_copy_bytes_bound, in
// the compute dtype in force when it is made): what a training step and an inference forward of
// `tiny` make stays within it, and the bound is less than twice what they make, in every dtype
// (none in fp32); in bf16 they make the blocked layouts only, not the plain copy (which decoding
// would make); a refresh in another dtype frees the last one's copy; and a model refused for its
// memory names the copy among what it needed.
TEST(WeightCopy, HoldsNoMoreThanTheModelAdmitted) {
  const ModelConfig c = tiny();
  std::vector<kernels::Dtype> dtypes = {kernels::Dtype::fp32, kernels::Dtype::bf16_emulated};
  if (kernels::bf16_gemm_supported()) dtypes.push_back(kernels::Dtype::bf16);
  const int B = 2;
  std::vector<int32_t> tokens(size_t(B * c.seq_len)), labels(tokens.size());
  Rng rng(4);
  for (auto& t : tokens) t = int32_t(rng.next_u64() % uint64_t(c.vocab_size));
  for (size_t i = 0; i + 1 < tokens.size(); ++i) labels[i] = tokens[i + 1];
  const Batch b{B, tokens.data(), labels.data(), nullptr};
  for (const kernels::Dtype d : dtypes)
    for (const ModelUse use : {ModelUse::Training, ModelUse::Inference}) {
      SCOPED_TRACE(fmt::format("{}, {}", kernels::dtype_name(d),
                               use == ModelUse::Training ? "training" : "inference"));
      const kernels::DtypeScope scope(d);
      Model<float> m(c, B, use);
      perturb(m, 5);
      m.forward(b);
      if (use == ModelUse::Training) m.backward();
      const int64_t held = m.weight_copy_bytes(),
                    bound = Model<float>::weight_copy_bytes_bound(m.table(), d, use);
      EXPECT_LE(held, bound);
      const int64_t copy = kernels::WeightCopy::copy_bytes(d, m.table().total());
      if (d == kernels::Dtype::bf16) {  // the blocked layouts only: no product read the plain copy
        EXPECT_GT(held, 0) << "no blocked layouts were made";
        EXPECT_LE(held, bound - copy) << "a batched forward or a training step made the plain copy";
        EXPECT_LT(bound - copy, 2 * held + 1);
      } else {
        EXPECT_EQ(held, copy);
        EXPECT_LT(bound, 2 * held + 1);
      }
      {
        const kernels::DtypeScope fp32(kernels::Dtype::fp32);
        m.forward(b);
        EXPECT_EQ(m.weight_copy_bytes(), 0) << "a refresh in fp32 kept the copy";
      }
    }
  const kernels::DtypeScope emulated(kernels::Dtype::bf16_emulated);
  const std::string e = marin::testing::error_of([&] { Model<float> m(c, 1 << 30); });
  EXPECT_NE(e.find("their bf16-emulated copy"), std::string::npos) << e;
}

TEST(Decoder, StopsAtSeqLenAndRejectsBadIds) {
  ModelConfig c = tiny();
  c.seq_len = 8;
  c.sliding_window = 4;
  Model<float> m(c, 1);
  m.init(1);
  Decoder<float> dec(m);
  EXPECT_THROW(dec.step(int32_t(c.vocab_size)), Error);
  EXPECT_THROW(dec.step(-1), Error);
  std::vector<int32_t> toks(8, 5);
  dec.prefill(toks.data(), 8);
  EXPECT_EQ(dec.position(), 8);
  EXPECT_THROW(dec.step(1), Error);
  dec.reset();
  EXPECT_EQ(dec.position(), 0);
  EXPECT_NO_THROW(dec.step(1));
  EXPECT_GT(dec.state_bytes(), 0);
}

// ---- sampling ----

TEST(Sampling, GreedyIsArgmaxAndTopK1IsGreedy) {
  Rng data(5);
  std::vector<float> logits(300);
  for (auto& x : logits) x = float(3 * data.normal());
  const int32_t arg = int32_t(std::max_element(logits.begin(), logits.end()) - logits.begin());
  Rng rng(1);
  const uint64_t before = rng.state();
  EXPECT_EQ(sample_token(logits.data(), 300, SamplingOptions{0.0, 0, 1.0}, rng), arg);
  EXPECT_EQ(rng.state(), before);  // greedy draws nothing
  for (int i = 0; i < 50; ++i)
    EXPECT_EQ(sample_token(logits.data(), 300, SamplingOptions{1.5, 1, 1.0}, rng), arg);
  // A masked argmax is skipped.
  std::vector<uint8_t> allowed(300, 1);
  allowed[arg] = 0;
  const int32_t g2 =
      sample_token(logits.data(), 300, SamplingOptions{0.0, 0, 1.0}, rng, allowed.data());
  EXPECT_NE(g2, arg);
  for (int i = 0; i < 200; ++i)
    EXPECT_NE(sample_token(logits.data(), 300, SamplingOptions{2.0, 0, 1.0}, rng, allowed.data()),
              arg);
}

TEST(Sampling, SeededAndReproducible) {
  Rng data(6);
  std::vector<double> logits(100);
  for (auto& x : logits) x = data.normal();
  auto draw = [&](uint64_t seed) {
    Rng rng(seed);
    std::vector<int32_t> out;
    for (int i = 0; i < 64; ++i)
      out.push_back(sample_token(logits.data(), 100, SamplingOptions{1.0, 20, 0.9}, rng));
    return out;
  };
  EXPECT_EQ(draw(42), draw(42));
  EXPECT_NE(draw(42), draw(43));
}

TEST(Sampling, TopKTopPAndTemperature) {
  // Probabilities 0.5, 0.3, 0.15, 0.05.
  const std::vector<double> p = {0.5, 0.3, 0.15, 0.05};
  std::vector<double> logits;
  for (double x : p) logits.push_back(std::log(x));
  Rng rng(9);
  const int N = 20000;
  auto freq = [&](SamplingOptions o) {
    std::vector<int> n(4, 0);
    for (int i = 0; i < N; ++i) n[sample_token(logits.data(), 4, o, rng)]++;
    std::vector<double> f(4);
    for (int i = 0; i < 4; ++i) f[i] = double(n[i]) / N;
    return f;
  };
  // Temperature 1, no filter: the distribution itself.
  auto f = freq({1.0, 0, 1.0});
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(f[i], p[i], 0.015) << i;
  // top-k 2: renormalised over {0, 1}.
  f = freq({1.0, 2, 1.0});
  EXPECT_NEAR(f[0], 0.625, 0.015);
  EXPECT_EQ(f[2] + f[3], 0.0);
  // top-p 0.7: the smallest prefix reaching 0.7 is {0, 1}; top-p 0.5: {0} alone.
  f = freq({1.0, 0, 0.7});
  EXPECT_NEAR(f[0], 0.625, 0.015);
  EXPECT_EQ(f[2] + f[3], 0.0);
  f = freq({1.0, 0, 0.5});
  EXPECT_EQ(f[0], 1.0);
  // Temperature 2 flattens: p_i ∝ sqrt(p_i).
  f = freq({2.0, 0, 1.0});
  double z = 0;
  for (double x : p) z += std::sqrt(x);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(f[i], std::sqrt(p[i]) / z, 0.015) << i;
  // A tiny temperature is (almost surely) greedy.
  f = freq({0.01, 0, 1.0});
  EXPECT_EQ(f[0], 1.0);
}

TEST(Sampling, Utf8CompletePrefix) {
  EXPECT_EQ(utf8_complete_prefix(""), 0u);
  EXPECT_EQ(utf8_complete_prefix("abc"), 3u);
  EXPECT_EQ(utf8_complete_prefix("a\xC3"), 1u);
  EXPECT_EQ(utf8_complete_prefix("a\xC3\xA9"), 3u);
  EXPECT_EQ(utf8_complete_prefix("\xE2\x82"), 0u);
  EXPECT_EQ(utf8_complete_prefix("x\xE2\x82\xAC"), 4u);
  EXPECT_EQ(utf8_complete_prefix("\xF0\x9F\x98"), 0u);
  EXPECT_EQ(utf8_complete_prefix("\xF0\x9F\x98\x80"), 4u);
  EXPECT_EQ(utf8_complete_prefix("a\x80"), 2u);  // stray continuation: nothing to wait for
}

// ---- the CLI ----

TEST(SampleCli, GeneratesTextAndNamesAMissingTokenizer) {
  marin::testing::TempDir dir("sample");
  const std::string ck = dir.str("ck");
  auto r = marin::testing::run("init --preset tiny --out " + ck);
  ASSERT_EQ(r.code, 0) << r.out;
  // No tokenizer yet: a clear error naming the file.
  r = marin::testing::run("sample --checkpoint " + ck + " --prompt 'In the beginning'");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find(ck + "/tokenizer.json"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("missing"), std::string::npos) << r.out;

  const std::string corpus =
      std::string(MARIN_SOURCE_DIR) + "/data/fixture/bible_kjv/train-00000.jsonl";
  r = marin::testing::run("tokenizer train --vocab-size 512 --in " + corpus + " --out " + ck +
                          "/tokenizer.json");
  ASSERT_EQ(r.code, 0) << r.out;

  // Seeded sampling is reproducible; stdout carries the text, stderr the speed.
  const std::string cmd = "sample --checkpoint " + ck +
                          " --prompt 'In the beginning God' --max-tokens 12 --temperature 0.9 "
                          "--top-k 50 --top-p 0.95 --seed 7";
  auto a = marin::testing::run(cmd);
  auto b = marin::testing::run(cmd);
  ASSERT_EQ(a.code, 0) << a.out;
  EXPECT_NE(a.out.find("tok/s"), std::string::npos) << a.out;
  const auto text = [](const std::string& out) { return out.substr(0, out.find("sample: ")); };
  EXPECT_EQ(text(a.out), text(b.out));
  EXPECT_GT(text(a.out).size(), 1u) << a.out;  // some text beyond the final newline

  // Greedy runs to max tokens (or EOS) and prints text.
  r = marin::testing::run("sample --checkpoint " + ck +
                          " --prompt 'And God said' --max-tokens 5 --temperature 0");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("generated"), std::string::npos) << r.out;
  // stdout reads as the whole text: the prompt, then its continuation (--no-echo: only that).
  EXPECT_EQ(r.out.rfind("And God said", 0), 0u) << r.out;
  r = marin::testing::run("sample --checkpoint " + ck +
                          " --prompt 'And God said' --max-tokens 5 --temperature 0 --no-echo");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.rfind("And God said", 0), 0u) << r.out;

  // Bad options are errors, not crashes.
  r = marin::testing::run("sample --checkpoint " + ck + " --prompt x --top-p 0");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--top-p"), std::string::npos) << r.out;
  r = marin::testing::run("sample --checkpoint " + ck + " --prompt ''");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("empty"), std::string::npos) << r.out;
}

// `marin bench --decode` times the decoder `marin sample` uses: a prompt, then one token at a
// time, in auto's dtype (bf16 where the CPU runs it, as for every command), lengths that fit by
// default; a prompt and continuation that do not fit are refused.
TEST(SampleCli, BenchDecodeTimesTheDecoder) {
  auto r = marin::testing::run(
      "bench --decode --preset tiny --prompt-tokens 8 --max-tokens 16 --iters 1 --warmup 0 "
      "--threads 1 --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto j = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  EXPECT_EQ(j["dtype"], kernels::bf16_gemm_supported() ? "bf16" : "fp32");
  EXPECT_EQ(j["prompt_tokens"].get<int64_t>(), 8);
  EXPECT_EQ(j["max_tokens"].get<int64_t>(), 16);
  EXPECT_GT(j["decode_tokens_per_second"].get<double>(), 0);
  EXPECT_GT(j["prefill_tokens_per_second"].get<double>(), 0);
  // The state of 24 positions: what a Decoder over the same model holds after them.
  Model<float> m(ModelConfig::preset("tiny"), 1, ModelUse::Inference);
  m.init(1);
  Decoder<float> dec(m);
  std::vector<int32_t> ids(24, 1);
  dec.prefill(ids.data(), 24);
  EXPECT_EQ(j["decode_state_bytes"].get<int64_t>(), dec.state_bytes());

  // Without lengths: 64 and 256, or a quarter of a short context and the rest of it.
  r = marin::testing::run("bench --decode --preset tiny --iters 1 --warmup 0 --json");
  ASSERT_EQ(r.code, 0) << r.out;
  const auto d = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  EXPECT_EQ(d["prompt_tokens"].get<int64_t>(), 16);
  EXPECT_EQ(d["max_tokens"].get<int64_t>(), 48);

  r = marin::testing::run("bench --decode --preset tiny --prompt-tokens 60 --max-tokens 16");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("must be >= 1 and fit in the context together (seq_len 64)"),
            std::string::npos)
      << r.out;
  r = marin::testing::run("bench --decode --train --preset tiny");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("give --train or --decode, not both"), std::string::npos) << r.out;
}
