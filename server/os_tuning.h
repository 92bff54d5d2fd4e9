// server/os_tuning.h - what the server asks of the operating system, as Redis 7.0 does: the
// open-files limit that maxclients needs (server.c adjustOpenFilesLimit) and TCP keepalive on
// client sockets (anet.c anetKeepAlive); and the machine's memory, which sizes the memory region
// by default (memory.capacity 0).
#pragma once

#include <sys/resource.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "server/log.h"

namespace server {

/// File descriptors kept for the server's own use beyond maxclients (CONFIG_MIN_RESERVED_FDS).
inline constexpr int64_t kReservedFds = 32;

/// getrlimit/setrlimit of RLIMIT_NOFILE; each returns 0 or an errno. Replaceable for tests.
struct FileLimitOps {
  std::function<int(rlimit*)> get;
  std::function<int(const rlimit&)> set;
};

/// The process's own RLIMIT_NOFILE.
FileLimitOps real_file_limit_ops();

/// What adjust_open_files_limit() found and did.
struct OpenFilesLimit {
  int64_t maxclients = 0;  ///< what maxclients must be: as asked, or lowered to fit the limit
  uint64_t limit = 0;      ///< the soft limit now in force (0 when it could not be read)
  bool fatal = false;      ///< the limit leaves no room for clients: the server must not start
  /// Redis's log lines, in order (warnings when maxclients was lowered or the server cannot
  /// start, a notice when the limit was raised), plus one notice with what the server got.
  std::vector<std::pair<log::Level, std::string>> log;
};

/// Raises the soft RLIMIT_NOFILE to maxclients + kReservedFds when it is lower, as Redis's
/// adjustOpenFilesLimit does: the full need first, else 16 descriptors less at each try down
/// to the current limit. The hard limit is raised with it only where needed (which takes
/// privilege); it is never lowered. When the need is not met, maxclients becomes the limit
/// got minus kReservedFds, with Redis's three warnings; when that leaves nothing, `fatal`.
/// Nothing is logged here: the caller writes `log`.
OpenFilesLimit adjust_open_files_limit(int64_t maxclients,
                                       const FileLimitOps& ops = real_file_limit_ops());

/// Sets TCP keepalive on a connected TCP socket as Redis's anetKeepAlive does: SO_KEEPALIVE
/// on, the first probe after `interval` idle seconds (TCP_KEEPIDLE), the next ones every
/// interval/3 seconds (TCP_KEEPINTVL, at least 1), the peer dead after 3 unanswered
/// (TCP_KEEPCNT). `interval` <= 0 switches SO_KEEPALIVE off. Returns the failing call's error
/// text (e.g. an interval over Linux's 32767 s), or nullopt; options set before it stay set.
std::optional<std::string> set_tcp_keepalive(int fd, int64_t interval);

}  // namespace server

namespace server {

/// The memory this process may use, in bytes: physical RAM (sysconf), or the cgroup's limit when
/// it is lower (cgroup v2 memory.max, else v1 memory.limit_in_bytes). 0 if nothing can be read.
uint64_t machine_memory_bytes();

/// memory.capacity's automatic default (the key set to 0): `fraction` (0..1] of
/// machine_memory_bytes(), rounded down to 2 MiB and at least 2 MiB. Dragonfly likewise
/// defaults its maxmemory to about 80% of the machine's memory. 1 GiB when the machine's
/// memory cannot be read.
uint64_t auto_memory_capacity(double fraction, uint64_t machine_bytes = machine_memory_bytes());

}  // namespace server
