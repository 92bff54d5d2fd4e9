// server/dispatch.cc - Connection::execute: from a parsed request to a handler call.
//
// Order of checks follows Redis 7.0's processCommand: lookup (unknown command), arity,
// authentication, maxmemory for denyoom commands; then the call, its stats and the slowlog.
#include <algorithm>
#include <chrono>

#include "server/connection.h"
#include "server/errors.h"
#include "server/server.h"
#include "tiering/need_room.h"

namespace server {

void Connection::execute(const resp::Request& req, int64_t now_ms) {
  if (req.empty()) return;
  WorkerStats& stats = worker_.stats;
  const CommandSpec* spec = server_.commands().find(req[0]);
  if (spec == nullptr) {
    WorkerStats::bump(stats.rejected);
    writer_.error(err::unknown_command(req.args()));
    return;
  }
  if (!spec->subcommands.empty() && req.size() >= 2) {
    const CommandSpec* sub = CommandTable::find_sub(*spec, req[1]);
    if (sub == nullptr) {
      WorkerStats::bump(stats.rejected);
      writer_.error(err::unknown_subcommand(req[1], spec->name));
      return;
    }
    spec = sub;
  }
  if (!CommandTable::arity_ok(*spec, req.size())) {
    WorkerStats::bump(stats.rejected);
    writer_.error(err::wrong_arity(spec->full_name));
    return;
  }
  Config& config = server_.config();
  if (!authenticated && !(spec->flags & kNoAuth) && config.num(Key::kRequirePass) != 0) {
    WorkerStats::bump(stats.rejected);
    writer_.error(err::kNoAuth);
    return;
  }
  // With the SSD tier, a write that waited for room (Connection::run, Server::RoomWait) has
  // had its maxmemory check; what it allocates frees memory at once if it must.
  if ((spec->flags & kDenyOom) && !room_checked_) {
    // Used memory (heap + value blocks, Server::used_memory_now) against maxmemory, or the
    // region's capacity when maxmemory is 0. Buffers reserved for large bulks still in flight
    // do not count: a client that sends a header and no bytes must not push other clients'
    // writes out.
    const uint64_t used = server_.used_memory_now(), limit = server_.memory_limit();
    // Past the high watermark, wake the background evictor now rather than at its next tick:
    // at GB/s of writes the room between the watermark and maxmemory lasts milliseconds.
    if (used > config.fraction(Key::kEvictionHighWatermark) * static_cast<double>(limit))
      server_.evictor().notify();
    if (used > limit && !server_.make_room_for_write(now_ms)) {
      WorkerStats::bump(stats.rejected);
      writer_.error(err::kOom);
      return;
    }
  }

  last_cmd_.store(spec, std::memory_order_relaxed);
  CommandContext ctx{server_, *this, writer_, req, req.args(), now_ms, server_.keyspace()};
  const auto start = command_end_;
  // A handler that found the region full while it held shard locks threw NeedRoom before it
  // changed anything or replied (tiering/need_room.h); its locks are released now. Make room
  // with no lock held, then run it again.
  constexpr int kAttempts = 8;
  for (int attempt = 1;; ++attempt) {
    try {
      spec->handler(ctx);
    } catch (const tiering::NeedRoom& need) {
      server_.stats().value_alloc_failures.fetch_add(1, std::memory_order_relaxed);
      if (attempt < kAttempts && server_.evictor().make_room(need.bytes, true, tiering::now_ms()))
        continue;
      writer_.error(err::kOom);
    } catch (const std::bad_alloc&) {
      writer_.error(err::kOom);
    }
    break;
  }
  command_end_ = std::chrono::steady_clock::now();
  const int64_t us =
      std::chrono::duration_cast<std::chrono::microseconds>(command_end_ - start).count();
  WorkerStats::bump(stats.commands);
  const int64_t threshold = config.num(Key::kSlowlogLogSlowerThan);
  if (threshold >= 0 && us >= threshold)
    server_.slowlog().add(config.num(Key::kSlowlogMaxLen), us, now_ms / 1000,
                                req.args(), peer_, name());
}

}  // namespace server
