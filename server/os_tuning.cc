// server/os_tuning.cc - the open-files limit, TCP keepalive and the machine's memory. See os_tuning.h.
#include "server/os_tuning.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace server {

FileLimitOps real_file_limit_ops() {
  return {[](rlimit* l) { return ::getrlimit(RLIMIT_NOFILE, l) == 0 ? 0 : errno; },
          [](const rlimit& l) { return ::setrlimit(RLIMIT_NOFILE, &l) == 0 ? 0 : errno; }};
}

OpenFilesLimit adjust_open_files_limit(int64_t maxclients, const FileLimitOps& ops) {
  OpenFilesLimit out;
  out.maxclients = maxclients;
  const uint64_t maxfiles = static_cast<uint64_t>(maxclients) + kReservedFds;
  rlimit limit{};
  if (int e = ops.get(&limit); e != 0) {
    out.maxclients = 1024 - kReservedFds;
    out.log.emplace_back(log::Level::kWarning,
                         "Unable to obtain the current NOFILE limit (" +
                             std::string(std::strerror(e)) +
                             "), assuming 1024 and setting the max clients configuration "
                             "accordingly.");
    return out;
  }
  const uint64_t oldlimit = limit.rlim_cur;
  const uint64_t hard = limit.rlim_max;
  out.limit = oldlimit;
  if (oldlimit < maxfiles) {
    // Redis: the full need, else 16 less at each try while above the current limit.
    uint64_t best = maxfiles;
    int set_error = 0;
    while (best > oldlimit) {
      rlimit want{};
      want.rlim_cur = best;
      want.rlim_max = std::max<uint64_t>(best, hard);  // never lowers the hard limit
      set_error = ops.set(want);
      if (set_error == 0) break;
      if (best < 16) {
        best = oldlimit;
        break;
      }
      best -= 16;
    }
    best = std::max(best, oldlimit);
    out.limit = best;
    if (best < maxfiles) {
      out.maxclients = static_cast<int64_t>(best) - kReservedFds;
      if (best <= static_cast<uint64_t>(kReservedFds)) {
        out.fatal = true;
        out.log.emplace_back(log::Level::kWarning,
                             "Your current 'ulimit -n' of " + std::to_string(oldlimit) +
                                 " is not enough for the server to start. Please increase your "
                                 "open file limit to at least " +
                                 std::to_string(maxfiles) + ". Exiting.");
        return out;
      }
      out.log.emplace_back(log::Level::kWarning,
                           "You requested maxclients of " + std::to_string(maxclients) +
                               " requiring at least " + std::to_string(maxfiles) +
                               " max file descriptors.");
      out.log.emplace_back(log::Level::kWarning,
                           "Server can't set maximum open files to " + std::to_string(maxfiles) +
                               " because of OS error: " + std::strerror(set_error) + ".");
      out.log.emplace_back(log::Level::kWarning,
                           "Current maximum open files is " + std::to_string(best) +
                               ". maxclients has been reduced to " +
                               std::to_string(out.maxclients) +
                               " to compensate for low ulimit. If you need higher maxclients "
                               "increase 'ulimit -n'.");
    } else {
      out.log.emplace_back(log::Level::kNotice,
                           "Increased maximum number of open files to " +
                               std::to_string(maxfiles) + " (it was originally set to " +
                               std::to_string(oldlimit) + ").");
    }
  }
  out.log.emplace_back(log::Level::kNotice,
                       "open files limit=" + std::to_string(out.limit) +
                           " maxclients=" + std::to_string(out.maxclients) +
                           " reserved=" + std::to_string(kReservedFds));
  return out;
}

std::optional<std::string> set_tcp_keepalive(int fd, int64_t interval) {
  auto set = [fd](int level, int name, int value, const char* what) -> std::optional<std::string> {
    if (::setsockopt(fd, level, name, &value, sizeof value) == 0) return std::nullopt;
    return std::string("setsockopt ") + what + ": " + std::strerror(errno);
  };
  if (interval <= 0) return set(SOL_SOCKET, SO_KEEPALIVE, 0, "SO_KEEPALIVE");
  const int idle = static_cast<int>(std::min<int64_t>(interval, INT32_MAX));
  if (auto e = set(SOL_SOCKET, SO_KEEPALIVE, 1, "SO_KEEPALIVE")) return e;
  if (auto e = set(IPPROTO_TCP, TCP_KEEPIDLE, idle, "TCP_KEEPIDLE")) return e;
  if (auto e = set(IPPROTO_TCP, TCP_KEEPINTVL, std::max(idle / 3, 1), "TCP_KEEPINTVL")) return e;
  return set(IPPROTO_TCP, TCP_KEEPCNT, 3, "TCP_KEEPCNT");
}

}  // namespace server

namespace server {
namespace {

// The first number in `path` (a cgroup limit file); nullopt for "max", absence or garbage.
std::optional<uint64_t> read_limit_file(const char* path) {
  std::FILE* f = std::fopen(path, "r");
  if (f == nullptr) return std::nullopt;
  char buf[64] = {};
  const bool got = std::fgets(buf, sizeof buf, f) != nullptr;
  std::fclose(f);
  if (!got) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(buf, &end, 10);
  if (end == buf || errno != 0) return std::nullopt;  // "max\n": no limit
  return static_cast<uint64_t>(v);
}

}  // namespace

uint64_t machine_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  uint64_t bytes = pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page)
                                         : 0;
  // A cgroup's limit above the RAM (v1 says "no limit" with a huge number) changes nothing.
  for (const char* path : {"/sys/fs/cgroup/memory.max",
                           "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    if (auto limit = read_limit_file(path); limit && *limit > 0 && (bytes == 0 || *limit < bytes))
      bytes = *limit;
  }
  return bytes;
}

uint64_t auto_memory_capacity(double fraction, uint64_t machine_bytes) {
  constexpr uint64_t kUnit = uint64_t{2} << 20;
  if (machine_bytes == 0) return uint64_t{1} << 30;
  const double share = std::clamp(fraction, 0.0, 1.0) * static_cast<double>(machine_bytes);
  const uint64_t bytes = static_cast<uint64_t>(share) / kUnit * kUnit;
  return std::max(bytes, kUnit);
}

}  // namespace server
