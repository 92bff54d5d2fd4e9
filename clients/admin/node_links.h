// clients/admin/node_links.h - stratakv-admin's RESP connections to the cluster's nodes: one per
// node, opened on first use and kept for the command's run (status asks every node; assign-slots
// asks a node once per slot of a range).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "cluster/topology.h"

struct redisContext;

namespace admin {

/// Not thread-safe. Each call waits at most `timeout_ms` for the node.
class NodeLinks {
 public:
  explicit NodeLinks(int timeout_ms) : timeout_ms_(timeout_ms) {}
  ~NodeLinks();
  NodeLinks(const NodeLinks&) = delete;
  NodeLinks& operator=(const NodeLinks&) = delete;

  /// `INFO everything` of `n` as field -> value ("db0" holds "keys=N,..."); empty when the node
  /// does not answer.
  std::map<std::string, std::string> info(const cluster::NodeAddress& n);
  /// CLUSTER COUNTKEYSINSLOT `slot` on `n`; -1 when the node does not answer.
  long long count_keys(const cluster::NodeAddress& n, uint16_t slot);
  /// CLUSTER FAILOVER [FORCE] on the replica `n`: "" when it started, else the node's error (or
  /// that it does not answer).
  std::string failover(const cluster::NodeAddress& n, bool force);

 private:
  // The connection to `n` (made on first use), or null when it cannot be made; a connection
  // that failed a command is dropped so the next call makes a new one.
  redisContext* link(const cluster::NodeAddress& n);
  void drop(const cluster::NodeAddress& n);

  int timeout_ms_;
  std::map<std::string, redisContext*> links_;  // "host:port" -> connection
};

}  // namespace admin
