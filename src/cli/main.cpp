// marin: one binary, one subcommand per src/cli/*.cpp file. This file only dispatches.
#include <fmt/core.h>

#include <algorithm>
#include <map>

#include "cli/command.hpp"
#include "core/error.hpp"

namespace marin::cli {
std::vector<Command>& registry() {
  static std::vector<Command> r;
  return r;
}
}  // namespace marin::cli

int main(int argc, char** argv) {
  using namespace marin::cli;
  CLI::App app{
      "marin: pretrain, forecast and evaluate Mixture-of-Experts language models with the Marin "
      "535B-A23B recipe.\nRun `marin <command> --help` for the options of one command."};
  app.require_subcommand(1);
  app.set_version_flag("--version", "marin.cpp 0.1");
  auto& cmds = registry();
  std::sort(cmds.begin(), cmds.end(), [](auto& a, auto& b) { return a.name < b.name; });
  std::map<CLI::App*, Runner> runners;
  for (auto& c : cmds) {
    CLI::App* sub = app.add_subcommand(c.name, c.help);
    runners[sub] = c.setup(*sub);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    for (auto& [sub, run] : runners)
      if (sub->parsed()) return run();
  } catch (const marin::Error& e) {
    fmt::print(stderr, "marin: error: {}\n", e.what());
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "marin: internal error: {}\n", e.what());
    return 2;
  }
  return 0;
}
