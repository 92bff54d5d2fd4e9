// cluster/topology_agent.h - a node's link to the cluster through etcd (DESIGN.md "The
// cluster"): it registers the node under a lease it keeps alive, follows the topology record,
// applies only newer versions, and keeps a copy on disk so that a node restarted while etcd is
// down still routes.
//
// etcd keys (prefix e.g. "/stratakv/<cluster>"):
//   <prefix>/topology     the Topology (cluster/topology.h's JSON), changed only by CAS
//   <prefix>/nodes/<id>   this node's NodeRecord, attached to its lease
//
// Runs on two threads of its own, never an I/O thread: one grants the lease, writes the node
// record and renews the lease every TTL/3; the other reads the topology and watches it. On any
// etcd failure the current topology stays, status() says disconnected, the failure is logged,
// and the thread retries with a backoff of 100 ms doubling to 1 s. A lease found gone
// (expired while etcd was unreachable, or revoked) is replaced by a new one and the record
// written again.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <stop_token>
#include <string>
#include <string_view>
#include <thread>

#include "cluster/etcd_client.h"
#include "cluster/topology.h"
#include "cluster/topology_file.h"

namespace cluster {

/// What a TopologyAgent needs.
struct AgentOptions {
  EtcdOptions etcd;
  /// Key prefix of this cluster, e.g. "/stratakv/prod" (a trailing '/' is ignored).
  std::string prefix;
  /// This node: its address (address.id is the key under <prefix>/nodes/). role and shard are
  /// derived from the topology; topology_version and repl_offset start from these values and
  /// follow set_progress().
  NodeRecord self;
  /// TTL of the registration lease in seconds (etcd may raise it to its minimum). The record
  /// disappears this long after the node stops renewing it.
  int lease_ttl_s = 10;
  /// Where the last applied topology is kept (load_topology_file / save_topology_file); "" =
  /// no copy.
  std::string saved_path;
  /// Called on the lease thread after each successful grant or renewal with lease_deadline()
  /// (fencing follows it without polling); may be empty.
  std::function<void(std::chrono::steady_clock::time_point deadline)> on_lease;
  /// Receives one line per event ("cluster-agent node=<id prefix> event=... error=..."; a
  /// repeated failure is logged every 30 s); default: stderr. Called from the agent's threads
  /// and from start() / stop().
  std::function<void(std::string_view line)> log;
};

/// See the file comment. current(), status() and set_progress() may be called from any thread
/// at any time; start() and stop() from one controlling thread.
class TopologyAgent {
 public:
  /// What the agent knows about its link (for INFO, CLUSTER INFO and the admin tool).
  struct Status {
    bool etcd_connected = false;  ///< the last lease renewal and the watch both work
    uint64_t version = 0;         ///< version of current(), 0 when none
    int64_t last_contact_ms = -1;  ///< ms since the last successful exchange with etcd; -1 never
    /// ms since the lease was last granted or renewed; -1 never. Past the lease TTL, etcd may
    /// have dropped the registration (what a primary fences itself by).
    int64_t lease_renewed_ms = -1;
    int64_t saved_age_s = -1;      ///< age of the saved copy in seconds; -1 when there is none
    int64_t lease_id = 0;          ///< the registration lease, 0 while there is none
    std::string last_error;        ///< the last etcd failure ("" if none yet)
  };
  /// Called with each topology the agent applies: the saved copy from start() on the caller's
  /// thread, then every newer version from etcd on the agent's watch thread. Never called
  /// concurrently with itself; an exception it throws is logged and ignored.
  using OnChange = std::function<void(std::shared_ptr<const Topology>)>;

  /// No I/O until start(). Throws std::invalid_argument for an empty prefix, an invalid node id,
  /// a TTL below 1 or no endpoints.
  TopologyAgent(AgentOptions options, OnChange on_change);
  /// stop().
  ~TopologyAgent();
  TopologyAgent(const TopologyAgent&) = delete;
  TopologyAgent& operator=(const TopologyAgent&) = delete;

  /// Loads the saved copy, if any and if it decodes, and publishes it at once; then starts the
  /// threads. Returns without waiting for etcd. Once per agent.
  void start();
  /// Stops the threads (a running watch or wait is interrupted at once; a request in flight
  /// ends first, within the etcd timeout per endpoint), then revokes the lease when etcd was
  /// reachable (the record disappears at once; otherwise after the TTL). Idempotent.
  void stop();

  /// The topology applied last; nullptr while there is none (no saved copy, nothing in etcd).
  std::shared_ptr<const Topology> current() const;
  Status status() const;
  /// The node has applied topology `applied_version` and its replication offset is
  /// `repl_offset`: written into the node record (a new version at once, a new offset at the
  /// next renewal).
  void set_progress(uint64_t applied_version, uint64_t repl_offset);

  /// Until when the registration lease is surely alive in etcd: the send time of the last
  /// successful grant or renewal plus the TTL (etcd counts from its receipt, later), so past
  /// it etcd may have expired the lease and another node may be promoted in this node's place:
  /// what a primary fences itself by (docs/replication.md). time_point{} before the first
  /// grant. Thread-safe (one atomic load).
  std::chrono::steady_clock::time_point lease_deadline() const {
    return std::chrono::steady_clock::time_point(
        std::chrono::steady_clock::duration(lease_deadline_.load(std::memory_order_acquire)));
  }

  /// "<prefix>/topology" and "<prefix>/nodes/<id>".
  const std::string& topology_key() const { return topology_key_; }
  const std::string& node_key() const { return node_key_; }

 private:
  using Clock = std::chrono::steady_clock;

  void lease_loop(std::stop_token stop);
  void watch_loop(std::stop_token stop);
  /// Decodes `json` (from etcd, at `mod_revision`) and applies it when newer.
  void offer(const std::string& json, int64_t mod_revision);
  void publish(std::shared_ptr<const Topology> topology);
  NodeRecord record() const;
  /// One side of the link (the lease thread's or the watch thread's).
  struct Link {
    const char* name;
    bool ok = false;
    uint64_t failures = 0;  // in a row
    Clock::time_point logged{};
  };
  /// A successful exchange on `link` (logs the recovery after failures).
  void contact(Link& link);
  /// A failed one: logged the first time and then at most every 30 s.
  void failure(Link& link, const std::string& what);
  /// Waits up to `d` or until stopped or the record needs writing; true unless stopped.
  bool wait(std::stop_token& stop, std::chrono::milliseconds d, bool wake_on_dirty);
  void log(const std::string& line) const;

  const AgentOptions options_;
  const OnChange on_change_;
  const std::string topology_key_, node_key_;
  EtcdClient client_;

  std::atomic<std::chrono::steady_clock::rep> lease_deadline_{0};
  mutable std::mutex mu_;
  std::condition_variable_any cv_;
  std::shared_ptr<const Topology> current_;
  Link lease_link_{"lease"}, watch_link_{"watch"};
  std::optional<Clock::time_point> last_contact_, lease_renewed_;
  std::optional<std::chrono::system_clock::time_point> saved_at_;
  int64_t lease_id_ = 0;
  std::string last_error_;
  uint64_t applied_version_ = 0, repl_offset_ = 0;
  bool record_dirty_ = false;  // the record changed in a way worth writing at once
  bool started_ = false;

  std::jthread lease_thread_, watch_thread_;
};

}  // namespace cluster
