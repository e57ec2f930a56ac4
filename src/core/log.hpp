// Diagnostics to stderr, gated by the CC_COLL_LOG_LEVEL setting.
#pragma once

namespace cc_coll::detail {

enum class LogLevel { None = 0, Error = 1, Info = 2, Debug = 3 };

// The process-wide level, read from CC_COLL_LOG_LEVEL on first use (an
// invalid value means the default, "none").
LogLevel log_level();

// Whether `level` is enabled: callers on every call's path test it before
// formatting a message's arguments.
inline bool log_enabled(LogLevel level)
{
    return level != LogLevel::None && static_cast<int>(level) <= static_cast<int>(log_level());
}

// Prints "[cc_coll <level>] <message>" to stderr when `level` is enabled.
void log_message(LogLevel level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

}  // namespace cc_coll::detail
