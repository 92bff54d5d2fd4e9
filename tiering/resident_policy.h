// tiering/resident_policy.h - when the memory region gives freed pages back to the OS.
//
// On these machines the first touch of a fresh page costs more than copying into a warm one
// (measured 0.36 GB/s against 15 GB/s of memcpy), so a freed value's pages stay resident and
// serve the next value (region.h: "dirty" pages). They go back to the OS only when memory use
// has fallen far below its limit and stayed there: used memory below half of the limit for
// kHoldMs, and then only the dirty bytes above an eighth of the limit, at most kStepBytes per
// call so that one madvise burst never stalls the calling thread for long. MEMORY PURGE returns
// everything at once. Resident memory is bounded anyway: used + dirty never exceeds the region.
//
// A pure decision (the caller passes the clock and the figures), called from the server's
// cron. Not thread-safe: one caller.
#pragma once

#include <cstddef>
#include <cstdint>

namespace tiering {

class ResidentPolicy {
 public:
  static constexpr int64_t kHoldMs = 10'000;             ///< used below half the limit this long
  static constexpr size_t kStepBytes = size_t{256} << 20;  ///< most bytes purged per call

  /// Bytes of dirty pages to purge now (0: none). `used`: used memory (bytes); `limit`:
  /// maxmemory, or the region's capacity when maxmemory is 0; `dirty`: resident free bytes.
  size_t to_purge(int64_t now_ms, size_t used, size_t limit, size_t dirty) {
    if (limit == 0 || used >= limit / 2) {
      low_since_ms_ = -1;
      return 0;
    }
    if (low_since_ms_ < 0) low_since_ms_ = now_ms;
    const size_t keep = limit / 8;
    if (now_ms - low_since_ms_ < kHoldMs || dirty <= keep) return 0;
    return dirty - keep < kStepBytes ? dirty - keep : kStepBytes;
  }

 private:
  int64_t low_since_ms_ = -1;  // when used memory fell below half of the limit (-1: it is not)
};

}  // namespace tiering
