// marin sample: text from a checkpoint by incremental decoding (KV cache + SConv taps), streamed
// to stdout as the tokens are produced. See docs/sampling.md.
#include <fmt/core.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>

#include "cli/command.hpp"
#include "cli/options.hpp"
#include "core/buffer.hpp"
#include "core/error.hpp"
#include "core/timer.hpp"
#include "data/tokenizer/tokenizer.hpp"
#include "eval/sampler.hpp"
#include "train/checkpoint.hpp"

namespace marin::cli {
namespace {

struct SampleOptions {
  DtypeOption dtype;
  std::string checkpoint, prompt;
  int64_t max_tokens = 128;
  SamplingOptions sampling;
  uint64_t seed = 0;
  bool echo = true;
  bool allow_nonfinite = false;
};

void write_out(std::string_view s) {
  if (s.empty()) return;
  std::fwrite(s.data(), 1, s.size(), stdout);
  std::fflush(stdout);
}

int run_sample(const SampleOptions& o) {
  const SamplingOptions& so = o.sampling;
  if (!std::isfinite(so.temperature) || so.temperature < 0)
    fail("--temperature must be a finite number >= 0 (0 = greedy), got {}", so.temperature);
  if (so.top_k < 0) fail("--top-k must be >= 0 (0 = off), got {}", so.top_k);
  if (!(so.top_p > 0 && so.top_p <= 1)) fail("--top-p must be in (0, 1], got {}", so.top_p);
  if (o.max_tokens < 0) fail("--max-tokens must be >= 0, got {}", o.max_tokens);

  const std::string tok_path = o.checkpoint + "/tokenizer.json";
  const ModelConfig c = load_config(o.checkpoint);
  if (!std::filesystem::exists(tok_path))
    fail(
        "{}: missing; sampling needs the checkpoint's tokenizer (train one with `marin tokenizer "
        "train --vocab-size {}` and put it there)",
        tok_path, c.vocab_size);
  const Tokenizer tok = Tokenizer::load(tok_path);
  if (int64_t(tok.vocab_size()) > c.vocab_size)
    fail("{}: {} tokens, but the model's vocab_size is {} (tokenizer and checkpoint do not match)",
         tok_path, tok.vocab_size(), c.vocab_size);
  o.dtype.apply();
  Model<float> model(c, 1, ModelUse::Inference);
  load_params(o.checkpoint, model.table(), model.params().data(), o.allow_nonfinite);
  Decoder<float> dec(model);

  std::vector<uint32_t> ids = tok.encode(o.prompt);
  if (ids.empty()) fail("--prompt is empty: give at least one character of text");
  if (int64_t(ids.size()) >= c.seq_len)
    fail("the prompt is {} tokens; the model's context is {} (seq_len), so at most {} fit",
         ids.size(), c.seq_len, c.seq_len - 1);
  std::vector<int32_t> prompt(ids.begin(), ids.end());

  // Ids that may be sampled: tokens the tokenizer has, and no special token except EOS.
  const std::optional<uint32_t> eos = tok.eos();
  std::vector<uint8_t> allowed(size_t(c.vocab_size), 0);
  for (uint32_t i = 0; i < tok.vocab_size(); ++i)
    allowed[i] = tok.has_token(i) && (!tok.is_special(i) || (eos && i == *eos));

  // The prompt first (dimmed on a terminal), so stdout reads as the whole text; --no-echo for the
  // continuation alone.
  if (o.echo) {
    const bool tty = isatty(fileno(stdout));
    write_out(tty ? "\x1b[2m" + o.prompt + "\x1b[0m" : o.prompt);
  }
  Timer t_prefill;
  const float* logits = dec.prefill(prompt.data(), int64_t(prompt.size()));
  const double prefill_s = t_prefill.seconds();

  Rng rng(o.seed);
  std::string pending;  // bytes of an incomplete UTF-8 sequence
  int64_t generated = 0;
  const char* stop = "max-tokens";
  Timer t_decode;
  while (generated < o.max_tokens) {
    const int32_t next = sample_token(logits, c.vocab_size, so, rng, allowed.data());
    ++generated;
    if (eos && uint32_t(next) == *eos) {
      stop = "EOS";
      break;
    }
    pending += tok.token_bytes(uint32_t(next));
    const size_t ready = utf8_complete_prefix(pending);
    write_out(std::string_view(pending).substr(0, ready));
    pending.erase(0, ready);
    if (generated == o.max_tokens) break;
    if (dec.position() >= dec.capacity()) {
      stop = "seq_len";
      break;
    }
    logits = dec.step(next);
  }
  write_out(pending);
  const double decode_s = t_decode.seconds();
  write_out("\n");
  fmt::print(stderr,
             "sample: prompt {} tokens (prefill {:.0f} tok/s), generated {} tokens in {:.2f} s "
             "({:.1f} tok/s), stopped at {}\n",
             prompt.size(), double(prompt.size()) / std::max(prefill_s, 1e-9), generated, decode_s,
             double(generated) / std::max(decode_s, 1e-9), stop);
  return 0;
}

}  // namespace

MARIN_COMMAND(sample, "sample",
              "Generate text from a checkpoint (incremental decoding with a KV cache)",
              [](CLI::App& app) -> Runner {
                auto o = std::make_shared<SampleOptions>();
                app.add_option("--checkpoint", o->checkpoint,
                               "checkpoint directory (config.json, model.safetensors, "
                               "tokenizer.json)")
                    ->required();
                app.add_option("--prompt", o->prompt, "text to continue")->required();
                app.add_flag("!--no-echo", o->echo, "print only the continuation, not the prompt");
                app.add_option("--max-tokens", o->max_tokens, "tokens to generate at most")
                    ->capture_default_str();
                app.add_option("--temperature", o->sampling.temperature,
                               "softmax temperature; 0 = greedy")
                    ->capture_default_str();
                app.add_option("--top-k", o->sampling.top_k,
                               "sample among the k most likely tokens; 0 = all")
                    ->capture_default_str();
                app.add_option("--top-p", o->sampling.top_p,
                               "nucleus: the most likely tokens holding this much probability")
                    ->capture_default_str();
                app.add_option("--seed", o->seed, "sampling seed")->capture_default_str();
                app.add_flag("--allow-nonfinite", o->allow_nonfinite, kAllowNonfiniteHelp);
                o->dtype.add(app);
                return [o] { return run_sample(*o); };
              });

}  // namespace marin::cli
