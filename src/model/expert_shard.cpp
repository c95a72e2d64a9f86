#include "model/expert_shard.hpp"

#include <algorithm>

#include "core/error.hpp"

namespace marin {

template <class T>
void take_shard(const ParamTable& full, const T* in, const ParamTable& local, T* out) {
  for (const ParamInfo& p : local.params()) {
    const ParamInfo& f = full.at(p.name);
    const int64_t at = p.routed_expert ? p.first_expert * (f.size / f.num_mats) : 0;
    MARIN_CHECK(at + p.size <= f.size, "take_shard: {} does not fit its full tensor", p.name);
    std::copy(in + f.offset + at, in + f.offset + at + p.size, out + p.offset);
  }
}

void gather_shards(const ParamTable& local, const float* in, const ParamTable& full, float* out,
                   parallel::Comm& ep) {
  const bool root = ep.is_root();
  const int P = ep.size();
  MARIN_CHECK(P == local.expert_shard().ranks,
              "gather_shards: a group of {} ranks for {} expert shards", P,
              local.expert_shard().ranks);
  std::vector<int64_t> counts(static_cast<size_t>(P)), displs(static_cast<size_t>(P));
  for (const ParamInfo& p : local.params()) {
    const ParamInfo& f = full.at(p.name);
    if (!p.routed_expert || P == 1) {
      if (root) std::copy(in + p.offset, in + p.offset + p.size, out + f.offset);
      continue;
    }
    // Shard j's slice is block j of the full stack (equal sizes: P divides E).
    for (int q = 0; q < P; ++q) counts[size_t(q)] = p.size, displs[size_t(q)] = q * p.size;
    ep.gatherv(in + p.offset, p.size, root ? out + f.offset : nullptr, counts.data(),
               displs.data());
  }
}

template void take_shard<float>(const ParamTable&, const float*, const ParamTable&, float*);
template void take_shard<double>(const ParamTable&, const double*, const ParamTable&, double*);

}  // namespace marin
