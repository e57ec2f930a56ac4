#include "core/log.hpp"

#include <cstdarg>
#include <cstdio>
#include <mutex>
#include <string>

#include "core/config.hpp"

namespace cc_coll::detail {

LogLevel log_level()
{
    static const LogLevel level = [] {
        // Only this setting matters here: a bad value elsewhere must still be
        // reported at the level asked for.
        std::string text;
        LogLevel parsed = LogLevel::None;
        if (process_env()("CC_COLL_LOG_LEVEL", &text) && parse_log_level(text, &parsed)) return parsed;
        return LogLevel::None;
    }();
    return level;
}

void log_message(LogLevel level, const char *fmt, ...)
{
    if (level == LogLevel::None || static_cast<int>(level) > static_cast<int>(log_level())) return;
    static const char *names[] = {"none", "error", "info", "debug"};
    char buf[1200];
    va_list ap;
    va_start(ap, fmt);
    std::vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    std::fprintf(stderr, "[cc_coll %s] %s\n", names[static_cast<int>(level)], buf);
}

}  // namespace cc_coll::detail
