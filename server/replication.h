// server/replication.h - this node's part in replication (docs/replication.md): as a primary,
// its backlog and one feed per replica; as a replica, its link to the primary; and what the
// commands ask of both (REPLICAOF, PSYNC, WAIT, ROLE, INFO replication).
//
// The streams themselves live in cluster/ (repl_backlog.h, repl_feed.h, repl_link.h); this is
// the server's wiring: config keys (replicaof, masterauth, masteruser, repl-backlog-size,
// repl-timeout, repl-ping-replica-period, replica-read-only, replica-ignore-maxmemory), the
// replication ids, the keyspace's expiry mode, and the waiters of WAIT.
//
// Replication ids and offsets follow Redis's PSYNC2: a node has a replication id (40 hex
// characters, new at each start and each promotion) and an offset; a promoted replica keeps
// its former primary's id as replid2 up to the offset where it took over, so the other
// replicas resume from its backlog instead of taking a full copy.
//
// Thread-safety: every public call is thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/repl_backlog.h"
#include "cluster/repl_feed.h"
#include "cluster/repl_link.h"
#include "resp/writer.h"

namespace server {

class Server;

class Replication {
 public:
  explicit Replication(Server& server);
  ~Replication();

  /// Follows `replicaof` from the config, if set. Call once the server listens.
  void start();
  /// Stops the link and every feed (shutdown).
  void stop();

  /// Whether this node is a replica: it applies its primary's stream and refuses writes from
  /// clients under replica-read-only. One relaxed load (the pipeline asks it per write).
  bool is_replica() const { return replica_.load(std::memory_order_relaxed); }

  /// REPLICAOF host port: drops the current primary (if any) and follows this one, resuming
  /// where possible. Its feeds are closed (their replicas reconnect and resync).
  void replicate_from(const std::string& host, uint16_t port);
  /// replicate_from(), unless this node follows host:port already (the cluster's role hook,
  /// called with every topology).
  void follow(const std::string& host, uint16_t port);
  /// REPLICAOF NO ONE: becomes a primary, keeping its keys and its history (replid2). No
  /// effect on a primary.
  void promote();

  /// What PSYNC decided for a replica.
  struct SyncPlan {
    std::string reply;  ///< "+FULLRESYNC <id> <offset>" or "+CONTINUE <id>", without CRLF
    bool full = false;
    uint64_t offset = 0;  ///< the stream offset the feed sends from
  };
  /// PSYNC <replid> <offset>: resume when `replid` is this node's id (or its former primary's,
  /// up to the offset of the promotion) and the backlog still holds `offset`; else a full copy
  /// from the backlog's end. Creates the backlog on the first call.
  SyncPlan plan_sync(std::string_view replid, int64_t offset);
  /// Hands a replica's socket, plain or TLS (after the PSYNC reply was written), to a new feed.
  void attach(std::unique_ptr<cluster::ReplSocket> socket, std::string ip,
              uint16_t listening_port, const SyncPlan& plan);

  /// Slot migration's source (server/migration.h): the options of a feed that sends the keys
  /// of `slots` and then their changes, read from this primary's stream (created, and made an
  /// observer of the keyspace, if need be) from its current end. Null backlog on a replica.
  /// While such feeds run (`exports` > 0), heartbeats go into the stream as for replicas.
  cluster::FeedOptions export_feed(std::unique_ptr<cluster::ReplSocket> socket,
                                   std::shared_ptr<const cluster::SlotSet> slots);
  void set_exports(int exports) { exports_.store(exports, std::memory_order_relaxed); }

  /// What this node has of the stream: a replica's applied offset, a primary's own offset
  /// (failover ranks replicas by it).
  uint64_t applied_offset() const;
  /// Whether this node may be promoted: a primary, or a replica that holds a complete copy
  /// (not one whose full copy is still running or never ran).
  bool promotable() const;
  /// Bytes of the stream so far (master_repl_offset); 0 when no backlog yet.
  uint64_t offset() const;
  /// Replicas that acknowledged every byte before `offset`.
  int acked(uint64_t offset) const;
  /// Bytes of frames the backlog holds, values counted (MEMORY STATS replication.backlog).
  uint64_t backlog_bytes() const;
  /// Connected replicas (INFO connected_slaves).
  int replica_count() const;
  /// Calls `wake` (from any thread) once `needed` replicas acknowledged `offset`; returns an id
  /// for cancel_wait. `wake` may run before this returns.
  uint64_t wait_for(uint64_t offset, int needed, std::function<void()> wake);
  void cancel_wait(uint64_t id);

  /// INFO replication's fields (Redis's names), each "name:value\r\n".
  void info(std::string* out) const;
  /// ROLE's reply.
  void role(resp::Writer& out) const;
  /// CLIENT KILL TYPE master: drops the link to the primary (it reconnects and resumes).
  bool drop_primary_link();
  /// CLIENT KILL TYPE replica: closes every feed (the replicas reconnect and resume). Returns
  /// how many.
  int drop_replicas();

  /// Once per cron tick: heartbeat frames, backlog trimming, closed feeds reaped.
  void cron(int64_t now_ms);

 private:
  struct Waiter {
    uint64_t id, offset;
    int needed;
    std::function<void()> wake;
  };
  // Stops the link to the primary and every feed, joining their threads outside mu_.
  void close_links();
  // Creates the backlog (and registers it as an observer on a primary) if missing. mu_ held.
  void ensure_backlog(uint64_t start_offset);
  // The link's relay and sync callbacks.
  void relay(cluster::FrameType type, std::string_view key, tiering::ValueRef value,
             int64_t expire_ms, uint64_t frame_size);
  void on_ack();
  void sync_limits();
  static std::string new_replid();

  Server& server_;
  std::atomic<bool> replica_{false};
  std::atomic<int> exports_{0};
  mutable std::mutex mu_;  // everything below
  std::string replid_, replid2_;
  uint64_t second_offset_ = 0;  // replid2 is valid up to here (exclusive)
  std::shared_ptr<cluster::ReplBacklog> backlog_;
  bool backlog_observes_ = false;  // registered as the keyspace's observer (a primary)
  std::vector<std::unique_ptr<cluster::ReplicaFeed>> feeds_;
  std::unique_ptr<cluster::ReplicaLink> link_;
  std::string primary_host_;
  uint16_t primary_port_ = 0;
  int64_t last_ping_ms_ = 0;
  mutable std::mutex wait_mu_;
  std::vector<Waiter> waiters_;
  uint64_t next_waiter_ = 1;
};

}  // namespace server
