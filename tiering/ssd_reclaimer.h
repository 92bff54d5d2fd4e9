// tiering/ssd_reclaimer.h - the SSD tier's reclaim thread: gives back the disk space of removed,
// replaced and expired records while the server runs (SsdStore::reclaim(); docs/ssd-tier.md,
// "Disk space").
//
// A thread of its own (never the writer: a reclaim compaction takes seconds, and demotion must
// not wait for it) checks disk_bytes() against its target every `interval_ms` and, when over,
// runs one reclaim pass. After a pass that freed nothing (or failed) the next
// waits 0.5 s, doubling up to 5 s, so a store whose excess no pass can remove (the WAL, a store
// being filled) is not compacted in a loop.
//
// Thread-safety: every public call is thread-safe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string_view>
#include <thread>

#include "tiering/ssd_store.h"

namespace tiering {

/// Counters of the reclaim thread (INFO tiering: ssd_reclaim_*). Relaxed atomics.
struct SsdReclaimStats {
  std::atomic<uint64_t> runs{0};             ///< passes run (the disk was over its target)
  std::atomic<uint64_t> freed_bytes{0};      ///< bytes of files those passes deleted
  std::atomic<uint64_t> rewrites{0};         ///< passes that moved live values (step 2)
  std::atomic<uint64_t> rewritten_bytes{0};  ///< live value bytes moved
  std::atomic<uint64_t> errors{0};           ///< passes that failed
  std::atomic<uint64_t> last_ms{0};          ///< duration of the last pass
  void reset() {
    for (auto* c : {&runs, &freed_bytes, &rewrites, &rewritten_bytes, &errors, &last_ms})
      c->store(0, std::memory_order_relaxed);
  }
};

class SsdReclaimer {
 public:
  /// `store` must outlive the reclaimer. `log(warning, message)` says when a pass fails (once
  /// per failure episode); may be empty.
  SsdReclaimer(SsdStore& store, SsdReclaimOptions options,
               std::function<void(bool warning, std::string_view message)> log,
               int interval_ms = 200);
  ~SsdReclaimer();  ///< stop()
  SsdReclaimer(const SsdReclaimer&) = delete;
  SsdReclaimer& operator=(const SsdReclaimer&) = delete;

  /// Starts the thread (idempotent).
  void start();
  /// Cancels a pass in progress (RocksDB stops its compaction early) and joins the thread.
  void stop();
  /// Pauses or resumes the passes (tiering.ssd.reclaim, CONFIG SET).
  void set_enabled(bool on) { enabled_.store(on, std::memory_order_relaxed); }
  bool enabled() const { return enabled_.load(std::memory_order_relaxed); }
  /// tiering.ssd.reclaim_space_amp (percent of the live bytes, at least 100).
  void set_space_amp(uint32_t percent);
  /// The disk_bytes() above which a pass runs now.
  uint64_t target() const;

  /// The disk's hard bound: `capacity` + the slack (SsdStore::reclaim_target's constant); 0
  /// when the store has no capacity. Admission stops while the disk may be over it (below).
  uint64_t bound() const;
  /// The writer wrote `bytes` of values since the last look at the disk (the thread looks
  /// every interval whatever else it does, even with passes off). They count
  /// SsdStore::value_copies() times: a value is in the WAL, and again in a blob file once its
  /// memtable is flushed, until the flush has deleted that WAL (a flush between two looks left
  /// the disk past the bound by what it wrote). A pass's moves of live values write no WAL and
  /// count once (reclaim()'s `moving`).
  void wrote_values(uint64_t bytes) {
    written_.fetch_add(copies_ * bytes, std::memory_order_relaxed);
  }
  /// Whether the disk, as last measured (with the memtables: their values, already in the
  /// WAL, go to blob files at their flush), plus what was written since and `pending` value
  /// bytes queued to be written (as wrote_values() counts them), passes bound(): the
  /// tier then admits nothing until reclaim brings it back under (so the disk stays within
  /// capacity + slack however far reclaim falls behind; docs/ssd-tier.md, "Disk space"). One
  /// relaxed load each.
  bool over_bound(uint64_t pending) const {
    const uint64_t b = bound_.load(std::memory_order_relaxed);
    return b != 0 && disk_.load(std::memory_order_relaxed) +
                             written_.load(std::memory_order_relaxed) + copies_ * pending > b;
  }
  /// The disk's bytes at the last look.
  uint64_t measured_disk_bytes() const { return disk_.load(std::memory_order_relaxed); }
  SsdReclaimStats& stats() { return stats_; }

 private:
  void run();
  // Measures the disk (every interval, passes on or off) for over_bound().
  uint64_t measure();

  SsdStore& store_;
  std::atomic<uint32_t> space_amp_;
  uint64_t slack_;
  const uint64_t copies_;  // store_.value_copies()
  std::function<void(bool, std::string_view)> log_;
  int interval_ms_;
  std::atomic<bool> enabled_{true};
  std::atomic<uint64_t> bound_{0};    // bound(), refreshed by each look
  std::atomic<uint64_t> disk_{0};     // disk_bytes() + unflushed_bytes() at the last look
  std::atomic<uint64_t> written_{0};  // bytes written since it (values copies_ times)
  std::atomic<bool> canceled_{false};
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;  // under mu_
  std::thread thread_;
  SsdReclaimStats stats_;
};

}  // namespace tiering
