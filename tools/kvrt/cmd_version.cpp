#include <cstdio>

#include "command.h"

namespace {
const bool registered = kvrt::cli::register_command(
    {"version", "Print the kvrt version and build configuration", [](CLI::App& sub) {
       sub.callback([] {
#ifdef KVRT_WITH_CUDA
         std::printf("kvrt 0.1.0 (cuda: built)\n");
#else
         std::printf("kvrt 0.1.0 (cuda: not built)\n");
#endif
       });
     }});
}  // namespace
