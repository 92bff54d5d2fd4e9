// server/pipeline.cc - the request pipeline (pipeline.h lists the stages): prepare() resolves a
// request once (stages 1-3), and Connection::process / process_tiered run it through the rest
// in order, with the handler stage (NeedRoom, -OOM) and the stats and slowlog stage. The SSD
// tier's steps (loads, back-pressure, reply barriers) are in connection_ssd.cc.
#include "server/pipeline.h"

#include <chrono>

#include "cluster/slot.h"
#include "server/connection.h"
#include "server/errors.h"
#include "server/replication.h"
#include "server/server.h"
#include "server/transfer_pool.h"
#include "tiering/need_room.h"

namespace server {

namespace {

using Verdict = PreparedCommand::Verdict;

// A handler that keeps needing room is run this many times at most.
constexpr int kMaxHandlerAttempts = 8;

// Whether a command needs authentication it does not have (server.c: authRequired): the
// default user has a password or is off.
bool needs_auth(Server& server, const CommandSpec& spec, bool authenticated) {
  return !authenticated && !(spec.flags & kNoAuth) && server.acl().default_needs_auth();
}

// The ACL's command check (ACLSelectorCheckCmd): no_auth commands run for everyone.
[[gnu::always_inline]] inline bool command_allowed(const acl::User& user, const CommandSpec& spec,
                                                   const std::string_view* arg1) {
  return (spec.flags & kNoAuth) || user.can_run(spec.id, arg1 != nullptr ? *arg1 : "");
}

// The key permissions a call of `spec` needs on each of its keys (Redis's key-spec flags, from
// our command flags): a write needs W, and R too when the call reads values (INCR, GETSET, SET
// ... GET); a read needs R.
uint8_t key_perms(const CommandSpec& spec, std::span<const std::string_view> args) {
  if (spec.flags & kWrite)
    return acl::kKeyWrite |
           (!(spec.flags & kNoValue) && CommandTable::reads_values(spec, args) ? acl::kKeyRead : 0);
  return acl::kKeyRead;
}

// The ACL's key and channel checks (ACLSelectorCheckCmd after the command bit), over the call's
// keys (found into `keys` unless `have_keys`).
Verdict acl_keys_channels(const Server& server, const acl::User& user, const CommandSpec& spec,
                          std::span<const std::string_view> args, std::vector<size_t>& keys,
                          bool have_keys, uint32_t* denied_arg) {
  if (!user.all_keys && CommandTable::has_keys(spec)) {
    if (!have_keys) CommandTable::keys(spec, args, keys);
    const uint8_t perms = key_perms(spec, args);
    for (size_t i : keys) {
      if (i < args.size() && !user.key_allowed(args[i], perms)) {
        *denied_arg = static_cast<uint32_t>(i);
        return Verdict::kNoPermKey;
      }
    }
  }
  if (!user.all_channels) {
    const acl::Channels where = server.acl().catalog()[spec.id].channels;
    if (where != acl::Channels::kNone) {
      const size_t end = where == acl::Channels::kFirst ? std::min<size_t>(2, args.size())
                                                        : args.size();
      for (size_t i = 1; i < end; ++i) {
        if (!user.channel_allowed(args[i], where == acl::Channels::kAllPatterns)) {
          *denied_arg = static_cast<uint32_t>(i);
          return Verdict::kNoPermChannel;
        }
      }
    }
  }
  return Verdict::kRun;
}

// Stages 1-2 for a call named by `name` (and, for a container, `sub`: null when the call has
// no second argument yet in hand) of `argc` arguments: the command or subcommand into `*spec`
// (null when unknown), and kRun or the verdict that refuses the call. The one check of both
// prepare() and unowned_slot_before().
[[gnu::always_inline]] inline Verdict check_call(Server& server, std::string_view name,
                                                 const std::string_view* sub, size_t argc,
                                                 bool authenticated, const acl::User* user,
                                                 const CommandSpec** spec) {
  // 1. Lookup (one table lookup, and the subcommand's among its container's) and arity.
  const CommandSpec* s = server.commands().find(name);
  *spec = s;
  if (s == nullptr) return Verdict::kUnknownCommand;
  if (!s->subcommands.empty() && argc >= 2) {
    if (sub == nullptr) {
      *spec = nullptr;
      return Verdict::kUnknownSubcommand;
    }
    s = CommandTable::find_sub(*s, *sub);
    *spec = s;
    if (s == nullptr) return Verdict::kUnknownSubcommand;
  }
  if (!CommandTable::arity_ok(*s, argc)) return Verdict::kWrongArity;
  // 2. Authentication.
  if (needs_auth(server, *s, authenticated)) return Verdict::kNoAuth;
  // 2. ACL: the user's command bitmap (the keys and channels once the call is whole).
  if (user != nullptr && !user->unrestricted && !command_allowed(*user, *s, sub))
    return Verdict::kNoPermCommand;
  return Verdict::kRun;
}

}  // namespace

Verdict acl_check(const Server& server, const acl::User& user, const CommandSpec& spec,
                  std::span<const std::string_view> args, std::vector<size_t>& keys,
                  uint32_t* denied_arg) {
  if (user.unrestricted) return Verdict::kRun;
  if (!command_allowed(user, spec, args.size() >= 2 ? &args[1] : nullptr))
    return Verdict::kNoPermCommand;
  keys.clear();
  return acl_keys_channels(server, user, spec, args, keys, false, denied_arg);
}

// prepare()'s body, inlined into the pipeline's own callers: one request's stages run without
// a call per stage.
[[gnu::always_inline]] inline void prepare_inline(Server& server, const resp::Request& req,
                                                  bool authenticated, const acl::User* user,
                                                  PreparedCommand& out) {
  const std::span<const std::string_view> args = req.args();
  out.spec = nullptr;
  out.keys.clear();
  out.slots.clear();
  out.writes = out.reads_values = false;
  out.write_bytes = 0;

  // 1-2. Lookup and arity, authentication.
  const CommandSpec* spec = nullptr;
  out.verdict = check_call(server, args[0], args.size() >= 2 ? &args[1] : nullptr, args.size(),
                           authenticated, user, &spec);
  out.spec = spec;
  if (out.verdict != Verdict::kRun) return;
  // 2. ACL: the keys (read or write patterns) and the Pub/Sub channels of a restricted user.
  const bool acl_keys = user != nullptr && !user->unrestricted;
  if (acl_keys) [[unlikely]] {
    out.verdict = acl_keys_channels(server, *user, *spec, args, out.keys, false, &out.denied_arg);
    if (out.verdict != Verdict::kRun) return;
  }

  // What the later stages need. Only the slot stage (below) and the SSD tier's stages (loads,
  // waits for room) ask for the keys: a node that serves every slot outside cluster mode and
  // has no SSD tier does not find them (a read of 100 bytes costs a few hundred instructions
  // in all). A finder that finds the arguments malformed leaves the keys it found: the
  // handler replies the error.
  out.writes = (spec->flags & kDenyOom) != 0;
  const SlotOwner& owner = server.slot_owner();
  const bool cluster_mode = owner.cluster_enabled();
  // A batch that routes each key itself (kPerKeySlots) has no slot stage: its handler checks
  // every key once.
  const bool per_key = (spec->flags & kPerKeySlots) != 0;
  const bool slot_stage = (cluster_mode || !owner.owns_all()) && !per_key;
  // (found already when the ACL checked them: a user limited to some keys)
  if ((slot_stage || server.ssd() != nullptr) && !(acl_keys && !user->all_keys))
    CommandTable::keys(*spec, args, out.keys);
  if (server.ssd() != nullptr) {
    out.reads_values = CommandTable::reads_values(*spec, args);
    if (out.writes && spec->write_bytes != nullptr) {
      out.write_bytes = spec->write_bytes(args);
    } else if (out.writes) {
      // Arguments read straight into a block of the region (large bulks) are there already.
      for (size_t i = 1; i < args.size(); ++i)
        if (!req.owner(i)) out.write_bytes += args[i].size();
    }
  }

  // 3. Slot ownership (cluster.c getNodeByQuery): in cluster mode the keys must share one slot
  // (-CROSSSLOT first); a key in a slot another node serves is redirected (-MOVED). While this
  // node serves every slot outside cluster mode nothing is asked, and the slots are not
  // computed (a CRC16 per key: 4% of a 100-byte GET's CPU), as Redis computes them only in
  // cluster mode.
  if (per_key && !out.keys.empty() && !owner.owns_all()) {
    // Only this node's keys are left for the SSD tier's stages (no load of another node's key).
    std::erase_if(out.keys, [&](size_t i) { return !owner.owns(cluster::key_slot(args[i])); });
  }
  // A replica refuses writes from clients (replica-read-only; server.c processCommand checks
  // it after the cluster redirection: a replica in cluster mode redirects writes first).
  // Replication applies its primary's changes through the keyspace, not through here.
  // Fencing (docs/replication.md): a primary whose lease in etcd may have expired refuses
  // writes, so that it never accepts one after a replica could have taken its place.
  const bool write = (spec->flags & kWrite) != 0;
  const Verdict after_slots =
      !write                                   ? Verdict::kRun
      : owner.fenced()                         ? Verdict::kFenced
      : server.replication().is_replica() &&
              server.config().num(Key::kReplicaReadOnly) != 0
          ? Verdict::kReadOnlyReplica
          : Verdict::kRun;
  if (!slot_stage) {
    out.verdict = after_slots;
    return;
  }
  for (size_t i : out.keys) out.slots.push_back(cluster::key_slot(args[i]));
  if (cluster_mode && !out.slots.empty()) {
    // In Redis's order: the first key's slot served by nobody, keys of several slots, the
    // cluster down as a whole; then the redirect.
    const uint16_t first = out.slots.front();
    if (!owner.owns(first) && owner.address(first).empty()) {
      out.verdict = Verdict::kClusterDownUnbound;
      return;
    }
    for (uint16_t slot : out.slots) {
      if (slot != first) {
        out.verdict = Verdict::kCrossSlot;
        return;
      }
    }
    if (owner.cluster_down()) {
      out.verdict = Verdict::kClusterDownState;
      return;
    }
    if (owner.unconfirmed()) {  // a restarted primary, until etcd confirms its role
      out.verdict = Verdict::kFenced;
      return;
    }
  }
  for (uint16_t slot : out.slots) {
    if (!owner.owns(slot)) {
      out.verdict = Verdict::kMoved;
      out.moved_slot = slot;
      out.moved_to = owner.address(slot);
      return;
    }
  }
  out.verdict = after_slots;
}

void prepare(Server& server, const resp::Request& req, bool authenticated,
             const acl::User* user, PreparedCommand& out) {
  prepare_inline(server, req, authenticated, user, out);
}

int unowned_slot_before(Server& server, std::span<const std::string_view> known, size_t argc,
                        bool authenticated, const acl::User* user) {
  const SlotOwner& owner = server.slot_owner();
  if (owner.owns_all() || known.empty()) return -1;
  // A request stages 1-2 will refuse replies that first; a container whose subcommand is not
  // in hand yet cannot be told.
  const CommandSpec* spec = nullptr;
  if (check_call(server, known[0], known.size() >= 2 ? &known[1] : nullptr, argc, authenticated,
                 user, &spec) != Verdict::kRun)
    return -1;
  std::vector<size_t> keys;  // only when some slot is served elsewhere, for a large bulk
  if (!CommandTable::range_keys(*spec, argc, keys)) return -1;
  for (size_t i : keys) {
    if (i >= known.size()) break;
    const uint16_t slot = cluster::key_slot(known[i]);
    if (!owner.owns(slot)) return slot;
  }
  return -1;
}

void reply_refusal(const PreparedCommand& cmd, std::span<const std::string_view> args,
                   resp::Writer& out) {
  switch (cmd.verdict) {
    case Verdict::kRun:
      return;
    case Verdict::kUnknownCommand:
      return out.error(err::unknown_command(args));
    case Verdict::kUnknownSubcommand:
      return out.error(err::unknown_subcommand(args[1], args[0]));
    case Verdict::kWrongArity:
      return out.error(err::wrong_arity(cmd.spec->full_name));
    case Verdict::kNoAuth:
      return out.error(err::kNoAuth);
    case Verdict::kNoPermCommand:
      return out.error(err::noperm_command(cmd.spec->full_name));
    case Verdict::kNoPermKey:
      return out.error(err::kNoPermKey);
    case Verdict::kNoPermChannel:
      return out.error(err::kNoPermChannel);
    case Verdict::kMoved:
      return out.error(err::moved(cmd.moved_slot, cmd.moved_to));
    case Verdict::kCrossSlot:
      return out.error(err::kCrossSlot);
    case Verdict::kClusterDownUnbound:
      return out.error(err::kClusterDownUnbound);
    case Verdict::kClusterDownState:
      return out.error(err::kClusterDownState);
    case Verdict::kReadOnlyReplica:
      return out.error(err::kReadOnlyReplica);
    case Verdict::kFenced:
      return out.error(err::kFenced);
    case Verdict::kRefused:
      return out.error(cmd.refusal);
  }
}

// ---- Connection: the stages after prepare() ----

// Stage 3's redirect, as this connection sees it (cluster.c getNodeByQuery): on a READONLY
// connection a read-only command whose slot this node holds as a replica is served here; a
// client of tls-port is sent to the other node's tls-port when it has one.
void Connection::redirect(PreparedCommand& cmd) {
  if (readonly_reads && (cmd.spec->flags & kReadonly) != 0 &&
      server_.slot_owner().holds_as_replica(cmd.moved_slot)) {
    cmd.verdict = Verdict::kRun;
    return;
  }
  if (is_tls()) {
    std::string tls = server_.slot_owner().address(cmd.moved_slot, /*tls=*/true);
    if (!tls.empty()) cmd.moved_to = std::move(tls);
  }
}
//
// The helpers of the stages first (inlined: a request's stages cost no call each), then
// process() and process_tiered(), which run them in order.

void Connection::count_error_reply(void* self, std::string_view text) {
  WorkerStats& stats = static_cast<Connection*>(self)->worker_.stats;
  WorkerStats::bump(stats.errors);
  stats.error_codes.add(text);
}

[[gnu::always_inline]] inline void Connection::take_bulk_redirect(PreparedCommand& cmd) {
  if (bulk_too_large_ != 0) [[unlikely]] {
    // A bulk larger than memory can hold was dropped unread (allocate_bulk); a redirect of the
    // same request goes first.
    if (cmd.runs() && bulk_redirect_slot_ < 0) {
      cmd.verdict = Verdict::kRefused;
      cmd.refusal = err::value_too_large(bulk_too_large_, server_.memory_limit_name(),
                                         server_.memory_limit());
    }
    bulk_too_large_ = 0;
  }
  if (bulk_redirect_slot_ < 0) return;
  // A large bulk of this request was dropped unread (allocate_bulk): it must not run, whoever
  // serves the slot by now. Stages 1-2 passed when it was dropped, and still do.
  if (cmd.runs() || cmd.verdict == Verdict::kMoved) {
    // No node serves the slot (its address is empty): the cluster's error instead.
    cmd.verdict = bulk_redirect_to_.empty() ? Verdict::kClusterDownUnbound : Verdict::kMoved;
    cmd.moved_slot = static_cast<uint16_t>(bulk_redirect_slot_);
    cmd.moved_to = std::move(bulk_redirect_to_);
  }
  bulk_redirect_slot_ = -1;
  bulk_redirect_to_.clear();
}

[[gnu::always_inline]] inline bool Connection::room_for_write(int64_t now_ms) {
  // Used memory (heap + value blocks, Server::used_memory_now) against maxmemory, or the
  // region's capacity when maxmemory is 0. Buffers reserved for large bulks still in flight do
  // not count: a client that sends a header and no bytes must not push other clients' writes
  // out (Redis's processCommand: performEvictions before a denyoom command).
  const uint64_t used = server_.used_memory_now(), limit = server_.memory_limit();
  // Past the high watermark, wake the background evictor now rather than at its next tick: at
  // GB/s of writes the room between the watermark and maxmemory lasts milliseconds.
  if (used > server_.config().fraction(Key::kEvictionHighWatermark) * static_cast<double>(limit))
    server_.evictor().notify();
  return used <= limit || server_.make_room_for_write(now_ms);
}

[[gnu::always_inline]] inline Connection::Outcome Connection::call(const resp::Request& req,
                                                                   const PreparedCommand& cmd,
                                                                   int64_t now_ms) {
  last_cmd_.store(cmd.spec, std::memory_order_relaxed);
  // Keyspace notifications: the changes the handler makes are named after this command, and
  // published when it returned, with no lock held (server/keyspace_events.h).
  KeyspaceEvents::CommandScope events(server_.keyspace_events(), cmd.spec);
  const auto start = command_end_;
  CommandContext ctx{server_, *this, writer_, req, req.args(), now_ms, server_.keyspace()};
  ctx.may_suspend = true;  // the pipeline's own call: a large copy may go to the transfer pool
  const uint64_t errors_before = writer_.errors();
  const resp::Writer::Mark mark = writer_.mark();
  Outcome outcome = Outcome::kCalled;
  for (int attempt = 1;; ++attempt) {
    try {
      cmd.spec->handler(ctx);
      break;
    } catch (const tiering::NeedRoom& e) {
      // An allocation under a shard lock found no room. Unwinding released the handler's
      // locks: make room with none held, and run the handler again from the start (its partial
      // reply goes).
      writer_.rewind(mark);
      if (attempt < kMaxHandlerAttempts &&
          server_.evictor().make_room(e.bytes, /*allocation_failed=*/true, now_ms))
        continue;
      writer_.error(err::kOom);
      outcome = Outcome::kRejected;
      break;
    } catch (const std::bad_alloc&) {
      writer_.error(err::kOom);
      break;
    } catch (const WaitForRoom&) {
      // A fast-path put found no room while memory that comes back soon is held: it gave its
      // blocks back and replied nothing; its caller waits and calls again (wait_for_room).
      writer_.rewind(mark);
      room_wait_ = true;
      break;
    }
  }
  // The call's duration runs from the end of the previous command (or the batch's start): one
  // clock read per command. It includes loads from SSD that the call waited for.
  command_end_ = std::chrono::steady_clock::now();
  call_us_ = std::chrono::duration_cast<std::chrono::microseconds>(command_end_ - start).count();
  if (outcome == Outcome::kCalled && writer_.errors() != errors_before) outcome = Outcome::kFailed;
  return outcome;
}

[[gnu::always_inline]] inline void Connection::record(const resp::Request& req,
                                                      const PreparedCommand& cmd, Outcome outcome,
                                                      int64_t now_ms) {
  // Per worker, per command id: no lock, no cache line another thread writes. The error replies
  // themselves (errorstats, total_error_replies) were counted as they were written
  // (count_error_reply). An unknown command or subcommand has no counters, as in Redis.
  WorkerStats& stats = worker_.stats;
  if (cmd.spec == nullptr) return;
  CommandCounters& counters = stats.command(cmd.spec->id);
  if (outcome == Outcome::kRejected) {
    WorkerStats::bump(counters.rejected);
    return;
  }
  const int64_t us = call_us_;
  WorkerStats::bump(counters.calls);
  WorkerStats::bump(counters.usec, static_cast<uint64_t>(us));
  if (outcome == Outcome::kFailed) WorkerStats::bump(counters.failed);
  WorkerStats::bump(stats.commands);
  Config& config = server_.config();
  const int64_t threshold = config.num(Key::kSlowlogLogSlowerThan);
  if (threshold >= 0 && us >= threshold && !(cmd.spec->flags & kSkipSlowlog))
    server_.slowlog().add(config.num(Key::kSlowlogMaxLen), us, now_ms / 1000, req.args(), peer_,
                          name());
  // LATENCY (server.c call): a call of latency-monitor-threshold ms or more is a "command" or,
  // for a fast command, a "fast-command" spike. Off (0): one relaxed load.
  if (const int64_t latency = config.num(Key::kLatencyMonitorThreshold); latency != 0)
    [[unlikely]] server_.latency().add_command(cmd.spec->flags & kFast, us, latency);
  // MONITOR: the command as it ran, once it ran (Redis 7.0 feeds after the call), unless it is
  // an admin one or flagged skip_monitor. Nobody monitoring: one relaxed load.
  if (server_.monitors().active() && !(cmd.spec->flags & (kAdmin | kSkipMonitor))) [[unlikely]]
    feed_monitors(req.args());
}

// Whether a command runs in RESP2's subscribed mode (processCommand's Pub/Sub context check).
static bool runs_when_subscribed(const CommandSpec& spec) {
  const std::string& n = spec.full_name;
  return n == "ping" || n == "subscribe" || n == "ssubscribe" || n == "unsubscribe" ||
         n == "sunsubscribe" || n == "psubscribe" || n == "punsubscribe" || n == "quit" ||
         n == "reset";
}

bool Connection::subscribed_stage(const resp::Request& req, const PreparedCommand& cmd,
                                  int64_t now_ms) {
  if (!cmd.runs() || runs_when_subscribed(*cmd.spec)) return false;
  writer_.error(err::subscribed_context(cmd.spec->full_name));
  record(req, cmd, Outcome::kRejected, now_ms);
  return true;
}

void Connection::record_call(const resp::Request& req, const PreparedCommand& cmd,
                             Outcome outcome, int64_t now_ms) {
  record(req, cmd, outcome, now_ms);
}

// Whether a command runs at once inside MULTI (multi.c: processCommand's exceptions).
static bool runs_inside_multi(const CommandSpec& spec) {
  const std::string& n = spec.full_name;
  return n == "exec" || n == "discard" || n == "multi" || n == "watch" || n == "quit" ||
         n == "reset";
}

bool Connection::queue_stage(const resp::Request& req, const PreparedCommand& cmd,
                             int64_t now_ms) {
  // Redis's processCommand: a command refused by any check inside MULTI flags the transaction
  // (rejectCommand -> flagTransaction), whatever it is; the caller replies the refusal.
  if (!cmd.runs()) {
    if (cmd.verdict == Verdict::kWrongArity && cmd.spec->full_name == "exec") {
      // A refused EXEC ends the transaction (multi.c execCommandAbort).
      txn.end();
      writer_.error(err::exec_abort_because(err::wrong_arity("exec")));
      record(req, cmd, Outcome::kRejected, now_ms);
      return true;
    }
    txn.flag();
    return false;
  }
  // The slot stage over the whole transaction: in cluster mode every key of one transaction
  // shares a slot. As Redis's getNodeByQuery, it is EXEC's check (over the queued commands):
  // EXEC discards the transaction and answers -CROSSSLOT (processCommand's cluster redirect).
  if (txn.cross_slot && cmd.spec->full_name == "exec") {
    txn.end();
    writer_.error(err::kCrossSlot);
    record(req, cmd, Outcome::kRejected, now_ms);
    return true;
  }
  if (runs_inside_multi(*cmd.spec)) return false;
  // Room: a denyoom command is refused now past maxmemory, as Redis does at queueing.
  if (cmd.writes && !room_for_write(now_ms)) {
    txn.flag();
    writer_.error(err::kOom);
    record(req, cmd, Outcome::kRejected, now_ms);
    return true;
  }
  if (!cmd.slots.empty() && server_.slot_owner().cluster_enabled()) {
    if (txn.slot < 0) txn.slot = cmd.slots.front();
    else if (cmd.slots.front() != txn.slot) txn.cross_slot = true;
  }
  txn.queue(cmd.spec, req.args());
  writer_.simple("QUEUED");  // no call counted: it runs (and counts) inside EXEC
  return true;
}

void Connection::process(const resp::Request& req, int64_t now_ms) {
  PreparedCommand& cmd = prepared_;
  // 1-3. Lookup and arity, auth, slot ownership.
  prepare_inline(server_, req, authenticated, acl_user(), cmd);
  take_bulk_redirect(cmd);
  if (cmd.verdict >= Verdict::kNoPermCommand && cmd.verdict <= Verdict::kNoPermChannel)
    [[unlikely]] log_acl_refusal(cmd, req.args(), now_ms);
  if (cmd.verdict == Verdict::kMoved) [[unlikely]] redirect(cmd);
  // 3a. RESP2 subscribed mode: only the Pub/Sub commands, PING, QUIT and RESET.
  if (subscribed_resp2() && subscribed_stage(req, cmd, now_ms)) return;
  // 3b. Transaction queueing: inside MULTI the command is queued, not run.
  if (txn.active() && queue_stage(req, cmd, now_ms)) return;
  if (!cmd.runs()) {
    reply_refusal(cmd, req.args(), writer_);
    return record(req, cmd, Outcome::kRejected, now_ms);
  }
  // 4. Nothing to load without the SSD tier (with it, process_tiered runs instead).
  // 5. Room and -OOM.
  if (cmd.writes && !room_for_write(now_ms)) {
    // Copies in flight hold the memory: the connection's loop waits for them and runs the
    // request again (wait_for_copies).
    if (may_wait_for_room()) [[unlikely]] {
      room_wait_ = true;
      return;
    }
    writer_.error(err::kOom);
    return record(req, cmd, Outcome::kRejected, now_ms);
  }
  // 6. The handler. 7. Write events: the keyspace tells its observers. 8. Stats, slowlog.
  const Outcome outcome = call(req, cmd, now_ms);
  // EVAL handed its script over, or a fast-path command its copy: the connection's loop runs
  // it (finish_script, finish_transfer) and records. A write that waits for room: the loop
  // runs it again.
  if (script_call_ || transfer_ || room_wait_) [[unlikely]] return;
  record(req, cmd, outcome, now_ms);
}

asio::awaitable<void> Connection::process_tiered(const resp::Request& req, int64_t& now_ms,
                                                 std::string_view ahead) {
  PreparedCommand& cmd = prepared_;
  // 1-3. Lookup and arity, auth, slot ownership: refused requests load nothing.
  prepare_inline(server_, req, authenticated, acl_user(), cmd);
  take_bulk_redirect(cmd);
  if (cmd.verdict >= Verdict::kNoPermCommand && cmd.verdict <= Verdict::kNoPermChannel)
    [[unlikely]] log_acl_refusal(cmd, req.args(), now_ms);
  if (cmd.verdict == Verdict::kMoved) [[unlikely]] redirect(cmd);
  // 3a. RESP2 subscribed mode: only the Pub/Sub commands, PING, QUIT and RESET.
  if (subscribed_resp2() && subscribed_stage(req, cmd, now_ms)) co_return;
  // 3b. Transaction queueing: inside MULTI the command is queued, not run (nothing loaded).
  if (txn.active() && queue_stage(req, cmd, now_ms)) co_return;
  Outcome outcome = Outcome::kRejected;
  if (!cmd.runs()) {
    reply_refusal(cmd, req.args(), writer_);
  } else {
    // 4. Loads: keys whose values are on SSD only come back first, on the I/O pool (and the
    // keys of the read commands pipelined behind, ahead of time). A failed load replied.
    bool loaded = !cmd.reads_values || !ssd_pin(cmd, req, now_ms) ||
                  co_await ssd_load(now_ms, ahead);
    // EXEC: the queued commands' values come back from SSD before its locks are taken.
    if (loaded && txn.active() && !txn.aborted() && cmd.spec->full_name == "exec") {
      for (const QueuedCommand& q : txn.queued()) {
        prepare(server_, q.req, true, nullptr, peek_);
        if (!peek_.runs() || !peek_.reads_values || !ssd_pin(peek_, q.req, now_ms)) continue;
        if (!(loaded = co_await ssd_load(now_ms, {}))) break;
      }
      if (!loaded) txn.end();  // ssd_load replied the error: the transaction is discarded
    }
    if (closed_.load(std::memory_order_relaxed)) {
      ssd_release();
      co_return;
    }
    if (loaded) {
      // 5. Room: a write waits (this coroutine) while demotions make room for its bytes
      // (back-pressure, docs/ssd-tier.md); room found that way stands for the maxmemory
      // check, which otherwise decides per policy. The room found is held until it ran.
      std::optional<Server::RoomClaim> claim;
      bool room = false;
      if (cmd.writes) {
        room = !server_.must_wait_for_room(cmd.write_bytes, Server::RoomFor::kWrite);
        // (With tiering.ssd.admission reuse nothing waits: room_for_write evicts below.)
        if (!room && !server_.ssd()->selective()) {
          co_await ssd_throttle(cmd.write_bytes);
          room = !server_.must_wait_for_room(cmd.write_bytes, Server::RoomFor::kWrite);
        }
        room = room && server_.demotes();
        claim.emplace(server_, cmd.write_bytes);
      }
      bool refused = cmd.writes && !room && !room_for_write(now_ms);
      // Copies in flight hold the memory: wait for them (wait_for_copies), then look again.
      while (refused && may_wait_for_room()) {
        co_await wait_for_room();
        refused = !room_for_write(tiering::now_ms());
      }
      if (refused) {
        writer_.error(err::kOom);
      } else {
        outcome = call(req, cmd, now_ms);  // 6. The handler.
        while (room_wait_) {  // a fast-path put that waits for room runs again
          co_await wait_for_room();
          outcome = call(req, cmd, tiering::now_ms());
        }
      }
      // EVAL's script runs on a script thread, the values of its keys pinned meanwhile.
      if (script_call_) outcome = co_await finish_script();
      // A large fast-path copy runs on the transfer pool; the values it reads stay pinned.
      if (transfer_) outcome = co_await finish_transfer(req, cmd);
    }
  }
  // 7. Write events: the keyspace tells its observers (the SSD tier queues its ops); a reply
  // that supersedes SSD records goes out once their removal is written.
  if (const uint64_t ticket = ssd_release()) co_await ssd_wait(ticket);
  // 8. Stats and the slowlog.
  record(req, cmd, outcome, now_ms);
}

}  // namespace server
