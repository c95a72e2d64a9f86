// marin corpus build: the multi-domain text corpus from the fetched sources (docs/corpus.md).
// Room is left for more sub-subcommands (e.g. `decontaminate`) next to `build`.
#include <fmt/core.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "cli/command.hpp"
#include "core/error.hpp"
#include "data/corpus/corpus.hpp"

namespace {

std::string default_sources() {
  if (const char* cache = std::getenv("MARIN_CACHE"); cache && *cache)
    return std::string(cache) + "/sources";
  const char* home = std::getenv("HOME");
  return std::string(home && *home ? home : ".") + "/.cache/marin/sources";
}

struct BuildArgs {
  std::string sources = default_sources();
  std::string out = "corpus";
  std::vector<std::string> domains;
  double valid_fraction = 0.02;
  double shard_mb = 64;
  int threads = 2;
  bool fixture = false;
  double fixture_scale = 1.0;
  bool quiet = false;
};

int run_build(const BuildArgs& a) {
  marin::corpus::BuildOptions o;
  o.sources = a.sources;
  o.out = a.out;
  o.domains = a.domains;
  o.valid_fraction = a.valid_fraction;
  MARIN_CHECK(a.shard_mb > 0, "corpus build: --shard-mb must be positive, got {}", a.shard_mb);
  o.shard_bytes = static_cast<std::uint64_t>(a.shard_mb * (1 << 20));
  o.threads = a.threads;
  o.fixture = a.fixture;
  o.fixture_scale = a.fixture_scale;
  o.progress = !a.quiet;
  auto m = marin::corpus::build(o);
  const auto& t = m["totals"];
  fmt::print(
      "{} domains ({} train+valid, {} eval-only): {} documents, {:.1f} MB of text "
      "({:.1f} MB train, {:.1f} MB valid) -> {}/manifest.json\n",
      t["domains"].get<int>(), t["train_domains"].get<int>(), t["eval_only_domains"].get<int>(),
      t["documents"]["all"].get<std::uint64_t>(), t["bytes"]["all"].get<std::uint64_t>() / 1e6,
      t["bytes"]["train"].get<std::uint64_t>() / 1e6,
      t["bytes"]["valid"].get<std::uint64_t>() / 1e6, a.out);
  return 0;
}

}  // namespace

MARIN_COMMAND(corpus, "corpus", "Build the multi-domain text corpus (JSONL shards + manifest)",
              [](CLI::App& app) -> marin::cli::Runner {
                auto a = std::make_shared<BuildArgs>();
                app.require_subcommand(1);
                auto* build = app.add_subcommand(
                    "build",
                    "Extract clean text per domain from the sources that scripts/fetch_corpus.sh "
                    "fetched; write <out>/<domain>/{train,valid}-NNNNN.jsonl and "
                    "<out>/manifest.json");
                build->add_option("--sources", a->sources, "Directory filled by fetch_corpus.sh")
                    ->capture_default_str();
                build->add_option("--out", a->out, "Output directory")->capture_default_str();
                build->add_option("--domains", a->domains, "Only these domains (default: all)")
                    ->delimiter(',');
                build
                    ->add_option("--valid-fraction", a->valid_fraction,
                                 "Share of documents (by id hash) in the valid split")
                    ->capture_default_str();
                build->add_option("--shard-mb", a->shard_mb, "Shard size limit in MiB")
                    ->capture_default_str();
                build->add_option("--threads", a->threads, "Domains built in parallel")
                    ->capture_default_str();
                build->add_flag("--fixture", a->fixture,
                                "Write the small committed fixture instead: a deterministic "
                                "slice of each shippable domain, plus LICENSES/");
                build
                    ->add_option("--fixture-scale", a->fixture_scale,
                                 "Multiply the per-domain fixture budgets")
                    ->capture_default_str();
                build->add_flag("--quiet", a->quiet, "No progress lines on stderr");
                return [a, build]() -> int {
                  if (build->parsed()) return run_build(*a);
                  return 1;
                };
              });
