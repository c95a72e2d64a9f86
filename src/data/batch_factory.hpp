#pragma once
// The training and validation sources of a run, built from their data specs (the "data" and
// "valid" of the run's options, as run.json and every checkpoint's state.json record them):
//   {"kind": "rows", "path": ROWS}                                   pre-tokenized rows
//   {"kind": "mixture", "tokens": TOKDIR, "mixture": {...}}          a mixture (mixture.hpp)
//   {"kind": "valid", "tokens": TOKDIR, "domains": [DOMAIN, ...]}    validation splits, in order
// Adding a data source is one new file (its BatchSource) and one line in make_batch_source;
// nothing in train/ changes.
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "data/batch_source.hpp"

namespace marin {

// What a source needs of the run besides its spec.
struct DataOptions {
  int64_t seq_len = 0;        // tokens per row
  int64_t vocab_size = 0;     // the model's: every token read must be below it
  int64_t rows_per_step = 0;  // the global batch (a mixture's schedule counts steps of it)
  int64_t total_steps = 0;    // a mixture's phases given as fractions of the run
  uint64_t seed = 0;          // a mixture's source choice and document order
  std::string tokenizer;      // the run's tokenizer.json ("": none); shards must carry its hash
};

// The source a spec names; a null spec gives nullptr. A spec that is not an object, lacks a
// field or gives it the wrong type is refused naming the field.
std::unique_ptr<BatchSource> make_batch_source(const nlohmann::json& spec, const DataOptions& o);

}  // namespace marin
