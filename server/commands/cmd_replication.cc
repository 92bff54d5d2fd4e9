// server/commands/cmd_replication.cc - the replication family: REPLICAOF (and SLAVEOF), ROLE,
// WAIT, and the replica's side of the handshake, REPLCONF and PSYNC (docs/replication.md).
//
// Replies and texts are Redis 7.0's (replication.c: replicaofCommand, roleCommand,
// waitCommand, replconfCommand), checked against redis-server in
// tests/integration/test_replication.py. PSYNC answers Redis's +FULLRESYNC / +CONTINUE lines,
// then hands the socket to a feed that streams stratakv's frames (cluster/repl_frame.h), so
// only stratakv nodes replicate from stratakv (REPLCONF capa stratakv).
#include <chrono>
#include <string>

#include "server/arg_parser.h"
#include "server/ascii.h"
#include "server/commands/family.h"
#include "server/connection.h"
#include "server/errors.h"
#include "server/replication.h"
#include "server/server.h"

namespace server {

namespace {

// REPLICAOF host port | REPLICAOF NO ONE
void cmd_replicaof(CommandContext& ctx) {
  if (ctx.server.cluster().enabled()) return ctx.out.error(err::kReplicaOfCluster);
  Replication& repl = ctx.server.replication();
  if (iequals(ctx.args[1], "no") && iequals(ctx.args[2], "one")) {
    repl.promote();
    return ctx.out.ok();
  }
  const auto port = parse_int(ctx.args[2]);
  if (!port || *port < 0 || *port > 65535) return ctx.out.error(err::kNotInteger);
  std::string info;
  repl.info(&info);
  const std::string host(ctx.args[1]);
  if (repl.is_replica() &&
      info.find("master_host:" + host + "\r\nmaster_port:" + std::to_string(*port) + "\r\n") !=
          std::string::npos)
    return ctx.out.simple(err::kAlreadyConnected);
  repl.replicate_from(host, static_cast<uint16_t>(*port));
  ctx.out.ok();
}

void cmd_role(CommandContext& ctx) { ctx.server.replication().role(ctx.out); }

// WAIT numreplicas timeout: the replicas that acknowledged every write made before it (the
// stream's offset now covers them all: a bound at least as strict as this client's own).
void cmd_wait(CommandContext& ctx) {
  Replication& repl = ctx.server.replication();
  if (repl.is_replica()) return ctx.out.error(err::kWaitInReplica);
  const auto needed = parse_int(ctx.args[1]);
  const auto timeout = parse_int(ctx.args[2]);
  if (!needed || !timeout) return ctx.out.error(err::kNotInteger);
  if (*timeout < 0) return ctx.out.error(err::kTimeoutNegative);
  const uint64_t offset = repl.offset();
  const int acked = repl.acked(offset);
  // Inside a transaction WAIT cannot block (Redis replies at once, CLIENT_MULTI).
  if (acked >= *needed || ctx.conn.txn.active()) return ctx.out.integer(acked);
  const int want = *needed > INT32_MAX ? INT32_MAX : static_cast<int>(*needed);
  ctx.conn.suspend_for_wait(offset, want, *timeout);
}

// REPLCONF <option> <value> ...: what a replica says of itself before PSYNC.
void cmd_replconf(CommandContext& ctx) {
  if (ctx.args.size() % 2 == 0) return ctx.out.error(err::kSyntax);
  // A manual failover's first step, sent by the replica taking over (cluster/failover.h):
  // refuse writes for <ms> (0: resume), and answer the offset the replica must reach.
  if (ctx.args.size() == 3 && iequals(ctx.args[1], "pause-writes")) {
    const auto ms = parse_int(ctx.args[2]);
    if (!ms || *ms < 0 || *ms > 60000) return ctx.out.error(err::kNotInteger);
    const auto until = std::chrono::steady_clock::now() + std::chrono::milliseconds(*ms);
    ctx.server.slot_owner().pause_writes_until(*ms == 0 ? 0 : until.time_since_epoch().count());
    return ctx.out.integer(static_cast<int64_t>(ctx.server.replication().offset()));
  }
  for (size_t i = 1; i + 1 < ctx.args.size(); i += 2) {
    const std::string_view opt = ctx.args[i], val = ctx.args[i + 1];
    if (iequals(opt, "listening-port")) {
      const auto port = parse_int(val);
      if (!port || *port < 0 || *port > 65535) return ctx.out.error(err::kNotInteger);
      ctx.conn.replica_listening_port = static_cast<uint16_t>(*port);
    } else if (iequals(opt, "capa")) {
      if (iequals(val, "stratakv")) ctx.conn.replica_capa_stratakv = true;
    } else if (iequals(opt, "ip-address") || iequals(opt, "ack") || iequals(opt, "getack") ||
               iequals(opt, "rdb-only") || iequals(opt, "rdb-filter-only")) {
      // Accepted; ACKs travel as frames once the stream runs.
    } else {
      return ctx.out.error("ERR Unrecognized REPLCONF option: " + std::string(opt));
    }
  }
  ctx.out.ok();
}

// PSYNC <replid> <offset>: the reply line, then the socket becomes the replica's feed.
void cmd_psync(CommandContext& ctx) {
  if (!ctx.conn.replica_capa_stratakv) return ctx.out.error(err::kPsyncNotStratakv);
  const auto offset = parse_int(ctx.args[2]);
  if (!offset) return ctx.out.error(err::kNotInteger);
  Replication& repl = ctx.server.replication();
  Replication::SyncPlan plan = repl.plan_sync(ctx.args[1], *offset);
  ctx.out.simple(std::string_view(plan.reply).substr(1));
  std::string ip = ctx.conn.peer();
  if (const size_t colon = ip.rfind(':'); colon != std::string::npos) ip.resize(colon);
  const uint16_t port = ctx.conn.replica_listening_port;
  // The feed takes over the socket, and on tls-port the TLS session with it (docs/tls.md).
  ctx.conn.hand_off_after_reply(
      [&repl, ip = std::move(ip), port, plan](std::unique_ptr<cluster::ReplSocket> socket) {
        repl.attach(std::move(socket), ip, port, plan);
      });
}

}  // namespace

void register_replication_family(CommandTable& table) {
  CommandBuilder b(table, "server");
  for (const char* name : {"replicaof", "slaveof"})
    b.add(name, 3, kAdmin | kNoScript | kStale, kNoKeys, cmd_replicaof,
          {"Configures a server as replica of another, or promotes it to a master", "5.0.0"});
  b.add("role", 1, kNoScript | kLoading | kStale | kFast, kNoKeys, cmd_role,
        {"Returns the replication role", "2.8.12"});
  b.add("wait", 3, kNoScript, kNoKeys, cmd_wait,
        {"Blocks until the asynchronous replication of all preceding write commands sent by "
         "the connection is completed",
         "3.0.0"});
  b.add("replconf", -1, kAdmin | kNoScript | kLoading | kStale, kNoKeys, cmd_replconf,
        {"An internal command for configuring the replication stream", "3.0.0"});
  b.add("psync", -3, kAdmin | kNoScript, kNoKeys, cmd_psync,
        {"An internal command used in replication", "2.8.0"});
}

}  // namespace server
