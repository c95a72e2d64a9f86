#pragma once
// xxh64 as marin.cpp writes it everywhere (token and corpus manifests, checkpoint and state.json
// checksums, the rows file's identity, forecast.json): seed 0, 16 lowercase hex digits. One
// definition, so a hash written by one module always compares equal to one computed by another.
#include <fmt/format.h>
#include <xxhash.h>

#include <cstdint>
#include <string>
#include <string_view>

namespace marin {

inline std::string hex64(uint64_t v) {
  return fmt::format("{:016x}", v);
}

inline std::string xxh64_hex(std::string_view bytes) {
  return hex64(XXH64(bytes.data(), bytes.size(), 0));
}

}  // namespace marin
