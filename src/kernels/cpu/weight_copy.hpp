#pragma once
// The GEMMs' side of kernels::WeightCopy (kernels.hpp): where a fresh copy of an input exists,
// and the copy in oneDNN's blocked weight layouts.
#include <cstdint>
#include <oneapi/dnnl/dnnl.hpp>

#include "kernels/kernels.hpp"

namespace marin::kernels::cpu {

struct WeightCopies {
  // The copy of the `extent` floats at p in dtype d (bf16: uint16_t values; bf16_emulated:
  // bf16-rounded floats), at the same offsets and strides, or null where no fresh copy of that
  // dtype holds all of them (in bf16: no plain copy since a refresh() without it).
  static const void* find(const float* p, int64_t extent, Dtype d);
  // Whether a fresh copy in dtype d holds them, plain copy or not (a product that reads the
  // blocked layouts asks this, not find).
  static bool covers(const float* p, int64_t extent, Dtype d);
  // The weights op(B)[K,N] at p (leading dimension ldb, transposed when tb) in the layout `want`
  // that oneDNN's bf16 matmul chose for them (its weights_desc, asked for format `any`): made
  // by a reorder at their first use after each refresh, from the plain bf16 copy where it is
  // current, else from the weights converted then (the same bits), and kept. An empty
  // memory where no fresh bf16 copy holds them.
  static dnnl::memory blocked(const float* p, bool tb, int64_t K, int64_t N, int64_t ldb,
                              const dnnl::memory::desc& want, const dnnl::engine& engine,
                              dnnl::stream& stream);

 private:
  // The fresh copy in dtype d that holds all `extent` floats at p (the caller locks the list).
  static const WeightCopy* holder(const float* p, int64_t extent, Dtype d);
};

}  // namespace marin::kernels::cpu
