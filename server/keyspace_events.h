// server/keyspace_events.h - keyspace notifications (Redis 7.0's notify.c; docs/pubsub.md):
// `notify-keyspace-events`, and the events of every change of the keyspace published on
// `__keyspace@0__:<key>` (message: the event) and `__keyevent@0__:<event>` (message: the key).
//
// Fed by the write path: KeyspaceEvents is a tiering::KeyspaceObserver, so every change -
// whoever makes it: a command, lazy or active expiry, the evictor, the SSD tier's demotion and
// promotion - raises its event, with no command remembering to. The observer runs under the
// changed key's shard lock and may only enqueue (tiering/change.h): it copies the key and the
// event name into a queue and returns; the events are published afterwards, with no lock held:
//   - on a command's thread, inside a CommandScope (the pipeline's handler stage), into a
//     per-thread queue that the scope publishes when the command has returned (so a command's
//     events go out in order, before its reply is written, like Redis's);
//   - anywhere else (the cron's active expiry, the evictor's thread, the SSD tier's threads, a
//     command's wait for room), into one shared queue under a leaf mutex, published by the
//     server's main loop (set_wake posts the drain there).
//
// Event names. A Change says what happened (set, expire, delete, demoted, promoted) and why
// (command, expiry, eviction, tiering), not which command: SETRANGE, APPEND and SET are all a
// kSet. The name comes from the command table: each CommandSpec carries its KeyEvents (the
// event its kSet and kDelete changes raise: "setrange", "append", "incrby", "rename_to" ...,
// set next to the command's registration), and the pipeline installs the running command's spec
// on its thread (CommandScope, a thread-local pointer the observer reads, like ShardMutex's
// re-entrant transaction). This keeps tiering/ free of command names and every name in the one
// table. The one thing a table cannot say is per call: SET with EX/PX/EXAT/PXAT (and SETEX)
// raises "expire" after "set", SET with KEEPTTL does not; the handler says so with
// also_expire(). Alternatives weighed: an event-name field in tiering::Change (every write
// path caller would pass names it has no use for), or handlers calling notify() as Redis does
// (every command remembering, which the write path exists to avoid).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/notify_flags.h"
#include "tiering/change.h"

namespace server {

class Config;
class PubSub;
struct CommandSpec;


/// The keyspace events a command's changes raise (CommandSpec::events): what Redis's
/// implementation of the command passes to notifyKeyspaceEvent.
struct KeyEvents {
  std::string_view set = "set";  ///< a kSet change of a key
  bool set_generic = false;      ///< `set` is of class g (rename_to, copy_to), not $
  std::string_view del = "del";  ///< a kDelete change (class g)
  bool keymiss = true;           ///< its reads of missing keys raise "keymiss" (OBJECT: no)
};

/// One event to publish: its name, its class bit, the key.
struct KeyEvent {
  std::string_view name;  ///< a literal ("set") or a command table entry's: outlives the event
  uint32_t cls;
  std::string key;
};

/// The event names a change raises, in order, into `out` (at most 3: "new", the change's own,
/// "expire" after a set with an expiry), their classes filtered by nothing. `cmd` is the
/// running command's events (null: defaults); `also_expire`: its call set an expiry.
/// Pure: the mapping, testable on its own.
size_t events_of(const tiering::Change& c, const KeyEvents* cmd, bool also_expire,
                 std::pair<std::string_view, uint32_t> out[3]);

/// The keyspace's notifier (see the file comment). Thread-safe.
class KeyspaceEvents final : public tiering::KeyspaceObserver {
 public:
  KeyspaceEvents(const Config& config, PubSub& pubsub) : config_(config), pubsub_(pubsub) {}

  /// How events raised off a command's thread reach a thread with no lock: `wake` is called
  /// (under a shard lock: it must only post) when the shared queue stops being empty, and
  /// must make drain() run soon on a thread that holds no shard lock.
  void set_wake(std::function<void()> wake) { wake_ = std::move(wake); }
  /// Publishes the shared queue's events (the main loop).
  void drain();

  /// The handler stage of one command (Connection::call, and each command EXEC runs): while
  /// it lives, this thread's changes are named after `spec`'s KeyEvents and queued per thread;
  /// the outermost scope publishes them when it ends (no shard lock may be held then: it
  /// ends after the handler, whose KeyLocks are gone). Scopes nest (EXEC's commands).
  class CommandScope {
   public:
    CommandScope(KeyspaceEvents& events, const CommandSpec* spec);
    ~CommandScope();
    CommandScope(const CommandScope&) = delete;
    CommandScope& operator=(const CommandScope&) = delete;

   private:
    KeyspaceEvents& events_;
    const CommandSpec* outer_spec_;
    bool outer_expire_;
  };
  /// Called by a handler whose call set an expiry along with a value (SET EX, SETEX ...): its
  /// kSet changes raise "expire" after "set", as Redis's setGenericCommand.
  static void also_expire();

  /// An event for a change the write path does not see because nothing changed, where Redis
  /// still raises one: EXPIRE (or GETEX) setting the deadline a key already has raises
  /// "expire". From a handler (inside a CommandScope); `cls` its class bit.
  void raise_unchanged(std::string_view event, uint32_t cls, std::string_view key);

  void on_change(tiering::Shard& shard, const tiering::Change& change) override;
  void on_flush() override {}  // FLUSHALL raises no per-key event, as in Redis
  void on_miss(tiering::Shard& shard, std::string_view key) override;

 private:
  // Publishes `events` (no lock held) and empties it (capacity kept).
  void publish(std::vector<KeyEvent>& events, size_t n);

  const Config& config_;
  PubSub& pubsub_;
  std::function<void()> wake_;
  std::mutex mu_;  // the shared queue: a leaf lock
  std::vector<KeyEvent> shared_;
  size_t shared_n_ = 0;
  std::vector<KeyEvent> draining_;  // drain()'s: only the main loop drains
};

}  // namespace server
