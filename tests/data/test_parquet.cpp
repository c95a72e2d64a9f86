// The Parquet reader (src/data/sources/parquet_*.cpp) on files written by two real writers: the
// Rust `parquet` crate (npm parquet-wasm) and hyparquet-writer, made at test time by
// scripts/parquet_write.sh (never committed), and on those files damaged in each way the reader
// must refuse.
#include <gtest/gtest.h>
#include <xxhash.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <optional>
#include <set>
#include <sstream>

#include "cli_util.hpp"
#include "core/fileio.hpp"
#include "data/sources/document_source.hpp"
#include "data/sources/parquet_file.hpp"
#include "data/sources/thrift_compact.hpp"

using namespace marin;
using namespace marin::data;
using namespace marin::testing;

namespace {

// The texts every file holds, in order: non-ASCII, empty, long (> 64 KiB), repeated (for the
// dictionary), quotes and newlines, and nulls.
std::vector<std::optional<std::string>> texts() {
  std::vector<std::optional<std::string>> t = {
      "hello",
      "",
      std::nullopt,
      "h\xc3\xa9llo w\xc3\xb6rld \xe2\x9c\x93 \xe6\x97\xa5\xe6\x9c\xac \xf0\x9f\x8e\x89",
      std::string(70000, 'x') + "end of a long one",
      std::nullopt,
      "a\nb\"c\\d\te",
      "same",
      "same",
      "same"};
  std::string grow;
  for (int i = 0; i < 40; ++i) {
    grow += "word" + std::to_string(i) + " ";
    t.push_back("doc " + std::to_string(i) + ": " + grow);
  }
  t.push_back(std::nullopt);
  t.push_back(std::string(100000, 'y'));
  t.push_back("last");
  return t;
}

struct Written {
  std::string dir, skip_reason, error;
  std::vector<std::string> files;
};

// Writes the files once for the whole suite.
const Written& written() {
  static const Written w = [] {
    Written w;
    w.dir = (std::filesystem::temp_directory_path() /
             ("marin-test-parquet-" + std::to_string(::getpid())))
                .string();
    std::filesystem::remove_all(w.dir);
    std::filesystem::create_directories(w.dir);
    static std::string remove_at_exit;
    remove_at_exit = w.dir;
    std::atexit([] {
      std::error_code ec;
      std::filesystem::remove_all(remove_at_exit, ec);
    });
    std::string jsonl;
    for (const auto& t : texts())
      jsonl += nlohmann::json{{"text", t ? nlohmann::json(*t) : nlohmann::json()}}.dump() + "\n";
    write_file_atomic(w.dir + "/in.jsonl", jsonl);
    const std::string script = std::string(MARIN_SOURCE_DIR) + "/scripts/parquet_write.sh";
    const RunResult fetch = run_shell(script + " fetch");
    if (fetch.code != 0) {
      w.skip_reason = "node, npm or the npm registry is unavailable: " + fetch.out;
      return w;
    }
    const RunResult r = run_shell(script + " write " + w.dir + "/in.jsonl " + w.dir + "/out");
    if (r.code != 0) {
      w.error = r.out;
      return w;
    }
    std::istringstream list(read_file(w.dir + "/out/files.txt"));
    for (std::string f; std::getline(list, f);)
      if (!f.empty()) w.files.push_back(f);
    return w;
  }();
  return w;
}

std::string path_of(const std::string& name) {
  return written().dir + "/out/" + name;
}

#define NEED_FILES()                                                           \
  do {                                                                         \
    if (!written().skip_reason.empty()) GTEST_SKIP() << written().skip_reason; \
    ASSERT_EQ(written().error, "");                                            \
  } while (0)

struct Read {
  std::vector<std::string> values;
  int64_t nulls = 0;
};

Read read_column(const std::string& path, const std::string& column) {
  ParquetFile f(path);
  ParquetTextColumn c(f, column);
  Read r;
  std::string_view v;
  while (c.next(v)) r.values.emplace_back(v);
  r.nulls = c.nulls();
  EXPECT_EQ(c.values(), int64_t(r.values.size()));
  return r;
}

bool refused_file(const std::string& name) {
  return name.find("lz4") != std::string::npos || name.find("brotli") != std::string::npos ||
         name.find("delta") != std::string::npos;
}

}  // namespace

TEST(Parquet, TheWriterMatrixIsComplete) {
  NEED_FILES();
  std::set<std::string> have(written().files.begin(), written().files.end());
  for (const std::string codec : {"uncompressed", "snappy", "gzip", "zstd"}) {
    for (const std::string page : {"v1", "v2"})
      for (const std::string enc : {"dict", "plain"})
        EXPECT_TRUE(have.count("rust-" + codec + "-" + page + "-" + enc + ".parquet")) << codec;
    // hyparquet-writer's ZSTD goes through the `zstd` command; without it those two are not
    // written (scripts/parquet_write.mjs), and the Rust writer alone covers ZSTD.
    if (codec == "zstd" && run_shell("command -v zstd").code != 0) {
      std::printf("no `zstd` command: hyparquet-writer's ZSTD files not written\n");
      continue;
    }
    for (const std::string enc : {"dict", "plain"})
      EXPECT_TRUE(have.count("hyparquet-" + codec + "-v2-" + enc + ".parquet")) << codec;
  }
}

TEST(Parquet, EveryFileOfBothWritersReadsBackByteForByte) {
  NEED_FILES();
  std::vector<std::string> expect_text, expect_req;
  int64_t expect_nulls = 0;
  for (const auto& t : texts()) {
    if (t) expect_text.push_back(*t);
    expect_nulls += !t;
    expect_req.push_back(t.value_or(""));
  }
  int checked = 0;
  for (const auto& name : written().files) {
    if (refused_file(name)) continue;
    SCOPED_TRACE(name);
    const Read text = read_column(path_of(name), "text");
    EXPECT_EQ(text.nulls, expect_nulls);
    ASSERT_EQ(text.values.size(), expect_text.size());
    for (size_t i = 0; i < expect_text.size(); ++i) EXPECT_EQ(text.values[i], expect_text[i]) << i;
    const Read req = read_column(path_of(name), "req");  // REQUIRED: no definition levels
    EXPECT_EQ(req.nulls, 0);
    EXPECT_EQ(req.values, expect_req);
    // Several row groups in every file.
    EXPECT_GT(ParquetFile(path_of(name)).metadata().row_groups.size(), 3u);
    ++checked;
  }
  EXPECT_GE(checked, 24);
}

TEST(Parquet, ListsTheColumnsWithTheirTypes) {
  NEED_FILES();
  const ParquetFile f(path_of("rust-snappy-v1-dict.parquet"));
  EXPECT_EQ(f.column_list(), "text (BYTE_ARRAY, STRING), req (BYTE_ARRAY, STRING), n (INT32)");
  EXPECT_EQ(f.metadata().num_rows, int64_t(texts().size()));
  const auto cols = f.columns();
  ASSERT_EQ(cols.size(), 3u);
  EXPECT_EQ(cols[0].repetition, "OPTIONAL");
  EXPECT_EQ(cols[1].repetition, "REQUIRED");
}

TEST(Parquet, RefusesOtherCodecsAndEncodingsByName) {
  NEED_FILES();
  const auto err = [](const std::string& name) {
    return error_of([&] { read_column(path_of(name), "text"); });
  };
  std::string e = err("rust-lz4_raw-v1-plain.parquet");
  EXPECT_NE(e.find("rust-lz4_raw-v1-plain.parquet: column 'text', row group 0: codec LZ4_RAW is "
                   "not supported"),
            std::string::npos)
      << e;
  e = err("rust-brotli-v1-plain.parquet");
  EXPECT_NE(e.find("codec BROTLI is not supported"), std::string::npos) << e;
  e = err("rust-snappy-v2-delta.parquet");
  EXPECT_NE(e.find("row group 0: encoding DELTA_BYTE_ARRAY is not supported"), std::string::npos)
      << e;
  e = err("hyparquet-snappy-v2-deltalength.parquet");
  EXPECT_NE(e.find("encoding DELTA_LENGTH_BYTE_ARRAY is not supported"), std::string::npos) << e;
}

TEST(Parquet, RefusesAColumnOfAnotherTypeAndAMissingColumn) {
  NEED_FILES();
  const std::string p = path_of("rust-snappy-v1-dict.parquet");
  std::string e = error_of([&] { read_column(p, "n"); });
  EXPECT_NE(e.find(p + ": column 'n' is INT32, not a text column: expected BYTE_ARRAY"),
            std::string::npos)
      << e;
  e = error_of([&] { read_column(p, "body"); });
  EXPECT_NE(e.find(p + ": no column 'body'; the file's columns are: text (BYTE_ARRAY, STRING), "
                       "req (BYTE_ARRAY, STRING), n (INT32)"),
            std::string::npos)
      << e;
}

namespace {

// A copy of a written file with `edit` applied, at DIR/bad-NAME.
std::string damaged(const std::string& name,
                    const std::function<void(std::string&, const ParquetFile&)>& edit) {
  std::string bytes = read_file(path_of(name));
  const ParquetFile f(path_of(name));
  edit(bytes, f);
  const std::string out = written().dir + "/bad-" + name;
  write_file_atomic(out, bytes);
  return out;
}

void expect_error(const std::string& path, const std::string& column, const std::string& part) {
  const std::string e = error_of([&] { read_column(path, column); });
  EXPECT_NE(e.find(path), std::string::npos) << e;
  EXPECT_NE(e.find(part), std::string::npos) << e;
}

}  // namespace

TEST(Parquet, BadMagicFooterAndTruncation) {
  NEED_FILES();
  const std::string name = "rust-snappy-v1-dict.parquet";
  expect_error(damaged(name, [](std::string& b, const ParquetFile&) { b.replace(0, 4, "PAR2"); }),
               "text", "not a Parquet file: expected the magic 'PAR1'");
  expect_error(damaged(name,
                       [](std::string& b, const ParquetFile&) {
                         const uint32_t huge = 0x7fffffff;
                         std::memcpy(b.data() + b.size() - 8, &huge, 4);
                       }),
               "text", "the footer length 2147483647 (at byte offset");
  expect_error(damaged(name, [](std::string& b, const ParquetFile&) { b.resize(b.size() / 2); }),
               "text", "not a Parquet file");
  expect_error(damaged(name, [](std::string& b, const ParquetFile&) { b.resize(7); }), "text",
               "shorter than the 12 of an empty one");
  // The data cut away but the footer kept: the pages read are the footer's bytes, or lie past the
  // file's end.
  expect_error(damaged(name,
                       [](std::string& b, const ParquetFile&) {
                         uint32_t len;
                         std::memcpy(&len, b.data() + b.size() - 8, 4);
                         b = b.substr(0, 8) + b.substr(b.size() - 8 - len);
                       }),
               "text", "column 'text', row group 0, page at byte offset");
  // A footer whose Thrift bytes are cut short.
  expect_error(damaged(name,
                       [](std::string& b, const ParquetFile&) {
                         uint32_t len;
                         std::memcpy(&len, b.data() + b.size() - 8, 4);
                         const uint32_t half = len / 2;
                         b.erase(b.size() - 8 - len, len - half);
                         std::memcpy(b.data() + b.size() - 8, &half, 4);
                       }),
               "text", "footer (FileMetaData)");
}

TEST(Parquet, APageWhoseSizesDisagree) {
  NEED_FILES();
  // An uncompressed page: the header's second field (uncompressed_page_size) made one larger.
  const std::string name = "rust-uncompressed-v1-plain.parquet";
  const std::string p = damaged(name, [](std::string& b, const ParquetFile& f) {
    const size_t at = size_t(f.metadata().row_groups[0].columns[0].data_page_offset);
    ASSERT_EQ(uint8_t(b[at]), 0x15);           // field 1, i32: the page type
    ASSERT_EQ(uint8_t(b[at + 2]), 0x15);       // field 2, i32: uncompressed_page_size
    b[at + 3] = char(uint8_t(b[at + 3]) + 2);  // zigzag: one more
  });
  expect_error(p, "text", "row group 0, page at byte offset");
  const std::string e = error_of([&] { read_column(p, "text"); });
  EXPECT_NE(e.find("whose header says"), std::string::npos) << e;
}

TEST(Parquet, CorruptCompressedData) {
  NEED_FILES();
  for (const std::string name : {"rust-snappy-v1-plain.parquet", "rust-gzip-v1-plain.parquet",
                                 "rust-zstd-v2-plain.parquet"}) {
    SCOPED_TRACE(name);
    const std::string p = damaged(name, [](std::string& b, const ParquetFile& f) {
      // Garbage over the second half of the first column chunk (page bodies and headers).
      const auto& c = f.metadata().row_groups[0].columns[0];
      const size_t from = size_t(c.data_page_offset + c.total_compressed_size / 2);
      for (size_t i = from; i < size_t(c.data_page_offset + c.total_compressed_size); ++i)
        b[i] = char(0xa5 ^ (i * 7));
    });
    expect_error(p, "text", "row group 0");
  }
}

// The adapter into the document seam: a Parquet file through open_source ("auto" and
// "parquet") yields exactly the documents its JSONL original does, nulls skipped and counted.
TEST(Parquet, DocumentSourceMatchesTheSameTextsAsJsonl) {
  NEED_FILES();
  const auto read_all = [](const std::string& path, std::string_view format,
                           const SourceOptions& o) {
    std::vector<Document> docs;
    auto src = open_source(path, format, o);
    Document d;
    while (src->next(d)) docs.push_back(d);
    return std::make_pair(docs, src->skipped());
  };
  SourceOptions o;
  const auto [jsonl, jsonl_skipped] = read_all(written().dir + "/in.jsonl", "jsonl", o);
  ASSERT_EQ(jsonl_skipped.at("null text"), 3u);
  for (const std::string name : {"rust-zstd-v1-dict.parquet", "rust-gzip-v2-plain.parquet",
                                 "hyparquet-snappy-v2-dict.parquet"}) {
    SCOPED_TRACE(name);
    for (const std::string_view format : {"auto", "parquet"}) {
      const auto [docs, skipped] = read_all(path_of(name), format, o);
      EXPECT_EQ(skipped, jsonl_skipped);
      ASSERT_EQ(docs.size(), jsonl.size());
      for (size_t i = 0; i < docs.size(); ++i) {
        EXPECT_EQ(docs[i].text, jsonl[i].text) << i;
        EXPECT_EQ(docs[i].id, "");
      }
    }
    // --id-field: another text column, read row by row alongside.
    SourceOptions with_id;
    with_id.id_field = "req";
    const auto [docs, skipped] = read_all(path_of(name), "parquet", with_id);
    ASSERT_EQ(docs.size(), jsonl.size());
    for (const auto& d : docs) EXPECT_EQ(d.id, d.text);
    // The manifest's hash is the file's xxh64.
    auto src = open_source(path_of(name), "parquet", o);
    Document d;
    while (src->next(d)) {
    }
    const std::string bytes = read_file(path_of(name));
    EXPECT_EQ(src->file_xxh64(), XXH64(bytes.data(), bytes.size(), 0));
    EXPECT_EQ(src->bytes_read(), bytes.size());
  }
  SourceOptions bad;
  bad.text_field = "n";
  const std::string e =
      error_of([&] { read_all(path_of("rust-zstd-v1-dict.parquet"), "auto", bad); });
  EXPECT_NE(e.find("column 'n' is INT32, not a text column"), std::string::npos) << e;
}

// --- Columns of every type task data has (scripts/parquet_write.sh … cols): integers, booleans,
// floats, lists and structs, read as rows of JSON by ParquetRowReader. ---

namespace {

// The cols files, written once (their own directory: the mode writes fixed rows).
const Written& written_cols() {
  static const Written w = [] {
    Written w;
    if (!written().skip_reason.empty()) {
      w.skip_reason = written().skip_reason;
      return w;
    }
    w.dir = written().dir + "/cols";
    const std::string script = std::string(MARIN_SOURCE_DIR) + "/scripts/parquet_write.sh";
    const RunResult r = run_shell(script + " write /dev/null " + w.dir + " cols");
    if (r.code != 0) {
      w.error = r.out;
      return w;
    }
    std::istringstream list(read_file(w.dir + "/files.txt"));
    for (std::string f; std::getline(list, f);)
      if (!f.empty()) w.files.push_back(f);
    return w;
  }();
  return w;
}

#define NEED_COLS()                                                                      \
  do {                                                                                   \
    if (!written_cols().skip_reason.empty()) GTEST_SKIP() << written_cols().skip_reason; \
    ASSERT_EQ(written_cols().error, "");                                                 \
  } while (0)

std::vector<std::string> read_rows(const std::string& path) {
  const ParquetFile f(path);
  ParquetRowReader r(f);
  std::vector<std::string> rows;
  for (std::string line; r.next(line);) rows.push_back(line);
  return rows;
}

}  // namespace

TEST(Parquet, TypedNestedAndNullColumnsOfBothWritersReadAsTheirJson) {
  NEED_COLS();
  const std::set<std::string> files(written_cols().files.begin(), written_cols().files.end());
  EXPECT_EQ(files, (std::set<std::string>{"cols-rust-v1-dict.parquet", "cols-rust-v1-plain.parquet",
                                          "cols-rust-v2-dict.parquet", "cols-rust-v2-plain.parquet",
                                          "cols-hyparquet-v2-dict.parquet",
                                          "cols-hyparquet-v2-plain.parquet"}));
  std::vector<nlohmann::json> expected;
  std::istringstream in(read_file(written_cols().dir + "/expected.jsonl"));
  for (std::string line; std::getline(in, line);)
    if (!line.empty()) expected.push_back(nlohmann::json::parse(line));
  ASSERT_EQ(expected.size(), 11u);
  for (const std::string& name : written_cols().files) {
    SCOPED_TRACE(name);
    const std::vector<std::string> rows = read_rows(written_cols().dir + "/" + name);
    ASSERT_EQ(rows.size(), expected.size());
    for (size_t i = 0; i < rows.size(); ++i) {
      EXPECT_EQ(nlohmann::json::parse(rows[i]), expected[i]) << "row " << i << ": " << rows[i];
      // Column order as in the file, and integers as integers (not 1.0).
      if (i == 2) {
        EXPECT_EQ(rows[i],
                  "{\"question\":\"caf\u00e9\",\"answer\":9007199254740993,\"n32\":-7,\"flag\":"
                  "null,\"score\":-1.25,\"f32\":1.25,\"choices\":null,\"nums\":null,\"arc\":null,"
                  "\"pairs\":null}");
      }
    }
  }
}

TEST(Parquet, TheTextColumnReaderStillRefusesTypedColumnsByName) {
  NEED_COLS();
  const std::string p = written_cols().dir + "/cols-rust-v1-dict.parquet";
  std::string e = error_of([&] { read_column(p, "choices"); });
  EXPECT_NE(e.find(p + ": column 'choices' is a group"), std::string::npos) << e;
  e = error_of([&] { read_column(p, "answer"); });
  EXPECT_NE(e.find("column 'answer' is INT64, not a text column"), std::string::npos) << e;
  // The text column of the same file reads through the general leaf reader.
  const Read r = read_column(p, "question");
  EXPECT_EQ(r.nulls, 1);
  ASSERT_EQ(r.values.size(), 10u);
  EXPECT_EQ(r.values[1], "caf\u00e9");
}

namespace {

// The first data page of column `col` of row group 0: where its body starts (after the Thrift
// page header).
size_t page_body_at(const std::string& bytes, const ParquetFile& f, size_t col) {
  const auto& c = f.metadata().row_groups[0].columns[col];
  const size_t at = size_t(c.data_page_offset);
  ThriftCompactReader r(std::string_view(bytes).substr(at), at, "test page header");
  r.skip(ThriftType::Struct);
  return at + r.consumed();
}

size_t column_index(const ParquetFile& f, const std::vector<std::string>& path) {
  const auto& cols = f.metadata().row_groups[0].columns;
  for (size_t i = 0; i < cols.size(); ++i)
    if (cols[i].path == path) return i;
  ADD_FAILURE() << "no column";
  return 0;
}

}  // namespace

TEST(Parquet, InconsistentLevelsAreErrorsNamingTheFileAndColumn) {
  NEED_COLS();
  const auto damage = [](const std::string& name,
                         const std::function<void(std::string&, const ParquetFile&)>& edit) {
    const std::string src = written_cols().dir + "/" + name;
    std::string bytes = read_file(src);
    const ParquetFile f(src);
    edit(bytes, f);
    const std::string out = written_cols().dir + "/bad-" + name;
    write_file_atomic(out, bytes);
    return out;
  };
  const auto rows_error = [](const std::string& p) { return error_of([&] { read_rows(p); }); };
  // A repetition level past the column's maximum (1): a data page v2's levels are never
  // compressed, so its first bytes become an RLE run of one level 3.
  std::string p = damage("cols-rust-v2-plain.parquet", [](std::string& b, const ParquetFile& f) {
    const size_t at = page_body_at(b, f, column_index(f, {"choices", "list", "item"}));
    b[at] = 0x02;
    b[at + 1] = 0x03;
  });
  std::string e = rows_error(p);
  EXPECT_NE(e.find(p + ": column 'choices.list.item', row group 0, page at byte offset"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("a repetition level of 3 past the column's maximum 1"), std::string::npos) << e;
  // A page header whose value count is one less than its levels (and its chunk's count).
  p = damage("cols-rust-v2-plain.parquet", [](std::string& b, const ParquetFile& f) {
    const auto& c =
        f.metadata().row_groups[0].columns[column_index(f, {"choices", "list", "item"})];
    const size_t at = size_t(c.data_page_offset);
    // The DataPageHeaderV2 (field 8, after field 3: delta 5, struct) and its num_values (i32).
    for (size_t i = at; i < at + 24; ++i)
      if (uint8_t(b[i]) == 0x5c && uint8_t(b[i + 1]) == 0x15) {
        ASSERT_GE(uint8_t(b[i + 2]), 2);
        ASSERT_LT(uint8_t(b[i + 2]), 0x80);
        b[i + 2] = char(uint8_t(b[i + 2]) - 2);  // zigzag: one less
        return;
      }
    FAIL() << "no DataPageHeaderV2";
  });
  e = rows_error(p);
  EXPECT_NE(e.find(p + ": "), std::string::npos) << e;
  EXPECT_NE(e.find("choices.list.item"), std::string::npos) << e;
  // Every third byte of a file's data changed, one at a time: a marin::Error or rows, never a
  // crash (run under ASan by the sanitizer build).
  for (const std::string name : {"cols-rust-v1-dict.parquet", "cols-hyparquet-v2-plain.parquet"}) {
    const std::string src = written_cols().dir + "/" + name;
    const std::string good = read_file(src);
    uint32_t footer_len;
    std::memcpy(&footer_len, good.data() + good.size() - 8, 4);
    const std::string out = written_cols().dir + "/flip-" + name;
    int errors = 0;
    for (size_t i = 4; i + 8 + footer_len < good.size(); i += 3) {
      std::string b = good;
      b[i] = char(uint8_t(b[i]) ^ 0x5a);
      write_file_atomic(out, b);
      try {
        read_rows(out);
      } catch (const Error& err) {
        ++errors;
        EXPECT_NE(std::string(err.what()).find(out), std::string::npos) << err.what();
      }
    }
    EXPECT_GT(errors, 0);
  }
}
