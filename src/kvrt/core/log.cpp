#include "kvrt/core/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace kvrt {
namespace {

LogLevel level_from_env() {
  const char* value = std::getenv("KVRT_LOG");
  if (value == nullptr) return LogLevel::kWarn;
  const std::string_view text(value);
  if (text == "debug") return LogLevel::kDebug;
  if (text == "info") return LogLevel::kInfo;
  if (text == "error") return LogLevel::kError;
  if (text == "off") return LogLevel::kOff;
  return LogLevel::kWarn;
}

std::atomic<int>& level_storage() {
  static std::atomic<int> level{static_cast<int>(level_from_env())};
  return level;
}

}  // namespace

LogLevel log_level() {
  return static_cast<LogLevel>(level_storage().load());
}
void set_log_level(LogLevel level) {
  level_storage().store(static_cast<int>(level));
}

void log_message(LogLevel level, std::string_view message) {
  static constexpr const char* kNames[] = {"debug", "info", "warn", "error"};
  const char* name = kNames[static_cast<int>(level) < 4 ? static_cast<int>(level) : 3];
  std::fprintf(stderr, "kvrt %s: %.*s\n", name, static_cast<int>(message.size()), message.data());
}

}  // namespace kvrt
