// kvrt: export, inspect, check and run decoder-only language models.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <exception>
#include <new>
#include <string>
#include <vector>

#include "command.h"
#include "kvrt/engine/builtin_targets.h"
#include "suggest.h"

namespace {

std::vector<std::string> names_of(const std::vector<kvrt::cli::Command>& commands) {
  std::vector<std::string> names;
  for (const auto& command : commands) names.push_back(command.name);
  return names;
}

// The first argument that is not an option names the command: one kvrt does not have
// gets a suggestion instead of CLI11's "A subcommand is required".
int unknown_command(const std::string& typed, const std::vector<std::string>& names) {
  std::string list;
  for (const std::string& name : names) list += (list.empty() ? "" : ", ") + name;
  std::fprintf(stderr, "kvrt: '%s' is not a command.", typed.c_str());
  if (auto near = kvrt::cli::closest(typed, names)) {
    std::fprintf(stderr, " Did you mean 'kvrt %s'?", near->c_str());
  }
  std::fprintf(stderr, " Commands: %s (kvrt --help)\n", list.c_str());
  return 2;
}

// CLI11's "The following arguments were not expected: --tmp" with the option meant.
std::string with_suggestions(const CLI::ParseError& error, const CLI::App& app,
                             const std::vector<std::string>& args) {
  std::string message = error.what();
  const CLI::App* command = nullptr;
  for (const CLI::App* sub : app.get_subcommands({})) {
    if (sub->parsed()) command = sub;
  }
  if (command == nullptr) return message;
  std::vector<std::string> names;
  for (const CLI::Option* option : command->get_options({})) {
    for (const std::string& name : option->get_lnames()) names.push_back("--" + name);
  }
  for (const std::string& arg : args) {
    if (!arg.starts_with("--") || message.find(arg) == std::string::npos) continue;
    const std::string flag = arg.substr(0, arg.find('='));
    if (std::find(names.begin(), names.end(), flag) != names.end()) continue;
    if (auto near = kvrt::cli::closest(flag, names)) {
      message += " (did you mean " + *near + "?)";
    }
  }
  return message;
}

}  // namespace

int main(int argc, char** argv) {
  const kvrt::Status targets = kvrt::engine::register_builtin_targets();
  if (!targets.ok()) {
    std::fprintf(stderr, "kvrt: %s\n", targets.to_string().c_str());
    return 2;
  }
  CLI::App app{"kvrt: a runtime for decoder-only language models with in-place KV cache I/O",
               "kvrt"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string(kvrt::cli::version_line()));
  app.footer("Run 'kvrt COMMAND --help' for a command's options and examples.");
  // Every option shows its default in --help (those that come from the model say so).
  app.option_defaults()->always_capture_default();
  auto commands = kvrt::cli::registered_commands();
  std::sort(commands.begin(), commands.end(),
            [](const auto& a, const auto& b) { return a.name < b.name; });
  for (const auto& command : commands) {
    CLI::App* sub = app.add_subcommand(command.name, command.description);
    command.setup(*sub);
  }

  std::vector<std::string> args(argv + 1, argv + argc);
  if (auto refused = kvrt::cli::rewrite_llama_cpp_options(args)) {
    std::fprintf(stderr, "kvrt: %s\n", refused->c_str());
    return 2;
  }
  if (args.empty()) {  // a first run: the commands, not "A subcommand is required"
    std::fprintf(stderr, "%s", app.help().c_str());
    return 2;
  }
  const std::vector<std::string> names = names_of(commands);
  if (!args.empty() && !args[0].starts_with("-") &&
      std::find(names.begin(), names.end(), args[0]) == names.end()) {
    return unknown_command(args[0], names);
  }
  // Commands run inside parse(). Whatever a library below throws (std::filesystem,
  // an allocation, a thread the system refuses) ends in one line and exit code 1,
  // never in std::terminate.
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());  // CLI11 takes it so
    app.parse(reversed);
  } catch (const CLI::ParseError& error) {
    if (error.get_exit_code() != 0) {  // not --help or --version
      std::fprintf(stderr, "%s\n", with_suggestions(error, app, args).c_str());
      std::fprintf(stderr, "Run with --help for more information.\n");
      return error.get_exit_code();
    }
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
