#include "session/log.h"

#include <cstdio>
#include <cstdlib>

namespace nxrt::session {

namespace {
const char* level_name(LogLevel l) {
  switch (l) {
    case LogLevel::kError: return "error";
    case LogLevel::kWarning: return "warning";
    case LogLevel::kInfo: return "info";
    case LogLevel::kDebug: return "debug";
  }
  return "?";
}
}  // namespace

Result<LogLevel> resolve_log_level(int option) {
  if (option > 3) return invalid_argument("log_level " + std::to_string(option) + " is not 0-3 (or -1 for NXRT_LOG)");
  if (option >= 0) return static_cast<LogLevel>(option);
  const char* env = std::getenv("NXRT_LOG");
  if (!env || !*env) return LogLevel::kWarning;
  const std::string v = env;
  for (int l = 0; l <= 3; ++l) {
    if (v == std::to_string(l) || v == level_name(static_cast<LogLevel>(l))) return static_cast<LogLevel>(l);
  }
  return invalid_argument("NXRT_LOG=" + v + ": expected 0-3 or error|warning|info|debug");
}

void log_message(LogLevel threshold, LogLevel level, const std::string& message) {
  if (static_cast<int>(level) > static_cast<int>(threshold)) return;
  std::fprintf(stderr, "nxrt [%s] %s\n", level_name(level), message.c_str());
}

}  // namespace nxrt::session
