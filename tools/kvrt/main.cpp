// kvrt: export, inspect, check and run decoder-only language models.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <exception>
#include <new>

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
  // Commands run inside parse(). Whatever a library below throws (std::filesystem,
  // an allocation, a thread the system refuses) ends in one line and exit code 1,
  // never in std::terminate.
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& error) {
    return app.exit(error);
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "kvrt: error: out of memory\n");
    return 1;
  } catch (const std::exception& error) {
    std::fprintf(stderr, "kvrt: error: %s\n", error.what());
    return 1;
  }
  return kvrt::cli::exit_code();
}
