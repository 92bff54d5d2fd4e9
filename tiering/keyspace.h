// tiering/keyspace.h - the keyspace: key -> entry (value handle, expiry, access stats).
//
// The keyspace is split into shards, each a hash table with its own mutex, so connection
// threads never share a global lock (the "no global lock on the hot path" rule of DESIGN.md).
// A command locks the one shard of its key; multi-key commands lock every involved shard in
// ascending index order (KeyLock, key_lock.h), which makes deadlock impossible.
//
// Slots: every key has a hash slot (0..16383) given by the function the server hands the
// keyspace (Redis Cluster's CRC16 of the key or its hash tag; tiering/ does not know the rule).
// A slot's keys all live in one shard (shard = slot mod shard count), and each slot keeps its
// keys on an intrusive list with a count, so counting and iterating a slot's keys cost
// O(keys in that slot) (Redis 7's slot_to_keys).
//
// The write path: every change to an entry goes through Shard's write API below (upsert,
// set_value, modified, set_expire, erase, and the SSD tier's drop_value / install_value /
// recover), which tells the keyspace's observers what changed (change.h).
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

#include <algorithm>
#include <array>
#include <atomic>
#include <cassert>
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
#include "tiering/change.h"
#include "tiering/dict.h"
#include "tiering/value.h"

namespace tiering {

/// Milliseconds since the Unix epoch (wall clock, as Redis's expiry uses).
int64_t now_ms();

/// Number of hash slots (Redis Cluster's).
inline constexpr uint32_t kSlotCount = 16384;
/// The key-to-slot function the server hands the keyspace: pure, thread-safe, < kSlotCount.
using SlotFn = uint16_t (*)(std::string_view key);
/// The slot function of a keyspace built without one (unit tests): XXH3 of the key, mod 16384.
uint16_t hash_slot(std::string_view key);

/// What the keyspace keeps per key.
struct Entry {
  ValueRef value;
  int64_t expire_ms = 0;  ///< absolute deadline in Unix ms; 0 = no expiry
  uint32_t access = 0;       ///< last access: lru_clock() (ms; OBJECT IDLETIME, LRU eviction)
  uint16_t lfu_minutes = 0;  ///< lfu_minutes() when `lfu` was last decayed
  uint8_t lfu = kLfuInitVal; ///< Redis's logarithmic access counter (OBJECT FREQ, LFU eviction)
  uint8_t flags = 0;         ///< kEntry* bits
  /// The key's neighbours on its slot's list (owned by the Shard: never copy an Entry into
  /// another node).
  DictNode<Entry>* slot_prev = nullptr;
  DictNode<Entry>* slot_next = nullptr;
};
static_assert(sizeof(Entry) == 40, "Entry is in every key's node: keep it small");

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
/// Entry::flags: the value was read by a command (Shard::lookup) since it was written; a new
/// value clears it. The SSD tier's admission takes it as a sign of reuse (tiering/admission.h).
inline constexpr uint8_t kEntryRead = 32;

class Shard;

/// A shard's mutex: a std::mutex that also counts the shard locks the calling thread holds, so
/// that what must never run under one can tell (making room evicts, and eviction locks shards:
/// Evictor::make_room refuses to run while the thread holds any, and an allocation under one
/// throws NeedRoom instead of evicting; need_room.h). BasicLockable: use std::lock_guard.
class ShardMutex {
 public:
  /// The shards one thread holds for a whole transaction (ExecLock, exec_lock.h): while it is
  /// installed on that thread, locking one of them again only counts, so the commands of the
  /// transaction take their KeyLocks as usual, inside the transaction's. Values those KeyLocks
  /// release go to `garbage`, freed after the transaction's locks.
  struct Reentrant {
    std::vector<const ShardMutex*> held;  ///< sorted by address
    std::vector<ValueRef>* garbage = nullptr;
    bool holds(const ShardMutex* m) const { return std::binary_search(held.begin(), held.end(), m); }
  };

  void lock() {
    // Inside a transaction, a shard it does not hold would be locked out of the one order.
    assert((reentrant_ == nullptr || reentrant_->holds(this)) && "a shard outside the ExecLock");
    if (reentrant_ == nullptr || !reentrant_->holds(this)) mu_.lock();
    ++held_;
  }
  void unlock() {
    --held_;
    if (reentrant_ == nullptr || !reentrant_->holds(this)) mu_.unlock();
  }
  /// Shard locks the calling thread holds now (a re-entrant lock counts again).
  static int held_by_this_thread() { return held_; }
  /// Holders that may keep this shard for long (a script: ExecLock with long_hold), counted
  /// before they lock it and until they unlocked it. The cron and the evictor skip such a shard
  /// rather than wait for it, and the server's pipeline does not block an I/O thread on it.
  void mark_long(int delta) { long_holders_.fetch_add(delta, std::memory_order_relaxed); }
  bool held_long() const { return long_holders_.load(std::memory_order_relaxed) != 0; }
  /// The calling thread's transaction shards (null: none). See Reentrant.
  static const Reentrant* reentrant() { return reentrant_; }
  static void set_reentrant(const Reentrant* r) { reentrant_ = r; }

 private:
  std::mutex mu_;
  std::atomic<int> long_holders_{0};
  static inline thread_local int held_ = 0;
  static inline thread_local const Reentrant* reentrant_ = nullptr;
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

/// One slot's keys: an intrusive list through Entry::slot_prev/next, and its length.
struct SlotKeys {
  DictNode<Entry>* head = nullptr;
  uint64_t count = 0;
};

/// One shard: a hash table, its expiry index and its slots' key lists. Every method requires
/// `mu` held.
///
/// The write API (upsert, set_value, modified, set_expire, erase, and for the SSD tier
/// drop_value, install_value, recover) is the only way an entry changes: each call tells the
/// keyspace's observers (change.h) after the change, with the next sequence number of this shard.
class Shard {
 public:
  using Map = Dict<Entry>;
  /// One key: `item->first` (or key()) is the key, a DictKey that converts to std::string_view;
  /// `item->second` (or entry()) is its Entry. Valid until the key is erased: tables resize by
  /// relinking nodes, never moving them.
  using Item = Map::Node;

  /// A shard of its own (unit tests): slots by hash_slot(), no observers. A Keyspace builds
  /// its shards with its slot function, its slot lists and its observers instead.
  Shard();
  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;

  /// Looks `key` up. An expired key is removed (counted in expired_keys; a kDelete change of
  /// cause kExpiry) and reads as missing. Does not touch access stats or hit/miss counters; see
  /// lookup() for reads.
  Item* find(std::string_view key, int64_t now);
  /// Looks `key` up whatever its deadline, removing nothing (a replica applying its primary's
  /// change to a key past its deadline: the primary's DELETE of it is on its way).
  Item* find_any(std::string_view key) { return map_.find(key); }
  /// find() for a read by a command: counts a hit or miss and refreshes access stats; a miss
  /// is told to the observers (on_miss).
  Item* lookup(std::string_view key, int64_t now);
  /// find() for a read that counts a hit or miss but leaves access stats alone (Redis's
  /// LOOKUP_NOTOUCH: EXISTS, TYPE, TTL, OBJECT).
  Item* peek(std::string_view key, int64_t now);

  // ---- the write path: each call below is one Change for the observers ----

  /// Sets `key` to `value` with deadline `expire_ms` (0 = none), inserting or replacing (kSet).
  /// With `replaced`, the old value (null if none) is moved there instead of released here, so
  /// the caller can release it after the shard lock (freeing a block takes the region's lock).
  /// `slot` (every write below): the key's slot when the caller knows it, else -1 (computed).
  Item* upsert(std::string_view key, ValueRef value, int64_t expire_ms, int64_t now,
               ValueRef* replaced = nullptr, ChangeCause cause = ChangeCause::kCommand,
               int slot = -1);
  /// Replaces a present key's value, keeping its deadline (kSet: INCR, a grown APPEND).
  /// `replaced` as in upsert().
  void set_value(Item* item, ValueRef value, ValueRef* replaced = nullptr, int slot = -1);
  /// After a present key's value was changed in place (APPEND, SETRANGE on the sole
  /// reference): any SSD copy of the old bytes is stale; a kSet with the new bytes.
  void modified(Item* item, int slot = -1);
  /// Changes the deadline of a present key (0 = persist; kExpire). No change when equal.
  void set_expire(Item* item, int64_t expire_ms, int slot = -1);
  /// Removes a present key (kDelete). With `removed`, its value is moved there (as upsert's
  /// `replaced`).
  void erase(Item* item, ChangeCause cause = ChangeCause::kCommand, ValueRef* removed = nullptr,
             int slot = -1);
  /// Removes `key` if present (an expired key counts as absent). Returns whether it was.
  bool erase(std::string_view key, int64_t now);
  /// The SSD tier: the value leaves memory (an SSD record holds it): moved to `dropped`
  /// (kDemoted). The caller keeps the entry's SSD flags.
  void drop_value(Item* item, ValueRef* dropped);
  /// The SSD tier: a value read from SSD is back in memory (kPromoted).
  void install_value(Item* item, ValueRef value);
  /// The SSD tier at start-up: an entry whose value is on SSD only (kRecovered), with `flags`.
  /// Null when the key is present already.
  Item* recover(std::string_view key, int64_t expire_ms, uint8_t flags, int64_t now);

  // ---- leases ----

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
  /// Removes every key (no per-key change: Keyspace::flush tells the observers once). Returns
  /// the old table, so the caller can free it elsewhere.
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
  /// Calls `fn(Item&)` for every key, to change entries' bookkeeping in place (flags, never
  /// the value: that is the write API's).
  template <class Fn>
  void for_each_entry(Fn fn) {
    for (Item& item : map_) fn(item);
  }
  /// Calls `fn(const Item&)` for every key of `slot` (which must be one of this shard's), in
  /// no particular order, until it returns false. O(keys in the slot).
  template <class Fn>
  void for_each_in_slot(uint16_t slot, Fn fn) const {
    for (const Item* it = slots_[slot].head; it != nullptr; it = it->second.slot_next)
      if (!fn(*it)) return;
  }
  /// Keys in `slot` (one of this shard's), expired ones not yet removed included.
  uint64_t count_in_slot(uint16_t slot) const { return slots_[slot].count; }
  /// The slot of `key` (the keyspace's function).
  uint16_t slot_of(std::string_view key) const { return slot_fn_(key); }
  /// `hint` when it is a slot (>= 0), else the slot of `key`.
  uint16_t slot_of(std::string_view key, int hint) const {
    return hint >= 0 ? static_cast<uint16_t>(hint) : slot_fn_(key);
  }

  /// This shard's position in its Keyspace.
  size_t index() const { return index_; }
  /// Changes made so far: the sequence number of the last one.
  uint64_t seq() const { return seq_; }

  ShardMutex mu;
  uint64_t hits = 0, misses = 0, expired = 0;  ///< keyspace_hits/misses, expired_keys
  /// The SSD tier's count of this shard's keys with SSD writes queued (kept by the tier).
  size_t ssd_pending = 0;

 private:
  friend class Keyspace;
  // Tells every observer about one change of `item` (after it; `item` may be unlinked).
  void announce(ChangeKind kind, ChangeCause cause, uint8_t prev_flags, std::string_view key,
                uint16_t slot, const ValueRef* value, int64_t expire_ms, bool created = false);
  // Removes `item` from the expiry and lease indexes and its slot's list, leaving it in the
  // table (the caller announces the change, then erases the node from map_).
  void detach(Item* item, uint16_t slot);
  void slot_link(Item* item, uint16_t slot);
  void slot_unlink(Item* item, uint16_t slot);
  // Removes an expired key: a kDelete of cause kExpiry.
  void expire_item(Item* item);

  struct InKeyspace {};
  explicit Shard(InKeyspace) {}

  size_t index_ = 0;
  size_t slot_stride_ = 1;  // the shard count: this shard's slots are index_ + k * stride
  uint64_t seq_ = 0;
  bool passive_expiry_ = false;  // Keyspace::set_passive_expiry
  SlotFn slot_fn_ = &hash_slot;
  std::unique_ptr<SlotKeys[]> own_slots_;  // a shard of its own: its slot lists
  SlotKeys* slots_ = nullptr;  // indexed by slot (only this shard's are used)
  static inline const std::vector<KeyspaceObserver*> kNoObservers;
  const std::vector<KeyspaceObserver*>* observers_ = &kNoObservers;  // the keyspace's
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
  /// `shards` is rounded up to a power of two (at most kSlotCount). `slot_of` maps a key to
  /// its hash slot (null: hash_slot()).
  explicit Keyspace(size_t shards = 128, SlotFn slot_of = nullptr);

  size_t shard_count() const { return shards_.size(); }
  /// The shard of a key: its slot's.
  size_t shard_index(std::string_view key) const { return slot_fn_(key) & mask_; }
  /// The shard that holds the keys of `slot`.
  size_t shard_of_slot(uint16_t slot) const { return slot & mask_; }
  Shard& shard(size_t i) { return *shards_[i]; }
  Shard& shard_of(std::string_view key) { return *shards_[shard_index(key)]; }
  /// The slot of `key`.
  uint16_t slot_of(std::string_view key) const { return slot_fn_(key); }
  /// The key-to-slot function itself (the SSD tier keys its records with it).
  SlotFn slot_function() const { return slot_fn_; }

  /// Registers an observer of every change (change.h), once (again: no effect). Thread-safe:
  /// takes every shard's lock, so it is cheap only at start-up and shutdown.
  void add_observer(KeyspaceObserver* observer);
  /// Unregisters an observer (as add_observer).
  void remove_observer(KeyspaceObserver* observer);

  /// Number of keys (may count keys past their deadline not yet removed). Locks each shard.
  size_t size();
  /// Number of keys with a deadline.
  size_t volatile_size();
  /// Keys in `slot`, expired ones not yet removed included (CLUSTER COUNTKEYSINSLOT). Locks
  /// the slot's shard; O(1).
  uint64_t count_in_slot(uint16_t slot);
  /// Up to `count` live keys of `slot` (CLUSTER GETKEYSINSLOT). Locks the slot's shard;
  /// O(keys in that slot), never a scan of the keyspace.
  std::vector<std::string> keys_in_slot(uint16_t slot, size_t count, int64_t now);
  /// Calls `fn(key, entry)` for every live key of `slot`, under the slot's shard lock (slot
  /// migration's copy: O(keys in that slot)). `fn` must only read; it may take references to
  /// values.
  void for_each_in_slot(uint16_t slot, int64_t now,
                        const std::function<void(std::string_view, const Entry&)>& fn);
  /// Removes up to `max_keys` keys of `slot` through the write path (observers told, cause
  /// kCommand: replicas and the SSD tier follow). Returns how many it removed. For the keys
  /// a node keeps of a slot it does not serve: a migration's source after the handover, a
  /// target after a rollback. Locks the slot's shard.
  size_t remove_slot_keys(uint16_t slot, size_t max_keys);

  /// Slot migration (docs/cluster.md, "Slot migration"): the keys of a slot being imported are
  /// held but hidden until the handover: size(), for_each_live(), scan(), random_key() and
  /// keys_in_slot() pass them over. Lock-free reads; thread-safe.
  void set_hidden(uint16_t slot, bool hidden);
  bool hidden(uint16_t slot) const {
    return hidden_count_.load(std::memory_order_relaxed) != 0 &&
           ((hidden_[slot >> 6].load(std::memory_order_relaxed) >> (slot & 63)) & 1) != 0;
  }
  /// Whether any slot is hidden (one relaxed load).
  bool any_hidden() const { return hidden_count_.load(std::memory_order_relaxed) != 0; }

  /// Removes every key (every shard locked at once, so it is atomic; observers' on_flush()).
  /// With `async`, the old tables are freed on a background thread.
  void flush(bool async);
  /// A replica's keyspace (Redis's replicas since 3.2): a key past its deadline reads as
  /// missing but is not removed, and the active cycle removes nothing; the primary's DELETE
  /// removes it, so a replica never differs from its primary by expiring on its own clock.
  /// Locks every shard.
  void set_passive_expiry(bool passive);
  bool passive_expiry() const { return passive_expiry_; }
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
  /// Keys of hidden slots are passed over unless `include_hidden` (a replica's full copy).
  uint64_t scan(uint64_t cursor, size_t count, int64_t now,
                const std::function<void(const std::string&, const Entry&)>& emit,
                bool include_hidden = false);
  /// Calls `fn(key, entry)` for every live key, one shard locked at a time (KEYS). `fn` runs
  /// under the lock: it must only read.
  void for_each_live(int64_t now, const std::function<void(std::string_view, const Entry&)>& fn);

  /// A random live key, or nothing when the keyspace is empty.
  std::optional<std::string> random_key(int64_t now);

  struct Stats {
    uint64_t hits = 0, misses = 0, expired = 0;
  };
  /// Sums the shards' counters.
  Stats stats();
  /// Figures of the tables, summed over the shards (MEMORY STATS).
  struct TableFigures {
    size_t keys = 0;
    size_t node_bytes = 0;    ///< hash nodes without key bytes, plus bucket arrays
    size_t volatile_keys = 0; ///< keys in the expiry index
  };
  TableFigures table_figures();
  /// Keys under an unexpired lease. Locks each shard.
  size_t lease_count(int64_t now);
  /// Zeroes the counters (CONFIG RESETSTAT).
  void reset_stats();

 private:
  // Locks (unlocks) every shard, in the one lock order: ascending index (KeyLock's).
  void lock_all();
  void unlock_all();

  // Whether `key` lies in a hidden slot (only asked while any_hidden()).
  bool hidden_key(std::string_view key) const { return hidden(slot_fn_(key)); }

  std::vector<std::unique_ptr<Shard>> shards_;
  std::vector<SlotKeys> slots_;
  std::array<std::atomic<uint64_t>, kSlotCount / 64> hidden_{};
  std::atomic<uint32_t> hidden_count_{0};
  std::vector<KeyspaceObserver*> observers_;
  SlotFn slot_fn_;
  bool passive_expiry_ = false;
  size_t mask_;
  unsigned shard_bits_;  // log2 of the shard count
};

}  // namespace tiering
