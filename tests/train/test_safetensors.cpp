// safetensors writer/reader and atomic file writes: bit-identical round trip, every corruption
// gives an error naming the file (and tensor), an interrupted write leaves the old file intact, and
// the 20-line numpy reader in scripts/ agrees with the C++ reader.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "cli_util.hpp"
#include "core/error.hpp"
#include "core/fileio.hpp"
#include "core/rng.hpp"
#include "train/safetensors.hpp"

namespace {

namespace fs = std::filesystem;
using marin::TensorView;

class Safetensors : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("marin_st_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  fs::path dir_;
};

struct Sample {
  std::vector<float> a, b, c, s;
  std::vector<TensorView> views;
};

Sample sample() {
  Sample x;
  marin::Rng rng(3);
  x.a.resize(3 * 5);
  for (auto& v : x.a) v = static_cast<float>(rng.normal());
  x.a[0] = -0.0f;  // bit patterns that a lossy path would change
  x.a[1] = std::numeric_limits<float>::denorm_min();
  x.a[2] = std::numeric_limits<float>::infinity();
  x.a[3] = std::bit_cast<float>(0x7fc01234u);  // NaN with payload
  x.b.resize(2 * 3 * 7);
  for (auto& v : x.b) v = static_cast<float>(rng.uniform());
  x.s = {42.5f};
  x.views = {{"layers.0.attn.wq", {3, 5}, x.a.data()},
             {"layers.0.moe.experts.w_up", {2, 3, 7}, x.b.data()},
             {"empty", {0, 4}, nullptr},
             {"scalar", {}, x.s.data()}};
  return x;
}

using marin::testing::error_of;

std::string le64(uint64_t n) {
  std::string s(8, '\0');
  std::memcpy(s.data(), &n, 8);
  return s;
}

// A file from a JSON header (padded to 8) and a data section.
std::string make_file(const std::string& header, const std::string& data) {
  std::string h = header;
  h.append((8 - h.size() % 8) % 8, ' ');
  return le64(h.size()) + h + data;
}

TEST_F(Safetensors, RoundTripIsBitIdentical) {
  Sample x = sample();
  const std::string p = path("model.safetensors");
  marin::write_safetensors(p, x.views, {{"format", "pt"}, {"step", "7"}});
  const std::string bytes = marin::read_file(p);
  uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u) << "data must start 8-aligned";
  EXPECT_EQ(bytes[8 + n - 1] == ' ' || bytes[8 + n - 1] == '}', true);
  EXPECT_EQ(bytes.size(), 8 + n + 4 * (15 + 42 + 0 + 1));

  auto f = marin::read_safetensors(p);
  EXPECT_EQ(f.metadata, (marin::SafetensorsMetadata{{"format", "pt"}, {"step", "7"}}));
  ASSERT_EQ(f.names, (std::vector<std::string>{"layers.0.attn.wq", "layers.0.moe.experts.w_up",
                                               "empty", "scalar"}));
  for (const TensorView& v : x.views) {
    const auto& t = f.at(v.name, v.shape);
    EXPECT_EQ(t.dtype, "F32");
    EXPECT_EQ(t.shape, v.shape);
    if (t.numel()) {
      EXPECT_EQ(std::memcmp(t.data.data(), v.data, t.numel() * 4), 0) << v.name;
    }
  }
  // writing what was read gives the same bytes
  std::vector<TensorView> again;
  for (const auto& name : f.names)
    again.push_back({name, f.at(name).shape, f.at(name).data.data()});
  const std::string p2 = path("again.safetensors");
  marin::write_safetensors(p2, again, f.metadata);
  EXPECT_EQ(marin::read_file(p2), bytes);
  // the header is valid JSON with the documented fields
  auto h = nlohmann::json::parse(bytes.substr(8, n));
  EXPECT_EQ(h["layers.0.moe.experts.w_up"]["data_offsets"], nlohmann::json({60, 228}));
  EXPECT_EQ(h["__metadata__"]["step"], "7");
  // no temporary files left behind
  for (const auto& e : fs::directory_iterator(dir_))
    EXPECT_EQ(e.path().string().find(".tmp."), std::string::npos) << e.path();
}

TEST_F(Safetensors, ReadsHalfBfloatAndDouble) {
  // F16: 1.0 = 0x3c00, -2.5 = 0xc100, smallest subnormal 0x0001 = 2^-24, inf 0x7c00.
  // BF16: 1.0 = 0x3f80, -0.15625 = 0xbe20. F64: 0.1.
  const uint16_t f16[] = {0x3c00, 0xc100, 0x0001, 0x7c00};
  const uint16_t bf16[] = {0x3f80, 0xbe20};
  const double f64[] = {0.1};
  std::string data(reinterpret_cast<const char*>(f16), 8);
  data.append(reinterpret_cast<const char*>(bf16), 4);
  data.append(reinterpret_cast<const char*>(f64), 8);
  const std::string p = path("mixed.safetensors");
  marin::write_file_atomic(p,
                           make_file(R"({"h":{"dtype":"F16","shape":[4],"data_offsets":[0,8]},)"
                                     R"("b":{"dtype":"BF16","shape":[1,2],"data_offsets":[8,12]},)"
                                     R"("d":{"dtype":"F64","shape":[1],"data_offsets":[12,20]}})",
                                     data));
  auto f = marin::read_safetensors(p);
  EXPECT_EQ(f.at("h").data, (std::vector<float>{1.0f, -2.5f, std::ldexp(1.0f, -24),
                                                std::numeric_limits<float>::infinity()}));
  EXPECT_EQ(f.at("b").data, (std::vector<float>{1.0f, -0.15625f}));
  EXPECT_EQ(f.at("b").dtype, "BF16");
  EXPECT_EQ(f.at("d").data, (std::vector<float>{0.1f}));
  EXPECT_TRUE(f.metadata.empty());
}

TEST_F(Safetensors, LookupErrorsNameFileAndTensor) {
  Sample x = sample();
  const std::string p = path("m.safetensors");
  marin::write_safetensors(p, x.views);
  auto f = marin::read_safetensors(p);
  std::string e = error_of([&] { f.at("layers.9.attn.wq"); });
  EXPECT_NE(e.find(p), std::string::npos) << e;
  EXPECT_NE(e.find("layers.9.attn.wq"), std::string::npos) << e;
  const std::vector<int64_t> wrong = {5, 3};
  e = error_of([&] { f.at("layers.0.attn.wq", wrong); });
  EXPECT_NE(e.find(p), std::string::npos) << e;
  EXPECT_NE(e.find("[3, 5]"), std::string::npos) << e;
  EXPECT_NE(e.find("[5, 3]"), std::string::npos) << e;
}

TEST_F(Safetensors, WriterRejectsBadInput) {
  std::vector<float> v(4);
  const std::string p = path("w.safetensors");
  std::vector<TensorView> dup = {{"x", {4}, v.data()}, {"x", {4}, v.data()}};
  std::string e = error_of([&] { marin::write_safetensors(p, dup); });
  EXPECT_NE(e.find(p), std::string::npos) << e;
  EXPECT_NE(e.find("'x' appears twice"), std::string::npos) << e;
  std::vector<TensorView> neg = {{"y", {-1, 4}, v.data()}};
  EXPECT_NE(error_of([&] { marin::write_safetensors(p, neg); }).find("'y'"), std::string::npos);
  std::vector<TensorView> null = {{"z", {4}, nullptr}};
  EXPECT_NE(error_of([&] { marin::write_safetensors(p, null); }).find("'z'"), std::string::npos);
  EXPECT_FALSE(fs::exists(p));
}

// Each corruption: the bytes, and the words the error must contain (besides the file name).
TEST_F(Safetensors, CorruptFilesGiveClearErrors) {
  Sample x = sample();
  const std::string good_path = path("good.safetensors");
  marin::write_safetensors(good_path, x.views, {{"k", "v"}});
  const std::string good = marin::read_file(good_path);
  uint64_t n;
  std::memcpy(&n, good.data(), 8);
  const std::string header = good.substr(8, n), data = good.substr(8 + n);
  auto edit_header = [&](const std::function<void(nlohmann::json&)>& f) {
    auto h = nlohmann::json::parse(header);
    f(h);
    return make_file(h.dump(), data);
  };
  const std::string wq = "layers.0.attn.wq", up = "layers.0.moe.experts.w_up";

  struct Case {
    std::string what, bytes;
    std::vector<std::string> expect;
  };
  std::vector<Case> cases = {
      {"empty file", "", {"too short"}},
      {"7 bytes", good.substr(0, 7), {"too short"}},
      {"header length larger than file", le64(good.size()) + good.substr(8), {"header length"}},
      {"huge header length", le64(~0ull) + good.substr(8), {"header length"}},
      {"truncated header",
       good.substr(0, 8 + n / 2),
       {"header length", "past the end of the file"}},
      {"bad JSON", make_file(R"({"a": {"dtype": "F32", )", ""), {"not valid JSON"}},
      {"not an object", make_file("[1, 2, 3]", ""), {"not a JSON object"}},
      {"entry not an object", make_file(R"({"t": 5})", ""), {"'t'"}},
      {"missing dtype", edit_header([&](auto& h) { h[wq].erase("dtype"); }), {wq, "dtype"}},
      {"unsupported dtype",
       edit_header([&](auto& h) { h[wq]["dtype"] = "I64"; }),
       {wq, "I64", "not supported"}},
      {"negative dimension",
       edit_header([&](auto& h) {
         h[wq]["shape"] = {-3, 5};
       }),
       {wq, "shape"}},
      {"offsets not matching shape x 4",
       edit_header([&](auto& h) {
         h[wq]["shape"] = {3, 4};
       }),
       {wq, "needs 48"}},
      {"offsets out of range",
       edit_header([&](auto& h) {
         h[up]["data_offsets"] = {10000, 10168};
       }),
       {up, "run past the end"}},
      {"offsets reversed",
       edit_header([&](auto& h) {
         h[wq]["data_offsets"] = {60, 0};
       }),
       {wq, "end before"}},
      {"offsets negative",
       edit_header([&](auto& h) {
         h[wq]["data_offsets"] = {-4, 56};
       }),
       {wq, "data_offsets"}},
      {"overlapping",
       edit_header([&](auto& h) {
         h[up]["data_offsets"] = {56, 224};  // starts inside wq [0, 60)
         h["scalar"]["data_offsets"] = {224, 228};
       }),
       {wq, up, "overlap"}},
      {"gap", edit_header([&](auto& h) { h.erase(wq); }), {up, "gap"}},
      {"truncated data", good.substr(0, good.size() - 4), {"scalar", "run past the end"}},
      {"trailing bytes", good + "junk", {"4 bytes of data after the last tensor"}},
      {"duplicate name",
       make_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                 R"("a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                 std::string(8, '\0')),
       {"the safetensors header", "duplicate key \"a\""}},
      {"metadata not strings",
       edit_header([&](auto& h) { h["__metadata__"]["k"] = 3; }),
       {"__metadata__", "'k'"}},
  };
  for (const Case& c : cases) {
    const std::string p = path("bad.safetensors");
    marin::write_file_atomic(p, c.bytes);
    const std::string e = error_of([&] { marin::read_safetensors(p); });
    ASSERT_FALSE(e.empty()) << c.what << ": no error";
    std::printf("  %-32s -> %s\n", c.what.c_str(), e.c_str());
    EXPECT_NE(e.find(p), std::string::npos) << c.what << ": " << e;
    for (const auto& w : c.expect)
      EXPECT_NE(e.find(w), std::string::npos) << c.what << ": '" << w << "' not in: " << e;
  }
  const std::string missing = path("missing.safetensors");
  const std::string e = error_of([&] { marin::read_safetensors(missing); });
  EXPECT_NE(e.find(missing), std::string::npos) << e;
  EXPECT_NE(e.find("No such file"), std::string::npos) << e;
}

TEST_F(Safetensors, AtomicWriteFailuresLeaveOldFileIntact) {
  const std::string p = path("ckpt.bin");
  marin::write_file_atomic(p, std::string("old contents"));
  ASSERT_EQ(marin::read_file(p), "old contents");

  // 1. a directory that does not exist
  const std::string nodir = path("no/such/dir/file.bin");
  std::string e = error_of([&] { marin::write_file_atomic(nodir, std::string("x")); });
  EXPECT_NE(e.find(nodir), std::string::npos) << e;

  // 2. the target is a directory: refused before a temporary is made (it is no regular file)
  fs::create_directories(path("adir"));
  e = error_of([&] { marin::write_file_atomic(path("adir"), std::string("x")); });
  EXPECT_NE(e.find(path("adir")), std::string::npos) << e;
  EXPECT_NE(e.find("it is a directory"), std::string::npos) << e;

  // 3. a write interrupted half-way: a child process whose file-size limit (RLIMIT_FSIZE) is 64 KiB
  //    tries to replace the file with 1 MiB. The write fails mid-file (EFBIG); the old file must be
  //    intact and no temporary left behind.
  const pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::signal(SIGXFSZ, SIG_IGN);
    rlimit lim{64 << 10, 64 << 10};
    ::setrlimit(RLIMIT_FSIZE, &lim);
    int code = 0;
    try {
      marin::write_file_atomic(p, std::string(1 << 20, 'n'));
      code = 1;  // should not succeed
    } catch (const marin::Error& err) {
      code = std::string(err.what()).find(p) != std::string::npos ? 42 : 2;
    }
    ::_exit(code);
  }
  int status = 0;
  ::waitpid(pid, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 42) << "the child should fail with an error naming the file";
  EXPECT_EQ(marin::read_file(p), "old contents");

  // 4. a process killed mid-write (SIGKILL) leaves only a temporary beside the intact file
  const pid_t pid2 = ::fork();
  ASSERT_GE(pid2, 0);
  if (pid2 == 0) {
    rlimit lim{64 << 10, 64 << 10};
    ::setrlimit(RLIMIT_FSIZE, &lim);  // default SIGXFSZ action: killed mid-write
    marin::write_file_atomic(p, std::string(1 << 20, 'k'));
    ::_exit(1);
  }
  ::waitpid(pid2, &status, 0);
  EXPECT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(marin::read_file(p), "old contents");
  int tmps = 0;
  for (const auto& d : fs::directory_iterator(dir_))
    if (d.path().filename().string().starts_with("ckpt.bin.tmp.")) ++tmps;
  EXPECT_EQ(tmps, 1) << "the killed writer's temporary is the only trace";

  // a later successful write replaces the file
  marin::write_file_atomic(p, std::string("new"));
  EXPECT_EQ(marin::read_file(p), "new");
}

TEST_F(Safetensors, ReadFileErrors) {
  EXPECT_NE(error_of([&] { marin::read_file(dir_.string()); }).find("directory"),
            std::string::npos);
  const std::string big = path("big.bin");
  std::string content(300000, 'q');
  content[123457] = 'z';
  marin::write_file_atomic(big, content);
  EXPECT_EQ(marin::read_file(big), content);
}

TEST_F(Safetensors, NumpyReaderAgrees) {
  if (std::system("/usr/bin/python3 -c 'import numpy' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "/usr/bin/python3 has no numpy";
  Sample x = sample();
  x.a[2] = 1.0f;  // finite sums only
  x.a[3] = 2.0f;
  const std::string p = path("np.safetensors");
  marin::write_safetensors(p, x.views, {{"k", "v"}});
  const std::string cmd =
      "/usr/bin/python3 " MARIN_SOURCE_DIR "/scripts/read_safetensors.py '" + p + "'";
  FILE* pipe = ::popen(cmd.c_str(), "r");
  ASSERT_NE(pipe, nullptr);
  std::string out;
  char buf[4096];
  while (size_t k = std::fread(buf, 1, sizeof buf, pipe)) out.append(buf, k);
  ASSERT_EQ(::pclose(pipe), 0) << out;
  // name \t [shape] \t sum
  std::map<std::string, std::pair<std::string, double>> got;
  size_t pos = 0;
  while (pos < out.size()) {
    size_t eol = out.find('\n', pos);
    if (eol == std::string::npos) eol = out.size();
    std::string line = out.substr(pos, eol - pos);
    pos = eol + 1;
    size_t t1 = line.find('\t'), t2 = line.rfind('\t');
    ASSERT_NE(t1, t2) << line;
    got[line.substr(0, t1)] = {line.substr(t1 + 1, t2 - t1 - 1), std::stod(line.substr(t2 + 1))};
  }
  ASSERT_EQ(got.size(), x.views.size()) << out;
  auto f = marin::read_safetensors(p);
  for (const auto& name : f.names) {
    const auto& t = f.at(name);
    std::string shape = "[";
    for (size_t i = 0; i < t.shape.size(); ++i)
      shape += (i ? ", " : "") + std::to_string(t.shape[i]);
    shape += "]";
    double sum = 0;
    for (float v : t.data) sum += v;
    EXPECT_EQ(got[name].first, shape) << name;
    EXPECT_NEAR(got[name].second, sum, 1e-9 * (1 + std::abs(sum))) << name;
  }
}

}  // namespace
