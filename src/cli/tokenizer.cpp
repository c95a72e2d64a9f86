// marin tokenizer {train, encode, decode}: byte-level BPE vocabularies (see docs/tokenizer.md).
#include <fmt/core.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "cli/options.hpp"
#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/hash.hpp"
#include "core/json_file.hpp"
#include "data/sources/jsonl_source.hpp"
#include "data/tokenizer/documents.hpp"
#include "data/tokenizer/tokenizer.hpp"

namespace {

struct Options {
  uint32_t vocab = 8192;
  std::vector<std::string> inputs;
  std::string out = "tokenizer.json";
  std::string vocab_file, in_file, pattern, text_field = "text";
  bool json = false, allow_special = false, jsonl = false, add_special = false;
  std::vector<std::string> specials = marin::Tokenizer::default_specials();
};

int run_train(const Options& o) {
  auto t0 = std::chrono::steady_clock::now();
  // The output's folder is made first (as tokenize's --out is), so a long training cannot end in
  // an unwritable path.
  const std::filesystem::path parent = std::filesystem::path(o.out).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent);
  std::vector<std::string> docs = marin::read_documents(o.inputs, o.text_field);
  size_t bytes = 0;
  for (const auto& d : docs) bytes += d.size();
  fmt::print(stderr, "tokenizer train: {} documents, {:.2f} MB from {} file(s)\n", docs.size(),
             bytes / 1e6, o.inputs.size());
  marin::Tokenizer tok = marin::Tokenizer::train(docs, o.vocab, o.specials);
  tok.save_json(o.out);
  double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  fmt::print(stderr, "tokenizer train: {} tokens ({} merges) in {:.1f} s -> {} (hash {})\n",
             tok.vocab_size(), tok.num_merges(), s, o.out, marin::hex64(tok.hash()));
  return 0;
}

// The tokenizer file of encode and decode (not required by CLI11, so that its old spelling counts).
void require_tokenizer(const Options& o, const char* command) {
  if (o.vocab_file.empty())
    marin::fail("tokenizer {} needs --tokenizer FILE (tokenizer.json or .tiktoken)", command);
}

void append_ids(std::string& out, const std::vector<uint32_t>& ids, const char* sep) {
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += sep;
    out += std::to_string(ids[i]);
  }
}

// --jsonl: one JSON array of ids per input line, as Hugging Face's encode gives them (added
// tokens in the text are recognised; the template's tokens only with --add-special).
int run_encode_jsonl(const Options& o, const marin::Tokenizer& tok) {
  const std::string text = marin::read_file(o.in_file);
  const std::vector<std::string> path = marin::data::field_path(o.text_field, "--text-field");
  std::string out;
  std::vector<uint32_t> ids;
  nlohmann::json scratch;
  const auto lines = marin::split_lines(text);
  for (size_t i = 0; i < lines.size(); ++i) {
    if (marin::data::blank_line(lines[i])) continue;
    // The JSONL document rule of the corpus readers (data/sources/jsonl_source.hpp); a line
    // without text is an error here, as every line must give its array of ids.
    marin::data::JsonlSkip skip = marin::data::JsonlSkip::none;
    const std::string* t = marin::data::jsonl_text(lines[i], o.in_file, i + 1, path, scratch, skip);
    if (!t)
      marin::fail("{}:{}: {} (\"{}\"): every line needs a text", o.in_file, i + 1,
                  marin::data::skip_reason(skip), o.text_field);
    ids.clear();
    if (o.add_special) ids = tok.template_prefix();
    tok.encode_into(*t, ids, /*allow_special=*/true);
    if (o.add_special)
      ids.insert(ids.end(), tok.template_suffix().begin(), tok.template_suffix().end());
    out += '[';
    append_ids(out, ids, ",");
    out += "]\n";
    if (out.size() > (1 << 20)) {
      std::fwrite(out.data(), 1, out.size(), stdout);
      out.clear();
    }
  }
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

int run_encode(const Options& o) {
  require_tokenizer(o, "encode");
  marin::Tokenizer tok = marin::Tokenizer::load(o.vocab_file, o.pattern);
  if (o.jsonl) return run_encode_jsonl(o, tok);
  std::vector<uint32_t> ids;
  if (o.add_special) ids = tok.template_prefix();
  tok.encode_into(marin::read_file(o.in_file), ids, o.allow_special);
  if (o.add_special)
    ids.insert(ids.end(), tok.template_suffix().begin(), tok.template_suffix().end());
  std::string out;
  out.reserve(ids.size() * 6 + 4);
  if (o.json) out += '[';
  append_ids(out, ids, o.json ? "," : " ");
  out += o.json ? "]\n" : "\n";
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

int run_decode(const Options& o) {
  require_tokenizer(o, "decode");
  marin::Tokenizer tok = marin::Tokenizer::load(o.vocab_file, o.pattern);
  std::string text = marin::read_file(o.in_file);
  std::vector<uint32_t> ids;
  size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '[') {
    const nlohmann::json j = marin::parse_json(text, fmt::format("'{}'", o.in_file),
                                               "expected a JSON array of token ids");
    if (!j.is_array()) marin::fail("'{}': expected a JSON array of token ids", o.in_file);
    for (const auto& v : j) {
      if (!v.is_number_unsigned() || v.get<uint64_t>() > UINT32_MAX)
        marin::fail("'{}': expected non-negative integer token ids, found {}", o.in_file, v.dump());
      ids.push_back(v.get<uint32_t>());
    }
  } else {
    std::istringstream ss(text);
    std::string w;
    while (ss >> w) {
      char* end = nullptr;
      errno = 0;
      unsigned long long v = std::strtoull(w.c_str(), &end, 10);
      if (*end || errno || v > UINT32_MAX || w[0] == '-')
        marin::fail("'{}': expected token ids (a JSON array or whitespace-separated), found '{}'",
                    o.in_file, w);
      ids.push_back(uint32_t(v));
    }
  }
  std::string bytes = tok.decode(ids);
  std::fwrite(bytes.data(), 1, bytes.size(), stdout);
  return 0;
}

}  // namespace

MARIN_COMMAND(tokenizer, "tokenizer",
              "Byte-level BPE vocabularies: train one on text, encode text to ids, decode ids",
              [](CLI::App& app) -> marin::cli::Runner {
                auto o = std::make_shared<Options>();
                app.require_subcommand(1);
                auto* train = app.add_subcommand(
                    "train",
                    "Train a byte-level BPE (GPT-4 split regex) and write an HF tokenizer.json. "
                    "Ids 0-255 are bytes, then merges, then the special tokens.");
                train->add_option("--vocab-size", o->vocab, "Vocabulary size incl. special tokens")
                    ->capture_default_str();
                marin::cli::add_deprecated(*train, "--vocab", "--vocab-size", o->vocab);
                train
                    ->add_option("--in", o->inputs,
                                 "Text files (whole file = one document), .jsonl files (one "
                                 "object per line), gzip/zstd-compressed ones (by magic number), "
                                 "directories (walked recursively) or globs")
                    ->required();
                train
                    ->add_option("--text-field", o->text_field,
                                 "JSONL: the text's field, a dotted path for nested ones (a.b)")
                    ->capture_default_str();
                train->add_option("--out", o->out, "Output tokenizer.json")->capture_default_str();
                train->add_option("--special", o->specials, "Special tokens (BOS, EOS, PAD first)")
                    ->capture_default_str();

                auto* enc = app.add_subcommand(
                    "encode", "Encode a whole file to token ids (printed on stdout)");
                enc->add_option("--tokenizer", o->vocab_file, "tokenizer.json or .tiktoken file");
                marin::cli::add_deprecated(*enc, "--vocab", "--tokenizer", o->vocab_file);
                enc->add_option("--in", o->in_file,
                                "Input text file (raw bytes), or with --jsonl a .jsonl file")
                    ->required();
                enc->add_flag("--json", o->json, "Print one JSON array (default: space-separated)");
                enc->add_flag("--allow-special", o->allow_special,
                              "Recognise special-token text such as <|end_of_text|> in the input");
                enc->add_flag("--jsonl", o->jsonl,
                              "Batch mode: one JSON array of ids per input line's text, as "
                              "Hugging Face encodes it (added tokens in the text recognised)");
                enc->add_option("--text-field", o->text_field,
                                "With --jsonl: the dotted path of each line's text")
                    ->capture_default_str();
                enc->add_flag("--add-special", o->add_special,
                              "Add the post-processor template's tokens (e.g. BOS)");
                enc->add_option("--pattern", o->pattern,
                                ".tiktoken split: cl100k, o200k, p50k, r50k, gpt2 or a regex");

                auto* dec = app.add_subcommand(
                    "decode", "Decode token ids (JSON array or whitespace-separated) to bytes");
                dec->add_option("--tokenizer", o->vocab_file, "tokenizer.json or .tiktoken file");
                marin::cli::add_deprecated(*dec, "--vocab", "--tokenizer", o->vocab_file);
                dec->add_option("--in", o->in_file, "File with the ids")->required();
                dec->add_option("--pattern", o->pattern,
                                ".tiktoken split: cl100k, o200k, p50k, r50k, gpt2 or a regex");

                return [o, train, enc, dec]() -> int {
                  if (train->parsed()) return run_train(*o);
                  if (enc->parsed()) return run_encode(*o);
                  if (dec->parsed()) return run_decode(*o);
                  return 1;
                };
              });
