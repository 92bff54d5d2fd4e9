// server/server.h - the process: I/O threads, listeners, cron, shared state and stats.
//
// N worker threads (`threads`), each running its own asio::io_context; accepted connections
// are spread over the workers round-robin and live on one thread for their whole life, so a
// connection's own state needs no locks. Shared state is the sharded keyspace (tiering/), the
// read-only command table, the client registry and the slowlog, each with its own lock.
#pragma once

#include <asio.hpp>
#include <sys/socket.h>

#include <atomic>
#include <cstdint>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "rdma/verbs_transport.h"
#include "server/acl.h"
#include "server/acl_log.h"
#include "server/client_registry.h"
#include "server/command.h"
#include "server/command_stats.h"
#include "server/config.h"
#include "server/script_runner.h"
#include "server/cluster_state.h"
#include "server/keyspace_events.h"
#include "server/latency.h"
#include "server/monitor.h"
#include "server/pubsub.h"
#include "server/slot_owner.h"
#include "server/slowlog.h"
#include "server/transaction.h"
#include "server/transfer_pool.h"
#include "tiering/eviction.h"
#include "tiering/keyspace.h"
#include "tiering/memory_tier.h"
#include "tiering/eviction_log.h"
#include "tiering/resident_policy.h"
#include "tiering/ssd_tier.h"
#include "tiering/value.h"

struct ssl_ctx_st;

namespace server {

/// Counters of one worker thread: written only by that thread, read by INFO from any.
struct alignas(64) WorkerStats {
  /// `commands` is the size of the command table (CommandTable::size()).
  explicit WorkerStats(size_t commands)
      : per_command(std::make_unique<CommandCounters[]>(commands)), command_count(commands) {}

  std::atomic<uint64_t> commands{0};   ///< total_commands_processed
  std::atomic<uint64_t> net_in{0};     ///< total_net_input_bytes
  std::atomic<uint64_t> net_out{0};    ///< total_net_output_bytes
  std::atomic<uint64_t> errors{0};     ///< total_error_replies (every error reply)
  /// cmdstat_*: one entry per command and subcommand, indexed by CommandSpec::id.
  std::unique_ptr<CommandCounters[]> per_command;
  const size_t command_count;
  /// errorstat_*: error replies by code.
  ErrorCounts error_codes;

  CommandCounters& command(uint32_t id) { return per_command[id]; }
  const CommandCounters& command(uint32_t id) const { return per_command[id]; }

  /// Adds to a counter; only the owning thread calls this, so no read-modify-write race.
  [[gnu::always_inline]] static void bump(std::atomic<uint64_t>& c, uint64_t n = 1) {
    c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
};

/// One I/O thread and its event loop.
struct Worker {
  explicit Worker(size_t commands) : stats(commands) {}
  asio::io_context io{1};
  WorkerStats stats;
  std::thread thread;
};

/// Server-wide counters not owned by one worker.
struct ServerStats {
  std::atomic<uint64_t> connections_received{0};  ///< total_connections_received
  std::atomic<uint64_t> connections_rejected{0};  ///< rejected_connections
  std::atomic<uint64_t> used_memory{0};           ///< heap + value blocks, bytes (cron, INFO)
  std::atomic<uint64_t> used_memory_peak{0};
  /// used_memory less the region's page-rounded (large) value blocks, as of the same refresh:
  /// the maxmemory check adds the live figure of those (Server::used_memory_now).
  std::atomic<uint64_t> used_memory_base{0};
  std::atomic<uint64_t> used_memory_startup{0};   ///< used_memory when run() began
  std::atomic<uint64_t> value_alloc_failures{0};  ///< values the region could not fit
  std::atomic<uint64_t> write_room_waits{0};  ///< writes that waited for room (may_wait_for_room)
  std::atomic<uint64_t> reserved_bulk_bytes{0};   ///< large bulks allocated, not yet complete
  std::atomic<uint64_t> query_heap_bytes{0};      ///< requests' copied arguments and lines
  std::atomic<uint64_t> ops_per_sec{0};           ///< instantaneous_ops_per_sec
  std::atomic<uint64_t> kv_put_bytes{0};          ///< bytes copied in by KV.PUT/KV.MPUT
  std::atomic<uint64_t> kv_get_bytes{0};          ///< bytes copied out by KV.GET/KV.MGET
};

class Replication;
class Migrations;
class TlsContext;

class Server {
 public:
  /// `more_commands`, when set, registers further commands after the command families (an
  /// in-process test adds commands of its own that way).
  explicit Server(Config& config, void (*more_commands)(CommandTable&) = nullptr);
  ~Server();

  /// Binds the TCP listener (`bind`, `port`), the TLS listener (`tls-port`, after building its
  /// context from the tls-* keys) and the Unix socket (`unixsocket`). `port` 0 turns the plain
  /// TCP listener off when tls-port or unixsocket is set, as in Redis; with neither, it picks
  /// a free port. Returns an error text when a listener cannot be set up (a TLS context that
  /// cannot be built has its own line logged first, as Redis logs it).
  std::optional<std::string> listen();
  /// Runs the worker threads and the cron until stop(); blocks the calling thread.
  void run();
  /// What a stop does with the values held only in memory when the SSD tier is on (SHUTDOWN's
  /// SAVE/NOSAVE, as Redis's decide whether it saves its RDB): kDefault follows
  /// tiering.ssd.flush_on_shutdown, kSave writes them, kNoSave drops them.
  enum class ShutdownSave { kDefault, kSave, kNoSave };
  /// Begins a graceful stop: listeners close, connections close, run() returns. Thread-safe;
  /// the first call's `save` holds.
  void stop(ShutdownSave save = ShutdownSave::kDefault);
  bool stopping() const { return stopping_.load(); }

  Config& config() { return config_; }
  tiering::Keyspace& keyspace() { return keyspace_; }
  const CommandTable& commands() const { return commands_; }
  ClientRegistry& clients() { return clients_; }
  /// The ACL users (server/acl.h), over this server's command table. Thread-safe.
  acl::Users& acl() { return *acl_; }
  const acl::Users& acl() const { return *acl_; }
  /// The main loop (listeners, cron): where work that must not run on a connection thread
  /// (small file I/O: ACL SAVE/LOAD) is posted.
  asio::io_context& main_io() { return main_io_; }
  /// ACL LOG's entries (server/acl_log.h). Thread-safe.
  AclLog& acl_log() { return acl_log_; }
  Slowlog& slowlog() { return slowlog_; }
  /// LATENCY's series (latency-monitor-threshold). Thread-safe.
  LatencyMonitor& latency() { return latency_; }
  /// The MONITOR connections (server/monitor.h). Thread-safe.
  Monitors& monitors() { return monitors_; }
  /// The script cache and the script threads (EVAL, SCRIPT). Thread-safe.
  ScriptRunner& scripts() { return scripts_; }
  /// The transfer pool (server/transfer_pool.h): the fast path's large copies run there, off
  /// the I/O threads. Null when transfer.threads is 0. Thread-safe.
  TransferPool* transfers() { return transfers_.get(); }
  /// Who WATCHes which key (an observer of the keyspace). Thread-safe.
  WatchRegistry& watches() { return watches_; }
  /// Pub/Sub's registry of subscriptions (server/pubsub.h). Thread-safe.
  PubSub& pubsub() { return pubsub_; }
  /// Keyspace notifications (an observer of the keyspace; server/keyspace_events.h).
  KeyspaceEvents& keyspace_events() { return keyspace_events_; }
  /// Which hash slots this node serves (the pipeline's slot ownership stage). Thread-safe.
  SlotOwner& slot_owner() { return slot_owner_; }
  /// This node's identity and topology in cluster mode (cluster-enabled). Thread-safe.
  ClusterState& cluster() { return *cluster_; }
  ServerStats& stats() { return stats_; }
  /// Replication: this node's role, its backlog and feeds, or its link to its primary.
  Replication& replication() { return *replication_; }
  /// Online slot migration, this node's side (server/migration.h).
  Migrations& migrations() { return *migrations_; }
  const std::vector<std::unique_ptr<Worker>>& workers() const { return workers_; }

  /// Whether memory is made by demotion now: the SSD tier is on and takes demotions, and the
  /// policy evicts. Thread-safe.
  bool demotes() const;
  /// tiering.ssd.admission as the tier takes it.
  tiering::Admission ssd_admission() const;
  /// Who waits for room: a write command, or a read loading a value from SSD.
  enum class RoomFor { kWrite, kLoad };
  /// With the SSD tier: whether `who`, bringing `incoming` bytes not yet in the region, must
  /// wait for demotions to make room: the demotion queue is over its bound (writes only), or
  /// used memory, with the blocks of bulks in flight, has no room for it: below maxmemory for
  /// a load, below the high watermark for a write. So the room above the high watermark is
  /// kept for loads, which serve a request now, while writes wait for the disk. False when
  /// the tier takes no demotions (failing) or is off. Thread-safe.
  bool must_wait_for_room(uint64_t incoming, RoomFor who) const;
  /// One write's wait for room (server_ssd.cc): announces the bytes to the evictor, and says
  /// when to stop waiting: room is there, tiering.ssd.max_write_wait ms passed, or nothing has
  /// been queued for demotion for 100 ms (the room is held by leases or requests in flight:
  /// waiting longer would not help). The caller sleeps ~1 ms between again() calls (a timer
  /// on a connection, a sleep on a pool thread). Counted in INFO tiering ssd_write_waits.
  class RoomWait {
   public:
    RoomWait(Server& server, uint64_t incoming, RoomFor who);
    ~RoomWait();
    /// True while the write should wait another ~1 ms.
    bool again();

   private:
    Server& server_;
    const uint64_t incoming_;
    const RoomFor who_;
    const std::chrono::steady_clock::time_point start_;
    std::chrono::steady_clock::time_point idle_since_;
  };
  /// Room a write found (must_wait_for_room) and holds until it has allocated, so that writers
  /// checking at the same time do not all count the same free bytes. RAII.
  class RoomClaim {
   public:
    RoomClaim(Server& server, uint64_t bytes) : server_(server), bytes_(bytes) {
      server_.room_claimed_.fetch_add(bytes_, std::memory_order_relaxed);
    }
    ~RoomClaim() { server_.room_claimed_.fetch_sub(bytes_, std::memory_order_relaxed); }
    RoomClaim(const RoomClaim&) = delete;
    RoomClaim& operator=(const RoomClaim&) = delete;

   private:
    Server& server_;
    const uint64_t bytes_;
  };
  /// Bytes of blocks held for large bulks still being received (not in used_memory_now()).
  uint64_t reserved_bulk_bytes() const {
    return stats_.reserved_bulk_bytes.load(std::memory_order_relaxed);
  }
  /// Allocates a value of `size` bytes in use and room for `capacity` in the memory region.
  /// Null when the region cannot fit it. Every value the server creates comes from here, so
  /// this is the one place where a full region is handled (and where eviction makes room).
  /// Thread-safe.
  /// With `may_evict` false, or when the calling thread holds a shard lock (eviction locks
  /// shards), a full region returns null instead of evicting.
  tiering::ValueRef allocate_value(size_t size, size_t capacity = 0, bool may_evict = true);

  /// Used memory as the maxmemory check counts it, in bytes: the process heap (keys, tables,
  /// client buffers) plus the value blocks in the region, less large bulks still being
  /// received. Large value blocks are counted exactly; the heap and small value blocks as of
  /// the last refresh (cron, 1/hz s). Cheap: a few atomic loads. Thread-safe.
  uint64_t used_memory_now() const;
  /// The bound of the maxmemory check, in bytes: `maxmemory`, or the region's capacity when
  /// maxmemory is 0. Thread-safe.
  uint64_t memory_limit() const;
  /// The config key memory_limit() comes from: "maxmemory", or "memory.capacity" when
  /// maxmemory is 0 (for error texts). Thread-safe.
  std::string_view memory_limit_name() const;
  /// Measures memory now (a few microseconds: mallctl), updates used_memory, its peak and
  /// the maxmemory check's figures, and returns the figures. Thread-safe.
  tiering::MemoryFigures refresh_memory();

  /// The RDMA device the verbs transport uses, with the region registered; null when none.
  rdma::VerbsDevice* verbs() { return verbs_.get(); }
  /// Hands over the device (main(), before run()).
  void set_verbs(std::unique_ptr<rdma::VerbsDevice> device) { verbs_ = std::move(device); }

  /// The evictor (maxmemory-policy); its options follow the config at every cron tick.
  tiering::Evictor& evictor() { return evictor_; }
  /// For a write command while used memory is past the limit: evicts per maxmemory-policy
  /// until it fits. False under noeviction or when nothing evictable is left (reply OOM).
  bool make_room_for_write(int64_t now_ms);

  /// The SSD tier (docs/ssd-tier.md): null when tiering.ssd.enabled is off or the store could
  /// not open (ssd_error() says why). Its reads run on ssd_pool(), never a connection thread.
  tiering::SsdTier* ssd() { return ssd_.get(); }
  asio::thread_pool& ssd_pool() { return *ssd_pool_; }
  /// Opens the SSD tier and rebuilds its keys (tiering.ssd.recover) when it is enabled. Call
  /// once, before listen() and run(). A store that cannot open is logged and the server runs
  /// without the tier.
  void start_ssd_tier();
  /// Why the SSD tier is off although enabled ("" when it runs or is disabled).
  const std::string& ssd_error() const { return ssd_error_; }

  /// Sum of a counter over the workers.
  uint64_t sum(std::atomic<uint64_t> WorkerStats::*counter) const;
  /// Zeroes the resettable counters (CONFIG RESETSTAT).
  void reset_stats();

  int64_t start_ms() const { return start_ms_; }
  const std::string& run_id() const { return run_id_; }
  /// The plain TCP port listened on (0: none).
  uint16_t tcp_port() const { return tcp_port_; }
  /// The TLS port listened on (0: none).
  uint16_t tls_port() const { return tls_port_; }
  /// Builds a TLS context from the tls-* keys as they are now and makes it the one new TLS
  /// clients get (connected ones keep theirs). On failure logs Redis's line for it, keeps the
  /// old context and returns that line. Thread-safe.
  std::optional<std::string> configure_tls();
  /// The TLS context new clients of tls-port get; null when TLS is off. Thread-safe.
  std::shared_ptr<TlsContext> tls_context() const;
  /// The client side of that context, for links to other nodes (tls-replication, tls-cluster);
  /// null when none was built. Thread-safe.
  std::shared_ptr<ssl_ctx_st> tls_client() const;
  /// Whether TLS is configured at all: tls-port, tls-replication or tls-cluster (Redis builds
  /// its contexts in those cases, and refuses to start when they cannot be built).
  bool tls_wanted() const;

 private:
  // Accepting clients (accept.cc). A listener waits until its listen queue has connections,
  // then accepts them in one batch of non-blocking accept4 calls (up to kMaxAcceptsPerCall,
  // Redis's MAX_ACCEPTS_PER_CALL); each is checked against maxclients and protected-mode here
  // and set up (socket options, addresses, the Connection) on the worker it goes to, round
  // robin. `kind` is the plain TCP port, tls-port or the Unix socket.
  enum class Listener : uint8_t { kTcp, kTls, kUnix };
  template <typename Acceptor>
  void wait_accept(Acceptor& acceptor, Listener kind);
  // Accepts what `listen_fd` has queued. False when accept4 failed for lack of descriptors or
  // memory: the caller waits a little before trying again (the queue stays readable).
  bool accept_batch(int listen_fd, Listener kind);
  // On `worker`'s thread: the setup of one accepted socket `fd` from `peer` (`peer_len` bytes),
  // as client `id` (numbered on the main thread, so IDs grow in accept order as in Redis).
  void adopt(Worker& worker, int fd, uint64_t id, Listener kind, const sockaddr_storage& peer,
             socklen_t peer_len);
  void cron();
  void sync_eviction_options();
  void stop_ssd_tier();
  // A LATENCY sample for `event` of the time since `start`, when it reaches `threshold_ms`.
  void add_latency_sample(std::string_view event, std::chrono::steady_clock::time_point start,
                          int64_t threshold_ms);

  Config& config_;
  std::unique_ptr<rdma::VerbsDevice> verbs_;  // before the connections that use it
  WatchRegistry watches_;  // before the keyspace that calls it
  PubSub pubsub_;          // before the connections that subscribe
  Monitors monitors_;      // before the connections that monitor
  LatencyMonitor latency_;
  KeyspaceEvents keyspace_events_;  // before the keyspace that calls it
  tiering::Keyspace keyspace_;
  tiering::Evictor evictor_;
  CommandTable commands_;
  std::unique_ptr<acl::Users> acl_;  // over commands_, once it is filled
  AclLog acl_log_;
  ClientRegistry clients_;
  Slowlog slowlog_;
  SlotOwner slot_owner_;
  std::unique_ptr<ClusterState> cluster_;  // after slot_owner_, which it assigns
  std::unique_ptr<Replication> replication_;  // after the keyspace it feeds and applies to
  std::unique_ptr<Migrations> migrations_;    // after replication_, whose stream it feeds
  ServerStats stats_;

  std::vector<std::unique_ptr<Worker>> workers_;
  std::atomic<size_t> next_worker_{0};
  // Sockets accepted and handed to a worker, not yet in clients_: maxclients counts them.
  std::atomic<size_t> adopting_{0};
  asio::io_context main_io_{1};  // listeners, cron and signals
  std::optional<asio::ip::tcp::acceptor> tcp_acceptor_;
  std::optional<asio::ip::tcp::acceptor> tls_acceptor_;
  mutable std::mutex tls_mu_;
  std::shared_ptr<TlsContext> tls_ctx_;  // under tls_mu_
  std::optional<asio::local::stream_protocol::acceptor> unix_acceptor_;
  asio::steady_timer cron_timer_;
  tiering::ResidentPolicy resident_policy_;  // cron only
  tiering::EvictionLog eviction_log_;        // cron only
  asio::signal_set signals_;
  std::atomic<bool> stopping_{false};
  std::atomic<ShutdownSave> shutdown_save_{ShutdownSave::kDefault};  // set by the first stop()
  int64_t start_ms_;
  std::string run_id_;
  uint16_t tcp_port_ = 0;
  uint16_t tls_port_ = 0;
  uint64_t last_ops_ = 0;
  int64_t last_ops_ms_ = 0;
  int64_t last_buffer_sweep_ms_ = 0;  // cron: when idle clients last gave buffers back
  ScriptRunner scripts_;  // its threads run commands: stopped in run() and before the rest
  // Its copies use connections' memory: stopped once the workers are joined, as scripts_.
  std::unique_ptr<TransferPool> transfers_;
  // Last: destroyed first (the tier refers to the keyspace; the pool's jobs to the tier).
  std::unique_ptr<tiering::SsdTier> ssd_;
  std::atomic<uint64_t> room_claimed_{0};  // RoomClaim
  std::unique_ptr<asio::thread_pool> ssd_pool_;
  std::string ssd_error_;
};

/// Registers every command family into `table`.
void register_all_commands(CommandTable& table);

}  // namespace server
