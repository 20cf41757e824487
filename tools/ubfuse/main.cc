// ubfuse command line: demo, run, explain, bench. Each subcommand lives in cmd_<name>.cc.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli_util.h"
#include "commands.h"
#include "ubfuse/error.h"
#include "util/omp_env.h"

int main(int argc, char** argv) {
  ubfuse::reexec_with_passive_omp_wait(argv);
  CLI::App app{"ubfuse: buffer-level operator fusion for transformer inference"};
  app.require_subcommand(1);
  std::vector<std::function<int()>> actions;
  ubfuse::cli::register_commands(app, actions);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  try {
    for (auto& a : actions) {
      if (a) return a();
    }
  } catch (const ubfuse::Error& e) {
    std::fprintf(stderr, "ubfuse: error: %s\n", e.what());
    return 2;
  } catch (const ubfuse::cli::Interrupted&) {
    std::fprintf(stderr, "ubfuse: interrupted\n");
    return 130;
  }
  return 0;
}
