// tiering/ssd_tier.h - the SSD tier: demotion to and promotion from RocksDB (ssd_store.h),
// tied to the keyspace (DESIGN.md, "The SSD tier"; docs/ssd-tier.md).
//
// Where a value lives is in its entry's flags (keyspace.h): kEntrySsd (an SSD record holds this
// value, or a queued write will), kEntryDemoting (that write is queued), kEntryCold (on SSD
// only: no memory value), kEntryTransient (loaded for one command). A demoted key keeps its
// entry (key, deadline, access stats) with a null value.
//
// One ordered queue, one writer. Every change to the SSD store is an op in one queue, numbered
// by a ticket and enqueued under the key's shard lock: a demotion's put (by the evictor, which
// picks victims), the removal of a record superseded by a write, DEL or expiry (on_change), a
// deadline change, a FLUSHALL. One writer thread applies the ops in ticket order in WriteBatches.
// So the store always holds a prefix of the keyspace's history, in the keyspace's order, and a
// record is never removed after a newer one for its key was written. The tier learns of the
// keyspace's changes as its first observer (change.h).
//
// Demotion: the evictor (background thread or a write that needs room) calls demote() under the
// shard lock. A value with an SSD copy leaves memory at once; any other is queued (the op holds
// a ValueRef, so the bytes stay valid) and marked kEntrySsd|kEntryDemoting, or, with
// tiering.ssd.admission reuse, refused when the write budget does not admit it (admission.h):
// the evictor then evicts it as without the tier. After the batch is
// written the writer re-checks under the shard lock that the entry still holds the very same
// value (pointer equality), that no command has it pinned (use_count), no read is loading it and
// no lease holds it; only then does it drop the memory value (kEntryCold). A key overwritten or
// deleted meanwhile is left alone: its change queued the removal of the record after the put.
//
// Acknowledgement and crashes: a write, DEL or EXPIRE that supersedes an SSD record is not
// acknowledged until the removal (or new deadline) is written: the connection waits for the
// op's ticket (take_barrier(), when_processed()) before it sends the reply, asynchronously. With
// the WAL on, a write is durable against a process crash once written (sync adds power loss).
// So after kill -9 and a recovery each key is its last acknowledged value, or missing (values
// only in memory are lost), never an older value and never torn (a WriteBatch is atomic).
//
// Reads: a command whose keys are on SSD only never reads the disk on its connection thread:
// prepare() says which keys need loading; load() (on an I/O pool thread) reads one into the
// memory region and installs it if the entry is still cold. `promote_after` = 1 keeps it in
// memory (promotion; the SSD copy stays, so demoting it again costs no write); with N > 1 the
// value is installed transient and dropped after the command until its N-th read.
//
// Thread-safety: every public call is thread-safe. Lock order: shard locks, then the queue's
// mutex; the writer thread never holds the queue's mutex while it takes a shard lock.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "tiering/admission.h"
#include "tiering/eviction.h"
#include "tiering/keyspace.h"
#include "tiering/ssd_reclaimer.h"
#include "tiering/ssd_stats.h"
#include "tiering/ssd_store.h"

namespace tiering {

struct SsdTierOptions {
  SsdOptions store;
  uint32_t promote_after = 1;              ///< reads of a cold key before it stays in memory
  uint64_t batch_bytes = 32 << 20;         ///< bytes of values per WriteBatch (at least one value)
  uint64_t max_pending_bytes = 256 << 20;  ///< queued demotion bytes before the evictor waits
  /// The reclaim thread (ssd_reclaimer.h): whether its passes run, and their target.
  bool reclaim = true;
  SsdReclaimOptions reclaim_options;
  /// tiering.ssd.admission: choose victims by budget and reuse (drop the rest), or write all.
  Admission admission = Admission::kReuse;
  uint64_t max_write_rate = 0;  ///< tiering.ssd.max_write_rate: budget cap, bytes/s (0: none)
  /// Log sink: (warning?, message). Called from the tier's threads; may be empty.
  std::function<void(bool warning, std::string_view message)> log;
};

class SsdTier final : public KeyspaceObserver, public Demoter {
 public:
  /// Opens the store (SsdStore::open) for `ks`; its records are keyed by `ks`'s slots unless
  /// options.store.slot_of says otherwise. Null with the reason in `*status` on failure.
  static std::unique_ptr<SsdTier> open(Keyspace& ks, SsdTierOptions options, SsdStatus* status);
  ~SsdTier() override;

  /// Rebuilds an entry (cold, no memory value) for every live record whose key is absent from
  /// the keyspace, and removes expired records. Call before start(). Returns the keys added.
  size_t recover(int64_t now_ms);
  /// Registers as the keyspace's observer and starts the writer and reclaim threads.
  void start();
  /// Stops the reclaim thread, writes what is queued, stops the writer and unregisters the
  /// observer.
  void stop();
  /// What a shutdown did with the values held only in memory (demote_all(), memory_only()).
  struct ShutdownFlush {
    uint64_t kept_keys = 0, kept_bytes = 0;        ///< written to SSD by the flush
    uint64_t dropped_keys = 0, dropped_bytes = 0;  ///< left in memory only: lost at exit
    bool timed_out = false;                        ///< the time limit passed first
    SsdStatus status;                              ///< a failed write or flush
  };
  /// flush_on_shutdown: queues every memory-only value (not expired), waits until all is
  /// written or `limit_ms` (a steady-clock span) has passed, then flushes RocksDB's memtables
  /// (bounded: 3 write buffers). Past the limit the values not yet written are dropped (the
  /// writer skips the puts still queued; removals are still written, so no superseded value
  /// comes back) and counted. Call after the connections stopped, once; blocking.
  ShutdownFlush demote_all(int64_t limit_ms);
  /// Counts the values held only in memory (keys, value bytes): what a stop without a flush
  /// loses. Takes each shard lock in turn.
  ShutdownFlush memory_only(int64_t now_ms);

  // ---- the connection side ----

  /// Before a command reads `key`'s value: pins its memory value into `pins` (so no demotion can
  /// drop it before the command runs) and returns true when the value is on SSD only and must
  /// be load()ed first. No disk I/O.
  bool prepare(std::string_view key, int64_t now_ms, std::vector<ValueRef>& pins);
  /// Whether `key`'s value is on SSD only (a load would read it). No disk I/O, no pin.
  bool cold(std::string_view key, int64_t now_ms);
  /// What load() did.
  struct Loaded {
    ValueRef pin;            ///< the key's memory value after the load (null: key gone)
    bool transient = false;  ///< installed for this command only: pass to release()
    SsdStatus status;        ///< not ok: the read failed (the command gets an error)
  };
  /// Reads `key` from SSD into a value from `alloc(size)` (null: no memory) and installs it.
  /// Blocking: call on an I/O pool thread, never a connection thread.
  Loaded load(std::string_view key, int64_t now_ms, const std::function<ValueRef(size_t)>& alloc);
  /// After the command: drops a transient value from memory unless someone else uses it.
  void release(std::string_view key, const ValueRef& pin);

  /// The ticket a connection must wait for before replying (0: none), reset by the call:
  /// the highest op its thread queued for a superseded record since the last call.
  static uint64_t take_barrier();
  /// Calls `fn` once every op up to `ticket` is written: at once (on this thread) if it is
  /// already, else on the writer thread.
  void when_processed(uint64_t ticket, std::function<void()> fn);
  /// Blocks until every op up to `ticket` is written.
  void wait_processed(uint64_t ticket);

  // ---- KeyspaceObserver (called under shard locks): the keyspace's changes ----
  void on_change(Shard& shard, const Change& change) override;
  void on_flush() override;

  // ---- Demoter ----
  uint64_t demote(Shard& shard, Shard::Item* item, int64_t now, bool queue) override;
  /// Healthy, or past the retry time of a failure; never while the store is halted (RocksDB
  /// stopped writes until a restart: SsdStore::halted()).
  bool accepting(int64_t now) const override {
    return healthy() ||
           (now >= retry_at_ms_.load(std::memory_order_relaxed) && !store_->halted());
  }
  bool selective() const override { return selective_.load(std::memory_order_relaxed); }
  void unwritten_eviction() override {
    stats_.unwritten_evictions.fetch_add(1, std::memory_order_relaxed);
  }
  uint64_t pending_bytes() const override { return pending_bytes_.load(std::memory_order_relaxed); }
  uint64_t max_pending_bytes() const override { return options_.max_pending_bytes; }
  void wait_pending(uint64_t bytes, int timeout_ms) override;

  // ---- figures ----
  /// The tier's heap, which maxmemory does not count (as Redis leaves replication buffers out
  /// of eviction): RocksDB's memtables, caches and write batches, read buffers. Exact where
  /// jemalloc is the allocator (the tier's threads allocate from an arena of their own), else
  /// RocksDB's own estimate. As of the last refresh_memory(). Values queued for demotion
  /// (pending_bytes()) are in the region and not part of it.
  uint64_t heap_bytes() const { return heap_bytes_.load(std::memory_order_relaxed); }
  /// Samples heap_bytes(). Call right after allocator_allocated() (MemoryTier::figures()),
  /// whose statistics epoch it reads; costs a few microseconds.
  void refresh_memory();
  SsdTierStats& stats() { return stats_; }
  /// Keys whose value is on SSD only.
  uint64_t cold_keys() const { return cold_keys_.load(std::memory_order_relaxed); }
  /// Whether the last write succeeded; else the error, logged once per failure episode.
  bool healthy() const { return healthy_.load(std::memory_order_relaxed); }
  std::string last_error() const;
  SsdStore& store() { return *store_; }
  /// The reclaim thread (its counters, tiering.ssd.reclaim* at run time).
  SsdReclaimer& reclaimer() { return *reclaimer_; }
  const SsdTierOptions& options() const { return options_; }
  uint32_t promote_after() const { return promote_after_.load(std::memory_order_relaxed); }
  /// promote_after may change at run time (CONFIG SET).
  void set_promote_after(uint32_t n) { promote_after_.store(n ? n : 1); }
  /// tiering.ssd.admission and tiering.ssd.max_write_rate may change at run time.
  void set_admission(Admission a) {
    selective_.store(a == Admission::kReuse, std::memory_order_relaxed);
  }
  void set_max_write_rate(uint64_t bytes_per_s) { admission_.set_max_rate(bytes_per_s); }
  /// The write budget (its measured rate, depth and level for INFO).
  const AdmissionPolicy& admission() const { return admission_; }
  /// For INFO and the log: "keeping_up", "rejecting" (the budget refused a value in the last
  /// kBehindMs), "disk_full" (from a write refused for space until one succeeds) or "error"
  /// (a failed write, until the store recovers) or "over_capacity" (the disk holds more than
  /// its capacity plus slack until reclaim frees space: SsdReclaimer::over_bound): nothing is
  /// admitted while any of these lasts.
  std::string_view admission_state(int64_t now_ms) const;
  /// Whether the disk gate (SsdReclaimer::over_bound) refused a victim in the last kBehindMs,
  /// or would refuse the bytes queued now: the disk holds its capacity plus slack, and nothing
  /// is admitted until reclaim frees space. Writes then wait for no demotion (Server::demotes).
  bool over_capacity(int64_t now_ms) const {
    const int64_t last = last_over_ms_.load(std::memory_order_relaxed);
    return (last != 0 && now_ms - last < kBehindMs) || reclaimer_->over_bound(pending_bytes());
  }
  /// How long after its last budget rejection the tier counts as keeping up again.
  static constexpr int64_t kBehindMs = 2000;
  /// How long without a rejection before the log says the tier keeps up again: a bursty writer
  /// would otherwise log a pair of lines every few seconds (the eviction log's 10 s likewise).
  static constexpr int64_t kLogQuietMs = 10'000;

 private:
  struct Op {
    enum Kind : uint8_t { kPut, kRemove, kExpire, kClear } kind;
    uint32_t shard;
    uint64_t ticket;
    int64_t expire_ms;
    std::string key;
    ValueRef value;      // kPut: the bytes, alive until written
    uint64_t bytes = 0;  // kPut: the memory they take (pending_bytes_)
    bool shutdown = false;  // kPut queued by demote_all(): counted in shutdown_kept_*
    bool skipped = false;   // kPut not written: past demote_all()'s time limit
  };
  // Per shard, under that shard's lock.
  template <class T>
  using KeyMap = std::unordered_map<std::string, T, KeyHash, KeyEq>;
  struct ShardState {
    KeyMap<uint64_t> pending;  // key -> ticket of its latest queued op
    KeyMap<uint32_t> loading;  // keys being read by load()
  };

  SsdTier(Keyspace& ks, SsdTierOptions options, std::unique_ptr<SsdStore> store);
  // Makes the calling thread allocate from the tier's arena (once per thread).
  void use_arena() const;
  // Queues an op (under the shard's lock) and returns its ticket.
  uint64_t enqueue(Shard& shard, Op op);
  void run_writer();
  // Applies `ops` (written together, or failed with `st`) to the keyspace.
  void commit(std::vector<Op>& ops, const SsdStatus& st);
  void fail(const SsdStatus& st, bool records_may_be_stale);
  // Writer thread: one log line when the store halted (SsdStore::halted()).
  void note_halt();
  void drop_to_capacity();
  void log(bool warning, const std::string& m) const;
  // A change made `key`'s record (if any) stale: queue its removal (and, unless it `expired`,
  // make the connection's reply wait for it). `prev_flags`: the entry's flags before.
  void superseded(Shard& shard, std::string_view key, uint8_t prev_flags, bool expired);
  // A file whose presence says the store may hold superseded records: wiped at the next open.
  static std::string dirty_marker(const std::string& path);
  bool hit_enough(std::string_view key);
  // demote() refused a victim of `bytes`; `budget`: the write budget did (not a failing disk).
  void rejected(uint64_t bytes, int64_t now, bool budget);
  // Writer thread: one log line when demotion starts and stops falling behind, and when the
  // disk reaches its capacity plus slack and when it admits again.
  void log_admission(int64_t now);

  Keyspace& ks_;
  SsdTierOptions options_;
  std::unique_ptr<SsdStore> store_;
  std::unique_ptr<SsdReclaimer> reclaimer_;
  std::vector<ShardState> shard_state_;  // index: Shard::index()
  std::atomic<uint32_t> promote_after_;

  std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::deque<Op> queue_;
  uint64_t next_ticket_ = 1;  // under queue_mu_
  bool stop_ = false;         // under queue_mu_
  std::thread writer_;

  std::atomic<uint64_t> processed_{0};  // every op up to this ticket is written
  // demote_all(): past its time limit the writer skips queued puts; what it wrote.
  std::atomic<bool> skip_puts_{false};
  std::atomic<uint64_t> shutdown_kept_keys_{0}, shutdown_kept_bytes_{0};
  std::mutex waiters_mu_;
  std::condition_variable processed_cv_;
  std::multimap<uint64_t, std::function<void()>> waiters_;

  std::atomic<uint64_t> pending_bytes_{0}, writing_bytes_{0}, heap_bytes_{0};
  unsigned arena_ = 0;  // the jemalloc arena of the writer and the reads (0: none)
  std::atomic<uint64_t> cold_keys_{0};
  std::atomic<bool> healthy_{true};
  std::atomic<int64_t> retry_at_ms_{0};  // no new demotion before this (after a failure)
  mutable std::mutex error_mu_;
  std::string last_error_;
  int64_t backoff_ms_ = 0;  // writer thread only
  bool failing_ = false;    // writer thread only: a failure episode was logged
  bool halt_logged_ = false;  // writer thread only: note_halt() said it
  std::atomic<bool> disk_full_{false};  // the last failure was a full disk

  std::atomic<bool> selective_;
  AdmissionPolicy admission_;
  std::atomic<int64_t> last_reject_ms_{0};  // the last budget rejection
  std::atomic<int64_t> last_over_ms_{0};    // the last victim the disk gate refused
  // Writer thread only: the episode of rejections being logged (0: none).
  int64_t behind_since_ms_ = 0;
  uint64_t behind_rejected_ = 0, behind_rejected_bytes_ = 0, behind_admitted_ = 0;
  bool over_logged_ = false;  // writer thread only: the log said the disk is over_capacity()

  std::mutex hits_mu_;
  std::unordered_map<std::string, uint32_t> hits_;  // reads of cold keys not yet promoted

  SsdTierStats stats_;
};

}  // namespace tiering
