// server/slowlog.h - SLOWLOG: the last `slowlog-max-len` commands slower than
// `slowlog-log-slower-than` microseconds, with Redis's entry shape (slowlog.c).
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace server {

struct SlowlogEntry {
  uint64_t id;
  int64_t time_s;       ///< Unix seconds when the command ran
  int64_t duration_us;  ///< execution time, microseconds
  std::vector<std::string> args;  ///< at most 32, each at most 128 bytes, as Redis trims
  std::string peer;     ///< client address
  std::string name;     ///< client name
};

/// Thread-safe.
class Slowlog {
 public:
  /// Records a command that ran `duration_us` (the caller compares with
  /// slowlog-log-slower-than), keeping at most `max_len` entries.
  void add(size_t max_len, int64_t duration_us, int64_t time_s,
                 std::span<const std::string_view> args, const std::string& peer,
                 const std::string& name);
  /// The newest `count` entries, newest first (count < 0: all).
  std::vector<SlowlogEntry> get(int64_t count);
  size_t size();
  void reset();

 private:
  std::mutex mu_;
  std::deque<SlowlogEntry> entries_;  // newest first
  uint64_t next_id_ = 0;
};

}  // namespace server
