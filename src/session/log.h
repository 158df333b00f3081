// Session log messages on stderr, filtered by SessionOptions::log_level / NXRT_LOG:
//   0 error, 1 warning (the default), 2 info (one line per session: sizes, phase times, threads, ISA
//   tier), 3 debug (what each optimizer pass did).
// Errors themselves are returned as Status values; the log only adds context a caller did not ask for.
#pragma once
#include <string>

#include "nxrt/status.h"

namespace nxrt::session {

enum class LogLevel { kError = 0, kWarning = 1, kInfo = 2, kDebug = 3 };

// The option when it is >= 0, else NXRT_LOG (0-3 or error|warning|info|debug), else warning. An
// unrecognized NXRT_LOG or option is an error.
Result<LogLevel> resolve_log_level(int option);
// Writes "nxrt [level] message" to stderr when `level` is at or below `threshold`.
void log_message(LogLevel threshold, LogLevel level, const std::string& message);

}  // namespace nxrt::session
