// tiering/access_stats.h - the per-key access statistics eviction chooses by: an LRU clock in
// milliseconds and Redis's LFU counter (evict.c: LFULogIncr, LFUDecrAndReturn).
#pragma once

#include <atomic>
#include <cstdint>

namespace tiering {

/// The LRU clock of `now_ms`: milliseconds modulo 2^32 (wraps every 49.7 days; Redis's clock
/// has 1-second resolution).
inline uint32_t lru_clock(int64_t now_ms) { return static_cast<uint32_t>(now_ms); }
/// Milliseconds since `clock`, tolerating a wrap of the 32-bit clock. A `clock` later than
/// `now_ms` (an access by another thread after this caller took its time, as commands use
/// their batch's clock) is idle 0, not 49 days: else eviction would pick the freshest key.
/// Idle times saturate at 2^31 ms (24.8 days).
inline uint64_t lru_idle_ms(uint32_t clock, int64_t now_ms) {
  const auto idle = static_cast<int32_t>(lru_clock(now_ms) - clock);
  return idle < 0 ? 0 : static_cast<uint64_t>(idle);
}

/// Redis's LFU_INIT_VAL: the counter of a new key.
inline constexpr uint8_t kLfuInitVal = 5;
/// Redis's lfu-log-factor default: about a million hits saturate the counter.
inline constexpr int kLfuLogFactor = 10;

/// The process's lfu-log-factor and lfu-decay-time (minutes), set from the config (Redis's
/// keys of the same names) and read on every access. Relaxed atomics: a change applies to the
/// accesses after it, in any thread.
struct LfuParams {
  std::atomic<int> log_factor{kLfuLogFactor};
  std::atomic<int> decay_minutes{1};
};
inline LfuParams lfu_params;

/// Minutes modulo 2^16, the LFU decay clock.
inline uint16_t lfu_minutes(int64_t now_ms) { return static_cast<uint16_t>(now_ms / 60000); }

/// Redis's LFULogIncr: increments `counter` with probability 1 / ((counter - 5) * factor + 1);
/// `r` is a uniform random number in [0, 1).
inline uint8_t lfu_increment(uint8_t counter, int log_factor, double r) {
  if (counter == 255) return 255;
  double base = counter > kLfuInitVal ? counter - kLfuInitVal : 0;
  return r < 1.0 / (base * log_factor + 1) ? counter + 1 : counter;
}

/// Redis's LFUDecrAndReturn: `counter` less one per `decay_minutes` elapsed since
/// `last_decrement_min`. `decay_minutes` <= 0 disables decay.
inline uint8_t lfu_decay(uint8_t counter, uint16_t last_decrement_min, int64_t now_ms,
                         int decay_minutes) {
  if (decay_minutes <= 0) return counter;
  uint16_t elapsed = static_cast<uint16_t>(lfu_minutes(now_ms) - last_decrement_min);
  uint64_t periods = elapsed / static_cast<unsigned>(decay_minutes);
  return periods >= counter ? 0 : static_cast<uint8_t>(counter - periods);
}

}  // namespace tiering
