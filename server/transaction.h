// server/transaction.h - MULTI/EXEC state: a connection's queued commands and watched keys, and
// the server's registry of watched keys (Redis 7.0's multi.c).
//
// WATCH is Redis's design on stratakv's write path: the WatchRegistry is a KeyspaceObserver
// (tiering/change.h), so every change of a key - a command, lazy or active expiry, eviction,
// FLUSHALL - flags the transactions watching it, whoever made it. While nobody watches, an
// observer call costs one relaxed load. Per-key version stamps were the alternative: they cost
// eight bytes per entry and a stamp kept for deleted keys; the registry costs nothing per key.
// A deadline that passed without the key being touched is caught at EXEC: EXEC looks each
// watched key up under its locks, which removes it if expired and so flags it (Redis's
// isWatchedKeyExpired). A key already expired at WATCH is removed before it is registered.
#pragma once

#include <atomic>
#include <deque>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "resp/parser.h"
#include "server/command.h"
#include "tiering/change.h"

namespace server {

class Transaction;

/// Who watches which key. Thread-safe. Its observer calls run under a shard lock and take only
/// its own mutex (a leaf lock).
class WatchRegistry : public tiering::KeyspaceObserver {
 public:
  /// Registers `txn` as a watcher of `key`. Call with `key`'s shard locked, so no change of it
  /// is missed between its lookup and this.
  void watch(std::string_view key, Transaction* txn);
  /// Forgets `txn`'s watches of `keys`.
  void unwatch(const std::vector<std::string>& keys, Transaction* txn);

  void on_change(tiering::Shard& shard, const tiering::Change& change) override;
  void on_flush() override;

 private:
  std::atomic<size_t> watched_{0};  // keys with watchers: the observers' fast path
  std::mutex mu_;
  std::unordered_map<std::string, std::vector<Transaction*>> by_key_;
};

/// A command queued after MULTI: its arguments, owned (the request's buffer goes on).
struct QueuedCommand {
  const CommandSpec* spec = nullptr;
  std::vector<std::string> bytes;
  resp::Request req;  ///< views of `bytes`
};

/// One connection's transaction state. Lives on the connection's thread; only the watch flag
/// is written by others (the registry).
class Transaction {
 public:
  explicit Transaction(WatchRegistry& registry) : registry_(registry) {}
  ~Transaction() { unwatch(); }
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;

  /// Inside MULTI.
  bool active() const { return active_; }
  /// MULTI: starts queueing.
  void begin() {
    active_ = true;
    queued_count_.store(0, std::memory_order_relaxed);
  }
  /// A command refused while queueing: EXEC will answer -EXECABORT (Redis's CLIENT_DIRTY_EXEC).
  void flag() { aborted_ = true; }
  bool aborted() const { return aborted_; }
  /// Queues a command that passed every check (copies its arguments).
  void queue(const CommandSpec* spec, std::span<const std::string_view> args);
  const std::deque<QueuedCommand>& queued() const { return queue_; }
  /// Commands queued since MULTI, -1 outside MULTI (CLIENT LIST multi=). Any thread.
  int64_t queued_count() const { return queued_count_.load(std::memory_order_relaxed); }
  /// In cluster mode, the slot of the transaction's first key (-1: none yet), and whether a
  /// queued key is in another: EXEC then aborts with CROSSSLOT, as Redis's getNodeByQuery
  /// over the queued commands.
  int slot = -1;
  bool cross_slot = false;
  /// Ends the transaction (EXEC, DISCARD, RESET): drops the queue and every watch.
  void end();

  /// WATCH: records `key` (registered with the registry by the caller, under its shard lock).
  /// Returns false when it is watched already.
  bool add_watch(std::string_view key);
  /// Forgets every watched key (UNWATCH, EXEC, DISCARD).
  void unwatch();
  const std::vector<std::string>& watched() const { return watched_; }
  /// A watched key changed since WATCH (Redis's CLIENT_DIRTY_CAS).
  bool watch_broken() const { return broken_.load(std::memory_order_acquire); }
  /// Called by the registry when a watched key changes.
  void break_watch() { broken_.store(true, std::memory_order_release); }
  WatchRegistry& registry() { return registry_; }

 private:
  WatchRegistry& registry_;
  bool active_ = false, aborted_ = false;
  std::deque<QueuedCommand> queue_;  // a deque: elements never move (views of their bytes)
  std::vector<std::string> watched_;
  std::atomic<bool> broken_{false};
  std::atomic<int64_t> queued_count_{-1};
};

}  // namespace server
