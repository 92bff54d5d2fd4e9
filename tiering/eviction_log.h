// tiering/eviction_log.h - the operator's log lines about eviction: one when keys start being
// evicted, one when eviction has stopped (quiet for kQuietMs), with what it evicted meanwhile.
// Nothing per key or per request: a cache that evicts all day logs two lines per episode.
//
// A pure decision (the caller passes the clock and the running count of evicted keys and
// bytes), called from the server's cron. Not thread-safe: one caller.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace tiering {

class EvictionLog {
 public:
  static constexpr int64_t kQuietMs = 10'000;  ///< no eviction this long ends an episode

  /// What to log now, or "" for nothing. `evicted_keys`: the running count of keys evicted
  /// (INFO evicted_keys, never decreasing but for CONFIG RESETSTAT); `used`, `limit`: used
  /// memory and the limit it is held to (bytes), for the start line; `policy`: maxmemory-policy.
  std::string tick(int64_t now_ms, uint64_t evicted_keys, uint64_t used, uint64_t limit,
                   std::string_view policy) {
    if (evicted_keys < last_count_) last_count_ = evicted_keys;  // CONFIG RESETSTAT
    const uint64_t fresh = evicted_keys - last_count_;
    last_count_ = evicted_keys;
    if (fresh != 0) {
      last_evicted_ms_ = now_ms;
      if (started_ms_ < 0) {
        started_ms_ = now_ms;
        episode_keys_ = fresh;
        return "eviction started: used_memory=" + std::to_string(used) +
               " limit=" + std::to_string(limit) + " maxmemory-policy=" + std::string(policy);
      }
      episode_keys_ += fresh;
      return {};
    }
    if (started_ms_ >= 0 && now_ms - last_evicted_ms_ >= kQuietMs) {
      std::string line = "eviction stopped: " + std::to_string(episode_keys_) +
                         " keys evicted in " +
                         std::to_string((last_evicted_ms_ - started_ms_) / 1000) +
                         " s; used_memory=" + std::to_string(used) +
                         " limit=" + std::to_string(limit);
      started_ms_ = -1;
      episode_keys_ = 0;
      return line;
    }
    return {};
  }

 private:
  uint64_t last_count_ = 0;
  uint64_t episode_keys_ = 0;
  int64_t started_ms_ = -1;  // the episode's first eviction (-1: none running)
  int64_t last_evicted_ms_ = 0;
};

}  // namespace tiering
