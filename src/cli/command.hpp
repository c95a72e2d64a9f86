#pragma once
// Each subcommand lives in its own src/cli/<name>.cpp and registers itself here with
// MARIN_COMMAND; main.cpp only dispatches. A command's setup() adds its options to the CLI11
// subcommand and returns the function that runs it (exit code).
#include <CLI/CLI.hpp>

#include <functional>
#include <string>
#include <vector>

namespace marin::cli {

using Runner = std::function<int()>;
struct Command {
  std::string name;
  std::string help;
  std::function<Runner(CLI::App&)> setup;
};

std::vector<Command>& registry();

struct Registrar {
  Registrar(std::string name, std::string help, std::function<Runner(CLI::App&)> setup) {
    registry().push_back({std::move(name), std::move(help), std::move(setup)});
  }
};

#define MARIN_COMMAND(ident, name, help, ...) \
  static ::marin::cli::Registrar marin_cmd_##ident(name, help, __VA_ARGS__)

}  // namespace marin::cli
