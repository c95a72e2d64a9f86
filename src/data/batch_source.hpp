#pragma once
// Where a trainer's batches come from. A source is deterministic: the batch of step s is a
// function of its configuration and its position, and its position is part of the run state
// (saved in checkpoints), so a resumed run reads exactly the rows the uninterrupted one would.
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

namespace marin {

class BatchSource {
 public:
  virtual ~BatchSource() = default;
  // Fills [B, seq_len] inputs, next-token labels (−1 = not scored) and segment (document) ids,
  // then advances the position.
  virtual void next(int B, int32_t* tokens, int32_t* labels, int32_t* seg) = 0;
  virtual nlohmann::json state() const = 0;
  virtual void restore(const nlohmann::json& state) = 0;
  virtual std::string describe() const = 0;
  // How many rows it yields before it repeats itself (0: not a fixed number, e.g. a mixture,
  // which reports each source's passes in its state instead).
  virtual int64_t distinct_rows() const { return 0; }
};

// Pre-tokenized rows (formats.md) in plain order: step s uses rows s·B … s·B+B−1 (wrapping), one
// document per row, so any other implementation of the recipe can reproduce a run on known tokens.
std::unique_ptr<BatchSource> make_rows_source(const std::string& path, int64_t seq_len,
                                              int64_t vocab_size);

}  // namespace marin
