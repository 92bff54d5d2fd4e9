// tiering/eviction.h - maxmemory eviction: Redis's policies, watermarks, a background evictor.
//
// Policies keep Redis's names and meaning (evict.c): allkeys-/volatile- x lru/lfu/random, and
// volatile-ttl. Eviction runs in the background like Mooncake Store's: when used memory passes
// the high watermark (0.95 of maxmemory) a thread evicts down to the low watermark (0.90), so
// foreground writes rarely wait; a write whose allocation fails anyway calls make_room(), which
// evicts synchronously. Eviction only unlinks keys: a value still being read (a reply being
// written, a transfer) is freed when its last reference drops, so eviction never waits on a
// client.
//
// Choosing victims (see docs/eviction.md):
// - LRU: each key's last access is a millisecond clock (Redis: seconds). A keyspace of at most
//   `exact_limit` keys (a KV cache of large values: thousands of 32 MiB chunks) is scanned
//   whole, so the victim is the exact least recently used key. A larger one is sampled as Redis
//   does: random keys feed a pool of the best candidates kept across rounds (evictionPoolAlloc).
// - LFU: Redis's logarithmic 8-bit counter with decay (lfu_increment / lfu_decay below), chosen
//   the same way as LRU.
// - volatile-ttl: exact, from each shard's deadline-ordered expiry index.
// - random: a random key (volatile-random: a random key with a TTL).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "tiering/access_stats.h"
#include "tiering/eviction_policy.h"
#include "tiering/keyspace.h"

namespace tiering {

struct EvictionOptions {
  EvictionPolicy policy = EvictionPolicy::kNoEviction;
  uint64_t maxmemory = 0;        ///< bytes; 0 = no limit (nothing is evicted)
  double high_watermark = 0.95;  ///< background eviction starts above this share of maxmemory
  double low_watermark = 0.90;   ///< ... and stops at or below this one
  size_t samples = 16;           ///< keys sampled per round in large keyspaces
  size_t exact_limit = 4096;     ///< keyspaces up to this many keys are scanned whole
  int lfu_decay_minutes = 1;     ///< lfu-decay-time
};

/// Where victims go instead of being dropped: the SSD tier (ssd_tier.h). Thread-safe.
///
/// A selective demoter (tiering.ssd.admission reuse; admission.h) chooses which victims to
/// write: demote() refuses the others (returns 0 and leaves the entry's SSD flags clear), and
/// the evictor then evicts them as it would without a tier, so nobody waits for the disk; a
/// full or failing disk admits nothing and memory evicts as without the tier. A waiting one
/// (tiering.ssd.admission wait) writes every victim it can:
///
/// Two kinds of eviction use it (docs/ssd-tier.md, "Memory while demoting"):
/// - the background evictor queues victims for demotion (`queue` = true): their memory leaves
///   when the writer has written them, so it plans with used - pending_bytes();
/// - a write that needs room now (`queue` = false) takes only what leaves at once: a value with
///   an SSD copy. When none is left and the tier works, the evictor drops the coldest value as
///   Redis would (counted by unwritten_eviction()); when the tier is failing nothing is dropped
///   and the write gets -OOM, so no acknowledged value is lost to a broken disk.
class Demoter {
 public:
  virtual ~Demoter() = default;
  /// Under `shard`'s lock, for a victim `item` whose value is in memory: drops the value from
  /// memory at once when an SSD copy of it exists; else, with `queue`, queues its write (no disk
  /// I/O here: connection threads call this too). Returns the bytes of memory that leave (now,
  /// or when the queued write completes), or 0 when the value stays (no copy and not `queue`,
  /// the tier is failing, the value is in use): the victim is then skipped.
  virtual uint64_t demote(Shard& shard, Shard::Item* item, int64_t now, bool queue) = 0;
  /// Whether the tier takes demotions now (false after a write error, until it recovers).
  virtual bool accepting(int64_t now) const = 0;
  /// Whether it chooses its victims (see above): a victim demote() refuses is evicted, and
  /// neither the evictor nor a write waits for the queue.
  virtual bool selective() const { return false; }
  /// Counts a value evicted from memory before it could be written (a write needed the room).
  virtual void unwritten_eviction() = 0;
  /// Bytes queued for demotion and not yet written. They are still in memory and count as
  /// used; the background evictor counts them as leaving.
  virtual uint64_t pending_bytes() const = 0;
  /// The background pass stops queueing past this many pending bytes.
  virtual uint64_t max_pending_bytes() const = 0;
  /// Blocks up to `timeout_ms` until pending bytes are at most `bytes`.
  virtual void wait_pending(uint64_t bytes, int timeout_ms) = 0;
};

/// Evicts keys from a Keyspace. Thread-safe.
class Evictor {
 public:
  /// `used` returns the used memory that maxmemory limits, in bytes (called once per eviction
  /// pass; the evictor then counts the bytes of the values it unlinks).
  /// Keys under a lease (Shard::lease) are skipped.
  Evictor(Keyspace& ks, std::function<uint64_t()> used);
  ~Evictor();

  void set_options(const EvictionOptions& o);
  EvictionOptions options() const;
  /// options().policy without the lock (per-request checks).
  EvictionPolicy policy() const { return policy_.load(std::memory_order_relaxed); }
  /// Demotes victims through `d` instead of dropping them (null: drop). Call before start().
  void set_demoter(Demoter* d) { demoter_ = d; }
  Demoter* demoter() const { return demoter_; }
  /// Whether a block of `bytes` fits in one piece now (the region's largest free range). With
  /// it, make_room(allocation_failed) goes on evicting past the bytes it needs until the block
  /// fits: values need contiguous pages, and LRU's victims may leave holes between live values
  /// that add up to enough but lie apart. Null (default): bytes alone. Call before start().
  void set_fits(std::function<bool(uint64_t)> fits) { fits_ = std::move(fits); }

  /// The background pass: evicts (or queues for demotion) until used memory, less what is
  /// queued for demotion, is <= `target` bytes (measured once, then counting the victims'
  /// bytes) or nothing more is evictable. Returns the number of keys evicted or queued.
  size_t evict_to(uint64_t target, int64_t now_ms);
  /// For a write that needs `bytes` more: frees memory synchronously, now (never by queueing a
  /// demotion; see Demoter), until used + bytes <= maxmemory, and, when `allocation_failed`
  /// (the region had no room even so), until at least `bytes` of values were freed and, with
  /// set_fits, a block of `bytes` fits in one piece (or nothing is left to evict). False
  /// when the policy is noeviction or nothing evictable is left. Without `drop_unwritten`
  /// (with a Demoter), only values with an SSD copy are candidates: nothing is lost. With a
  /// selective Demoter and no `allocation_failed`, victims it admits are queued and count as
  /// freed (used memory is then planned less pending_bytes(), as in evict_to). False
  /// at once when the calling thread holds a shard lock (eviction locks shards).
  bool make_room(uint64_t bytes, bool allocation_failed, int64_t now_ms,
                 bool drop_unwritten = true);

  /// Starts the background thread (checks every `period_ms`, and at once after notify()).
  void start(int period_ms = 100);
  /// Stops and joins the background thread.
  void stop();
  /// Wakes the background thread (e.g. after a large write).
  void notify();
  /// Writes waiting for room (Connection::ssd_throttle) announce the bytes they bring, so that
  /// the background pass makes room for them too: it then keeps used + wanted below the
  /// watermarks. want(n) before waiting, unwant(n) after; then notify().
  void want(uint64_t bytes) { wanted_.fetch_add(bytes, std::memory_order_relaxed); }
  void unwant(uint64_t bytes) { wanted_.fetch_sub(bytes, std::memory_order_relaxed); }

  /// evicted_keys of INFO stats.
  uint64_t evicted_keys() const { return evicted_.load(std::memory_order_relaxed); }
  void reset_stats() { evicted_.store(0); }

 private:
  struct Candidate {
    uint64_t score;  // higher = better victim
    size_t shard;
    std::string key;
  };

  // Each returns the bytes of the value it unlinked, or 0 when it found no victim.
  uint64_t evict_one(const EvictionOptions& o, int64_t now);
  // Evicts until the victims' values add up to `need` bytes; returns keys evicted. With
  // `background`, stops early when the demoter's queue is full.
  size_t evict_bytes(const EvictionOptions& o, uint64_t need, int64_t now,
                     bool background = false);
  // Whether an entry can be a victim: its value is in memory and not already being demoted
  // (and, in a clean-only pass, has an SSD copy).
  bool candidate(const Entry& e) const {
    return e.value && !(e.flags & kEntryDemoting) && (!clean_only_ || (e.flags & kEntrySsd));
  }
  // candidate(), and not a key of a hidden slot (a migration's import) unless a demoter can
  // take it: such a key is never evicted (evict_key), so without a demoter it is no victim.
  bool candidate(const Shard::Item& item) const {
    return candidate(item.second) &&
           (demoter_ != nullptr || !ks_.any_hidden() || !ks_.hidden(ks_.slot_of(item.key())));
  }
  uint64_t evict_ttl(int64_t now);
  uint64_t evict_random(bool volatile_only, int64_t now);
  uint64_t evict_best(const EvictionOptions& o, int64_t now);
  void fill_pool(const EvictionOptions& o, int64_t now);
  void offer(Candidate c);
  uint64_t evict_key(size_t shard, const std::string& key, bool volatile_only, int64_t now);
  void run(int period_ms);

  Keyspace& ks_;
  std::function<uint64_t()> used_;
  Demoter* demoter_ = nullptr;
  std::function<bool(uint64_t)> fits_;

  mutable std::mutex options_mu_;
  EvictionOptions options_;
  std::atomic<EvictionPolicy> policy_{EvictionPolicy::kNoEviction};  // options_.policy

  std::mutex evict_mu_;  // one evictor at a time: the pool and rng are shared
  std::vector<Candidate> pool_;
  bool exact_pass_ = false;  // this pass scans every key (set once per pass: size() locks all shards)
  bool free_now_ = false;    // this pass must free memory now (make_room), not queue demotions
  bool clean_only_ = false;  // ... and only values with an SSD copy may go
  std::mt19937_64 rng_{std::random_device{}()};
  std::atomic<uint64_t> evicted_{0};
  std::atomic<uint64_t> wanted_{0};  // bytes of writes waiting for room (want())

  std::mutex wake_mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::atomic<bool> woken_{false};  // a notify() is pending: later ones cost one atomic op
  std::thread thread_;
};

}  // namespace tiering
