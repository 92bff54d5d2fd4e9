// server/command_stats.h - command and error statistics: INFO commandstats, INFO errorstats
// and total_error_replies, in Redis 7.0's format (server.c genRedisInfoString,
// incrementErrorCount), cleared by CONFIG RESETSTAT.
//
// The counters live per worker thread (WorkerStats in server.h) and only their thread writes
// them: counting a call takes no lock and touches no cache line another thread writes. INFO
// sums them over the workers.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace server {

class Server;

/// One command's (or subcommand's) counters on one worker (cmdstat_<name>).
struct CommandCounters {
  std::atomic<uint64_t> calls{0};     ///< handler runs
  std::atomic<uint64_t> usec{0};      ///< their duration, microseconds
  std::atomic<uint64_t> rejected{0};  ///< refused before the handler ran (arity, NOAUTH, MOVED,
                                      ///< OOM, a failed load from SSD)
  std::atomic<uint64_t> failed{0};    ///< runs that replied an error
};

/// One worker's error replies by error code, the first word of the reply ("ERR", "WRONGTYPE",
/// "MOVED"; "ERR" when the text has no space in its first 31 bytes, as Redis's
/// afterErrorReply). Codes past the 128th distinct one are not tracked (Redis's
/// ERROR_STATS_NUMBER). add() is called by the worker's own thread; a small mutex, contended
/// only by INFO and CONFIG RESETSTAT, guards the table (error replies are off the hot path).
class ErrorCounts {
 public:
  void add(std::string_view error_text);
  /// Adds this worker's counts into `into`, by code.
  void sum_into(std::map<std::string, uint64_t>& into) const;
  void reset();

 private:
  static constexpr size_t kMaxCodes = 128;
  mutable std::mutex mu_;
  std::vector<std::pair<std::string, uint64_t>> codes_;
};

/// The "# Commandstats" lines: cmdstat_<name>:calls=N,usec=N,usec_per_call=N.NN,
/// rejected_calls=N,failed_calls=N for every command or subcommand ("client|kill") with a
/// count, in the table's order, summed over the workers.
void section_commandstats(Server& server, int64_t now_ms, std::string* out);

/// The "# Errorstats" lines: errorstat_<CODE>:count=N, by code in byte order, summed over the
/// workers.
void section_errorstats(Server& server, int64_t now_ms, std::string* out);

}  // namespace server
