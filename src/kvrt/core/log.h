// Minimal leveled logging to stderr. KVRT_LOG=debug|info|warn|error|off sets the level
// (default warn), so library code stays quiet unless asked.
#pragma once

#include <string_view>

#include "kvrt/core/status.h"

namespace kvrt {

enum class LogLevel : int { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3, kOff = 4 };

LogLevel log_level();
void set_log_level(LogLevel level);
void log_message(LogLevel level, std::string_view message);

template <typename... Parts>
void log(LogLevel level, const Parts&... parts) {
  if (level < log_level()) return;
  log_message(level, detail::concat(parts...));
}

}  // namespace kvrt
