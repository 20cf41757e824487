// Subcommand registration: each cmd_*.cc adds its subcommand and sets the action to run.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <vector>

namespace ubfuse::cli {

// Each register_X adds a subcommand; when parsed, the chosen one's action is non-empty.
void register_demo(CLI::App& app, std::vector<std::function<int()>>& actions);
void register_explain(CLI::App& app, std::vector<std::function<int()>>& actions);
void register_run(CLI::App& app, std::vector<std::function<int()>>& actions);

inline void register_commands(CLI::App& app, std::vector<std::function<int()>>& actions) {
  register_demo(app, actions);
  register_explain(app, actions);
  register_run(app, actions);
}

}  // namespace ubfuse::cli
