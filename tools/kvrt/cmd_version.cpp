#include <cstdio>

#include "command.h"

namespace kvrt::cli {
const char* version_line() {
#ifdef KVRT_WITH_CUDA
  return "kvrt 0.1.0 (cuda: built)";
#else
  return "kvrt 0.1.0 (cuda: not built)";
#endif
}
}  // namespace kvrt::cli

namespace {
const bool registered = kvrt::cli::register_command(
    {"version", "Print the kvrt version and build configuration (also kvrt --version)",
     [](CLI::App& sub) { sub.callback([] { std::printf("%s\n", kvrt::cli::version_line()); }); }});
}  // namespace
