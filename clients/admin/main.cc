// clients/admin/main.cc - stratakv-admin: creates and changes a cluster's topology in etcd
// (docs/cluster.md, "Operating a cluster"). Every change is one compare-and-swap of the
// topology record (etcd_store.h) computed by a pure function (plan.h); nodes follow the record
// by watching it.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "clients/admin/etcd_store.h"
#include "clients/admin/node_links.h"
#include "clients/admin/plan.h"
#include "clients/admin/status.h"

namespace {

constexpr const char* kUsage = R"(usage: stratakv-admin [options] <command> [args]

Creates and changes a stratakv cluster's topology, kept in etcd. Nodes register themselves
(cluster-enabled yes, cluster.etcd.endpoints); these commands decide what they serve.

commands:
  create --shards N [--replicas R] [--name NAME] [--wait S]
                       a new cluster over the registered nodes, slots split evenly
  add-node NODE [--replica-of SHARD]
                       a registered node joins: a new shard without slots, or a replica
  remove-node NODE     a replica, or the primary of a shard without slots or replicas, leaves
  assign-slots FIRST[-LAST] --to SHARD
                       empty slots are served by another shard from now on
  failover SHARD [--force yes]
                       a replica of SHARD takes over (CLUSTER FAILOVER on the most up-to-date)
  status               the cluster as a table (shards, slots, nodes, keys, memory, leases)
  topology             the topology record as JSON

NODE is a node id or host:port; SHARD a shard id, or the id or host:port of one of its nodes.

options (before the command):
  --etcd URLS          etcd endpoints, comma-separated (env STRATAKV_ETCD;
                       default http://127.0.0.1:2379)
  --prefix P           the cluster's key prefix (env STRATAKV_PREFIX; default /stratakv/default)
  --user U --password P           etcd credentials
  --ca-file F --cert-file F --key-file F   etcd TLS
  -h, --help           this text; `stratakv-admin <command> --help` for one command
)";

const std::map<std::string, std::string> kCommandHelp = {
    {"create", R"(usage: stratakv-admin create --shards N [--replicas R] [--name NAME] [--wait S]

Writes the first topology of the cluster: N shards of 1 + R nodes each, taken from the nodes
registered in etcd (ordered by host, then port: the first N are the primaries; replicas go to
another host than their primary's when one is free). Slots 0-16383 are split evenly, as
redis-cli --cluster create does. Waits up to S seconds (default 30) for enough nodes to
register. Refuses when the cluster has a topology already.
)"},
    {"add-node", R"(usage: stratakv-admin add-node NODE [--replica-of SHARD]

The registered node NODE (id or host:port) joins the topology: as the primary of a new shard
that serves no slot yet (give it slots with assign-slots), or with --replica-of as a replica of
SHARD (a shard id, or the id or host:port of one of its nodes).
)"},
    {"remove-node", R"(usage: stratakv-admin remove-node NODE

NODE (id or host:port) leaves the topology: a replica at once; a primary only when its shard
serves no slot and has no replica (the shard goes with it). The node keeps running: stop it
afterwards.
)"},
    {"assign-slots", R"(usage: stratakv-admin assign-slots FIRST[-LAST] --to SHARD

Slots FIRST..LAST are served by SHARD from now on. Each slot must be empty on the node that
serves it now (CLUSTER COUNTKEYSINSLOT answers 0): a slot with keys moves by migration. Clients
of the old owner get -MOVED to the new one.
)"},
    {"failover", R"(usage: stratakv-admin failover SHARD [--force yes] [--wait S]

A manual failover of SHARD (a shard id, or the id or host:port of one of its nodes): the
replica with the highest replication offset in its record is sent CLUSTER FAILOVER, so the
primary refuses writes for a moment, the replica catches up and takes over by one
compare-and-swap; no write the old primary answered is lost. With --force yes the replica takes
over without the primary (CLUSTER FAILOVER FORCE: for a primary that is gone). Waits up to S
seconds (default 20) for the new topology and prints the new primary.
)"},
    {"status", R"(usage: stratakv-admin status

One line about the topology, then a row per node: shard, slots, host:port, role, id, keys,
used memory, SSD bytes (from the node's INFO), seconds left on its lease, and the topology
version it serves. Registered nodes outside the topology show role "none".
)"},
    {"topology", R"(usage: stratakv-admin topology

Prints the topology record (the JSON of docs/cluster.md) as etcd holds it.
)"},
};

[[noreturn]] void fail(const std::string& message) {
  std::fprintf(stderr, "stratakv-admin: %s\n", message.c_str());
  std::exit(1);
}

struct Args {
  std::vector<std::string> words;           // positional
  std::map<std::string, std::string> opts;  // --name value
  bool help = false;
};

Args parse(int argc, char** argv, int from) {
  Args a;
  for (int i = from; i < argc; ++i) {
    std::string w = argv[i];
    if (w == "-h" || w == "--help") {
      a.help = true;
    } else if (w.rfind("--", 0) == 0) {
      if (i + 1 >= argc) fail("option " + w + " needs a value");
      a.opts[w.substr(2)] = argv[++i];
    } else {
      a.words.push_back(w);
    }
  }
  return a;
}

size_t to_size(const std::string& s, const char* what) {
  char* end = nullptr;
  const unsigned long long v = std::strtoull(s.c_str(), &end, 10);
  if (s.empty() || *end != '\0' || v > 1000000) fail(std::string("invalid ") + what + ": " + s);
  return static_cast<size_t>(v);
}

std::vector<cluster::NodeAddress> addresses(const std::vector<admin::Registered>& nodes) {
  std::vector<cluster::NodeAddress> out;
  for (const admin::Registered& r : nodes) out.push_back(r.record.address);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  // Global options, then the command.
  int at = 1;
  std::map<std::string, std::string> global;
  for (; at < argc && argv[at][0] == '-'; ++at) {
    std::string w = argv[at];
    if (w == "-h" || w == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (at + 1 >= argc) fail("option " + w + " needs a value");
    global[w.substr(2)] = argv[++at];
  }
  if (at >= argc) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  const std::string command = argv[at];
  if (kCommandHelp.count(command) == 0) fail("unknown command '" + command + "' (see --help)");
  const Args args = parse(argc, argv, at + 1);
  if (args.help) {
    std::fputs(kCommandHelp.at(command).c_str(), stdout);
    return 0;
  }

  auto opt = [&](const char* name, const char* env, const char* def) {
    if (auto it = global.find(name); it != global.end()) return it->second;
    if (const char* v = env ? std::getenv(env) : nullptr; v != nullptr && *v) return std::string(v);
    return std::string(def);
  };
  cluster::EtcdOptions etcd;
  etcd.endpoints = cluster::parse_endpoints(opt("etcd", "STRATAKV_ETCD", "http://127.0.0.1:2379"));
  etcd.user = opt("user", nullptr, "");
  etcd.password = opt("password", nullptr, "");
  etcd.ca_file = opt("ca-file", nullptr, "");
  etcd.cert_file = opt("cert-file", nullptr, "");
  etcd.key_file = opt("key-file", nullptr, "");
  const std::string prefix = opt("prefix", "STRATAKV_PREFIX", "/stratakv/default");

  try {
    admin::EtcdStore store(etcd, prefix);
    if (command == "status") {
      const auto t = store.topology();
      admin::print_status(t ? std::optional(t->first) : std::nullopt, store.nodes(), stdout);
    } else if (command == "topology") {
      const auto t = store.topology();
      if (!t) fail("the cluster has no topology yet (stratakv-admin create)");
      std::printf("%s\n", cluster::encode(t->first).c_str());
    } else if (command == "create") {
      if (!args.opts.count("shards")) fail("create needs --shards N");
      const size_t shards = to_size(args.opts.at("shards"), "--shards");
      const size_t replicas = args.opts.count("replicas") ? to_size(args.opts.at("replicas"), "--replicas") : 0;
      const size_t wait_s = args.opts.count("wait") ? to_size(args.opts.at("wait"), "--wait") : 30;
      std::string name = args.opts.count("name") ? args.opts.at("name") : prefix.substr(prefix.rfind('/') + 1);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(wait_s);
      std::vector<admin::Registered> nodes = store.nodes();
      while (nodes.size() < shards * (1 + replicas) && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(200));
        nodes = store.nodes();
      }
      const cluster::Topology t = store.update([&](const std::optional<cluster::Topology>& now) {
        if (now) throw admin::PlanError("the cluster has a topology already (version " +
                                        std::to_string(now->version) + ")");
        return admin::create(addresses(nodes), shards, replicas, name);
      });
      std::printf("created cluster %s: %zu shard(s), %zu node(s), topology version %llu\n",
                  t.name.c_str(), t.shards.size(), t.nodes.size(),
                  static_cast<unsigned long long>(t.version));
    } else if (command == "failover") {
      if (args.words.size() != 1) fail("failover needs one SHARD (see failover --help)");
      const auto now = store.topology();
      if (!now) fail("the cluster has no topology yet (stratakv-admin create)");
      const cluster::Topology& t = now->first;
      const cluster::Shard& shard = t.shards[admin::find_shard(t, args.words[0])];
      if (shard.replicas.empty()) fail("shard " + shard.id + " has no replica to take over");
      // The most up-to-date replica by the offset its record publishes.
      const std::vector<admin::Registered> nodes = store.nodes();
      const cluster::NodeAddress* best = nullptr;
      uint64_t best_offset = 0;
      for (const std::string& id : shard.replicas) {
        for (const admin::Registered& r : nodes) {
          if (r.record.address.id != id || t.node(id) == nullptr) continue;
          if (best == nullptr || r.record.repl_offset > best_offset) {
            best = t.node(id);
            best_offset = r.record.repl_offset;
          }
        }
      }
      if (best == nullptr) fail("no replica of shard " + shard.id + " is registered (alive)");
      const bool force = args.opts.count("force") && args.opts.at("force") == "yes";
      admin::NodeLinks links(5000);
      if (const std::string error = links.failover(*best, force); !error.empty())
        fail("CLUSTER FAILOVER on " + best->host + ":" + std::to_string(best->port) + ": " + error);
      const size_t wait_s = args.opts.count("wait") ? to_size(args.opts.at("wait"), "--wait") : 20;
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(wait_s);
      for (;;) {
        const auto next = store.topology();
        const cluster::Shard* s = nullptr;
        if (next)
          for (const cluster::Shard& x : next->first.shards)
            if (x.id == shard.id) s = &x;
        if (s != nullptr && s->primary == best->id) {
          std::printf("shard %s: primary %s:%u (epoch %llu), topology version %llu\n",
                      shard.id.c_str(), best->host.c_str(), best->port,
                      static_cast<unsigned long long>(s->primary_epoch),
                      static_cast<unsigned long long>(next->first.version));
          break;
        }
        if (std::chrono::steady_clock::now() > deadline)
          fail("the failover did not complete within " + std::to_string(wait_s) +
               " s (see the replica's log)");
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    } else if (command == "add-node") {
      if (args.words.size() != 1) fail("add-node needs one NODE (see add-node --help)");
      const std::vector<admin::Registered> nodes = store.nodes();
      const cluster::NodeAddress node = admin::find_node(addresses(nodes), args.words[0]);
      const std::string replica_of = args.opts.count("replica-of") ? args.opts.at("replica-of") : "";
      const cluster::Topology t = store.update([&](const std::optional<cluster::Topology>& now) {
        if (!now) throw admin::PlanError("the cluster has no topology yet (stratakv-admin create)");
        return admin::add_node(*now, node, replica_of);
      });
      std::printf("topology version %llu\n", static_cast<unsigned long long>(t.version));
    } else if (command == "remove-node") {
      if (args.words.size() != 1) fail("remove-node needs one NODE (see remove-node --help)");
      const cluster::Topology t = store.update([&](const std::optional<cluster::Topology>& now) {
        if (!now) throw admin::PlanError("the cluster has no topology yet");
        return admin::remove_node(*now, args.words[0]);
      });
      std::printf("topology version %llu\n", static_cast<unsigned long long>(t.version));
    } else if (command == "assign-slots") {
      if (args.words.size() != 1 || !args.opts.count("to"))
        fail("assign-slots needs FIRST[-LAST] and --to SHARD (see assign-slots --help)");
      const cluster::SlotRange range = admin::parse_range(args.words[0]);
      const cluster::Topology t = store.update([&](const std::optional<cluster::Topology>& now) {
        if (!now) throw admin::PlanError("the cluster has no topology yet");
        // Every slot must be empty on the node serving it now (one connection per node).
        const cluster::SlotMap map(*now);
        admin::NodeLinks nodes(2000);
        for (uint32_t s = range.first; s <= range.last; ++s) {
          const uint16_t shard = map.shard_of(static_cast<uint16_t>(s));
          if (shard == cluster::SlotMap::kNoShard) continue;
          const cluster::NodeAddress* p = now->node(now->shards[shard].primary);
          if (p == nullptr) continue;
          const long long keys = nodes.count_keys(*p, static_cast<uint16_t>(s));
          if (keys != 0)
            throw admin::PlanError(
                "slot " + std::to_string(s) + (keys < 0 ? ": its node " + p->host + ":" +
                                                              std::to_string(p->port) + " does not answer"
                                                        : " holds " + std::to_string(keys) +
                                                              (keys == 1 ? " key" : " keys") +
                                                              ": slots with keys move by migration"));
        }
        return admin::assign_slots(*now, range.first, range.last, args.opts.at("to"));
      });
      std::printf("topology version %llu\n", static_cast<unsigned long long>(t.version));
    }
  } catch (const admin::PlanError& e) {
    fail(e.what());
  } catch (const cluster::EtcdUnavailable& e) {
    fail(std::string("etcd is unreachable: ") + e.what());
  } catch (const std::exception& e) {
    fail(e.what());
  }
  return 0;
}
