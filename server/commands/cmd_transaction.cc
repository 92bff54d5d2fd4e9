// server/commands/cmd_transaction.cc - MULTI, EXEC, DISCARD, WATCH, UNWATCH (Redis 7.0's
// multi.c). Queueing is a stage of the pipeline (Connection::queue_stage, pipeline.cc); EXEC's
// run is Connection::exec (exec.cc); the state is server/transaction.h.
#include "server/commands/family.h"
#include "server/connection.h"
#include "server/errors.h"
#include "server/server.h"
#include "tiering/key_lock.h"

namespace server {
namespace {

void cmd_multi(CommandContext& ctx) {
  if (ctx.conn.txn.active()) return ctx.out.error(err::kMultiNested);
  ctx.conn.txn.begin();
  ctx.out.ok();
}

void cmd_exec(CommandContext& ctx) { ctx.conn.exec(ctx); }

void cmd_discard(CommandContext& ctx) {
  if (!ctx.conn.txn.active()) return ctx.out.error(err::kDiscardWithoutMulti);
  ctx.conn.txn.end();
  ctx.out.ok();
}

void cmd_watch(CommandContext& ctx) {
  Transaction& txn = ctx.conn.txn;
  if (txn.active()) return ctx.out.error(err::kWatchInMulti);
  for (size_t i = 1; i < ctx.args.size(); ++i) {
    const std::string_view key = ctx.args[i];
    if (!txn.add_watch(key)) continue;
    // Under the key's shard lock: an expired key is removed first (a key expired at WATCH is
    // no change since), and no change can slip between that and the registration.
    tiering::KeyLock lock(ctx.ks, key, ctx.now_ms);
    lock.find(key);
    txn.registry().watch(key, &txn);
  }
  ctx.out.ok();
}

void cmd_unwatch(CommandContext& ctx) {
  ctx.conn.txn.unwatch();
  ctx.out.ok();
}

}  // namespace

void register_transaction_family(CommandTable& t) {
  CommandBuilder b(t, "transactions");
  const uint32_t f = kNoScript | kLoading | kStale | kAllowBusy;
  b.add("multi", 1, f | kFast, kNoKeys, cmd_multi, {"Mark the start of a transaction block", "1.2.0"});
  b.add("exec", 1, kNoScript | kLoading | kStale | kSkipSlowlog, kNoKeys, cmd_exec, {"Execute all commands issued after MULTI", "1.2.0", "Depends on commands in the transaction"});
  b.add("discard", 1, f | kFast, kNoKeys, cmd_discard, {"Discard all commands issued after MULTI", "2.0.0", "O(N), when N is the number of queued commands"});
  b.add("watch", -2, f | kFast, {1, -1, 1}, cmd_watch, {"Watch the given keys to determine execution of the MULTI/EXEC block", "2.2.0", "O(1) for every key."});
  b.add("unwatch", 1, f | kFast, kNoKeys, cmd_unwatch, {"Forget about all watched keys", "2.2.0"});
}

}  // namespace server
