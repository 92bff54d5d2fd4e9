// tiering/change.h - what the keyspace's write path tells its observers.
//
// Every change to an entry, whoever makes it (a command, lazy or active expiry, eviction, the
// SSD tier's demotion and promotion, a fast-path publish, and later replication and slot
// migration), goes through Shard's write API (keyspace.h), which calls every observer after the
// change, under the shard's lock, in change order, with a per-shard sequence number. The SSD tier
// is the first observer; the replication stream, the slot index of a migration and keyspace
// notifications are the next ones, so a Change carries what they need to apply it without
// re-running a command: the key, its slot, the new value by reference, the absolute deadline,
// and why (Redis's propagate() and notifyKeyspaceEvent() from one place, as Dragonfly's DbSlice
// change callbacks).
#pragma once

#include <cstdint>
#include <string_view>

#include "tiering/value.h"

namespace tiering {

class Shard;

/// What happened to the key.
enum class ChangeKind : uint8_t {
  kSet,        ///< the key holds `value` now: inserted, overwritten, or changed in place
  kExpire,     ///< only its deadline changed (`expire_ms`; 0 = persisted)
  kDelete,     ///< the key is gone
  kDemoted,    ///< its value left memory; an SSD record holds it (content unchanged)
  kPromoted,   ///< its value is back in memory from SSD (content unchanged); with kEntryTransient
               ///< in prev_flags, only for one command, after which it is kDemoted again
  kRecovered,  ///< rebuilt from the SSD tier at start-up (value on SSD only)
};

/// Why it happened.
enum class ChangeCause : uint8_t {
  kCommand,   ///< a client's command (a fast-path publish included)
  kExpiry,    ///< its deadline passed (lazy or active expiry)
  kEviction,  ///< maxmemory-policy, or the SSD tier's capacity
  kTiering,   ///< the SSD tier moved it between memory and disk
};

/// One change. Valid only during the observer call: an observer that keeps something copies
/// the key and takes its own reference to the value.
struct Change {
  ChangeKind kind;
  ChangeCause cause;
  uint8_t prev_flags;    ///< the entry's kEntry* flags before the change (0 for a new key)
  uint16_t slot;         ///< the key's hash slot (the keyspace's key-to-slot function)
  uint64_t seq;          ///< the shard's sequence number of this change: 1, 2, 3 ...
  std::string_view key;
  const ValueRef* value;  ///< kSet, kPromoted: the value the key holds now; else null
  int64_t expire_ms;      ///< the deadline after the change, absolute Unix ms; 0 = none
  bool created = false;   ///< kSet: the key did not exist before (Redis's dbAdd; event "new")
};

/// Learns of every change of a Keyspace (Keyspace::add_observer).
///
/// Called under the changed key's shard lock (on_flush: under every shard's lock), on the thread
/// that made the change, in the order of the shard's changes. An observer may only record or
/// enqueue: it must never block, wait, allocate from the memory region, do I/O or take a shard
/// lock, and must be cheap (it runs inside every write).
class KeyspaceObserver {
 public:
  virtual ~KeyspaceObserver() = default;
  /// One change of one key of `shard`.
  virtual void on_change(Shard& shard, const Change& change) = 0;
  /// Every key was removed (FLUSHALL/FLUSHDB).
  virtual void on_flush() = 0;
  /// A command's read found no `key`: Shard::lookup and Shard::peek, the reads that count
  /// keyspace_misses (Redis's lookupKeyRead and its keymiss event). Under the shard's lock, as
  /// on_change. Default: nothing.
  virtual void on_miss(Shard& /*shard*/, std::string_view /*key*/) {}
};

}  // namespace tiering
