// clients/admin/etcd_store.h - the cluster's records in etcd as stratakv-admin reads and changes
// them: the topology ("<prefix>/topology", changed only by compare-and-swap on its
// mod_revision) and the nodes registered under their leases ("<prefix>/nodes/<id>").
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "cluster/etcd_client.h"
#include "cluster/topology.h"

namespace admin {

/// One registered node: its record and how long its lease has left.
struct Registered {
  cluster::NodeRecord record;
  int64_t lease = 0;             ///< the lease the record is attached to
  int64_t lease_ttl_left_s = -1; ///< seconds left on it; -1 unknown
};

/// Not thread-safe (one admin command at a time).
class EtcdStore {
 public:
  EtcdStore(cluster::EtcdOptions options, std::string prefix);

  /// The topology and its mod_revision; nullopt when the cluster has none yet. Throws
  /// TopologyError when the record does not decode.
  std::optional<std::pair<cluster::Topology, int64_t>> topology();
  /// Every registered node, sorted by key, with its lease's TTL left.
  std::vector<Registered> nodes();

  /// Applies `change` to the current topology (nullopt: none yet) and writes the result by
  /// compare-and-swap; on a lost race reads again and retries, at most 10 times. Returns the
  /// topology written. Exceptions of `change` (PlanError) propagate untouched.
  cluster::Topology update(
      const std::function<cluster::Topology(const std::optional<cluster::Topology>&)>& change);

  const std::string& topology_key() const { return topology_key_; }

 private:
  cluster::EtcdClient etcd_;
  std::string prefix_;
  std::string topology_key_;
};

}  // namespace admin
