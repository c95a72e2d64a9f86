#pragma once
// One exception type for every user-facing failure: the message names the file, field or value
// and what was expected. The CLI prints it and exits non-zero.
#include <fmt/core.h>

#include <stdexcept>
#include <string>

namespace marin {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <class... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

// A check that stays on in release builds (it guards user input, not internal invariants).
#define MARIN_CHECK(cond, ...)               \
  do {                                       \
    if (!(cond)) ::marin::fail(__VA_ARGS__); \
  } while (0)

}  // namespace marin
