// server/connection_script.cc - what a connection does about scripts (docs/scripting.md):
// hands EVAL's script to a script thread and waits for it on its coroutine (finish_script), and,
// while some script runs, keeps requests that would lock one of its shards from blocking the
// I/O thread: they wait on their coroutine until it is done or has run for
// busy-reply-threshold, then get -BUSY (busy_stage).
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>

#include <chrono>
#include <memory>

#include "server/connection.h"
#include "server/errors.h"
#include "server/server.h"

namespace server {

asio::awaitable<Connection::Outcome> Connection::finish_script() {
  ScriptCall call = std::move(*script_call_);
  script_call_.reset();
  // Replies already made go out first: a pipelined reply does not wait for the script.
  if (!writer_.empty() && !co_await flush()) {
    closed_ = true;
    co_return Outcome::kRejected;
  }
  ScriptOutcome result;
  auto ex = co_await asio::this_coro::executor;
  co_await asio::async_initiate<decltype(asio::use_awaitable), void()>(
      [&](auto handler) {
        auto done = std::make_shared<decltype(handler)>(std::move(handler));
        server_.scripts().submit(std::move(call), [&result, done, ex](ScriptOutcome r) {
          result = std::move(r);
          asio::post(ex, [done] { std::move(*done)(); });
        });
      },
      asio::use_awaitable);
  // A write that superseded SSD records is acknowledged once their removal is written.
  if (result.ssd_ticket != 0 && server_.ssd() != nullptr) co_await ssd_wait(result.ssd_ticket);
  // The commands it ran count in INFO commandstats, as Redis counts them (this thread owns the
  // counters).
  WorkerStats& stats = worker_.stats;
  for (const ScriptCommandStat& c : result.calls) {
    CommandCounters& counters = stats.command(c.id);
    WorkerStats::bump(counters.calls);
    WorkerStats::bump(counters.usec, c.us);
    if (c.failed) WorkerStats::bump(counters.failed);
    WorkerStats::bump(stats.commands);
  }
  // The call's duration is the script's (stats, slowlog); the next command's starts now.
  command_end_ = std::chrono::steady_clock::now();
  call_us_ = static_cast<int64_t>(result.us);
  if (result.error) {
    writer_.error(result.reply);
    co_return Outcome::kFailed;
  }
  writer_.raw(result.reply);
  co_return Outcome::kCalled;
}

namespace {
// Whether a keyless command locks shards of its own (KEYS, DBSIZE, FLUSHALL, INFO ...):
// connection commands never do, nor the replication link's own (a replica's REPLCONF ACK, WAIT
// and ROLE must not wait for a script: Redis lets a replica's link through too).
bool locks_all_shards(const CommandSpec& spec) {
  if (CommandTable::has_keys(spec) || spec.group == "connection") return false;
  const std::string& n = spec.full_name;
  return n != "replconf" && n != "wait" && n != "role";
}
}  // namespace

asio::awaitable<bool> Connection::busy_stage(const resp::Request& req, int64_t now_ms) {
  ScriptRunner& scripts = server_.scripts();
  // Requests the pipeline refuses first (unknown, arity, auth, slots) go on to be refused;
  // commands allowed while busy (SCRIPT KILL, SHUTDOWN, AUTH ...) lock nothing.
  prepare(server_, req, authenticated, acl_user(), prepared_);
  if (!prepared_.runs() || (prepared_.spec->flags & kAllowBusy)) co_return false;
  const CommandSpec& spec = *prepared_.spec;
  // The shards the request would lock.
  busy_shards_.clear();
  bool all = false;
  auto add = [&](const CommandSpec& s, std::span<const std::string_view> args) {
    if (locks_all_shards(s)) {
      all = true;
      return;
    }
    busy_keys_.clear();
    CommandTable::keys(s, args, busy_keys_);
    for (size_t i : busy_keys_)
      if (i < args.size()) busy_shards_.push_back(server_.keyspace().shard_index(args[i]));
  };
  if (txn.active()) {
    if (spec.full_name != "exec") co_return false;  // queued: it locks nothing now
    for (const QueuedCommand& q : txn.queued()) add(*q.spec, q.req.args());
    for (const std::string& k : txn.watched())
      busy_shards_.push_back(server_.keyspace().shard_index(k));
  } else if (spec.full_name == "exec" || spec.full_name == "multi" ||
             spec.full_name == "discard") {
    co_return false;
  } else {
    add(spec, req.args());
  }
  asio::steady_timer timer(co_await asio::this_coro::executor);
  for (;;) {
    const int64_t held = scripts.holding_ms(busy_shards_, all, tiering::now_ms());
    if (held < 0) co_return false;
    if (held >= server_.config().num(Key::kBusyReplyThreshold)) {
      writer_.error(err::kBusy);
      record_call(req, prepared_, Outcome::kRejected, now_ms);
      co_return true;
    }
    // Replies already made go out first; then wait a millisecond, the thread free meanwhile.
    if (!writer_.empty() && !co_await flush()) {
      closed_ = true;
      co_return true;
    }
    timer.expires_after(std::chrono::milliseconds(1));
    co_await timer.async_wait(asio::use_awaitable);
    if (closed_.load(std::memory_order_relaxed)) co_return true;
  }
}

}  // namespace server
