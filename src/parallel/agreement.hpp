// Ranks agree or stop: every rank of a job must run with the same settings (model, data,
// optimizer, transport, --ep, micro-batch, seed, ...). Ranks started with different options would
// otherwise wait forever in collectives that do not match (a dropless rank and a capacity rank),
// or, worse, each train something different and finish silently.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "parallel/comm.hpp"

namespace marin::parallel {

// Compares `settings` (a JSON object: the options as run.json records them) on every rank of `c`
// with rank 0's, leaf by leaf. Where any rank differs, every rank throws the same marin::Error
// naming each differing setting and rank 0's value of it, e.g.
//   `the ranks were started with different options: transport (rank 0: "dropless") — every rank
//   must run the same command`.
// A collective: every rank of `c` must call it. Costs one broadcast and one small allreduce.
void require_agreement(Comm& c, const nlohmann::json& settings, std::string_view what);

}  // namespace marin::parallel
