// kvrt: export, inspect, check and run decoder-only language models.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>

#include "command.h"
#include "kvrt/engine/builtin_targets.h"

int main(int argc, char** argv) {
  const kvrt::Status targets = kvrt::engine::register_builtin_targets();
  if (!targets.ok()) {
    std::fprintf(stderr, "kvrt: %s\n", targets.to_string().c_str());
    return 2;
  }
  CLI::App app{"kvrt: a runtime for decoder-only language models with in-place KV cache I/O"};
  app.require_subcommand(1);
  auto commands = kvrt::cli::registered_commands();
  std::sort(commands.begin(), commands.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  for (const auto& command : commands) {
    CLI::App* sub = app.add_subcommand(command.name, command.description);
    command.setup(*sub);
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error);
  }
  return kvrt::cli::exit_code();
}
