// server/log.h - one-line structured log events on stderr (or `logfile`), in Redis's layout:
// "pid:M 30 Nov 2026 01:23:22.123 * message key=value ...". Not for the per-request hot path.
#pragma once

#include <string_view>

namespace server::log {

enum class Level { kDebug, kVerbose, kNotice, kWarning };

/// Sets the minimum level printed and, when `path` is non-empty, the file to append to.
void configure(Level min_level, std::string_view path);
/// Writes one line. Thread-safe.
void write(Level level, std::string_view message);

inline void notice(std::string_view m) { write(Level::kNotice, m); }
inline void warning(std::string_view m) { write(Level::kWarning, m); }
inline void verbose(std::string_view m) { write(Level::kVerbose, m); }

}  // namespace server::log
