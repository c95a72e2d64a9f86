// marin score: dropless forward of a checkpoint over pre-tokenized rows; one JSON line of
// mean loss, CE, z (mean lse²) and the number of scored tokens.
#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "cli/command.hpp"
#include "data/token_rows.hpp"
#include "train/checkpoint.hpp"

namespace marin::cli {
namespace {

struct ScoreOptions {
  std::string checkpoint, tokens;
  int batch = 4;
};

int run_score(const ScoreOptions& o) {
  const ModelConfig c = load_config(o.checkpoint);
  const TokenRows rows = TokenRows::load(o.tokens, c.seq_len, c.vocab_size);
  const int B = int(std::min<int64_t>(o.batch, rows.rows));
  Model<float> m(c, B);
  load_params(o.checkpoint, m.table(), m.params().data());
  m.transport = Transport::Dropless;  // evaluation is always dropless
  std::vector<int32_t> tok(size_t(B) * c.seq_len), lab(tok.size());
  double ce = 0, z = 0;
  int64_t n = 0;
  for (int64_t r = 0; r < rows.rows; r += B) {
    const int nb = int(std::min<int64_t>(B, rows.rows - r));
    rows.fill(r, nb, tok.data(), lab.data());
    const LossStats s = m.forward({nb, tok.data(), lab.data(), nullptr});
    ce += s.ce * double(s.tokens);
    z += s.z * double(s.tokens);
    n += s.tokens;
  }
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
                return [o] { return run_score(*o); };
              });

}  // namespace marin::cli
