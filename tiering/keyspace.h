// tiering/keyspace.h - the keyspace: key -> entry (value handle, expiry, access stats).
//
// The keyspace is split into shards, each a hash table with its own mutex, so connection
// threads never share a global lock (the "no global lock on the hot path" rule of DESIGN.md).
// A command locks the one shard of its key; multi-key commands lock every involved shard in
// ascending index order (MultiLock), which makes deadlock impossible.
//
// Each shard's table is a tiering::Dict (dict.h): Redis's chained table with incremental
// rehashing, one allocation per key (the key's bytes inline in the node), and Redis's
// reverse-binary SCAN cursor, so a key present for a whole SCAN is returned at least once even
// when tables grow or shrink between calls.
//
// Expiry follows Redis: lazy on access (find() removes an expired key and reports it missing)
// plus an active cycle run by the server's cron. Where Redis samples random volatile keys, each
// shard here keeps its volatile keys ordered by deadline, so the active cycle removes exactly
// the keys that are due, oldest first, within a per-call budget.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "tiering/access_stats.h"
#include "tiering/dict.h"
#include "tiering/value.h"

namespace tiering {

/// Milliseconds since the Unix epoch (wall clock, as Redis's expiry uses).
int64_t now_ms();

/// What the keyspace keeps per key.
struct Entry {
  ValueRef value;
  int64_t expire_ms = 0;  ///< absolute deadline in Unix ms; 0 = no expiry
  uint32_t access = 0;       ///< last access: lru_clock() (ms; OBJECT IDLETIME, LRU eviction)
  uint16_t lfu_minutes = 0;  ///< lfu_minutes() when `lfu` was last decayed
  uint8_t lfu = kLfuInitVal; ///< Redis's logarithmic access counter (OBJECT FREQ, LFU eviction)
  uint8_t flags = 0;         ///< kEntry* bits
};
static_assert(sizeof(Entry) == 24, "Entry is in every key's node: keep it small");

/// Entry::flags: the key holds (or held) a lease; its deadline is in Shard's lease table.
inline constexpr uint8_t kEntryLeased = 1;
/// Entry::flags of the SSD tier (ssd_tier.h). An SSD record holds this entry's current value
/// (or a queued write will write it).
inline constexpr uint8_t kEntrySsd = 2;
/// ... that write is queued or in flight; the value is still in memory.
inline constexpr uint8_t kEntryDemoting = 4;
/// ... the value was loaded from SSD for one command and leaves memory after it.
inline constexpr uint8_t kEntryTransient = 8;
/// ... the value is on SSD only: `value` is null.
inline constexpr uint8_t kEntryCold = 16;
/// Every SSD bit: a new value (upsert, set_value) clears them.
inline constexpr uint8_t kEntrySsdFlags = kEntrySsd | kEntryDemoting | kEntryTransient | kEntryCold;

class Shard;

/// What the SSD tier learns of keyspace changes (SsdTier implements it; null when the tier is
/// off). Every call is made with the shard's lock held (flushed(): every shard's).
class ShardHooks {
 public:
  virtual ~ShardHooks() = default;
  /// `item` is about to lose its value: replaced (upsert, set_value, will_modify), removed
  /// (erase: DEL, eviction) or `expired`. Called only when the entry has SSD flags or its
  /// shard has SSD writes queued (Shard::ssd_pending), so keys the tier never saw cost nothing.
  virtual void superseded(Shard& shard, const DictNode<Entry>& item, bool expired) = 0;
  /// `item`'s deadline changed while an SSD record holds its value.
  virtual void expire_changed(Shard& shard, const DictNode<Entry>& item) = 0;
  /// Every key was removed (FLUSHALL).
  virtual void flushed() = 0;
};

/// The hash every table and the shard choice use (XXH3), as a function object.
struct KeyHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return hash_key(s); }
};
struct KeyEq {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const { return a == b; }
};

/// One shard: a hash table and its expiry index. Every method requires `mu` held.
class Shard {
 public:
  using Map = Dict<Entry>;
  /// One key: `item->first` (or key()) is the key, a DictKey that converts to std::string_view;
  /// `item->second` (or entry()) is its Entry. Valid until the key is erased: tables resize by
  /// relinking nodes, never moving them.
  using Item = Map::Node;

  /// Looks `key` up. An expired key is removed (counted in expired_keys) and reads as missing.
  /// Does not touch access stats or hit/miss counters; see lookup() for reads.
  Item* find(std::string_view key, int64_t now);
  /// find() for a read by a command: counts a hit or miss and refreshes access stats.
  Item* lookup(std::string_view key, int64_t now);
  /// find() for a read that counts a hit or miss but leaves access stats alone (Redis's
  /// LOOKUP_NOTOUCH: EXISTS, TYPE, TTL, OBJECT).
  Item* peek(std::string_view key, int64_t now);
  /// Sets `key` to `value` with deadline `expire_ms` (0 = none), inserting or replacing. With
  /// `replaced`, the old value (null if none) is moved there instead of released here, so the
  /// caller can release it after the shard lock (freeing a block takes the region's lock).
  Item* upsert(std::string_view key, ValueRef value, int64_t expire_ms, int64_t now,
               ValueRef* replaced = nullptr);
  /// Replaces a present key's value, keeping its deadline (INCR, a grown APPEND). `replaced`
  /// as in upsert().
  void set_value(Item* item, ValueRef value, ValueRef* replaced = nullptr);
  /// Announces that a present key's value is about to change in place (APPEND, SETRANGE on
  /// the sole reference): any SSD copy of it becomes stale.
  void will_modify(Item* item);
  /// Changes the deadline of a present key (0 = persist).
  void set_expire(Item* item, int64_t expire_ms);
  /// Removes a present key.
  void erase(Item* item);
  /// Removes `key` if present (an expired key counts as absent). Returns whether it was.
  bool erase(std::string_view key, int64_t now);
  /// Leases (DESIGN.md, "Values, references and leases"): `holder` (a connection id) pins a
  /// present key against eviction until `until_ms` (Unix ms). Each holder has its own lease:
  /// one holder extends (never shortens) or ends only its own. A lease does not stop DEL,
  /// overwrite or expiry; it ends with the key.
  void lease(Item* item, uint64_t holder, int64_t until_ms);
  /// Whether eviction must skip `item` at `now`: some holder's lease is unexpired.
  bool leased(const Item* item, int64_t now) const;
  /// Ends `holder`'s lease of `item` early. Returns whether it was unexpired.
  bool unlease(Item* item, uint64_t holder, int64_t now);
  /// Leases whose deadline is after `now` (INFO leased_keys).
  size_t lease_count(int64_t now) const;
  /// Forgets leases whose deadline is <= now (for the cron).
  void prune_leases(int64_t now);

  /// Removes up to `budget` keys whose deadline is <= now. Returns how many it removed.
  size_t expire_due(int64_t now, size_t budget);
  /// Removes every key. Returns the old table, so the caller can free it elsewhere.
  Map take_all();
  /// Moves up to `buckets` buckets of an ongoing table resize (for the cron; every operation
  /// also moves one). Returns whether a resize is still in progress.
  bool rehash_step(size_t buckets) { return map_.rehash_step(buckets); }

  size_t size() const { return map_.size(); }
  size_t volatile_size() const { return expiry_.size(); }
  /// The key with the nearest deadline, or null when no key has one (volatile-ttl eviction).
  Item* soonest_expiring() const { return expiry_.empty() ? nullptr : expiry_.begin()->second; }
  /// The key with the nearest deadline among those `pred(item)` accepts, or null.
  template <class Pred>
  Item* soonest_expiring_if(Pred pred) const {
    for (const auto& [deadline, item] : expiry_)
      if (pred(*item)) return item;
    return nullptr;
  }
  /// The table, for iteration (`for (const auto& [key, entry] : shard.map())`) and scans.
  const Map& map() const { return map_; }
  /// Calls `fn(Item&)` for every key, to change entries in place (never the table).
  template <class Fn>
  void for_each_entry(Fn fn) {
    for (Item& item : map_) fn(item);
  }

  /// This shard's position in its Keyspace.
  size_t index() const { return index_; }

  std::mutex mu;
  uint64_t hits = 0, misses = 0, expired = 0;  ///< keyspace_hits/misses, expired_keys
  /// The SSD tier's hooks (null when it is off) and its count of this shard's keys with SSD
  /// writes queued (kept by the tier; while non-zero every change consults the hooks).
  ShardHooks* hooks = nullptr;
  size_t ssd_pending = 0;

 private:
  friend class Keyspace;
  // Tells the hooks that `item` loses its value, when they need to know.
  void notify(Item* item, bool expired) {
    if (hooks != nullptr && ((item->second.flags & kEntrySsdFlags) != 0 || ssd_pending != 0))
      hooks->superseded(*this, *item, expired);
  }
  // Removes `item` from the table and the expiry and lease indexes (no hooks).
  void unlink(Item* item);

  size_t index_ = 0;
  Map map_;
  std::set<std::pair<int64_t, Item*>> expiry_;  // (deadline, node in map_) of volatile keys
  struct Lease {
    uint64_t holder;
    int64_t until_ms;
  };
  // The leases of kEntryLeased keys: few keys, few holders each.
  std::unordered_map<const Item*, std::vector<Lease>> leases_;
};

/// The sharded keyspace. Thread-safe through the shards' mutexes.
class Keyspace {
 public:
  /// `shards` is rounded up to a power of two.
  explicit Keyspace(size_t shards = 128);

  size_t shard_count() const { return shards_.size(); }
  size_t shard_index(std::string_view key) const;
  Shard& shard(size_t i) { return *shards_[i]; }
  Shard& shard_of(std::string_view key) { return *shards_[shard_index(key)]; }

  /// Holds the shards of a set of keys locked, acquired in ascending index order.
  class MultiLock {
   public:
    MultiLock(Keyspace& ks, std::span<const std::string_view> keys);
    ~MultiLock();
    MultiLock(const MultiLock&) = delete;
    MultiLock& operator=(const MultiLock&) = delete;

   private:
    Keyspace& ks_;
    std::vector<size_t> locked_;
  };

  /// Number of keys (may count keys past their deadline not yet removed). Locks each shard.
  size_t size();
  /// Number of keys with a deadline.
  size_t volatile_size();
  /// Removes every key (every shard locked at once, so it is atomic). With `async`, the old
  /// tables are freed on a background thread.
  void flush(bool async);
  /// Installs the SSD tier's hooks on every shard (null removes them).
  void set_hooks(ShardHooks* hooks);
  /// One active expiry pass: at most `budget_per_shard` keys per shard. Returns keys removed.
  size_t active_expire(int64_t now, size_t budget_per_shard);

  /// Moves up to `buckets_per_shard` buckets of every shard's ongoing table resize (Redis's
  /// incrementallyRehash, for the cron). Returns how many shards are still resizing.
  size_t rehash_step(size_t buckets_per_shard);

  /// One step of SCAN. `cursor` 0 starts; the returned cursor is 0 when the scan is complete.
  /// Calls `emit(key, entry)` for the keys visited, roughly `count` of them (whole buckets, so
  /// sometimes more), and visits at most 10 * `count` buckets. Every key present from the first
  /// call to the last is returned at least once, whatever resizes happen in between (Redis's
  /// guarantee); a key may be returned twice. The cursor's low bits are the shard, the rest the
  /// shard table's reverse-binary cursor. Locks one shard at a time; `emit` runs under it.
  uint64_t scan(uint64_t cursor, size_t count, int64_t now,
                const std::function<void(const std::string&, const Entry&)>& emit);

  /// A random live key, or nothing when the keyspace is empty.
  std::optional<std::string> random_key(int64_t now);

  struct Stats {
    uint64_t hits = 0, misses = 0, expired = 0;
  };
  /// Sums the shards' counters.
  Stats stats();
  /// Keys under an unexpired lease. Locks each shard.
  size_t lease_count(int64_t now);
  /// Zeroes the counters (CONFIG RESETSTAT).
  void reset_stats();

 private:
  std::vector<std::unique_ptr<Shard>> shards_;
  size_t mask_;
  unsigned shard_bits_;  // log2 of the shard count
};

}  // namespace tiering
