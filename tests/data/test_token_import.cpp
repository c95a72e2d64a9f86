// Pre-tokenized imports (src/data/sources/token_import.*, docs/data.md "Pre-tokenized imports"):
// llm.c and Megatron-LM files written by scripts/write_token_files.py, which follows the two
// projects' own writers (llm.c's write_datafile, Megatron's IndexedDatasetBuilder), from the
// tokens `marin tokenize --corpus` made of real text. The import must give back that very shard.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "cli_util.hpp"
#include "core/fileio.hpp"
#include "core/hash.hpp"
#include "core/json_file.hpp"
#include "data/shards.hpp"
#include "data/sources/split_rule.hpp"
#include "data/sources/token_import.hpp"
#include "data/tokenizer/tokenizer.hpp"

namespace {

namespace fs = std::filesystem;
using marin::testing::error_of;
using marin::testing::run;
using marin::testing::run_shell;
using marin::testing::RunResult;
using marin::testing::TempDir;

// A tokenizer trained on the fixture and one domain of real text tokenized with it, once for the
// whole file: DIR/tok.json, DIR/corpus/d/train-00000.jsonl, DIR/tokens/d/train-00000.tok.
struct Tokenized {
  TempDir dir{"token-import"};
  std::string error;
  marin::Tokenizer tok;
  uint32_t eos = 0, bos = 0;
  std::string tok_json() const { return dir.str("tok.json"); }
  std::string shard() const { return dir.str("tokens/d/train-00000.tok"); }
  Tokenized() {
    const fs::path fixture = fs::path(MARIN_SOURCE_DIR) / "data/fixture";
    RunResult r = run("tokenizer train --vocab-size 512 --in " +
                      (fixture / "bible_kjv/train-00000.jsonl").string() + " --out " + tok_json());
    if (r.code != 0) {
      error = r.out;
      return;
    }
    fs::create_directories(dir.path / "corpus/d");
    fs::copy_file(fixture / "fortunes/train-00000.jsonl", dir.path / "corpus/d/train-00000.jsonl");
    r = run("tokenize --tokenizer " + tok_json() + " --corpus " + dir.str("corpus") + " --out " +
            dir.str("tokens"));
    if (r.code != 0) {
      error = r.out;
      return;
    }
    tok = marin::Tokenizer::load(tok_json());
    eos = *tok.eos();
    bos = *tok.bos();
  }
};

const Tokenized& tokenized() {
  static const Tokenized t;
  return t;
}

// scripts/write_token_files.py ARGS; its output (the files it wrote, one a line) or a failure.
std::vector<std::string> write_files(const std::string& args) {
  const RunResult r = run_shell("/usr/bin/python3 " + std::string(MARIN_SOURCE_DIR) +
                                "/scripts/write_token_files.py " + args);
  EXPECT_EQ(r.code, 0) << r.out;
  std::vector<std::string> out;
  for (std::string_view l : marin::split_lines(r.out))
    if (!l.empty()) out.emplace_back(l);
  return out;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += " " + x;
  return s;
}

// `marin tokenize --format F --in INPUTS --domain d --valid-fraction 0 --out OUT`.
RunResult import_cli(const std::string& format, const std::string& inputs, const std::string& out) {
  return run("tokenize --tokenizer " + tokenized().tok_json() + " --format " + format + " --in" +
             inputs + " --domain d --valid-fraction 0 --out " + out);
}

marin::TokenManifest import_lib(const std::string& format, std::vector<std::string> inputs,
                                const std::string& out, double valid_fraction = 0,
                                uint64_t shard_tokens = uint64_t(1) << 24) {
  marin::data::TokenImportOptions o;
  o.format = format;
  o.inputs = std::move(inputs);
  o.out = out;
  o.domain = std::string("d");  // not = "d": g++ 12 -O3 warns falsely (-Wrestrict) on that
  o.valid_fraction = valid_fraction;
  o.shard_tokens = shard_tokens;
  o.progress = false;
  return marin::data::import_token_files(tokenized().tok, o);
}

std::vector<std::vector<uint32_t>> documents(const std::string& shard) {
  const marin::TokenShard s = marin::TokenShard::open(shard, tokenized().tok.hash());
  std::vector<std::vector<uint32_t>> out;
  for (uint64_t d = 0; d < s.documents(); ++d) out.push_back(s.document(d));
  return out;
}

// Overwrites bytes of a file in place.
void patch(const std::string& path, uint64_t offset, const void* bytes, size_t n) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(std::streamoff(offset));
  f.write(static_cast<const char*>(bytes), std::streamsize(n));
}
template <class T>
void patch_value(const std::string& path, uint64_t offset, T v) {
  patch(path, offset, &v, sizeof(T));
}
void resize(const std::string& path, uint64_t size) {
  fs::resize_file(path, size);
}

class TokenImport : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(tokenized().error, ""); }
  TempDir tmp{"token-import-case"};
};

// ---- equality with `marin tokenize --corpus` ----------------------------------------------------

TEST_F(TokenImport, LlmcGpt2FileImportsToTheTokenizedShardByteForByte) {
  const Tokenized& t = tokenized();
  const auto files = write_files("llmc " + tmp.str("fw.bin") + " --from " + t.shard() + " --eos " +
                                 std::to_string(t.eos));
  ASSERT_EQ(files.size(), 1u);
  const RunResult r = import_cli("llmc", joined(files), tmp.str("out"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(marin::read_file(tmp.str("out/d/train-00000.tok")), marin::read_file(t.shard()));
  EXPECT_FALSE(fs::exists(tmp.str("out/d/valid-00000.tok")));
  // The manifest lists the source file with its size and xxh64, and loads as any token dir.
  const nlohmann::json m = marin::load_json(tmp.str("out/manifest.json"));
  ASSERT_EQ(m["sources"].size(), 1u);
  EXPECT_EQ(m["sources"][0]["path"], files[0]);
  EXPECT_EQ(m["sources"][0]["size"], fs::file_size(files[0]));
  EXPECT_EQ(m["sources"][0]["xxh64"], marin::xxh64_hex(marin::read_file(files[0])));
  EXPECT_EQ(m["import"]["format"], "llmc");
  const marin::TokenManifest a = marin::TokenManifest::load(tmp.str("out"));
  const marin::TokenManifest b = marin::TokenManifest::load(t.dir.str("tokens"));
  ASSERT_EQ(a.shards.size(), 1u);
  EXPECT_EQ(a.shards[0].file, b.shards[0].file);
  EXPECT_EQ(a.shards[0].documents, b.shards[0].documents);
  EXPECT_EQ(a.shards[0].tokens, b.shards[0].tokens);
  EXPECT_EQ(a.shards[0].bytes, b.shards[0].bytes);
}

TEST_F(TokenImport, LlmcShardsCutMidDocumentAreReadAsOneStream) {
  const Tokenized& t = tokenized();
  // fineweb.py cuts its shards every N tokens, mid-document.
  const auto files = write_files("llmc " + tmp.str("fw") + " --from " + t.shard() + " --eos " +
                                 std::to_string(t.eos) + " --shard-size 7777");
  ASSERT_GT(files.size(), 3u);
  const RunResult r = import_cli("llmc", joined(files), tmp.str("out"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(marin::read_file(tmp.str("out/d/train-00000.tok")), marin::read_file(t.shard()));
}

TEST_F(TokenImport, LlmcVersion7Uint32FileStartsDocumentsAtBos) {
  const Tokenized& t = tokenized();
  const auto files =
      write_files("llmc " + tmp.str("l3.bin") + " --from " + t.shard() + " --version 7 --eos " +
                  std::to_string(t.eos) + " --bos " + std::to_string(t.bos));
  ASSERT_EQ(fs::file_size(files[0]) % 4, 0u);
  const RunResult r = import_cli("llmc", joined(files), tmp.str("out"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(marin::read_file(tmp.str("out/d/train-00000.tok")), marin::read_file(t.shard()));
}

struct MegatronCase {
  const char* args;
};
class MegatronImport : public TokenImport, public ::testing::WithParamInterface<MegatronCase> {};

TEST_P(MegatronImport, ImportsToTheTokenizedShardByteForByte) {
  const Tokenized& t = tokenized();
  const auto files =
      write_files("megatron " + tmp.str("ds_text_document") + " --from " + t.shard() + " --eos " +
                  std::to_string(t.eos) + " --vocab 512 " + GetParam().args);
  ASSERT_EQ(files.size(), 2u);
  // Given as PREFIX (.bin and .idx beside it).
  const RunResult r = import_cli("megatron", " " + tmp.str("ds_text_document"), tmp.str("out"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(marin::read_file(tmp.str("out/d/train-00000.tok")), marin::read_file(t.shard()));
  const nlohmann::json m = marin::load_json(tmp.str("out/manifest.json"));
  ASSERT_EQ(m["sources"].size(), 2u);
  EXPECT_EQ(m["sources"][0]["path"], tmp.str("ds_text_document.idx"));
  EXPECT_EQ(m["sources"][1]["xxh64"],
            marin::xxh64_hex(marin::read_file(tmp.str("ds_text_document.bin"))));
}

// preprocess_data.py's default (--append-eod, optimal dtype uint16), then no EOD, sentence-split
// documents and every dtype that holds a 512-id vocabulary.
INSTANTIATE_TEST_SUITE_P(
    Layouts, MegatronImport,
    ::testing::Values(MegatronCase{""}, MegatronCase{"--no-eod"}, MegatronCase{"--sentences 3"},
                      MegatronCase{"--dtype int16 --no-eod --sentences 2"},
                      MegatronCase{"--dtype int32"}, MegatronCase{"--dtype int64 --sentences 4"},
                      MegatronCase{"--dtype float32"}, MegatronCase{"--dtype float64 --no-eod"}));

TEST_F(TokenImport, MegatronByteDtypesAndTheEosRule) {
  const uint32_t e = tokenized().eos;
  // Without EOD: EOS appended; an empty document is EOS alone, as `tokenize` makes of "".
  marin::write_file_atomic(tmp.str("docs.json"), "[[1, 2, 3], [], [4, 5]]");
  for (const char* dtype : {"uint8", "int8"}) {
    SCOPED_TRACE(dtype);
    write_files("megatron " + tmp.str(dtype) + " --docs-json " + tmp.str("docs.json") +
                " --no-eod --eos " + std::to_string(e) + " --dtype " + dtype);
    import_lib("megatron", {tmp.str(dtype) + ".bin"}, tmp.str(std::string("out-") + dtype));
    EXPECT_EQ(documents(tmp.str(std::string("out-") + dtype + "/d/train-00000.tok")),
              (std::vector<std::vector<uint32_t>>{{1, 2, 3, e}, {e}, {4, 5, e}}));
  }
  // With EOD: it is kept once, not doubled.
  marin::write_file_atomic(tmp.str("docs2.json"), "[[7, 8], []]");
  write_files("megatron " + tmp.str("eod") + " --docs-json " + tmp.str("docs2.json") +
              " --dtype int32 --eos " + std::to_string(e));
  import_lib("megatron", {tmp.str("eod.idx")}, tmp.str("out-eod"));
  EXPECT_EQ(documents(tmp.str("out-eod/d/train-00000.tok")),
            (std::vector<std::vector<uint32_t>>{{7, 8, e}, {e}}));
}

TEST_F(TokenImport, ValidFractionSplitsByTheDocumentsTokensInOrder) {
  const Tokenized& t = tokenized();
  const auto files = write_files("llmc " + tmp.str("fw.bin") + " --from " + t.shard() + " --eos " +
                                 std::to_string(t.eos));
  import_lib("llmc", files, tmp.str("out"), 0.3);
  std::vector<std::vector<uint32_t>> want[2];
  for (auto& doc : documents(t.shard())) {
    const std::string_view key(reinterpret_cast<const char*>(doc.data()), doc.size() * 4);
    want[marin::data::split_for(key, 0.3) == "valid"].push_back(doc);
  }
  ASSERT_GT(want[0].size(), 0u);
  ASSERT_GT(want[1].size(), 0u);
  EXPECT_EQ(documents(tmp.str("out/d/train-00000.tok")), want[0]);
  EXPECT_EQ(documents(tmp.str("out/d/valid-00000.tok")), want[1]);
}

TEST_F(TokenImport, ShardsCloseAtDocumentBoundaries) {
  const Tokenized& t = tokenized();
  const auto files = write_files("llmc " + tmp.str("fw.bin") + " --from " + t.shard() + " --eos " +
                                 std::to_string(t.eos));
  const marin::TokenManifest m = import_lib("llmc", files, tmp.str("out"), 0, 10000);
  ASSERT_GT(m.shards.size(), 3u);
  std::vector<std::vector<uint32_t>> all;
  for (const auto& s : m.shards) {
    EXPECT_EQ(s.split, "train");
    for (auto& d : documents(m.path(s))) all.push_back(d);
  }
  EXPECT_EQ(all, documents(t.shard()));
}

TEST_F(TokenImport, TrainTrainsOnTheImportWithoutRetokenizing) {
  const Tokenized& t = tokenized();
  const auto files = write_files("megatron " + tmp.str("ds") + " --from " + t.shard() + " --eos " +
                                 std::to_string(t.eos) + " --vocab 512");
  RunResult r =
      run("tokenize --tokenizer " + t.tok_json() + " --format megatron --in " + tmp.str("ds.bin") +
          " --domain d --valid-fraction 0.2 --out " + tmp.str("tokens"));
  ASSERT_EQ(r.code, 0) << r.out;
  marin::write_file_atomic(tmp.str("mix.toml"), "[[phase]]\nweights = { d = 1 }\n");
  r = run("train --preset tiny --data " + tmp.str("mix.toml") + " --token-dir " +
          tmp.str("tokens") + " --tokenizer " + t.tok_json() +
          " --batch 2 --steps 2 --eval-every 2 --eval-batches 1 --out " + tmp.str("run"));
  ASSERT_EQ(r.code, 0) << r.out;
  int steps = 0;
  for (const auto& line : marin::testing::metrics(tmp.str("run")))
    if (line.contains("loss") && line.contains("step")) ++steps;
  EXPECT_GE(steps, 2) << r.out;
}

// ---- bad input ----------------------------------------------------------------------------------

class TokenImportErrors : public TokenImport {
 protected:
  // A valid llm.c file and Megatron dataset of three short documents.
  void SetUp() override {
    TokenImport::SetUp();
    marin::write_file_atomic(tmp.str("docs.json"), "[[1, 2, 3], [4, 5], [6]]");
    const std::string e = " --eos " + std::to_string(tokenized().eos);
    write_files("llmc " + llmc + " --docs-json " + tmp.str("docs.json") + e);
    write_files("megatron " + tmp.str("m") + " --docs-json " + tmp.str("docs.json") + e +
                " --dtype int32");
  }
  std::string error(const std::string& format, std::vector<std::string> in) {
    return error_of([&] { import_lib(format, std::move(in), tmp.str("out")); });
  }
  std::string llmc = tmp.str("a.bin"), idx = tmp.str("m.idx"), bin = tmp.str("m.bin");
};

TEST_F(TokenImportErrors, TheValidFilesImport) {
  EXPECT_EQ(error("llmc", {llmc}), "");
  EXPECT_EQ(error("megatron", {bin}), "");
}

TEST_F(TokenImportErrors, LlmcHeader) {
  patch_value<int32_t>(llmc, 0, 12345);
  EXPECT_NE(error("llmc", {llmc}).find(llmc + ": bad magic 12345 at byte offset 0"),
            std::string::npos)
      << error("llmc", {llmc});
  patch_value<int32_t>(llmc, 0, 20240522);
  EXPECT_NE(error("llmc", {llmc}).find("llm.c's evaluation file"), std::string::npos);
  patch_value<int32_t>(llmc, 0, 20240520);
  patch_value<int32_t>(llmc, 4, 2);
  EXPECT_NE(error("llmc", {llmc}).find("llm.c version 2 at byte offset 4"), std::string::npos);
  patch_value<int32_t>(llmc, 4, 1);
  patch_value<int32_t>(llmc, 8, -1);
  EXPECT_NE(error("llmc", {llmc}).find("token count -1 at byte offset 8 is negative"),
            std::string::npos);
  patch_value<int32_t>(llmc, 8, 10);  // the file holds 9: 3 delimiters + 6 ids
  EXPECT_NE(error("llmc", {llmc}).find(llmc + ": truncated: the header (byte offset 8) counts 10"),
            std::string::npos)
      << error("llmc", {llmc});
  patch_value<int32_t>(llmc, 8, 8);
  EXPECT_NE(error("llmc", {llmc}).find(llmc + ": 2 bytes after the 8 tokens"), std::string::npos)
      << error("llmc", {llmc});
  resize(llmc, 1000);
  EXPECT_NE(error("llmc", {llmc}).find("shorter than the 1024-byte header"), std::string::npos);
}

TEST_F(TokenImportErrors, LlmcIdOutsideTheVocabulary) {
  patch_value<uint16_t>(llmc, 1024 + 2 * 5, 600);  // token 5 of [E 1 2 3 E 4 5 E 6]
  EXPECT_NE(error("llmc", {llmc})
                .find(llmc + ": token 5 (byte offset 1034) is id 600, outside the tokenizer's "
                             "vocabulary of 512"),
            std::string::npos)
      << error("llmc", {llmc});
}

TEST_F(TokenImportErrors, LlmcVersionsDoNotMix) {
  marin::write_file_atomic(tmp.str("one.json"), "[[9]]");
  write_files("llmc " + tmp.str("b.bin") + " --docs-json " + tmp.str("one.json") +
              " --version 7 --bos " + std::to_string(tokenized().bos) + " --eos " +
              std::to_string(tokenized().eos));
  EXPECT_NE(error("llmc", {llmc, tmp.str("b.bin")}).find("llm.c version 7 but " + llmc),
            std::string::npos);
}

TEST_F(TokenImportErrors, MegatronIndexHeader) {
  const std::string good = marin::read_file(idx);
  patch(idx, 0, "MMIDIDY", 7);
  EXPECT_NE(error("megatron", {bin}).find(idx + ": bad magic at byte offset 0"), std::string::npos);
  marin::write_file_atomic(idx, good);
  patch_value<uint64_t>(idx, 9, 2);
  EXPECT_NE(error("megatron", {bin}).find("Megatron index version 2 at byte offset 9"),
            std::string::npos);
  marin::write_file_atomic(idx, good);
  patch_value<uint8_t>(idx, 17, 9);
  EXPECT_NE(error("megatron", {bin}).find("dtype code 9 at byte offset 17"), std::string::npos);
  marin::write_file_atomic(idx, good);
  resize(idx, good.size() - 1);  // truncated
  EXPECT_NE(error("megatron", {bin}).find("which take"), std::string::npos)
      << error("megatron", {bin});
  marin::write_file_atomic(idx, good);
  patch_value<uint64_t>(idx, 18, uint64_t(1) << 60);  // a count no file holds
  EXPECT_NE(error("megatron", {bin}).find("more than a"), std::string::npos);
  resize(idx, 20);
  EXPECT_NE(error("megatron", {bin}).find("shorter than the 34-byte header"), std::string::npos);
}

TEST_F(TokenImportErrors, MegatronSequencesPastTheBin) {
  // 3 sequences: lengths (4 ids incl. EOD, 3, 2) at 34, pointers at 46, document index at 70.
  const std::string good = marin::read_file(idx);
  patch_value<int64_t>(idx, 46 + 16, 1 << 20);
  EXPECT_NE(error("megatron", {bin})
                .find(idx + ": sequence 2 of 2 tokens at byte 1048576 of " + bin +
                      " (pointer at byte offset 62, length at 42) runs "
                      "past the end of the .bin (36 bytes)"),
            std::string::npos)
      << error("megatron", {bin});
  marin::write_file_atomic(idx, good);
  patch_value<int32_t>(idx, 34 + 8, 5);  // the last sequence 5 ids long
  EXPECT_NE(error("megatron", {bin}).find("runs past the end of the .bin"), std::string::npos);
  marin::write_file_atomic(idx, good);
  patch_value<int64_t>(idx, 46 + 8, 12);  // overlaps the first
  EXPECT_NE(error("megatron", {bin}).find("the sequence before it ends at byte 16"),
            std::string::npos)
      << error("megatron", {bin});
  marin::write_file_atomic(idx, good);
  resize(bin, 40);
  EXPECT_NE(error("megatron", {bin}).find(bin + ": 4 bytes after byte 36 belong to no sequence"),
            std::string::npos)
      << error("megatron", {bin});
  resize(bin, 36);
  patch_value<int64_t>(idx, 70 + 8, 2);
  patch_value<int64_t>(idx, 70 + 16, 1);  // decreases
  EXPECT_NE(error("megatron", {bin}).find("document index entry 2 (byte offset 86) is 1, after 2"),
            std::string::npos)
      << error("megatron", {bin});
  marin::write_file_atomic(idx, good);
  patch_value<int64_t>(idx, 70, 1);
  EXPECT_NE(error("megatron", {bin}).find("the document index (byte offset 70) starts at 1"),
            std::string::npos);
}

TEST_F(TokenImportErrors, MegatronIdsOutsideTheVocabulary) {
  patch_value<int32_t>(bin, 4 * 5, 70000);
  EXPECT_NE(error("megatron", {bin}).find(bin + ": token 5 (byte offset 20) is id 70000, outside"),
            std::string::npos)
      << error("megatron", {bin});
  patch_value<int32_t>(bin, 4 * 5, -3);
  EXPECT_NE(error("megatron", {bin}).find(bin + ": token 5 (byte offset 20) is id -3: negative"),
            std::string::npos);
  write_files("megatron " + tmp.str("f") + " --docs-json " + tmp.str("docs.json") +
              " --dtype float32 --eos " + std::to_string(tokenized().eos));
  patch_value<float>(tmp.str("f.bin"), 4, 1.5f);
  EXPECT_NE(
      error("megatron", {tmp.str("f")}).find("token 1 (byte offset 4) is 1.5, not a token id"),
      std::string::npos);
}

TEST_F(TokenImportErrors, MissingFifoAndEmptyInputs) {
  fs::remove(idx);
  EXPECT_NE(error("megatron", {bin}).find("Megatron dataset without " + idx), std::string::npos);
  ASSERT_EQ(::mkfifo(tmp.str("fifo.bin").c_str(), 0600), 0);
  EXPECT_NE(error("llmc", {tmp.str("fifo.bin")}).find("FIFO"), std::string::npos);
  marin::write_file_atomic(tmp.str("empty.json"), "[]");
  write_files("llmc " + tmp.str("e.bin") + " --docs-json " + tmp.str("empty.json") + " --eos " +
              std::to_string(tokenized().eos));
  EXPECT_NE(error("llmc", {tmp.str("e.bin")}).find("hold no document"), std::string::npos);
  EXPECT_NE(error("parquet", {llmc}).find("format 'parquet' is not one of llmc, megatron"),
            std::string::npos);
}

TEST_F(TokenImportErrors, TheCommandNamesTheFileAndNeedsADomain) {
  patch_value<int32_t>(llmc, 0, 7);
  RunResult r = run("tokenize --tokenizer " + tokenized().tok_json() + " --format llmc --in " +
                    llmc + " --domain d --out " + tmp.str("out"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find(llmc + ": bad magic 7"), std::string::npos) << r.out;
  r = run("tokenize --tokenizer " + tokenized().tok_json() + " --format megatron --in " + bin +
          " --out " + tmp.str("out"));
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("tokenize --in needs exactly one of --domain NAME and --domain-from dir"),
            std::string::npos)
      << r.out;
}

}  // namespace
