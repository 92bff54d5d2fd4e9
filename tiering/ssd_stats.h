// tiering/ssd_stats.h - the SSD tier's counters (INFO tiering) and a latency histogram.
#pragma once

#include <array>
#include <atomic>
#include <bit>
#include <cstdint>

namespace tiering {

/// A histogram of durations in microseconds: log-linear buckets (four per power of two, so a
/// reported percentile is within 19% of the truth). Lock-free; record() from any thread.
class LatencyHistogram {
 public:
  void record(uint64_t us) {
    buckets_[bucket(us)].fetch_add(1, std::memory_order_relaxed);
    count_.fetch_add(1, std::memory_order_relaxed);
  }
  /// The `p`-th percentile (0 < p <= 1) in microseconds: the upper bound of its bucket; 0 when
  /// nothing was recorded.
  uint64_t percentile(double p) const {
    const uint64_t n = count_.load(std::memory_order_relaxed);
    if (n == 0) return 0;
    const auto rank = static_cast<uint64_t>(p * static_cast<double>(n) + 0.999999);
    uint64_t seen = 0;
    for (size_t i = 0; i < kBuckets; ++i) {
      seen += buckets_[i].load(std::memory_order_relaxed);
      if (seen >= rank) return upper(i);
    }
    return upper(kBuckets - 1);
  }
  uint64_t count() const { return count_.load(std::memory_order_relaxed); }
  void reset() {
    for (auto& b : buckets_) b.store(0, std::memory_order_relaxed);
    count_.store(0, std::memory_order_relaxed);
  }

 private:
  static constexpr size_t kBuckets = 4 * 40;  // up to 2^40 us
  static size_t bucket(uint64_t us) {
    if (us < 4) return static_cast<size_t>(us);
    const unsigned log = 63 - static_cast<unsigned>(std::countl_zero(us));  // >= 2
    const size_t i = 4 * (log - 1) + ((us >> (log - 2)) & 3);
    return i < kBuckets ? i : kBuckets - 1;
  }
  static uint64_t upper(size_t i) {
    if (i < 4) return i;
    const unsigned log = static_cast<unsigned>(i / 4) + 1;
    const uint64_t sub = i % 4;
    return ((4 + sub + 1) << (log - 2)) - 1;
  }
  std::array<std::atomic<uint64_t>, kBuckets> buckets_{};
  std::atomic<uint64_t> count_{0};
};

/// The tier's counters. Relaxed atomics, bumped by whichever thread does the work.
struct SsdTierStats {
  std::atomic<uint64_t> demotions{0};       ///< values written to SSD and dropped from memory
  std::atomic<uint64_t> demoted_bytes{0};   ///< ... their bytes
  std::atomic<uint64_t> free_drops{0};      ///< values dropped from memory with an SSD copy
  /// Values evicted from memory before they could be written: a write needed the room and
  /// the disk had not caught up (see tiering.ssd.max_write_wait).
  std::atomic<uint64_t> unwritten_evictions{0};
  std::atomic<uint64_t> admitted{0};        ///< victims queued for writing (admission)
  std::atomic<uint64_t> admitted_bytes{0};  ///< ... their bytes
  std::atomic<uint64_t> rejected{0};        ///< victims refused and evicted (admission reuse)
  std::atomic<uint64_t> rejected_bytes{0};  ///< ... their bytes
  std::atomic<uint64_t> write_waits{0};    ///< writes that waited for demotions to make room
  std::atomic<uint64_t> write_wait_us{0};  ///< ... the time they waited, summed
  std::atomic<uint64_t> promotions{0};      ///< values loaded that stay in memory
  std::atomic<uint64_t> reads{0};           ///< values read from SSD
  std::atomic<uint64_t> read_bytes{0};      ///< ... their bytes
  std::atomic<uint64_t> read_errors{0};     ///< reads that failed
  std::atomic<uint64_t> write_errors{0};    ///< write batches that failed
  std::atomic<uint64_t> dropped_keys{0};    ///< keys lost to tiering.ssd.capacity (evicted_keys)
  std::atomic<uint64_t> recovered_keys{0};  ///< keys rebuilt at start-up
  std::atomic<uint64_t> batches{0};         ///< write batches written
  LatencyHistogram read_latency;            ///< of load(): the read and the install, in us

  void reset() {
    for (auto* c : {&demotions, &demoted_bytes, &free_drops, &unwritten_evictions, &admitted,
                    &admitted_bytes, &rejected, &rejected_bytes, &write_waits,
                    &write_wait_us, &promotions, &reads, &read_bytes, &read_errors, &write_errors,
                    &dropped_keys, &batches})
      c->store(0, std::memory_order_relaxed);
    read_latency.reset();
  }
};

}  // namespace tiering
