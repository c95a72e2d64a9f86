// The one rule that puts a document of an unsplit input into "train" or "valid"
// (`marin tokenize --valid-fraction F`): deterministic, by the xxh64 of the document's key (its id
// when it has one, else its text or token bytes), so the same document lands in the same split
// whatever the order, sharding, thread or rank count of the run that reads it.
#pragma once

#include <xxhash.h>

#include <cstdint>
#include <string_view>

namespace marin::data {

// "valid" when the key's hash, as a fraction of 2^64, is below valid_fraction; else "train".
// valid_fraction 0 puts everything in train, 1 everything in valid.
inline std::string_view split_for(std::string_view key, double valid_fraction) {
  if (valid_fraction <= 0) return "train";
  if (valid_fraction >= 1) return "valid";
  // The top 53 bits as a double in [0, 1): exact, and the same on every machine.
  const uint64_t h = XXH64(key.data(), key.size(), 0);
  const double u = static_cast<double>(h >> 11) * 0x1.0p-53;
  return u < valid_fraction ? "valid" : "train";
}

}  // namespace marin::data
