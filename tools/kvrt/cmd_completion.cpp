// `kvrt completion bash|zsh|fish`: a completion script written from the commands and
// options registered here, so it never falls behind them. Install with e.g.
//   kvrt completion bash > ~/.local/share/bash-completion/completions/kvrt
#include <cstdio>
#include <string>
#include <vector>

#include "command.h"

namespace {

struct CommandInfo {
  std::string name;
  std::string description;
  std::vector<std::string> words;  // options and nested commands
  struct Flag {
    std::string long_name, short_name, description;
    bool takes_value = false;
  };
  std::vector<Flag> flags;
  std::vector<std::pair<std::string, std::string>> nested;  // name, description
};

std::vector<CommandInfo> describe(const CLI::App& root) {
  std::vector<CommandInfo> commands;
  for (const CLI::App* sub : root.get_subcommands({})) {
    CommandInfo info{sub->get_name(), sub->get_description(), {}, {}, {}};
    for (const CLI::Option* option : sub->get_options({})) {
      if (option->get_positional()) continue;
      CommandInfo::Flag flag;
      flag.description = option->get_description();
      flag.takes_value = option->get_type_size() != 0;
      for (const std::string& name : option->get_snames()) {
        info.words.push_back("-" + name);
        flag.short_name = name;
      }
      for (const std::string& name : option->get_lnames()) {
        info.words.push_back("--" + name);
        if (flag.long_name.empty()) flag.long_name = name;
        if (name == "n-gpu-layers") info.words.push_back("-ngl");  // rewritten by main.cpp
      }
      info.flags.push_back(flag);
    }
    for (const CLI::App* nested : sub->get_subcommands({})) {
      info.words.push_back(nested->get_name());
      info.nested.emplace_back(nested->get_name(), nested->get_description());
    }
    commands.push_back(std::move(info));
  }
  return commands;
}

std::string joined(const std::vector<std::string>& words) {
  std::string out;
  for (const std::string& word : words) out += (out.empty() ? "" : " ") + word;
  return out;
}

void print_bash(const std::vector<CommandInfo>& commands) {
  std::vector<std::string> names;
  for (const auto& command : commands) names.push_back(command.name);
  std::printf(
      "# kvrt completion for bash (kvrt completion bash)\n"
      "_kvrt() {\n"
      "  local cur=\"${COMP_WORDS[COMP_CWORD]}\" command=\"\" word opts\n"
      "  for word in \"${COMP_WORDS[@]:1:COMP_CWORD-1}\"; do\n"
      "    case \"$word\" in -*) ;; *) command=\"$word\"; break ;; esac\n"
      "  done\n"
      "  if [ -z \"$command\" ]; then\n"
      "    COMPREPLY=($(compgen -W \"%s --help --version\" -- \"$cur\"))\n"
      "    return\n"
      "  fi\n"
      "  case \"$command\" in\n",
      joined(names).c_str());
  for (const auto& command : commands) {
    std::printf("    %s) opts=\"%s\" ;;\n", command.name.c_str(), joined(command.words).c_str());
  }
  std::printf(
      "  esac\n"
      "  if [[ \"$cur\" == -* ]]; then\n"
      "    COMPREPLY=($(compgen -W \"$opts\" -- \"$cur\"))\n"
      "  else\n"
      "    COMPREPLY=($(compgen -W \"$(printf '%%s\\n' $opts | grep -v '^-')\" -- \"$cur\")\n"
      "               $(compgen -f -- \"$cur\"))\n"
      "  fi\n"
      "}\n"
      "complete -o filenames -o bashdefault -F _kvrt kvrt\n");
}

std::string fish_quote(const std::string& text) {
  std::string out = "'";
  for (char c : text) {
    if (c == '\'' || c == '\\') out += '\\';
    out += c;
  }
  return out + "'";
}

void print_fish(const std::vector<CommandInfo>& commands) {
  std::printf("# kvrt completion for fish (kvrt completion fish)\n");
  std::printf("complete -c kvrt -f -n __fish_use_subcommand -l version -d 'Print the version'\n");
  for (const auto& command : commands) {
    std::printf("complete -c kvrt -f -n __fish_use_subcommand -a %s -d %s\n", command.name.c_str(),
                fish_quote(command.description).c_str());
    const std::string when = "'__fish_seen_subcommand_from " + command.name + "'";
    for (const auto& [name, description] : command.nested) {
      std::printf("complete -c kvrt -f -n %s -a %s -d %s\n", when.c_str(), name.c_str(),
                  fish_quote(description).c_str());
    }
    for (const auto& flag : command.flags) {
      std::string line = "complete -c kvrt -n " + when;
      if (!flag.long_name.empty()) line += " -l " + flag.long_name;
      if (!flag.short_name.empty()) line += " -s " + flag.short_name;
      if (flag.long_name == "n-gpu-layers") line += " -o ngl";
      if (flag.takes_value) line += " -r";
      line += " -d " + fish_quote(flag.description.substr(0, 80));
      std::printf("%s\n", line.c_str());
    }
  }
}

const bool registered = kvrt::cli::register_command(
    {"completion", "Print a shell completion script (bash, zsh or fish)", [](CLI::App& sub) {
       auto shell = std::make_shared<std::string>();
       sub.add_option("shell", *shell, "bash, zsh or fish")
           ->required()
           ->check(CLI::IsMember({"bash", "zsh", "fish"}));
       sub.footer(
           "Examples:\n"
           "  source <(kvrt completion bash)                      # this shell\n"
           "  kvrt completion bash > ~/.local/share/bash-completion/completions/kvrt\n"
           "  kvrt completion zsh > \"${fpath[1]}/_kvrt\"\n"
           "  kvrt completion fish > ~/.config/fish/completions/kvrt.fish");
       sub.callback([shell, app = &sub] {
         const std::vector<CommandInfo> commands = describe(*app->get_parent());
         if (*shell == "fish") {
           print_fish(commands);
           return;
         }
         if (*shell == "zsh") {
           // zsh runs the bash function through its bash-completion layer.
           std::printf("#compdef kvrt\nautoload -U +X bashcompinit && bashcompinit\n");
         }
         print_bash(commands);
       });
     }});

}  // namespace
