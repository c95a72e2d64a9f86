// The Parquet reader (src/data/sources/parquet_*.cpp): the footer, the column list, every
// value of the text column `text`, and every row of the file through ParquetRowReader (the leaf
// columns of every type and the row assembly from their levels). Seeds: files written by real
// writers are not committed; scripts/parquet_write.sh writes them at fuzz time
// (`scripts/parquet_write.sh write data/fixture/bible_kjv/valid-00000.jsonl
// fuzz/corpus/fuzz_parquet`), and libFuzzer also starts from nothing ("PAR1" is found quickly
// through the comparison hooks).
#include "data/sources/parquet_file.hpp"
#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path =
      marin::fuzz::input_file("fuzz.parquet", marin::fuzz::as_text(data, size));
  marin::fuzz::refuse_or_accept([&] {
    const marin::data::ParquetFile f(path);
    (void)f.column_list();
    marin::data::ParquetTextColumn c(f, "text");
    std::string_view v;
    while (c.next(v)) {
    }
  });
  marin::fuzz::refuse_or_accept([&] {
    const marin::data::ParquetFile f(path);
    marin::data::ParquetRowReader rows(f);
    std::string row;
    while (rows.next(row)) {
    }
  });
  return 0;
}
