// A text corpus's manifest.json (corpus::ShardChecksums: shard paths, duplicates, xxh64 digits),
// and a shard checked against it.
#include "data/corpus/corpus.hpp"
#include "fuzz_util.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fz = marin::fuzz;
  fz::refuse_or_accept([&] {
    fz::input_file("corpus/manifest.json", fz::as_text(data, size));
    const std::filesystem::path root = fz::scratch_dir() / "corpus";
    const marin::corpus::ShardChecksums sums(root);
    sums.check(root / "d" / "train-00000.jsonl", "{\"text\":\"a\"}\n");
  });
  return 0;
}
