// server/migration.h - online slot migration, this node's side (docs/cluster.md, "Slot
// migration"): atomic per slot range, as Valkey 9 moves slots, never key by key with -ASK.
//
// The admin tool starts a migration by writing it into the topology record (state
// "streaming"). Then:
//   1. The target shard's primary links to the source shard's primary as a replica would
//      (cluster::ReplicaLink in import mode: AUTH, CLUSTER SYNCSLOTS <id>).
//   2. The source answers with a feed of the range's keys (cluster::ReplicaFeed with a slot
//      set: each slot's key list, values by reference, cold values read from SSD on the feed's
//      thread; no scan of the keyspace), then the writes to the range from its stream.
//   3. The target applies them through its write path (its own replicas follow) and keeps them
//      hidden: a node hides the keys of every slot another shard serves (KEYS, SCAN, DBSIZE,
//      RANDOMKEY, CLUSTER COUNTKEYSINSLOT pass them over).
//   4. Once the target has caught up, the source pauses writes to the range (they wait on
//      their connections' coroutines, they do not fail; reads go on), waits for the writes in
//      flight, streams what is left, and changes the owner by one CAS of the record (the
//      migration "done", the range the target's). It sends the new record down the stream at
//      once (a TOPOLOGY frame: the target and the source's replicas serve it without waiting
//      for etcd), serves it itself, and ends the pause: the writes that waited get -MOVED.
//   5. The source, and a target after a rollback, drop the keys they hold of slots another
//      shard serves, in the background (the janitor: only on a primary etcd confirmed).
// A cancel (state "cancelled"), a target that goes away (the source marks the migration
// "failed") or a target out of memory rolls back: the target drops its partial copy, the
// source never stopped serving. A source that fails over: its new primary serves the next
// CLUSTER SYNCSLOTS of the target, which starts the copy again.
//
// One thread of its own drives it all (links, feeds, handovers, the janitor, the CAS through
// etcd); the I/O threads only hand sockets over and read the figures. Thread-safe.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cluster/etcd_client.h"
#include "cluster/repl_feed.h"
#include "cluster/repl_link.h"
#include "cluster/topology.h"
#include "resp/writer.h"

namespace server {

class Server;
struct ClusterView;

class Migrations {
 public:
  explicit Migrations(Server& server);
  ~Migrations();  ///< stop()
  Migrations(const Migrations&) = delete;
  Migrations& operator=(const Migrations&) = delete;

  /// Starts the thread (cluster mode with etcd only; otherwise nothing to do).
  void start();
  /// Ends every link and feed, releases any pause, joins the thread.
  void stop();

  /// ClusterState's view hook: hides the slots another shard serves, and wakes the thread.
  /// Quick; no I/O.
  void on_view(const std::shared_ptr<const ClusterView>& view);

  /// CLUSTER SYNCSLOTS <id> on the source: "" when this node may feed migration `id` (it is
  /// the source shard's primary and the migration is streaming), else the error reply.
  std::string check_export(std::string_view id) const;
  /// Hands the target's socket (after the +FULLRESYNC line) to a new feed of `id`'s slots.
  void attach_export(std::unique_ptr<cluster::ReplSocket> socket, const std::string& id);

  /// Test aid (DEBUG MIGRATION-HOLD): while on, the handovers of the migrations this node feeds
  /// are put off; they keep streaming.
  void hold_handovers(bool on) { hold_handovers_.store(on); }

  /// CLUSTER GETSLOTMIGRATIONS: one map per migration this node runs or ran (the last 16).
  void describe(resp::Writer& out) const;
  /// INFO cluster's migration fields, each "name:value\r\n".
  void info(std::string* out) const;

 private:
  struct Export;
  struct Import;
  /// What this node did of one migration: CLUSTER GETSLOTMIGRATIONS's row.
  struct Record {
    std::string id, role, slots, peer, state;
    uint64_t keys = 0, bytes = 0;
    int64_t started_ms = 0, ended_ms = 0;
    int64_t pause_us = -1;  ///< the handover's write pause (source, done)
  };

  void run();
  void tick();
  void reconcile_imports(const ClusterView& view);
  void check_exports(const ClusterView& view);
  // Migrations out of this node's shard with no feed: failed when their target's primary has
  // no registration in etcd (it died before it linked, or while it was not linked).
  void check_orphans(const ClusterView& view);
  // Marks migration `id` failed by CAS and serves the result; true when it is no longer active.
  bool mark_failed(const std::string& id, const std::string& why);
  // The handover of `x` (streaming, caught up); true when it is done (or abandoned).
  bool handover(Export& x);
  // Ends export `x` (its feed, its slots' marks).
  // `pause_us`: the handover's write pause (a migration done here), else -1.
  void end_export(Export& x, const std::string& state, int64_t pause_us = -1);
  // Writes a change of the record by CAS (re-read and retried on a lost CAS): `change` edits
  // it and returns false to give up. The new record, or null (error says why).
  std::shared_ptr<const cluster::Topology> update_topology(
      const std::function<bool(cluster::Topology&)>& change, std::string* error);
  void janitor(const ClusterView& view);
  void record(Record r);

  Server& server_;
  std::atomic<bool> hold_handovers_{false};
  std::thread thread_;
  mutable std::mutex mu_;  // everything below
  std::condition_variable cv_;
  bool stop_ = false;
  bool woken_ = false;
  std::shared_ptr<const ClusterView> view_;
  std::vector<std::unique_ptr<Export>> exports_;
  std::vector<std::unique_ptr<Import>> imports_;  // the thread's own (under mu_ for info)
  std::set<std::string> gave_up_;      // imports ended for lack of room
  int64_t last_orphan_check_ms_ = 0;   // check_orphans (thread only)
  std::vector<uint16_t> stale_;        // the janitor's slots (thread only)
  size_t stale_left_ = 0;              // stale_.size() for INFO (mu_)
  uint64_t stale_version_ = 0;         // the view version stale_ was made from
  std::vector<Record> records_;        // finished, oldest first
  uint64_t handovers_ = 0, rollbacks_ = 0, janitor_keys_ = 0;
  int64_t last_pause_us_ = 0, max_pause_us_ = 0;  // handovers' write pauses, this run
  std::unique_ptr<cluster::EtcdClient> etcd_;     // the record's CAS (thread only)
};

}  // namespace server
