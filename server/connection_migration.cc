// server/connection_migration.cc - the connection's slot migration stage (docs/cluster.md,
// "Slot migration"): while some slot migrates out of this node, a write to such a slot is
// counted in flight until it completed, and during the handover's pause it waits here, on its
// coroutine (never blocking the thread), until the pause ends; then it runs, and the pipeline's
// slot stage answers -MOVED if the slot has moved. Reads never wait.
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>

#include <chrono>

#include "cluster/slot.h"
#include "server/connection.h"
#include "server/server.h"

namespace server {

namespace {
// Writes for this stage: the write commands, scripts (their writes are inside) and EXEC.
bool writes(const CommandSpec& spec) {
  if (spec.flags & kWrite) return true;
  const std::string& n = spec.full_name;
  return n == "exec" || n == "eval" || n == "evalsha" || n == "fcall";
}
}  // namespace

asio::awaitable<bool> Connection::migration_stage(const resp::Request& req) {
  SlotOwner& owner = server_.slot_owner();
  prepare(server_, req, authenticated, acl_user(), peek_);
  if (!peek_.runs() || !writes(*peek_.spec)) co_return false;
  // The slots the request writes: its keys', or, for EXEC, its queued commands' keys'.
  migration_slots_.clear();
  auto add = [&](const CommandSpec& spec, std::span<const std::string_view> args) {
    migration_keys_.clear();
    CommandTable::keys(spec, args, migration_keys_);
    for (size_t i : migration_keys_)
      if (i < args.size()) migration_slots_.push_back(cluster::key_slot(args[i]));
  };
  if (txn.active()) {
    if (peek_.spec->full_name != "exec") co_return false;  // queued: it writes nothing now
    for (const QueuedCommand& q : txn.queued()) add(*q.spec, q.req.args());
  } else {
    add(*peek_.spec, req.args());
  }
  auto any = [&](auto pred) {
    for (uint16_t slot : migration_slots_)
      if (pred(slot)) return true;
    return false;
  };
  if (!any([&](uint16_t s) { return owner.migrating(s); })) co_return false;
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (;;) {
    owner.write_begin();
    if (!any([&](uint16_t s) { return owner.held(s); })) co_return true;
    owner.write_end();
    // The handover's pause: replies already made go out first, then wait a millisecond.
    if (!writer_.empty() && !co_await flush()) {
      closed_ = true;
      co_return false;
    }
    timer.expires_after(std::chrono::milliseconds(1));
    co_await timer.async_wait(asio::use_awaitable);
    if (closed_.load(std::memory_order_relaxed)) co_return false;
  }
}

}  // namespace server
