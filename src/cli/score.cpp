// marin score: dropless forward of a checkpoint over pre-tokenized rows (--rows), or over the
// documents of a token directory's domain packed into rows as validation packs them (--token-dir,
// --domain, --split); one JSON line of mean loss, CE, z (mean lse²) and the number of scored
// tokens. Under mpirun the rows are split into one contiguous run per rank and the sums are
// all-reduced.
#include <fmt/core.h>

#include <nlohmann/json.hpp>

#include "cli/command.hpp"
#include "cli/options.hpp"
#include "data/loader.hpp"
#include "data/token_rows.hpp"
#include "parallel/comm.hpp"
#include "train/checkpoint.hpp"

namespace marin::cli {
namespace {

struct ScoreOptions {
  DtypeOption dtype;
  std::string checkpoint, rows, token_dir, domain, split = "valid";
  int batch = 4;
  bool allow_nonfinite = false;
};

// Rows to score: a rows file, or a domain's documents packed as validation packs them.
class ScoreRows {
 public:
  ScoreRows(const ScoreOptions& o, const ModelConfig& c) : seq_len_(c.seq_len) {
    const std::string& rows = o.rows;
    if (rows.empty() == o.token_dir.empty())
      fail("score needs one of --rows FILE or --token-dir DIR (with --domain)");
    if (!rows.empty()) {
      rows_ = TokenRows::load(rows, c.seq_len, c.vocab_size);
      total_ = rows_.rows;
      return;
    }
    if (o.domain.empty()) fail("score --token-dir needs --domain (a domain of its manifest)");
    packed_ = ValidationSource::for_domain(o.token_dir, o.domain, c.seq_len, 0,
                                           uint32_t(c.vocab_size), o.split);
    total_ = packed_->total_rows();
  }
  int64_t total() const { return total_; }
  // Rows [r, r + n) into tok/lab/seg (called in increasing r).
  void fill(int64_t r, int n, int32_t* tok, int32_t* lab, int32_t* seg) {
    if (!packed_) {
      rows_.fill(r, n, tok, lab);
      std::fill(seg, seg + int64_t(n) * seq_len_, 0);
      return;
    }
    // A packed source is read in order: skip the rows of lower ranks.
    std::vector<int32_t> t(static_cast<size_t>(seq_len_)), l(t.size()), g(t.size());
    while (packed_->row() < r) packed_->next(1, t.data(), l.data(), g.data());
    packed_->next(n, tok, lab, seg);
  }

 private:
  int64_t seq_len_, total_ = 0;
  TokenRows rows_;
  std::unique_ptr<ValidationSource> packed_;
};

int run_score(const ScoreOptions& o) {
  const ModelConfig c = load_config(o.checkpoint);
  ScoreRows rows(o, c);
  parallel::Comm& world = parallel::world();
  const parallel::Range mine = parallel::split_evenly(rows.total(), world.size(), world.rank());
  const int B = int(std::max<int64_t>(1, std::min<int64_t>(o.batch, mine.size())));
  o.dtype.apply();
  Model<float> m(c, B, ModelUse::Inference);
  load_params(o.checkpoint, m.table(), m.params().data(), o.allow_nonfinite);
  std::vector<int32_t> tok(size_t(B) * c.seq_len), lab(tok.size()), seg(tok.size());
  double sums[3] = {0, 0, 0};  // Σ CE, Σ lse², scored tokens
  for (int64_t r = mine.begin; r < mine.end; r += B) {
    const int nb = int(std::min<int64_t>(B, mine.end - r));
    rows.fill(r, nb, tok.data(), lab.data(), seg.data());
    const LossStats s =
        m.forward({nb, tok.data(), lab.data(), seg.data(), 0, /*same_weights=*/r > mine.begin,
                   /*evaluation=*/true});
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

MARIN_COMMAND(score, "score",
              "Score pre-tokenized rows, or a domain of a token directory, with a checkpoint "
              "(dropless forward)",
              [](CLI::App& app) -> Runner {
                auto o = std::make_shared<ScoreOptions>();
                app.add_option("--checkpoint", o->checkpoint, "checkpoint directory")->required();
                app.add_option("--rows", o->rows,
                               "raw uint32 file of rows of seq_len+1 ids (docs/formats.md)");
                add_deprecated(app, "--tokens", "--rows", o->rows);
                app.add_option("--token-dir", o->token_dir,
                               "token directory (marin tokenize): score --domain's documents, "
                               "packed into rows as validation packs them");
                app.add_option("--domain", o->domain, "with --token-dir: the domain to score");
                app.add_option("--split", o->split, "with --token-dir: valid (default) or train");
                app.add_option("--batch", o->batch, "rows per forward pass")->default_val(4);
                app.add_flag("--allow-nonfinite", o->allow_nonfinite, kAllowNonfiniteHelp);
                o->dtype.add(app);
                return [o] { return run_score(*o); };
              });

}  // namespace marin::cli
