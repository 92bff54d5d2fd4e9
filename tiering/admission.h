// tiering/admission.h - which demoted values the SSD tier writes when values leave memory faster
// than the disk takes them (tiering.ssd.admission = reuse; docs/ssd-tier.md, "Admission").
//
// A write-rate budget: a token bucket of bytes refilled at the disk's write speed, as the tier's
// writer measures it on its own batches (record_write), or at tiering.ssd.max_write_rate when
// that is lower. Its depth is one second of that speed (at least 4 MiB, at most the demotion
// queue's bound). While the disk keeps up the bucket stays nearly full and every victim is
// admitted. When it falls behind, the budget goes first to values read at least once since they
// were written (expected reuse: the bucket may run dry for them); the rest are admitted in runs
// that hold the write rate to the budget's, as CacheLib's dynamic random admission for flash
// does with a probability: admitted while the bucket is above a quarter, then none until it is
// back at three quarters. Runs, not a coin per value: victims leave in LRU order, so the chunks
// of one prefix chain (stored together) leave together, and a chain with a hole is worth no
// more than its part before the hole (a prefix load stops at the first miss): a coin per chunk
// (tried first: 2.4% hit ratio on the trace replay against 23.7% when waiting) breaks nearly
// every chain. A value not admitted is dropped from memory as if there were no tier, so no
// store ever waits for the disk.
#pragma once

#include <cstdint>
#include <mutex>

namespace tiering {

/// tiering.ssd.admission: how the SSD tier takes the values eviction picks.
enum class Admission {
  kReuse,  ///< admit by the write budget and expected reuse, drop the rest (never wait)
  kWait,   ///< write every victim; writes wait while the disk is behind (back-pressure)
};

/// What decide() answered.
enum class AdmissionDecision { kAdmit, kReject };

/// The budget and the choice. Thread-safe (a leaf mutex held for a few arithmetic steps; never
/// around I/O).
class AdmissionPolicy {
 public:
  /// Speed assumed until the writer has measured one (bytes/s): a slow SATA SSD's.
  static constexpr uint64_t kInitialRate = 200ull << 20;
  /// The bucket holds this long of the write speed...
  static constexpr int64_t kDepthMs = 1000;
  /// ... and at least this many bytes.
  static constexpr uint64_t kMinDepth = 4ull << 20;

  /// `max_depth`: the bucket's largest depth in bytes (the demotion queue's bound; at least
  /// kMinDepth is used). `max_rate`: a cap on the budget's rate in bytes/s (0: none).
  explicit AdmissionPolicy(uint64_t max_depth = 256ull << 20, uint64_t max_rate = 0);

  /// Whether to write a victim of `bytes` (> 0) now. `reused`: read at least once since it was
  /// written. `pending`: bytes queued for the disk and not yet written; the budget never lets
  /// them pass `max_depth`, nor a never-read value past 3/4 of it (unless the queue is empty:
  /// a value larger than the bucket goes alone). `now_ms`: a clock in ms (refills the bucket; a clock going back refills nothing).
  /// Admitting takes the bytes from the budget.
  AdmissionDecision decide(uint64_t bytes, bool reused, uint64_t pending, int64_t now_ms);

  /// The writer wrote `bytes` of values in `micros` of its own time (one batch). Updates the
  /// measured write speed once per ~250 ms of writing, averaged with the previous figure.
  void record_write(uint64_t bytes, uint64_t micros);

  /// The budget's rate in bytes/s: the measured speed (kInitialRate before any), capped by
  /// max_rate.
  uint64_t rate() const;
  /// The disk's measured write speed in bytes/s (0 before the first measurement).
  uint64_t measured_rate() const;
  /// The bucket's depth in bytes: kDepthMs of rate(), within [kMinDepth, max_depth].
  uint64_t depth() const;
  /// The bytes in the bucket as of the last decide().
  uint64_t tokens() const;
  /// tiering.ssd.max_write_rate may change at run time (0: no cap).
  void set_max_rate(uint64_t bytes_per_s);

 private:
  uint64_t rate_locked() const;
  uint64_t depth_locked() const;

  mutable std::mutex mu_;
  uint64_t max_depth_;
  uint64_t max_rate_;
  uint64_t measured_ = 0;  // bytes/s; 0 = not measured yet
  double tokens_;          // may go below 0 after a value larger than what was left
  int64_t refilled_ms_ = -1;
  bool run_ = true;  // admitting never-read values (a run); off below 1/4, on again at 3/4
  uint64_t window_bytes_ = 0, window_us_ = 0;  // writing since the last measurement
};

}  // namespace tiering
