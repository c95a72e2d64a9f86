// A token directory's manifest.json (TokenManifest::load), and the cross-check of each shard it
// lists against the shard's header (TokenManifest::open) for a fixed shard <d>/train-00000.tok
// (2 documents, 5 tokens, 11 bytes, vocab 300, tokenizer hash 0x5eed).
#include "data/shards.hpp"
#include "fuzz_util.hpp"

namespace {
constexpr uint64_t kHash = 0x5eed;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fz = marin::fuzz;
  static const bool shard = [] {
    const std::filesystem::path dir = fz::scratch_dir() / "tok" / "d";
    std::filesystem::create_directories(dir);
    const std::vector<uint64_t> offsets = {0, 2, 5};
    const std::vector<uint32_t> tokens = {1, 2, 3, 299, 0};
    marin::write_token_shard((dir / "train-00000.tok").string(), 300, kHash, 11, offsets, tokens);
    return true;
  }();
  (void)shard;
  fz::refuse_or_accept([&] {
    fz::input_file("tok/manifest.json", fz::as_text(data, size));
    const marin::TokenManifest m = marin::TokenManifest::load((fz::scratch_dir() / "tok").string());
    (void)m.domains();
    for (const marin::TokenShardInfo& s : m.shards) {
      if (s.file != "d/train-00000.tok") continue;  // other paths name files that do not exist
      fz::refuse_or_accept([&] { (void)m.open(s, m.tokenizer_hash); });
    }
  });
  return 0;
}
