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
  move-slots FROM TO RANGE... [--wait S]
                       slots and their keys move from shard FROM to shard TO (a migration)
  cancel-migration [ID]
                       a running migration stops; its slots stay with their source
  rebalance [--exclude SHARD]... [--wait S]
                       slots move until the shards with a primary hold equal shares
  failover SHARD [--force yes]
                       a replica of SHARD takes over (CLUSTER FAILOVER on the most up-to-date)
  status               the cluster as a table (shards, slots, nodes, keys, memory, leases),
                       then the migrations
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
    {"move-slots", R"(usage: stratakv-admin move-slots FROM TO RANGE... [--wait S]

Moves slots with their keys from shard FROM to shard TO (each a shard id, or the id or
host:port of one of its nodes) by one migration: RANGE is FIRST[-LAST], several may be given.
The source's primary streams the keys to the target's, then the slots change owner by one
compare-and-swap; clients see only -MOVED. Refused when FROM and TO are the same shard, either
has no primary, a slot is not served by FROM now, or a slot is in a running migration.

Waits up to S seconds (default 600; 0: does not wait) for the migration to end, and prints
how long it took. Exits 1 when it failed or was cancelled (the slots stay with FROM), or when
S seconds pass (it keeps running: see status, cancel-migration).
)"},
    {"cancel-migration", R"(usage: stratakv-admin cancel-migration [ID]

Cancels the running migration ID (its id, or the first characters of it as status prints
them), or the only running one when no ID is given: its state becomes "cancelled", the nodes
drop what the target received, and the slots stay with the source.
)"},
    {"rebalance", R"(usage: stratakv-admin rebalance [--exclude SHARD]... [--wait S]

Moves slots until every shard with a primary holds an equal share of them (a shard added by
add-node starts with none). Shards above their share give whole ranges, or the edges of
ranges, to shards below it; the moves run one after another, as move-slots runs them, and a
line is printed for each. --exclude SHARD (repeatable: a shard id, or the id or host:port of
one of its nodes) gives that shard no share: its slots all move away, to empty it before
remove-node. Each move waits up to S seconds (default 600). Stops at the first move that
fails, is cancelled or times out (exit 1). Refused while a migration is running.
)"},
    {"status", R"(usage: stratakv-admin status

One line about the topology, then a row per node: shard, slots, host:port, role, id, keys,
used memory, SSD bytes (from the node's INFO), seconds left on its lease, and the topology
version it serves. Registered nodes outside the topology show role "none". Then a line per
migration the record keeps (the running ones and the 16 most recent finished ones): id,
slots, source -> target shard, state.
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
  std::map<std::string, std::string> opts;  // --name value (the last one given)
  std::map<std::string, std::vector<std::string>> all;  // --name value, every one given
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
      a.opts[w.substr(2)] = argv[i + 1];
      a.all[w.substr(2)].push_back(argv[++i]);
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

const char* plural(size_t n) { return n == 1 ? "" : "s"; }

// "1000 slots (0-999)"
std::string slots_phrase(const std::vector<cluster::SlotRange>& slots) {
  const size_t n = cluster::count_slots(slots);
  return std::to_string(n) + " slot" + plural(n) + " (" + admin::slots_text(slots) + ")";
}

// Polls the record every 200 ms until migration `id` is no longer streaming or handover, or
// `wait_s` seconds pass. Returns its last state seen ("" when it is not in the record). etcd
// out of reach for a moment is waited out.
std::string wait_for_migration(admin::EtcdStore& store, const std::string& id, size_t wait_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(wait_s);
  std::string state = "streaming";
  for (;;) {
    try {
      const auto now = store.topology();
      if (!now) return "";
      const cluster::Migration* m = nullptr;
      for (const cluster::Migration& x : now->first.migrations)
        if (x.id == id) m = &x;
      if (m == nullptr) return "";
      state = m->state;
      if (!cluster::is_active(*m)) return state;
    } catch (const cluster::EtcdUnavailable&) {
      // keep polling until the deadline
    }
    if (std::chrono::steady_clock::now() >= deadline) return state;
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

// move-slots, and each step of rebalance: starts the migration by compare-and-swap (re-read
// and retried when another writer wins), then waits up to `wait_s` seconds (0: not at all).
// Prints one line; exits 1 (fail) unless the migration is done or was not waited for.
void run_migration(admin::EtcdStore& store, const std::string& from, const std::string& to,
                   const std::vector<cluster::SlotRange>& slots, size_t wait_s) {
  const std::string id = cluster::new_id();
  const auto started = std::chrono::steady_clock::now();
  const cluster::Topology t = store.update([&](const std::optional<cluster::Topology>& now) {
    if (!now) throw admin::PlanError("the cluster has no topology yet (stratakv-admin create)");
    return admin::start_migration(*now, from, to, slots, id);
  });
  const cluster::Migration* m = nullptr;
  for (const cluster::Migration& x : t.migrations)
    if (x.id == id) m = &x;
  if (m == nullptr) fail("the migration is missing from the record just written");
  const std::string what = slots_phrase(m->slots) + " from " +
                           admin::describe_shard(t, *t.shard(m->source_shard)) + " to " +
                           admin::describe_shard(t, *t.shard(m->target_shard));
  const std::string short_id = id.substr(0, 8);
  if (wait_s == 0) {
    std::printf("migration %s started: %s (topology version %llu)\n", short_id.c_str(),
                what.c_str(), static_cast<unsigned long long>(t.version));
    return;
  }
  const std::string state = wait_for_migration(store, id, wait_s);
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const std::string source = admin::describe_shard(t, *t.shard(m->source_shard));
  if (state == "done") {
    std::printf("moved %s in %.1f s\n", what.c_str(), took);
    std::fflush(stdout);
    return;
  }
  if (state == "failed")
    fail("migration " + short_id + " of " + what + " failed: the slots stay with " + source +
         " (the nodes' logs say why)");
  if (state == "cancelled")
    fail("migration " + short_id + " of " + what + " was cancelled: the slots stay with " + source);
  if (state.empty()) fail("migration " + short_id + " of " + what + " left the topology record");
  fail("migration " + short_id + " of " + what + " is still " + state + " after " +
       std::to_string(wait_s) + " s; it keeps running (stratakv-admin status; cancel-migration " +
       short_id + ")");
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
    } else if (command == "move-slots") {
      if (args.words.size() < 3) fail("move-slots needs FROM TO RANGE... (see move-slots --help)");
      std::vector<cluster::SlotRange> slots;
      for (size_t i = 2; i < args.words.size(); ++i) slots.push_back(admin::parse_range(args.words[i]));
      const size_t wait_s = args.opts.count("wait") ? to_size(args.opts.at("wait"), "--wait") : 600;
      run_migration(store, args.words[0], args.words[1], slots, wait_s);
    } else if (command == "cancel-migration") {
      if (args.words.size() > 1) fail("cancel-migration takes at most one ID (see cancel-migration --help)");
      const std::string which = args.words.empty() ? "" : args.words[0];
      cluster::Migration cancelled;
      const cluster::Topology t = store.update([&](const std::optional<cluster::Topology>& now) {
        if (!now) throw admin::PlanError("the cluster has no topology yet");
        cancelled = now->migrations[admin::find_migration(*now, which)];
        return admin::cancel_migration(*now, which);
      });
      const cluster::Shard* source = t.shard(cancelled.source_shard);
      std::printf("migration %s cancelled: %s stay with %s (topology version %llu)\n",
                  cancelled.id.substr(0, 8).c_str(), slots_phrase(cancelled.slots).c_str(),
                  source ? admin::describe_shard(t, *source).c_str() : cancelled.source_shard.c_str(),
                  static_cast<unsigned long long>(t.version));
    } else if (command == "rebalance") {
      if (!args.words.empty()) fail("rebalance takes no arguments but options (see rebalance --help)");
      const size_t wait_s = args.opts.count("wait") ? to_size(args.opts.at("wait"), "--wait") : 600;
      if (wait_s == 0) fail("rebalance waits for each move: --wait must be at least 1");
      const std::vector<std::string> exclude =
          args.all.count("exclude") ? args.all.at("exclude") : std::vector<std::string>{};
      const auto now = store.topology();
      if (!now) fail("the cluster has no topology yet (stratakv-admin create)");
      const std::vector<admin::Move> moves = admin::plan_rebalance(now->first, exclude);
      if (moves.empty()) {
        std::printf("the slots are balanced already: nothing to move\n");
        return 0;
      }
      for (const admin::Move& m : moves) run_migration(store, m.source_shard, m.target_shard, m.slots, wait_s);
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
