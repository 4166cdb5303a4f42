// Subcommand registry of the `kvrt` CLI. A command file does:
//   static const bool registered = kvrt::cli::register_command({"inspect", "...", setup});
// where setup adds its options to the subcommand and sets its callback. The callback
// returns the process exit code through kvrt::cli::set_exit_code().
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace kvrt::cli {

struct Command {
  std::string name;
  std::string description;
  std::function<void(CLI::App& subcommand)> setup;
};

bool register_command(Command command);
const std::vector<Command>& registered_commands();

// "kvrt 0.1.0 (cuda: built)": `kvrt --version` and `kvrt version`.
const char* version_line();

void set_exit_code(int code);
int exit_code();

}  // namespace kvrt::cli
