#pragma once
// What every fuzz target shares: an input is either parsed or refused with a marin::Error (the
// project's one error type, with a message naming the file and what was expected). Any other
// exception escaping a parser (a nlohmann::json type error, std::out_of_range, bad_alloc, ...) is
// a bug: it would reach the user as "internal error: ...", so the target aborts and libFuzzer
// reports it with the input. Crashes, hangs and sanitizer reports are caught by libFuzzer itself.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <typeinfo>

#include "core/error.hpp"

namespace marin::fuzz {

inline std::string_view as_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

// Runs parse(); a marin::Error is a refusal (fine), anything else aborts.
template <class F>
void refuse_or_accept(F&& parse) {
  try {
    parse();
  } catch (const marin::Error&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fuzz: a parser threw %s, not marin::Error: %s\n", typeid(e).name(),
                 e.what());
    std::abort();
  }
}

// A directory of this process for parsers that read files (one per process: libFuzzer's -jobs
// and -fork run several), removed when the process exits normally.
inline const std::filesystem::path& scratch_dir() {
  struct Dir {
    std::filesystem::path path =
        std::filesystem::temp_directory_path() / ("marin-fuzz-" + std::to_string(::getpid()));
    Dir() { std::filesystem::create_directories(path); }
    ~Dir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static const Dir dir;
  return dir.path;
}

// Writes the input to scratch_dir()/name (replacing it) and returns its path.
inline std::string input_file(const std::string& name, std::string_view bytes) {
  const std::filesystem::path p = scratch_dir() / name;
  std::filesystem::create_directories(p.parent_path());
  std::ofstream(p, std::ios::binary | std::ios::trunc)
      .write(bytes.data(), std::streamsize(bytes.size()));
  return p.string();
}

}  // namespace marin::fuzz
