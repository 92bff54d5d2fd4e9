// server/cluster_state.h - this node's part in the cluster: its identity, the topology it
// routes by, and what CLUSTER ... and INFO cluster tell about both (DESIGN.md "The cluster").
//
// The node's id is made once and kept in `cluster-config-file` under `dir` (as Redis keeps
// nodes.conf). The topology comes from one of three places:
//   - etcd (`cluster.etcd.endpoints`): a cluster::TopologyAgent on a thread of its own
//     registers the node, watches the record and hands each newer version to apply();
//   - a JSON file (`cluster.topology-file`), read once at start, in the same format;
//   - neither: a topology of this node alone, serving every slot.
// apply() turns a topology into the SlotOwner map the pipeline's slot stage reads, so a
// request never waits for the topology: it sees each slot either before or after a change.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>

#include "cluster/topology.h"

namespace cluster {
class TopologyAgent;
class FailoverAgent;
struct EtcdOptions;
}

struct ssl_ctx_st;

namespace server {

class Config;
class SlotOwner;

/// One topology as this node serves it. Immutable once published: shared by the CLUSTER
/// commands, INFO and the SDK-facing replies without a lock.
struct ClusterView {
  std::shared_ptr<const cluster::Topology> topology;
  cluster::SlotMap slots;           ///< slot -> index into topology->shards
  std::string my_id;                ///< this node's id in the topology
  int my_shard = -1;                ///< index into topology->shards; -1: in no shard
  bool i_am_primary = false;        ///< this node is its shard's primary
  size_t slots_assigned = 0;        ///< slots some shard has
  size_t slots_ok = 0;              ///< slots of a shard that has a primary
  bool ok = false;                  ///< cluster_state:ok (Redis: every slot served, or
                                    ///< cluster-require-full-coverage off)
};

/// This node's identity and its current ClusterView. Thread-safe: any thread reads view();
/// apply() runs on the topology's thread (or at start).
class ClusterState {
 public:
  ClusterState(Config& config, SlotOwner& owner);
  ~ClusterState();
  ClusterState(const ClusterState&) = delete;
  ClusterState& operator=(const ClusterState&) = delete;

  /// Whether cluster-enabled is on (fixed at start).
  bool enabled() const { return enabled_; }

  /// Cluster mode only: loads or makes the node's id, learns its address (`tcp_port` is the
  /// port the listener bound), then serves the first topology (the file's, or this node
  /// alone). Returns an error text when the id file or the topology file is unusable (the
  /// server refuses to start, as Redis does with a corrupt nodes.conf).
  std::optional<std::string> start(uint16_t tcp_port);

  /// This node's address as the topology records it (id, announced host and port, Unix
  /// socket, host identity). Valid after start().
  const cluster::NodeAddress& self() const { return self_; }

  /// The current view; never null after start() in cluster mode (null before, or outside
  /// cluster mode).
  std::shared_ptr<const ClusterView> view() const;

  /// Serves `topology` if its version is newer than the current one's (or there is none):
  /// publishes the view and reassigns the slots in the SlotOwner. Returns whether it did.
  /// A topology that does not name this node leaves it serving no slot. Thread-safe.
  bool apply(std::shared_ptr<const cluster::Topology> topology);

  /// What this node's role is in each topology it serves: called by apply() (under its lock,
  /// in topology order) with the primary's address when this node is a replica of a shard,
  /// or null when it is a shard's primary. Not called for a node in no shard. Set before
  /// start().
  void set_role_hook(std::function<void(const cluster::NodeAddress* primary)> hook) {
    role_hook_ = std::move(hook);
  }

  /// Each view apply() publishes, called under apply()'s lock right after it is published (in
  /// topology order): slot migration's hook (server/migration.h). Must not block or call
  /// apply(). Set before start().
  void set_view_hook(std::function<void(const std::shared_ptr<const ClusterView>&)> hook) {
    view_hook_ = std::move(hook);
  }
  /// apply() of a topology record in JSON (a migration's TOPOLOGY frame). Returns whether it
  /// was newer and served; a record that does not decode is logged and ignored.
  bool apply_json(std::string_view json);
  /// etcd mode: how to reach etcd and the cluster's key prefix (a migration's CAS of the
  /// record); null otherwise.
  const cluster::EtcdOptions* etcd_options() const { return etcd_options_.get(); }
  const std::string& etcd_prefix() const { return etcd_prefix_; }

  /// This node's replication offset, for failover's rank (etcd mode). Set before start().
  void set_repl_offset_hook(std::function<uint64_t()> hook) { repl_offset_ = std::move(hook); }
  /// Whether this node may be promoted (a complete replica). Set before start().
  void set_promotable_hook(std::function<bool()> hook) { promotable_ = std::move(hook); }
  /// The TLS client context for this node's links to other nodes (Server::tls_client): with
  /// tls-replication, a manual failover's commands go to the primary's tls-port through it.
  void set_tls_client_hook(std::function<std::shared_ptr<ssl_ctx_st>()> hook) {
    tls_client_ = std::move(hook);
  }

  /// CLUSTER FAILOVER [FORCE|TAKEOVER] on a replica (etcd mode): starts a manual failover on
  /// the failover agent's thread. Returns an error text, or "" when it started.
  std::string request_manual_failover(bool force);

  /// Failovers this node won (INFO cluster).
  uint64_t promotions() const;

  /// The topology's source for INFO cluster: "etcd", "file" or "self".
  const char* source() const { return source_; }

  /// The link to etcd, for INFO cluster (etcd mode only; `etcd` false otherwise).
  struct EtcdLink {
    bool etcd = false;             ///< the topology comes from etcd
    bool connected = false;        ///< the lease renewal and the watch both work
    int64_t last_contact_ms = -1;  ///< since the last exchange with etcd; -1 never
    int64_t lease_renewed_ms = -1; ///< since the lease was last granted or renewed; -1 never
    int64_t saved_age_s = -1;      ///< age of the saved copy of the topology; -1 none
    std::string last_error;
  };
  EtcdLink etcd_link() const;

  /// Stops following etcd (revokes the node's lease when etcd answers). Idempotent; the
  /// destructor calls it.
  void stop();

 private:
  std::optional<std::string> load_or_make_id();
  std::optional<std::string> start_etcd();

  Config& config_;
  SlotOwner& owner_;
  const bool enabled_;
  cluster::NodeAddress self_;
  const char* source_ = "self";
  // Fencing (etcd mode; docs/replication.md): a primary of a shard with replicas refuses
  // writes past its lease's deadline, and after a lapse (or at start) until a read of the
  // record from etcd confirms it is still primary. Under fence_mu_ when changed.
  void on_lease(std::chrono::steady_clock::time_point deadline);
  void confirm(std::shared_ptr<const cluster::Topology> topology);
  void update_fence();  // fence_mu_ held
  std::mutex fence_mu_;
  std::atomic<int64_t> lease_deadline_{1};  // steady clock ticks (1: none yet)
  std::atomic<bool> fencing_{false}, lapsed_{true};
  bool started_unconfirmed_ = false;  // etcd mode, until the first confirmation (fence_mu_)
  std::atomic<bool> saved_phase_{false};  // TopologyAgent::start() applies the saved copy
  std::function<uint64_t()> repl_offset_;
  std::function<bool()> promotable_;
  std::function<std::shared_ptr<ssl_ctx_st>()> tls_client_;
  std::unique_ptr<cluster::FailoverAgent> failover_;  // etcd mode
  std::function<void(const cluster::NodeAddress* primary)> role_hook_;
  std::function<void(const std::shared_ptr<const ClusterView>&)> view_hook_;
  std::unique_ptr<cluster::EtcdOptions> etcd_options_;  // etcd mode
  std::string etcd_prefix_;
  std::mutex apply_mu_;  // one apply() at a time (the view's swap itself is atomic)
  // The current view. A mutex rather than std::atomic<std::shared_ptr>: views are read by
  // CLUSTER commands and INFO, never per request, and libstdc++ 12's atomic shared_ptr reads
  // its pointer in a way ThreadSanitizer reports as a race.
  mutable std::mutex view_mu_;
  std::shared_ptr<const ClusterView> view_;
  std::unique_ptr<cluster::TopologyAgent> agent_;  // etcd mode
};

/// Reads the node id kept at `path` ("id <40 hex>" line); makes and writes a new one (0600,
/// written to a temporary file and renamed) when the file does not exist. Returns the id, or
/// an error text (unreadable, malformed) in `*error`.
std::string load_or_make_node_id(const std::string& path, std::string* error);

/// The machine's identity for the topology's host_id: `configured` when set, else
/// /etc/machine-id, else the host name.
std::string host_identity(const std::string& configured);

}  // namespace server
