// server/exec.cc - EXEC: a transaction's queued commands run atomically (the queueing stage
// itself is in pipeline.cc, Connection::queue_stage).
//
// How EXEC runs (docs/design.md, "Transactions"):
//   1. Room first, with no lock held: the write bytes of the queued denyoom commands are made
//      room for (eviction per policy), as stage 5 does for one command.
//   2. One tiering::ExecLock over the shards of every queued key and watched key, in the one
//      lock order (every shard when a queued command touches the keyspace without declared
//      keys). The handlers run unchanged: their KeyLocks find the shards held (re-entrant).
//   3. The watched keys are looked up (an expired one is removed, which breaks the watch); a
//      broken watch answers nil and nothing runs.
//   4. The commands run in order, each reply an entry of EXEC's array; a runtime error is an
//      entry, the rest still run (Redis). A command the user's ACL rules no longer allow
//      (changed since it was queued) does not run: its entry is -NOPERM, as Redis 7.0's
//      execCommand checks each queued command again.
//   5. An allocation under the locks that finds no room throws NeedRoom. If no queued write
//      ran yet, nothing was applied: the locks go, room is made, and the whole EXEC runs again
//      from step 2 (its partial reply dropped). Once a write was applied, rerunning would
//      apply it twice and releasing the locks would let other clients see half a
//      transaction: the command that found no room answers -OOM in its entry and the rest
//      run, all under the same locks.
#include <chrono>

#include "server/connection.h"
#include "server/errors.h"
#include "server/pipeline.h"
#include "server/server.h"
#include "tiering/exec_lock.h"
#include "tiering/key_lock.h"
#include "tiering/need_room.h"

namespace server {

namespace {

// A transaction whose allocations keep needing room is run this many times at most.
constexpr int kMaxExecAttempts = 8;

// Whether a keyless command may touch the keyspace (KEYS, DBSIZE, FLUSHALL, RANDOMKEY ...):
// it locks shards of its own, so EXEC holds them all. Connection commands never do.
bool touches_keyspace_without_keys(const CommandSpec& spec) {
  return !CommandTable::has_keys(spec) && spec.group != "connection" && spec.group != "pubsub";
}

}  // namespace

void Connection::exec(CommandContext& ctx) {
  if (!txn.active()) return writer_.error(err::kExecWithoutMulti);
  if (txn.aborted()) {
    txn.end();
    return writer_.error(err::kExecAbort);
  }
  const int64_t now = ctx.now_ms;
  // The keys to lock, and the bytes the writes bring.
  std::vector<std::string_view> keys;
  std::vector<size_t> at;
  bool all = false;
  uint64_t write_bytes = 0;
  for (const QueuedCommand& q : txn.queued()) {
    at.clear();
    if (touches_keyspace_without_keys(*q.spec)) all = true;
    CommandTable::keys(*q.spec, q.req.args(), at);
    for (size_t i : at) keys.push_back(q.req[i]);
    // The bytes the client sent, not what a command claims it will write (KV.PUT's lengths are
    // checked only when it runs): room made on a claim alone would let a queued KV.PUT of a
    // made-up length evict the cache. What this misses, the NeedRoom retry below makes room
    // for, for the real allocation.
    if (q.spec->flags & kDenyOom)
      for (size_t i = 1; i < q.req.size(); ++i) write_bytes += q.req[i].size();
  }
  std::vector<std::string_view> watched(txn.watched().begin(), txn.watched().end());
  keys.insert(keys.end(), watched.begin(), watched.end());

  // 1. Room, no lock held (best effort: each write was checked against maxmemory when queued).
  if (write_bytes > 0) server_.evictor().make_room(write_bytes, false, now);

  const resp::Writer::Mark mark = writer_.mark();
  exec_stats_.clear();
  std::vector<std::string> denied;  // per queued command: its -NOPERM, or ""
  for (int attempt = 1;; ++attempt) {
    uint64_t need = 0;
    {
      // 2. The transaction's shards.
      tiering::ExecLock lock(ctx.ks, keys, all);
      // 3. Watched keys: a lookup removes an expired one, and its removal breaks the watch.
      if (!watched.empty()) {
        tiering::KeyLock look(ctx.ks, std::span<const std::string_view>(watched), now);
        for (std::string_view k : watched) look.find(k);
      }
      if (txn.watch_broken()) {
        writer_.null_array();
        txn.end();
        return;
      }
      // The ACL rules may have changed since the commands were queued: each is checked again,
      // once (an EXEC run again for room does not log twice).
      if (attempt == 1) denied = acl_recheck(now);
      // 4. The commands.
      writer_.array(txn.queued().size());
      bool applied = false;
      const bool may_retry = attempt < kMaxExecAttempts;
      try {
        for (size_t i = 0; i < txn.queued().size(); ++i) {
          const QueuedCommand& q = txn.queued()[i];
          if (!denied.empty() && !denied[i].empty()) {
            writer_.error(denied[i]);
            exec_stats_.push_back({q.spec->id, 0, false, /*ran=*/false});
            continue;
          }
          run_queued(q, now, may_retry && !applied);
          if (q.spec->flags & kWrite) applied = true;
        }
      } catch (const tiering::NeedRoom& e) {
        need = e.bytes;  // 5. nothing applied yet: run it all again once there is room
      }
    }
    if (need == 0) break;
    writer_.rewind(mark);
    exec_stats_.clear();
    server_.evictor().make_room(need, /*allocation_failed=*/true, now);
  }
  // Stats of the queued commands, counted once the transaction ran (Redis counts each call).
  // So does the slowlog (EXEC itself is kSkipSlowlog).
  // So does LATENCY (MONITOR saw each as it ran: run_queued).
  WorkerStats& stats = worker_.stats;
  Config& config = server_.config();
  const int64_t threshold = config.num(Key::kSlowlogLogSlowerThan);
  const int64_t latency = config.num(Key::kLatencyMonitorThreshold);
  for (size_t i = 0; i < exec_stats_.size(); ++i) {
    const auto& [id, us, failed, ran] = exec_stats_[i];
    if (!ran) continue;  // refused by the ACL: not called, not counted (Redis)
    const QueuedCommand& q = txn.queued()[i];
    CommandCounters& c = stats.command(id);
    WorkerStats::bump(c.calls);
    WorkerStats::bump(c.usec, us);
    if (failed) WorkerStats::bump(c.failed);
    WorkerStats::bump(stats.commands);
    if (threshold >= 0 && static_cast<int64_t>(us) >= threshold)
      server_.slowlog().add(config.num(Key::kSlowlogMaxLen), static_cast<int64_t>(us),
                            now / 1000, q.req.args(), peer_, name());
    if (latency != 0) server_.latency().add_command(q.spec->flags & kFast, us, latency);
  }
  txn.end();
}

std::vector<std::string> Connection::acl_recheck(int64_t now_ms) {
  const acl::User* user = acl_user();
  if (user == nullptr || user->unrestricted) return {};
  std::vector<std::string> denied(txn.queued().size());
  std::vector<size_t> keys;
  for (size_t i = 0; i < txn.queued().size(); ++i) {
    const QueuedCommand& q = txn.queued()[i];
    uint32_t arg = 0;
    const PreparedCommand::Verdict v = acl_check(server_, *user, *q.spec, q.req.args(), keys, &arg);
    if (v == PreparedCommand::Verdict::kRun) continue;
    using Verdict = PreparedCommand::Verdict;
    const std::string_view reason = v == Verdict::kNoPermCommand ? "command"
                                    : v == Verdict::kNoPermKey   ? "key"
                                                                 : "channel";
    const std::string_view object =
        v == Verdict::kNoPermCommand ? std::string_view(q.spec->full_name) : q.req[arg];
    log_acl_denial(reason, object, user->name, now_ms, "multi");
    denied[i] = err::noperm_at_exec(v == Verdict::kNoPermCommand ? err::kExecNoPermCommand
                                    : v == Verdict::kNoPermKey   ? err::kExecNoPermKey
                                                                 : err::kExecNoPermChannel);
  }
  return denied;
}

void Connection::run_queued(const QueuedCommand& q, int64_t now_ms, bool may_retry) {
  CommandContext ctx{server_, *this, writer_, q.req, q.req.args(), now_ms, server_.keyspace()};
  const uint64_t errors_before = writer_.errors();
  const resp::Writer::Mark mark = writer_.mark();
  const auto start = std::chrono::steady_clock::now();
  // Its changes raise its own events (published once EXEC returned: the scopes nest).
  KeyspaceEvents::CommandScope events(server_.keyspace_events(), q.spec);
  try {
    q.spec->handler(ctx);
  } catch (const tiering::NeedRoom&) {
    if (may_retry) throw;
    writer_.rewind(mark);
    writer_.error(err::kOom);
  } catch (const std::bad_alloc&) {
    writer_.rewind(mark);
    writer_.error(err::kOom);
  }
  const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                      std::chrono::steady_clock::now() - start).count();
  exec_stats_.push_back(
      {q.spec->id, static_cast<uint64_t>(us), writer_.errors() != errors_before, /*ran=*/true});
  // MONITOR shows each queued command as it ran, in order with the lines of the scripts it runs,
  // and EXEC last (its own call is fed by the pipeline). An EXEC run again for room (exec())
  // shows the commands of the first run again.
  if (server_.monitors().active() && !(q.spec->flags & (kAdmin | kSkipMonitor)))
    feed_monitors(q.req.args());
}

}  // namespace server
