// server/keyspace_events.cc - keyspace notifications (keyspace_events.h).
#include "server/keyspace_events.h"

#include <utility>

#include "server/command.h"
#include "server/config.h"
#include "server/pubsub.h"
#include "tiering/keyspace.h"

namespace server {

namespace {

// The command running on this thread (CommandScope) and the events its changes raised.
thread_local int tl_depth = 0;
thread_local const CommandSpec* tl_spec = nullptr;
thread_local bool tl_expire = false;
thread_local std::vector<KeyEvent> tl_events;
thread_local size_t tl_count = 0;

// Appends an event to `queue` (its first `n` entries in use), reusing the strings it holds.
void push(std::vector<KeyEvent>& queue, size_t& n, std::string_view name, uint32_t cls,
          std::string_view key) {
  if (n == queue.size()) queue.emplace_back();
  KeyEvent& e = queue[n++];
  e.name = name;
  e.cls = cls;
  e.key.assign(key);
}

}  // namespace

size_t events_of(const tiering::Change& c, const KeyEvents* cmd, bool also_expire,
                 std::pair<std::string_view, uint32_t> out[3]) {
  using K = tiering::ChangeKind;
  using C = tiering::ChangeCause;
  static const KeyEvents kDefault;
  const KeyEvents& ev = cmd != nullptr ? *cmd : kDefault;
  size_t n = 0;
  switch (c.kind) {
    case K::kSet:
      // dbAdd's "new" comes before the command's own event (t_string.c setKey -> dbAdd).
      if (c.created) out[n++] = {"new", kNotifyNew};
      out[n++] = {ev.set, ev.set_generic ? kNotifyGeneric : kNotifyString};
      if (also_expire && c.expire_ms != 0) out[n++] = {"expire", kNotifyGeneric};
      break;
    case K::kExpire:
      out[n++] = {c.expire_ms == 0 ? "persist" : "expire", kNotifyGeneric};
      break;
    case K::kDelete:
      if (c.cause == C::kCommand) out[n++] = {ev.del, kNotifyGeneric};
      else if (c.cause == C::kExpiry) out[n++] = {"expired", kNotifyExpired | kNotifyTier};
      else if (c.cause == C::kEviction) out[n++] = {"evicted", kNotifyEvicted | kNotifyTier};
      // kTiering: the SSD tier lost a record it could not read (logged there); no event.
      break;
    case K::kDemoted:
      // A value loaded for one command only goes back to SSD after it: no move to tell.
      if (!(c.prev_flags & tiering::kEntryTransient)) out[n++] = {"demoted", kNotifyTier};
      break;
    case K::kPromoted:
      if (!(c.prev_flags & tiering::kEntryTransient)) out[n++] = {"promoted", kNotifyTier};
      break;
    case K::kRecovered:
      break;  // start-up, before anyone can subscribe
  }
  return n;
}

// ---- KeyspaceEvents ----

KeyspaceEvents::CommandScope::CommandScope(KeyspaceEvents& events, const CommandSpec* spec)
    : events_(events), outer_spec_(tl_spec), outer_expire_(tl_expire) {
  ++tl_depth;
  tl_spec = spec;
  tl_expire = false;
}

KeyspaceEvents::CommandScope::~CommandScope() {
  tl_spec = outer_spec_;
  tl_expire = outer_expire_;
  if (--tl_depth == 0 && tl_count != 0) {
    const size_t n = std::exchange(tl_count, 0);
    events_.publish(tl_events, n);
  }
}

void KeyspaceEvents::also_expire() { tl_expire = true; }

void KeyspaceEvents::on_change(tiering::Shard&, const tiering::Change& change) {
  const uint32_t flags =
      static_cast<uint32_t>(config_.num(Key::kNotifyKeyspaceEvents));
  if (!(flags & (kNotifyKeyspace | kNotifyKeyevent)) || pubsub_.idle()) return;
  std::pair<std::string_view, uint32_t> ev[3];
  const size_t n = events_of(change, tl_spec != nullptr ? &tl_spec->events : nullptr,
                             tl_expire, ev);
  for (size_t i = 0; i < n; ++i) {
    if (!(flags & ev[i].second)) continue;
    if (tl_depth > 0) {
      push(tl_events, tl_count, ev[i].first, ev[i].second, change.key);
      continue;
    }
    bool first;
    {
      std::lock_guard lock(mu_);
      first = shared_n_ == 0;
      push(shared_, shared_n_, ev[i].first, ev[i].second, change.key);
    }
    if (first && wake_) wake_();
  }
}

void KeyspaceEvents::raise_unchanged(std::string_view event, uint32_t cls,
                                     std::string_view key) {
  const uint32_t flags = static_cast<uint32_t>(config_.num(Key::kNotifyKeyspaceEvents));
  if (!(flags & (kNotifyKeyspace | kNotifyKeyevent)) || !(flags & cls) || pubsub_.idle()) return;
  if (tl_depth > 0) push(tl_events, tl_count, event, cls, key);
}

void KeyspaceEvents::on_miss(tiering::Shard&, std::string_view key) {
  // lookupKey's keymiss: only the reads of a command (its thread, in its scope) count.
  if (tl_depth == 0 || (tl_spec != nullptr && !tl_spec->events.keymiss)) return;
  const uint32_t flags = static_cast<uint32_t>(config_.num(Key::kNotifyKeyspaceEvents));
  if (!(flags & kNotifyKeyMiss) || !(flags & (kNotifyKeyspace | kNotifyKeyevent)) ||
      pubsub_.idle())
    return;
  push(tl_events, tl_count, "keymiss", kNotifyKeyMiss, key);
}

void KeyspaceEvents::drain() {
  size_t n;
  {
    std::lock_guard lock(mu_);
    n = std::exchange(shared_n_, 0);
    shared_.swap(draining_);
  }
  publish(draining_, n);
}

void KeyspaceEvents::publish(std::vector<KeyEvent>& events, size_t n) {
  const uint32_t flags = static_cast<uint32_t>(config_.num(Key::kNotifyKeyspaceEvents));
  std::string channel;
  for (size_t i = 0; i < n; ++i) {
    const KeyEvent& e = events[i];
    // notifyKeyspaceEvent: __keyspace@<db>__:<key> <event>, then __keyevent@<db>__:<event> <key>.
    if (flags & kNotifyKeyspace) {
      channel.assign("__keyspace@0__:").append(e.key);
      pubsub_.publish(ChannelKind::kGlobal, channel, e.name);
    }
    if (flags & kNotifyKeyevent) {
      channel.assign("__keyevent@0__:").append(e.name);
      pubsub_.publish(ChannelKind::kGlobal, channel, e.key);
    }
  }
}

}  // namespace server
