// cluster/failover.h - a replica's side of automatic failover through etcd (docs/replication.md,
// "Failover"): when its shard's primary lost its registration lease, the replicas compete with
// one compare-and-swap on the topology record, the most up-to-date first.
//
// Every node registers under a lease (topology_agent.h); a primary that cannot renew it stops
// accepting writes before the lease can expire (fencing, server side), so once etcd has dropped
// the primary's record, or answers that its lease expired a second or more ago (etcd revokes
// expired leases late under load: see poll_once), no write can be acknowledged by it any more.
// Then each replica of that
// shard, having published its replication offset in its own record, waits a delay by rank (0
// for the replica with the highest offset, then one second per better replica, as Redis
// Cluster's replicas delay their election by rank) and tries one CAS of the record on its
// mod_revision: itself as primary, the old primary as a replica (it follows the new one when it
// comes back), the shard's primary_epoch and the version bumped. Exactly one CAS wins; the
// others see the new version through their watch and follow the new primary.
//
// One thread of its own, polling etcd every `poll` (a few requests per poll, only while this
// node is a replica). Thread-safe: start/stop from one controlling thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>
#include <utility>

#include "cluster/etcd_client.h"
#include "cluster/repl_socket.h"
#include "cluster/topology.h"

namespace cluster {

struct FailoverOptions {
  EtcdOptions etcd;
  std::string prefix;  ///< the cluster's key prefix (as the TopologyAgent's)
  std::string my_id;   ///< this node's id
  std::chrono::milliseconds poll{250};
  /// The topology this node serves now (the TopologyAgent's current()).
  std::function<std::shared_ptr<const Topology>()> current;
  /// This node's replication offset (what it has applied), and where to publish it (its record).
  std::function<uint64_t()> repl_offset;
  std::function<void(uint64_t offset)> publish_offset;
  /// Whether this node may take over (a replica whose full copy is complete); empty: yes.
  std::function<bool()> promotable;
  /// Fencing's way back (docs/replication.md): while `wants_confirmation()` says so (a primary
  /// whose lease lapsed, or one just started from a saved topology), each poll reads the record
  /// from etcd and hands it to `confirm`, which lifts the fence when it still names this node
  /// primary. May be empty.
  std::function<bool()> wants_confirmation;
  std::function<void(std::shared_ptr<const Topology>)> confirm;
  /// tls-replication: whether a manual failover talks to the primary's tls-port over TLS, and
  /// the client context it does so with (null: none could be built; the failover fails).
  std::function<bool()> tls_replication;
  std::function<std::shared_ptr<ssl_ctx_st>()> primary_tls;
  /// Credentials for the primary in a manual failover (masteruser / masterauth).
  std::function<std::pair<std::string, std::string>()> primary_auth;
  /// Log sink, one line per event. Called from the agent's thread.
  std::function<void(std::string_view line)> log;
};

class FailoverAgent {
 public:
  /// No I/O until start(). Throws std::invalid_argument as EtcdClient does.
  explicit FailoverAgent(FailoverOptions options);
  ~FailoverAgent();  ///< stop()
  FailoverAgent(const FailoverAgent&) = delete;
  FailoverAgent& operator=(const FailoverAgent&) = delete;

  void start();
  void stop();

  /// CLUSTER FAILOVER on this replica (Redis's manual failover, without loss): on the agent's
  /// thread, soon. The primary is asked to refuse writes (REPLCONF pause-writes), this node
  /// catches up to the primary's offset, then takes over by CAS; on any failure the primary
  /// resumes. `force`: without the primary (it is unreachable): the CAS at once.
  void request_manual(bool force);

  /// Failovers this node won (INFO).
  uint64_t promotions() const { return promotions_.load(std::memory_order_relaxed); }

 private:
  void run(std::stop_token stop);
  // One poll: returns true when it promoted this node.
  bool poll_once();
  // The CAS; true when it won.
  bool take_over(const std::string& shard_id, const std::string& old_primary);
  // The manual failover's steps (request_manual).
  void manual(bool force);

  FailoverOptions options_;
  EtcdClient client_;
  std::jthread thread_;
  std::atomic<uint64_t> promotions_{0};
  std::atomic<int> manual_{0};  // 0 none, 1 requested, 2 requested with FORCE
  // The primary seen gone, and since when (steady clock).
  std::string missing_primary_;
  std::chrono::steady_clock::time_point missing_since_{};
};

}  // namespace cluster
