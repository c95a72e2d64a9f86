#pragma once
// Packs scored token segments into the rows of evaluation batches: the one packing of
// per-domain evaluation (document windows, domain_eval.cpp) and of downstream tasks (each
// choice's request, task_scorer.cpp). A segment never crosses a row and has its own segment id,
// so attention stays inside it; the labels of the positions a segment scores name their owner
// (a document, a request), the rest are -1. `flush` hands the filled rows to the caller's
// callback and starts an empty batch; a batch that becomes full is flushed by the next `add`.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

#include "core/error.hpp"
#include "model/model.hpp"  // Batch

namespace marin::eval {

class RowPacker {
 public:
  // on_batch(batch of nb rows, owner of each of its nb·S cells or -1).
  using OnBatch = std::function<void(const Batch& batch, const int64_t* owner)>;

  RowPacker(int rows, int64_t seq_len, OnBatch on_batch)
      : B_(rows),
        S_(seq_len),
        on_batch_(std::move(on_batch)),
        tok_(size_t(rows) * size_t(seq_len), 0),
        lab_(tok_.size(), -1),
        seg_(tok_.size(), -1),
        owner_(tok_.size(), -1) {}

  // Whether segments of these lengths, added in order, all fit in the current batch.
  bool fits(const std::vector<int64_t>& lens) const {
    int r = row_;
    int64_t f = fill_;
    for (int64_t L : lens) {
      if (f + L > S_) ++r, f = 0;
      f += L;
      if (r >= B_) return false;
    }
    return true;
  }

  // One segment of `len` tokens x[0..len): position j predicts x[j + 1] and is scored (owned by
  // `owner`) for j in [score_begin, score_end). x must hold len + 1 tokens where the last
  // position is scored.
  void add(const int32_t* x, int64_t len, int64_t score_begin, int64_t score_end, int64_t owner) {
    MARIN_CHECK(
        len >= 1 && len <= S_ && 0 <= score_begin && score_begin <= score_end && score_end <= len,
        "row packer: segment of {} tokens scoring [{}, {}) (seq_len {})", len, score_begin,
        score_end, S_);
    if (fill_ + len > S_) next_row();
    const size_t base = size_t(row_) * size_t(S_) + size_t(fill_);
    for (int64_t j = 0; j < len; ++j) {
      tok_[base + size_t(j)] = x[j];
      seg_[base + size_t(j)] = next_seg_;
      if (j >= score_begin && j < score_end) {
        lab_[base + size_t(j)] = x[j + 1];
        owner_[base + size_t(j)] = owner;
      }
    }
    fill_ += len;
    ++next_seg_;
  }

  void flush() {
    const int nb = row_ + (fill_ > 0 ? 1 : 0);
    if (nb == 0) return;
    on_batch_({nb, tok_.data(), lab_.data(), seg_.data()}, owner_.data());
    const size_t used = size_t(nb) * size_t(S_);
    std::fill(tok_.begin(), tok_.begin() + int64_t(used), 0);
    std::fill(lab_.begin(), lab_.begin() + int64_t(used), -1);
    std::fill(seg_.begin(), seg_.begin() + int64_t(used), -1);
    std::fill(owner_.begin(), owner_.begin() + int64_t(used), -1);
    row_ = 0, fill_ = 0, next_seg_ = 0;
  }

 private:
  void next_row() {
    ++row_, fill_ = 0, next_seg_ = 0;
    if (row_ == B_) flush();
  }

  int B_;
  int64_t S_;
  OnBatch on_batch_;
  std::vector<int32_t> tok_, lab_, seg_;
  std::vector<int64_t> owner_;
  int row_ = 0;
  int64_t fill_ = 0;
  int32_t next_seg_ = 0;
};

}  // namespace marin::eval
