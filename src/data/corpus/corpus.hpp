#pragma once
// The multi-domain text corpus (docs/corpus.md): markup stripping for each source format, the
// stable train/validation split, and the builder behind `marin corpus build`.
//
// Design: scripts/fetch_corpus.sh fetches the packages and runs the outside decoders and renderers
// (bible, mod2imp, man | col, gzip -d, the kernel tarball) once, writing plain files under the
// sources directory; the builder here only reads files, so it is deterministic for a given
// sources directory and needs no tool at build time.
#include <nlohmann/json.hpp>

#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace marin::corpus {

// ---- text cleaning (clean.cpp) -----------------------------------------------------------------

// What clean_text() repaired, summed per domain into the manifest.
struct CleanStats {
  std::uint64_t invalid_utf8_bytes = 0;  // bytes that were not UTF-8, re-read as Latin-1
  std::uint64_t control_chars = 0;       // C0 controls other than \t \n dropped (incl. \r of CRLF)
  std::uint64_t documents_repaired = 0;  // documents with at least one of the above
};

// Makes `raw` valid UTF-8 (each byte that does not start a valid sequence is taken as Latin-1 and
// re-encoded), turns CRLF/CR into LF, drops other control characters except tab and newline,
// and trims trailing whitespace of each line and blank lines at both ends.
std::string clean_text(std::string_view raw, CleanStats& stats);

// Brown corpus: "The/at Fulton/np-tl ..." -> "The Fulton ...", one sentence per line, quotes
// (`` '') turned into ", punctuation re-attached.
std::string brown_to_text(std::string_view tagged);
// GCIDE entry: drops pronunciations (\Al"lo*cate\), source notes ([1913 Webster]), cross-ref
// braces ({Allow} -> Allow) and turns character escapes (["o], [=a], ...) into Unicode.
std::string gcide_to_text(std::string_view entry);
// FOLDOC / jargon / devil entries: cross-reference braces {x} -> x.
std::string dict_to_text(std::string_view entry);
// HTML page -> text: drops head/script/style, keeps <pre> verbatim, block elements become line
// breaks, entities are decoded.
std::string html_to_text(std::string_view html);
// One SWORD OSIS verse -> text: notes and titles dropped, tags removed, whitespace collapsed.
std::string osis_to_text(std::string_view osis);
// A fortune(6) file: records separated by lines holding only "%"; empty records skipped.
std::vector<std::string> split_fortunes(std::string_view file);
// Decodes &amp; &lt; &gt; &quot; &apos; &nbsp; &#N; &#xH; and a few named entities.
std::string decode_entities(std::string_view s);

// ---- split and hashes (split.cpp) ---------------------------------------------------------------

std::uint64_t xxh64(std::string_view data, std::uint64_t seed = 0);
// A document goes to validation when xxh64(id, seed 0), read as a fraction of 2^64, is below
// `valid_fraction`. Depends on the id only: stable across runs, machines and source versions.
bool is_valid_split(std::string_view id, double valid_fraction);
// xxh64 of a whole file, as 16 lowercase hex digits.
std::string xxh64_file_hex(const std::filesystem::path& file);

// The xxh64 checksums <root>/manifest.json lists per shard, to verify shards as they are read
// (`marin tokenize`, `marin decontaminate`; `--no-verify` skips it). Shards the manifest does
// not list with an "xxh64", and a corpus without a manifest, have nothing to verify.
class ShardChecksums {
 public:
  // Reads <root>/manifest.json (when `verify` and it exists). marin::Error naming the manifest
  // for malformed JSON, a shard path outside the root (absolute or with '..'), a shard listed
  // twice, or a checksum that is not 16 hex digits.
  explicit ShardChecksums(const std::filesystem::path& root, bool verify = true);
  // marin::Error naming the file and both checksums when `bytes`, the contents of `file` (a
  // shard under the root), do not hash to what the manifest lists for it.
  void check(const std::filesystem::path& file, std::string_view bytes) const;

 private:
  std::filesystem::path root_, manifest_;
  std::map<std::string, std::string> xxh64_;  // path relative to the root → 16 hex digits
};

// ---- builder (build.cpp) ------------------------------------------------------------------------

struct BuildOptions {
  std::filesystem::path sources;     // what scripts/fetch_corpus.sh produced
  std::filesystem::path out;         // corpus/<domain>/{train,valid}-NNNNN.jsonl + manifest.json
  std::vector<std::string> domains;  // empty: all (in fixture mode: all that may ship)
  double valid_fraction = 0.02;
  std::uint64_t shard_bytes = 64ull << 20;  // a shard is closed once it reaches this size
  int threads = 2;                          // domains built in parallel
  bool fixture = false;        // a small deterministic slice per shippable domain + LICENSES/
  double fixture_scale = 1.0;  // multiplies the per-domain fixture budgets
  bool progress = true;        // progress lines on stderr
};

struct DomainInfo {
  std::string name;
  std::string category;  // prose, reference, code, docs, ...
  bool eval_only;        // only valid shards (never trained on)
  bool shippable;        // public domain or permissive: may go into the committed fixture
  std::string licence;
  std::vector<std::string> packages;  // Debian packages / npm:<name> it is built from
};

const std::vector<DomainInfo>& domains();

// Builds the corpus and writes <out>/manifest.json; returns the manifest. Fails with a
// marin::Error naming the path when the sources directory or a domain's input is missing.
nlohmann::json build(const BuildOptions& opts);

}  // namespace marin::corpus
