// marin score: dropless forward of a checkpoint over pre-tokenized rows; one JSON line of
// mean loss, CE, z (mean lse²) and the number of scored tokens. Under mpirun the rows are split
// into one contiguous run per rank and the sums are all-reduced.
#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "cli/command.hpp"
#include "cli/options.hpp"
#include "data/token_rows.hpp"
#include "dist/comm.hpp"
#include "train/checkpoint.hpp"

namespace marin::cli {
namespace {

struct ScoreOptions {
  std::string checkpoint, tokens;
  int batch = 4;
  bool allow_nonfinite = false;
};

int run_score(const ScoreOptions& o) {
  const ModelConfig c = load_config(o.checkpoint);
  const TokenRows rows = TokenRows::load(o.tokens, c.seq_len, c.vocab_size);
  dist::Comm& world = dist::world();
  const dist::Range mine = dist::split_evenly(rows.rows, world.size(), world.rank());
  const int B = int(std::max<int64_t>(1, std::min<int64_t>(o.batch, mine.size())));
  Model<float> m(c, B);
  load_params(o.checkpoint, m.table(), m.params().data(), o.allow_nonfinite);
  m.transport = Transport::Dropless;  // evaluation is always dropless
  std::vector<int32_t> tok(size_t(B) * c.seq_len), lab(tok.size());
  double sums[3] = {0, 0, 0};  // Σ CE, Σ lse², scored tokens
  for (int64_t r = mine.begin; r < mine.end; r += B) {
    const int nb = int(std::min<int64_t>(B, mine.end - r));
    rows.fill(r, nb, tok.data(), lab.data());
    const LossStats s = m.forward({nb, tok.data(), lab.data(), nullptr});
    sums[0] += s.ce * double(s.tokens);
    sums[1] += s.z * double(s.tokens);
    sums[2] += double(s.tokens);
  }
  world.allreduce(sums, 3);
  if (!world.is_root()) return 0;
  const double ce = sums[0], z = sums[1];
  const int64_t n = int64_t(sums[2]);
  nlohmann::json j = {{"loss", ce / double(n) + c.z_loss * z / double(n)},
                      {"ce", ce / double(n)},
                      {"z", z / double(n)},
                      {"tokens", n}};
  fmt::print("{}\n", j.dump());
  return 0;
}

}  // namespace

MARIN_COMMAND(score, "score", "Score pre-tokenized rows with a checkpoint (dropless forward)",
              [](CLI::App& app) -> Runner {
                auto o = std::make_shared<ScoreOptions>();
                app.add_option("--checkpoint", o->checkpoint, "checkpoint directory")->required();
                app.add_option("--tokens", o->tokens,
                               "raw uint32 file of rows of seq_len+1 ids (formats.md)")
                    ->required();
                app.add_option("--batch", o->batch, "rows per forward pass")->default_val(4);
                app.add_flag("--allow-nonfinite", o->allow_nonfinite, kAllowNonfiniteHelp);
                return [o] { return run_score(*o); };
              });

}  // namespace marin::cli
