// tiering/key_lock.h - KeyLock: a command's access to the keyspace.
//
// A KeyLock holds the shards of one command's keys locked (ascending index order, the one lock
// order of the keyspace, so two KeyLocks never deadlock) and is the only way the server reads or
// changes entries: its writes go through Shard's write API, so every change reaches the
// keyspace's observers (change.h). Values that its changes replace or remove are released after
// the locks, since freeing a block takes the region's lock.
//
// Rules for the code that holds one (DESIGN.md, "The request pipeline and the write path"):
// no waiting, no I/O and no making room while it is held. An allocation made under it never
// evicts: when the region is full it throws NeedRoom (need_room.h), the KeyLock unlocks as the
// exception unwinds, and the request pipeline makes room and runs the command again. So a
// command allocates before it changes anything.
#pragma once

#include <cassert>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "tiering/keyspace.h"

namespace tiering {

/// The locked shards of one command's keys. Not thread-safe: one thread, one command; items it
/// returns are valid while it lives and the key is not removed.
class KeyLock {
 public:
  using Item = Shard::Item;

  /// Locks the shard of `key`, whose slot it computes once for every call below about `key`.
  /// `now` (Unix ms) is the command's clock for expiry and access.
  KeyLock(Keyspace& ks, std::string_view key, int64_t now)
      : ks_(ks), now_(now), key_(key), slot_(ks.slot_of(key)) {
    single_ = ks.shard_of_slot(static_cast<uint16_t>(slot_));
    ks_.shard(single_).mu.lock();
  }
  /// Locks the shards of `keys` (any number, repeats allowed).
  KeyLock(Keyspace& ks, std::span<const std::string_view> keys, int64_t now);
  /// Unlocks, then releases the values the changes replaced or removed.
  ~KeyLock() {
    if (!locked_.empty()) unlock_all();
    else if (single_ != SIZE_MAX) ks_.shard(single_).mu.unlock();
    // garbage_ is destroyed after this body: the values go with no shard lock held. Inside a
    // transaction (ExecLock) its shards stay locked: the values go after the transaction's
    // (out of line, so that this destructor stays inline on every command's path).
    if (ShardMutex::reentrant() != nullptr) [[unlikely]]
      hand_over_to_transaction();
  }
  KeyLock(const KeyLock&) = delete;
  KeyLock& operator=(const KeyLock&) = delete;

  // ---- reads: an expired key is removed on the way and reads as missing ----

  /// For a write: no hit/miss count, no access stats.
  const Item* find(std::string_view key) { return shard(key).find(key, now_); }
  /// Whatever its deadline, removing nothing (a replica applying its primary's changes).
  const Item* find_any(std::string_view key) { return shard(key).find_any(key); }
  /// A read by a command: counts a hit or miss and refreshes access stats (LRU/LFU).
  const Item* lookup(std::string_view key) { return shard(key).lookup(key, now_); }
  /// A read that counts a hit or miss and leaves access stats alone (LOOKUP_NOTOUCH).
  const Item* peek(std::string_view key) { return shard(key).peek(key, now_); }

  // ---- writes: each is one change for the observers ----

  /// Sets `key` to `value` with absolute deadline `expire_ms` (0 = none), inserting or
  /// replacing.
  const Item* set(std::string_view key, ValueRef value, int64_t expire_ms);
  /// Replaces a present key's value and keeps its deadline (INCR, a grown APPEND).
  void set_value(const Item* item, ValueRef value);
  /// The value's bytes for a change in place, when the entry holds the only reference and the
  /// block has room for `size` bytes; else null (the caller allocates a grown copy and calls
  /// set_value()). After writing through it, call modified().
  Value* writable_in_place(const Item* item, size_t size);
  /// Announces a change in place made through writable_in_place().
  void modified(const Item* item);
  /// Sets a present key's deadline (0 = persist).
  void set_expire(const Item* item, int64_t expire_ms);
  /// Removes a present key; returns its value (the caller may still reply it).
  ValueRef remove(const Item* item);
  /// Moves `src`'s entry (value, deadline, access stats) to `dst`, replacing what `dst` held:
  /// a kDelete of src, then a kSet of dst. Both keys must be under this lock; src != dst.
  void rename(const Item* src, std::string_view dst);

  // ---- leases (Shard::lease) ----
  void lease(const Item* item, uint64_t holder, int64_t until_ms);
  bool unlease(const Item* item, uint64_t holder);

  /// The command's clock.
  int64_t now() const { return now_; }

 private:
  // The shard of a key under this lock: the one locked shard of a single-key lock (no slot
  // computed again), else the key's.
  Shard& shard(std::string_view key) {
    if (locked_.empty() && single_ != SIZE_MAX) {
      assert(ks_.shard_index(key) == single_ && "a key outside this KeyLock");
      return ks_.shard(single_);
    }
    return ks_.shard_of(key);
  }
  Shard& shard_of_item(const Item* item) { return shard(item->key()); }
  // The slot of `key` when this lock knows it (-1: compute).
  int hint(std::string_view key) const {
    return locked_.empty() && key.size() == key_.size() && key == key_ ? slot_ : -1;
  }
  // Unlocks the shards of a multi-key lock, in descending order.
  void unlock_all();
  static Item* mut(const Item* item) { return const_cast<Item*>(item); }
  // Inside a transaction: moves the released values to the transaction's garbage.
  void hand_over_to_transaction();
  void keep(ValueRef v) {
    if (!v) return;
    if (!garbage_one_) garbage_one_ = std::move(v);  // most commands: no allocation
    else garbage_.push_back(std::move(v));
  }

  Keyspace& ks_;
  const int64_t now_;
  size_t single_;                // the one shard locked, when locked_ is empty
  std::string_view key_;         // a single-key lock's key, and its slot
  int slot_ = -1;
  std::vector<size_t> locked_;   // the shards locked, ascending (multi-key)
  // Values released after the locks (destroyed after ~KeyLock's body): the first, then the rest.
  ValueRef garbage_one_;
  std::vector<ValueRef> garbage_;
};

}  // namespace tiering
