// tiering/exec_lock.h - ExecLock: the shards of a whole transaction (MULTI/EXEC), held while
// it runs.
//
// EXEC locks every shard its commands' keys (and its watched keys) live in, in the one lock
// order of the keyspace (ascending index, as KeyLock), or every shard when a command of it has
// no declared keys (KEYS, DBSIZE, FLUSHALL: they lock shards of their own). While it lives it is
// installed on its thread as ShardMutex::Reentrant: the KeyLocks the commands take inside it
// find their shards held and only count them, so handlers are unchanged and take no lock out of
// order. The rules of KeyLock hold for the whole transaction: no waiting, I/O or making room
// (allocations throw NeedRoom; the caller makes room once this is gone).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "tiering/keyspace.h"

namespace tiering {

/// The locked shards of one transaction, re-entrant for its thread. Not thread-safe.
class ExecLock {
 public:
  /// Locks the shards of `keys` (repeats allowed), or every shard when `all`. `long_hold`: the
  /// holder may keep them for long (a script): they are marked (ShardMutex::mark_long) before
  /// they are locked and until they are unlocked, so the cron and the evictor skip them.
  ExecLock(Keyspace& ks, std::span<const std::string_view> keys, bool all, bool long_hold = false);
  /// Uninstalls, unlocks (descending), then frees the values the transaction released.
  ~ExecLock();
  ExecLock(const ExecLock&) = delete;
  ExecLock& operator=(const ExecLock&) = delete;

  /// Shards held (ascending index).
  size_t shards() const { return locked_.size(); }

 private:
  Keyspace& ks_;
  std::vector<size_t> locked_;
  bool long_hold_;
  ShardMutex::Reentrant reentrant_;
  std::vector<ValueRef> garbage_;  // declared last of the state it frees: see ~ExecLock
};

}  // namespace tiering
