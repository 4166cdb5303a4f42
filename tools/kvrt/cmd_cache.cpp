// `kvrt cache list|clean`: the programs `kvrt run`/`chat`/`serve` exported from
// checkpoint directories (src/kvrt/api/export_cache.h): where they came from, how
// large they are, when they were last used; and removing them.
#include <cstdio>
#include <ctime>
#include <nlohmann/json.hpp>
#include <string>

#include "command.h"
#include "flags.h"
#include "kvrt/api/export_cache.h"

namespace {

struct CacheArgs {
  bool json = false;
};

std::string local_time(int64_t seconds) {
  const std::time_t time = static_cast<std::time_t>(seconds);
  std::tm parts{};
  localtime_r(&time, &parts);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M", &parts);
  return text;
}

// ".../hub/models--org--name/snapshots/<sha>" reads as "org/name@<sha> (hub)".
std::string source_name(const std::string& source) {
  const size_t repo = source.rfind("/models--");
  const size_t snapshots = source.find("/snapshots/", repo == std::string::npos ? 0 : repo);
  if (repo == std::string::npos || snapshots == std::string::npos) return source;
  std::string name = source.substr(repo + 9, snapshots - repo - 9);
  const size_t dashes = name.find("--");
  if (dashes != std::string::npos) name = name.substr(0, dashes) + "/" + name.substr(dashes + 2);
  return name + "@" + source.substr(snapshots + 11, 12) + " (" + source + ")";
}

int list(const CacheArgs& args) {
  auto limit = kvrt::ExportCache::default_limit();
  if (!limit.ok()) return kvrt::cli::fail("cache", limit.status());
  kvrt::ExportCache cache({}, *limit);
  auto programs = cache.list();
  if (!programs.ok()) return kvrt::cli::fail("cache", programs.status());
  uint64_t total = 0;
  for (const auto& program : *programs) total += program.bytes;
  if (args.json) {
    nlohmann::json out = {{"dir", cache.dir()},
                          {"bytes", total},
                          {"limit_bytes", cache.limit_bytes()},
                          {"programs", nlohmann::json::array()}};
    for (const auto& program : *programs) {
      out["programs"].push_back({{"path", program.path},
                                 {"bytes", program.bytes},
                                 {"source", program.source},
                                 {"last_used", program.last_used},
                                 {"max_seq", program.max_seq},
                                 {"cache_dtype", program.cache_dtype}});
    }
    std::printf("%s\n", out.dump(1).c_str());
    return 0;
  }
  std::printf("%s: %zu program%s, %s of %s (KVRT_CACHE_LIMIT)\n", cache.dir().c_str(),
              programs->size(), programs->size() == 1 ? "" : "s", kvrt::human_bytes(total).c_str(),
              kvrt::human_bytes(cache.limit_bytes()).c_str());
  if (programs->empty()) return 0;
  std::printf("%-10s  %-16s  %-12s  %s\n", "size", "last used", "options", "source");
  for (const auto& program : *programs) {
    const std::string options =
        program.cache_dtype.empty()
            ? std::string("?")
            : (program.max_seq > 0 ? "ctx " + std::to_string(program.max_seq) : "ctx model") + " " +
                  program.cache_dtype;
    std::printf("%-10s  %-16s  %-12s  %s\n", kvrt::human_bytes(program.bytes).c_str(),
                local_time(program.last_used).c_str(), options.c_str(),
                program.source.empty() ? "(unknown)" : source_name(program.source).c_str());
  }
  return 0;
}

int clean() {
  kvrt::ExportCache cache;
  auto freed = cache.clean();
  if (!freed.ok()) return kvrt::cli::fail("cache", freed.status());
  std::printf("removed the programs in %s (%s)\n", cache.dir().c_str(),
              kvrt::human_bytes(*freed).c_str());
  return 0;
}

const bool registered = kvrt::cli::register_command(
    {"cache", "List or remove the programs exported from checkpoint directories",
     [](CLI::App& sub) {
       auto args = std::make_shared<CacheArgs>();
       sub.require_subcommand(1);
       CLI::App* list_command =
           sub.add_subcommand("list", "Each cached program: size, last use, options, source");
       list_command->add_flag("--json", args->json, "Print one JSON object");
       list_command->callback([args] { kvrt::cli::set_exit_code(list(*args)); });
       CLI::App* clean_command = sub.add_subcommand("clean", "Remove every cached program");
       clean_command->callback([] { kvrt::cli::set_exit_code(clean()); });
       sub.footer(
           "The cache is $XDG_CACHE_HOME/kvrt, else ~/.cache/kvrt. It holds one program per\n"
           "distinct checkpoint content and export options (a moved, copied or touched\n"
           "checkpoint reuses its program). Past KVRT_CACHE_LIMIT (default 32G; e.g. 20G,\n"
           "500M) the least recently used programs are removed after each export.\n\n"
           "Examples:\n"
           "  kvrt cache list\n"
           "  kvrt cache clean\n"
           "  KVRT_CACHE_LIMIT=10G kvrt run models/fortune-llama -p hi");
     }});

}  // namespace
