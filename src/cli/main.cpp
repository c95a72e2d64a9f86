// marin: one binary, one subcommand per src/cli/*.cpp file. This file only dispatches.
#include <fmt/core.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>

#include "cli/command.hpp"
#include "core/error.hpp"
#include "dist/comm.hpp"

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
  // Under mpirun a failure on one rank must end every rank (the others may be waiting in a
  // collective for it): print this rank's message and abort the whole job.
  namespace dist = marin::dist;
  auto failed = [](const char* kind, const char* what, int code) {
    const bool many = dist::launched_by_mpi() && dist::world().size() > 1;
    if (many)
      fmt::print(stderr, "marin: {} on rank {} of {}: {}\n", kind, dist::world().rank(),
                 dist::world().size(), what);
    else
      fmt::print(stderr, "marin: {}: {}\n", kind, what);
    if (many) dist::world().abort(code);
    dist::finalize();
    return code;
  };
  int rc = 0;
  try {
    for (auto& [sub, run] : runners)
      if (sub->parsed()) rc = run();
    // A report printed to stdout that did not reach it (a full disk, a closed pipe) is a failure,
    // not a silent success.
    if (std::fflush(stdout) != 0 || std::ferror(stdout))
      throw marin::Error(fmt::format("cannot write the output (stdout): {}", std::strerror(errno)));
  } catch (const marin::Error& e) {
    return failed("error", e.what(), 1);
  } catch (const std::exception& e) {
    return failed("internal error", e.what(), 2);
  }
  dist::finalize();
  return rc;
}
