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

// Where each rank did its own part of a collective step (wrote its shard, read its pieces): every
// rank learns whether each succeeded, and an error anywhere ("" on a rank that succeeded) becomes
// the same marin::Error everywhere, naming the first rank that failed and what it said:
//   `WHAT: rank 1 of 4 failed: MESSAGE`. A collective (one allgather of the messages).
void agree_on_error(Comm& c, const std::string& error, std::string_view what);

}  // namespace marin::parallel
