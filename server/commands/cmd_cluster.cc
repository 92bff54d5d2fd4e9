// server/commands/cmd_cluster.cc - the cluster family: CLUSTER SLOTS, SHARDS, NODES, INFO,
// MYID, MYSHARDID, KEYSLOT, COUNTKEYSINSLOT, GETKEYSINSLOT, REPLICAS, HELP; ASKING, READONLY,
// READWRITE.
//
// Shapes and texts are Redis 7.0's (cluster.c: clusterReplyMultiBulkSlots, clusterReplyShards,
// clusterGenNodesDescription, clusterGenClusterInfoString), checked against redis-server in
// tests/integration/test_cluster_commands.py. MYSHARDID is Redis 7.2's; TOPOLOGY stratakv's own
// (the record as JSON, with each node's Unix socket and host identity). There is no gossip bus,
// so the commands that drive one (MEET, ADDSLOTS, SETSLOT, ...) answer an error that names the
// admin tool: the topology lives in etcd and changes only through stratakv-admin.
#include <algorithm>
#include <string>
#include <vector>

#include "cluster/slot.h"
#include "server/arg_parser.h"
#include "server/cluster_state.h"
#include "server/commands/family.h"
#include "server/connection.h"
#include "server/errors.h"
#include "server/migration.h"
#include "server/server.h"

namespace server {

namespace {

// The view for a CLUSTER subcommand, or null after replying Redis's error outside cluster mode.
std::shared_ptr<const ClusterView> view_or_reply(CommandContext& ctx) {
  std::shared_ptr<const ClusterView> view;
  if (ctx.server.cluster().enabled()) view = ctx.server.cluster().view();
  if (!view) ctx.out.error(err::kClusterDisabled);
  return view;
}

// Slot ranges of shard `shard`, adjacent ones merged, in slot order (a validated topology's
// ranges are sorted and disjoint).
std::vector<cluster::SlotRange> ranges_of(const ClusterView& v, size_t shard) {
  std::vector<cluster::SlotRange> out;
  for (const cluster::SlotRange& r : v.topology->shards[shard].slots) {
    if (!out.empty() && out.back().last + 1u == r.first) out.back().last = r.last;
    else out.push_back(r);
  }
  return out;
}

// The port a client is told to reach `n` at: its tls-port for a client of tls-port (`tls`) when
// it has one, else its port (Redis 7.0 getNodeClientPort: the port of the client's kind).
int client_port(const cluster::NodeAddress& n, bool tls) { return tls && n.tls_port != 0 ? n.tls_port : n.port; }

// [host, port, id, {}]: one node of a CLUSTER SLOTS range (cluster.c addNodeToNodeReply; no
// hostname, so the networking metadata is an empty map).
void reply_slots_node(resp::Writer& out, const cluster::NodeAddress& n, bool tls) {
  out.array(4);
  out.bulk(n.host);
  out.integer(client_port(n, tls));
  out.bulk(n.id);
  out.map(0);
}

void cluster_slots(CommandContext& ctx) {
  auto view = view_or_reply(ctx);
  if (!view) return;
  const cluster::Topology& t = *view->topology;
  // Ranges in slot order; each names the primary first, then its replicas.
  struct Entry {
    cluster::SlotRange range;
    const cluster::Shard* shard;
    const cluster::NodeAddress* primary;
  };
  std::vector<Entry> entries;
  for (size_t i = 0; i < t.shards.size(); ++i) {
    const cluster::NodeAddress* primary = t.node(t.shards[i].primary);
    if (primary == nullptr) continue;  // a shard without a primary serves nothing
    for (const cluster::SlotRange& r : ranges_of(*view, i))
      entries.push_back({r, &t.shards[i], primary});
  }
  std::sort(entries.begin(), entries.end(),
            [](const Entry& a, const Entry& b) { return a.range.first < b.range.first; });
  ctx.out.array(entries.size());
  for (const Entry& e : entries) {
    std::vector<const cluster::NodeAddress*> replicas;
    for (const std::string& id : e.shard->replicas)
      if (const cluster::NodeAddress* n = t.node(id)) replicas.push_back(n);
    ctx.out.array(3 + replicas.size());
    ctx.out.integer(e.range.first);
    ctx.out.integer(e.range.last);
    reply_slots_node(ctx.out, *e.primary, ctx.conn.is_tls());
    for (const cluster::NodeAddress* r : replicas) reply_slots_node(ctx.out, *r, ctx.conn.is_tls());
  }
}

// One node of CLUSTER SHARDS (cluster.c addNodeDetailsToShardReply).
void reply_shard_node(resp::Writer& out, const cluster::NodeAddress& n, bool primary) {
  out.map(n.tls_port != 0 ? 8 : 7);
  out.bulk("id");
  out.bulk(n.id);
  out.bulk("port");
  out.integer(n.port);
  if (n.tls_port != 0) {
    out.bulk("tls-port");
    out.integer(n.tls_port);
  }
  out.bulk("ip");
  out.bulk(n.host);
  out.bulk("endpoint");
  out.bulk(n.host);
  out.bulk("role");
  out.bulk(primary ? "master" : "replica");
  out.bulk("replication-offset");
  out.integer(0);  // the replication issue reports the offsets
  out.bulk("health");
  out.bulk("online");
}

void cluster_shards(CommandContext& ctx) {
  auto view = view_or_reply(ctx);
  if (!view) return;
  const cluster::Topology& t = *view->topology;
  ctx.out.array(t.shards.size());
  for (size_t i = 0; i < t.shards.size(); ++i) {
    const cluster::Shard& shard = t.shards[i];
    ctx.out.map(2);
    ctx.out.bulk("slots");
    const auto ranges = ranges_of(*view, i);
    ctx.out.array(2 * ranges.size());
    for (const cluster::SlotRange& r : ranges) {
      ctx.out.integer(r.first);
      ctx.out.integer(r.last);
    }
    ctx.out.bulk("nodes");
    std::vector<std::pair<const cluster::NodeAddress*, bool>> nodes;
    if (const cluster::NodeAddress* p = t.node(shard.primary)) nodes.push_back({p, true});
    for (const std::string& id : shard.replicas)
      if (const cluster::NodeAddress* n = t.node(id)) nodes.push_back({n, false});
    ctx.out.array(nodes.size());
    for (const auto& [n, primary] : nodes) reply_shard_node(ctx.out, *n, primary);
  }
}

// One line of CLUSTER NODES (cluster.c clusterGenNodeDescription): id, ip:port@cport, flags,
// primary id or -, ping sent, pong received, config epoch, link state, slot ranges. No bus:
// cport 0. The port is the one of the client's kind (client_port).
std::string node_line(const ClusterView& v, const cluster::NodeAddress& n, bool tls) {
  const cluster::Topology& t = *v.topology;
  const cluster::Shard* shard = t.shard_of_node(n.id);
  const bool primary = shard != nullptr && shard->primary == n.id;
  std::string line = n.id + " " + n.host + ":" + std::to_string(client_port(n, tls)) + "@0 ";
  if (n.id == v.my_id) line += "myself,";
  line += primary ? "master" : (shard != nullptr ? "slave" : "noflags");
  line += " ";
  line += primary || shard == nullptr || shard->primary.empty() ? "-" : shard->primary;
  line += " 0 0 " + std::to_string(shard != nullptr ? shard->primary_epoch : 0) + " connected";
  if (primary) {
    const size_t index = static_cast<size_t>(shard - t.shards.data());
    for (const cluster::SlotRange& r : ranges_of(v, index)) {
      line += " " + std::to_string(r.first);
      if (r.last != r.first) line += "-" + std::to_string(r.last);
    }
  }
  return line;
}

void cluster_nodes(CommandContext& ctx) {
  auto view = view_or_reply(ctx);
  if (!view) return;
  std::string text;
  for (const cluster::NodeAddress& n : view->topology->nodes) text += node_line(*view, n, ctx.conn.is_tls()) + "\n";
  ctx.out.verbatim("txt", text);
}

void cluster_replicas(CommandContext& ctx) {
  auto view = view_or_reply(ctx);
  if (!view) return;
  const cluster::Topology& t = *view->topology;
  const std::string_view id = ctx.args[2];
  if (t.node(id) == nullptr) return ctx.out.error(err::unknown_node(id));
  const cluster::Shard* shard = t.shard_of_node(id);
  if (shard == nullptr || shard->primary != id)
    return ctx.out.error(err::kNotAMaster);
  std::vector<std::string> lines;
  for (const std::string& r : shard->replicas)
    if (const cluster::NodeAddress* n = t.node(r)) lines.push_back(node_line(*view, *n, ctx.conn.is_tls()) + "\n");
  ctx.out.array(lines.size());
  for (const std::string& l : lines) ctx.out.bulk(l);
}

void cluster_info(CommandContext& ctx) {
  auto view = view_or_reply(ctx);
  if (!view) return;
  const cluster::Topology& t = *view->topology;
  size_t size = 0;  // shards serving at least one slot (Redis: masters with slots)
  for (size_t i = 0; i < t.shards.size(); ++i)
    if (!t.shards[i].slots.empty()) ++size;
  const uint64_t my_epoch = view->my_shard >= 0 ? t.shards[view->my_shard].primary_epoch : 0;
  std::string s;
  auto field = [&s](std::string_view name, const std::string& value) {
    s.append(name).append(":").append(value).append("\r\n");
  };
  field("cluster_state", view->ok ? "ok" : "fail");
  field("cluster_slots_assigned", std::to_string(view->slots_assigned));
  field("cluster_slots_ok", std::to_string(view->slots_ok));
  field("cluster_slots_pfail", "0");
  field("cluster_slots_fail", std::to_string(view->slots_assigned - view->slots_ok));
  field("cluster_known_nodes", std::to_string(t.nodes.size()));
  field("cluster_size", std::to_string(size));
  field("cluster_current_epoch", std::to_string(t.version));
  field("cluster_my_epoch", std::to_string(my_epoch));
  field("cluster_stats_messages_sent", "0");
  field("cluster_stats_messages_received", "0");
  field("total_cluster_links_buffer_limit_exceeded", "0");
  ctx.out.verbatim("txt", s);
}

void cluster_myid(CommandContext& ctx) {
  if (auto view = view_or_reply(ctx)) ctx.out.bulk(view->my_id);
}

void cluster_myshardid(CommandContext& ctx) {
  auto view = view_or_reply(ctx);
  if (!view) return;
  if (view->my_shard < 0) return ctx.out.bulk("");  // in no shard yet
  ctx.out.bulk(view->topology->shards[view->my_shard].id);
}

void cluster_keyslot(CommandContext& ctx) {
  if (view_or_reply(ctx)) ctx.out.integer(cluster::key_slot(ctx.args[2]));
}

void cluster_countkeysinslot(CommandContext& ctx) {
  if (!view_or_reply(ctx)) return;
  auto slot = parse_int(ctx.args[2]);
  if (!slot) return ctx.out.error(err::kNotInteger);
  if (*slot < 0 || *slot >= cluster::kSlots) return ctx.out.error(err::kInvalidSlotArg);
  // The keys of a slot another shard serves are hidden (an import before its handover, a
  // source's copy before the janitor dropped it): this node holds none of it for clients.
  const auto s = static_cast<uint16_t>(*slot);
  ctx.out.integer(ctx.ks.hidden(s) ? 0 : static_cast<int64_t>(ctx.ks.count_in_slot(s)));
}

// CLUSTER SYNCSLOTS <migration id> (stratakv, between nodes): sent by a migration's target to
// the source shard's primary; answered +FULLRESYNC <id> 0, then the socket carries the feed of
// the migration's slots (server/migration.h).
void cluster_syncslots(CommandContext& ctx) {
  Migrations& migrations = ctx.server.migrations();
  const std::string id(ctx.args[2]);
  if (std::string error = migrations.check_export(id); !error.empty())
    return ctx.out.error(error);
  ctx.out.simple("FULLRESYNC " + id + " 0");
  ctx.conn.hand_off_after_reply([&migrations, id](std::unique_ptr<cluster::ReplSocket> socket) {
    migrations.attach_export(std::move(socket), id);
  });
}

// CLUSTER GETSLOTMIGRATIONS: the migrations this node runs and the last ones it ran.
void cluster_getslotmigrations(CommandContext& ctx) {
  if (!view_or_reply(ctx)) return;
  ctx.server.migrations().describe(ctx.out);
}

void cluster_getkeysinslot(CommandContext& ctx) {
  if (!view_or_reply(ctx)) return;
  auto slot = parse_int(ctx.args[2]);
  if (!slot) return ctx.out.error(err::kNotInteger);
  auto count = parse_int(ctx.args[3]);
  if (!count) return ctx.out.error(err::kNotInteger);
  if (*slot < 0 || *slot >= cluster::kSlots || *count < 0)
    return ctx.out.error(err::kInvalidSlotOrCount);
  const auto keys = ctx.ks.keys_in_slot(static_cast<uint16_t>(*slot),
                                        static_cast<size_t>(*count), ctx.now_ms);
  ctx.out.array(keys.size());
  for (const std::string& k : keys) ctx.out.bulk(k);
}

// CLUSTER TOPOLOGY (stratakv's own): the topology record this node serves by, as JSON
// (docs/cluster.md): what an SDK reads to learn each node's Unix socket and host identity.
void cluster_topology(CommandContext& ctx) {
  if (auto view = view_or_reply(ctx)) ctx.out.bulk(cluster::encode(*view->topology));
}

// The commands of a gossip cluster: the topology lives in etcd here.
void cluster_gossip_only(CommandContext& ctx) {
  if (!view_or_reply(ctx)) return;
  std::string name(ctx.args[1]);
  for (char& c : name) c = static_cast<char>(c >= 'a' && c <= 'z' ? c - 32 : c);
  ctx.out.error(err::gossip_only(name));
}

void cluster_help(CommandContext& ctx) {
  reply_help(ctx, "CLUSTER",
             {"COUNTKEYSINSLOT <slot>", "    Return the number of keys in <slot>.",
              "GETKEYSINSLOT <slot> <count>",
              "    Return key names stored by current node in a slot.",
              "INFO", "    Return information about the cluster.",
              "KEYSLOT <key>", "    Return the hash slot for <key>.",
              "MYID", "    Return the node id.",
              "MYSHARDID", "    Return the node's shard id.",
              "NODES", "    Return cluster configuration seen by node. Output format:",
              "    <id> <ip:port@bus-port> <flags> <master> <pings> <pongs> <epoch> <link> "
              "<slot> ...",
              "REPLICAS <node-id>", "    Return <node-id> replicas.",
              "SHARDS", "    Return information about slot range mappings and the nodes "
                        "associated with them.",
              "TOPOLOGY", "    Return the topology record this node serves by, as JSON (stratakv).",
              "SLOTS", "    Return information about slots range mappings. Each range is made of:",
              "    start, end, master and replicas IP addresses, ports and ids",
              "The topology is kept in etcd: stratakv-admin changes it (docs/cluster.md)."});
}

// ASKING, READONLY, READWRITE: accepted in cluster mode. No ASK is ever sent (slot migration
// is atomic); READONLY's replica reads come with replication.
// CLUSTER FAILOVER [FORCE|TAKEOVER]: on a replica, a manual failover (docs/replication.md);
// it runs in the background, as Redis's does: OK means started.
void cluster_failover(CommandContext& ctx) {
  if (!view_or_reply(ctx)) return;
  bool force = false;
  if (ctx.args.size() > 3) return ctx.out.error(err::kSyntax);
  if (ctx.args.size() == 3) {
    if (!iequals(ctx.args[2], "force") && !iequals(ctx.args[2], "takeover")) return ctx.out.error(err::kSyntax);
    force = true;
  }
  const std::string error = ctx.server.cluster().request_manual_failover(force);
  if (!error.empty()) return ctx.out.error(error);
  ctx.out.ok();
}

void cmd_cluster_ok(CommandContext& ctx) {
  if (!ctx.server.cluster().enabled()) return ctx.out.error(err::kClusterDisabled);
  ctx.out.ok();
}

// READONLY / READWRITE: whether this connection reads a replica's slots here.
void cmd_readonly(CommandContext& ctx) {
  if (!ctx.server.cluster().enabled()) return ctx.out.error(err::kClusterDisabled);
  ctx.conn.readonly_reads = true;
  ctx.out.ok();
}
void cmd_readwrite(CommandContext& ctx) {
  if (!ctx.server.cluster().enabled()) return ctx.out.error(err::kClusterDisabled);
  ctx.conn.readonly_reads = false;
  ctx.out.ok();
}

}  // namespace

void register_cluster_family(CommandTable& t) {
  CommandBuilder b(t, "cluster");
  const uint32_t info = kLoading | kStale;
  CommandSpec c = b.spec("cluster", -2, 0, kNoKeys, nullptr,
                         {"A container for Redis Cluster commands", "3.0.0",
                          "Depends on subcommand."});
  c.subcommands = {
      b.spec("slots", 2, info, kNoKeys, cluster_slots,
             {"Get array of Cluster slot to node mappings", "3.0.0",
              "O(N) where N is the total number of Cluster nodes"}),
      b.spec("shards", 2, info, kNoKeys, cluster_shards,
             {"Get array of cluster slots to node mappings", "7.0.0",
              "O(N) where N is the total number of cluster nodes"}),
      b.spec("nodes", 2, info, kNoKeys, cluster_nodes,
             {"Get Cluster config for the node", "3.0.0",
              "O(N) where N is the total number of Cluster nodes"}),
      b.spec("replicas", 3, kAdmin | info, kNoKeys, cluster_replicas,
             {"List replica nodes of the specified master node", "5.0.0", "O(1)"}),
      b.spec("info", 2, info, kNoKeys, cluster_info,
             {"Provides info about Redis Cluster node state", "3.0.0"}),
      b.spec("myid", 2, info, kNoKeys, cluster_myid, {"Return the node id", "3.0.0"}),
      b.spec("myshardid", 2, info, kNoKeys, cluster_myshardid,
             {"Return the node shard id", "7.2.0"}),
      b.spec("keyslot", 3, info, kNoKeys, cluster_keyslot,
             {"Returns the hash slot of the specified key", "3.0.0",
              "O(N) where N is the number of bytes in the key"}),
      b.spec("countkeysinslot", 3, info, kNoKeys, cluster_countkeysinslot,
             {"Return the number of local keys in the specified hash slot", "3.0.0"}),
      b.spec("getkeysinslot", 4, info, kNoKeys, cluster_getkeysinslot,
             {"Return local key names in the specified hash slot", "3.0.0",
              "O(log(N)) where N is the number of requested keys"}),
      b.spec("syncslots", 3, kAdmin | kNoScript, kNoKeys, cluster_syncslots,
             {"Streams a slot migration's keys to its target (stratakv, between nodes)",
              "0.1.0"}),
      b.spec("getslotmigrations", 2, info, kNoKeys, cluster_getslotmigrations,
             {"Lists the slot migrations this node runs or ran (as Valkey 9)", "0.1.0"}),
      b.spec("topology", 2, info, kNoKeys, cluster_topology,
             {"Return the topology record this node serves by, as JSON (stratakv)", "0.1.0"}),
      b.spec("failover", -2, kAdmin | kStale | kNoScript, kNoKeys, cluster_failover,
             {"Forces a replica to perform a manual failover of its master", "3.0.0"}),
      b.spec("help", 2, info, kNoKeys, cluster_help,
             {"Show helpful text about the different subcommands", "5.0.0"}),
  };
  // A gossip cluster's commands: one error naming the admin tool.
  for (const char* name : {"meet", "forget", "addslots", "addslotsrange", "delslots",
                           "delslotsrange", "flushslots", "setslot", "replicate",
                           "reset", "set-config-epoch", "bumpepoch", "saveconfig",
                           "count-failure-reports", "links"})
    c.subcommands.push_back(b.spec(name, -2, kAdmin | info, kNoKeys, cluster_gossip_only,
                                   {"Not supported: the topology is kept in etcd", "3.0.0"}));
  b.add(std::move(c));
  b.add("asking", 1, kFast, kNoKeys, cmd_cluster_ok,
        {"Sent by cluster clients after an -ASK redirect", "3.0.0"});
  b.add("readonly", 1, kFast | kLoading | kStale, kNoKeys, cmd_readonly,
        {"Enables read queries for a connection to a Redis Cluster replica node", "3.0.0"});
  b.add("readwrite", 1, kFast | kLoading | kStale, kNoKeys, cmd_readwrite,
        {"Disables read queries for a connection to a Redis Cluster replica node", "3.0.0"});
}

}  // namespace server
