#include "server/server.h"
#include "server/migration.h"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <random>

#include "cluster/slot.h"
#include "server/acl_catalog.h"
#include "server/connection.h"
#include "server/errors.h"
#include "server/log.h"
#include "server/os_tuning.h"
#include "server/replication.h"
#include "server/tls.h"
#include "tiering/thread_cache.h"

namespace server {

namespace {

std::string random_hex(size_t n) {
  std::random_device rd;
  static const char digits[] = "0123456789abcdef";
  std::string s(n, '0');
  for (auto& c : s) c = digits[rd() & 15];
  return s;
}

// A warning with the region's figures when a value found no room after eviction, at most one
// per 10 s: the operator learns why writes get -OOM under an evicting policy (fragmentation,
// values queued for the disk, values pinned by readers).
void log_no_room(size_t bytes, uint64_t queued) {
  static std::atomic<int64_t> last_ms{0};
  const int64_t now = tiering::now_ms();
  int64_t last = last_ms.load(std::memory_order_relaxed);
  if (now - last < 10'000 || !last_ms.compare_exchange_strong(last, now)) return;
  const tiering::RegionStats r = tiering::MemoryTier::region().stats();
  char line[320];
  std::snprintf(line, sizeof line,
                "A value of %zu bytes found no room after eviction: region free %zu bytes in %zu "
                "ranges (largest %zu), arena %zu, large values %zu, queued for the disk %llu",
                bytes, r.free, r.free_ranges, r.largest_free, r.arena_extents, r.direct_allocated,
                static_cast<unsigned long long>(queued));
  log::warning(line);
}

}  // namespace

Server::Server(Config& config, void (*more_commands)(CommandTable&))
    : config_(config),
      keyspace_events_(config_, pubsub_),
      // The keyspace's slots are Redis Cluster's (cluster/slot.h): a slot's keys share a shard.
      keyspace_(128, &cluster::key_slot),
      // The evictor measures used memory afresh once per pass (allocator figures: microseconds).
      // With the SSD tier, blocks reserved for large bulks in flight and room claimed by writes
      // about to allocate count too: demoting for them costs no value, and they need the room.
      evictor_(keyspace_, [this] {
        refresh_memory();
        return used_memory_now() +
               (ssd_ != nullptr ? reserved_bulk_bytes() + room_claimed_.load() : 0);
      }),
      cron_timer_(main_io_),
      signals_(main_io_, SIGINT, SIGTERM),
      start_ms_(tiering::now_ms()),
      run_id_(random_hex(40)),
      scripts_(*this) {
  // A failed allocation evicts until its block fits in one piece in the region.
  evictor_.set_fits([](uint64_t bytes) { return tiering::MemoryTier::region().fits(bytes); });
  cluster_ = std::make_unique<ClusterState>(config_, slot_owner_);
  replication_ = std::make_unique<Replication>(*this);
  migrations_ = std::make_unique<Migrations>(*this);
  cluster_->set_view_hook([this](const std::shared_ptr<const ClusterView>& view) {
    migrations_->on_view(view);
  });
  // In cluster mode the topology says whom this node replicates (docs/replication.md).
  cluster_->set_repl_offset_hook([this] { return replication_->applied_offset(); });
  cluster_->set_promotable_hook([this] { return replication_->promotable(); });
  cluster_->set_tls_client_hook([this] { return tls_client(); });
  cluster_->set_role_hook([this](const cluster::NodeAddress* primary) {
    if (primary == nullptr) {
      replication_->promote();
    } else if (!config_.num(Key::kTlsReplication)) {
      replication_->follow(primary->host, primary->port);
    } else if (primary->tls_port != 0) {  // tls-replication: the primary's tls-port, over TLS
      replication_->follow(primary->host, primary->tls_port);
    } else {
      log::warning("tls-replication is on but primary " + primary->id.substr(0, 8) + " (" +
                   primary->host + ") publishes no tls-port: not following it");
    }
  });
  keyspace_.add_observer(&watches_);
  keyspace_.add_observer(&keyspace_events_);
  // Events raised off a command's thread (expiry, eviction, the SSD tier) are published by
  // the main loop, where no shard lock is held.
  keyspace_events_.set_wake([this] { asio::post(main_io_, [this] { keyspace_events_.drain(); }); });
  register_all_commands(commands_);
  if (more_commands != nullptr) more_commands(commands_);
  acl_ = std::make_unique<acl::Users>(build_acl_catalog(commands_));
  // requirepass is the default user's password (Redis's config.c updateRequirePass).
  if (const std::string pass = config_.str(Key::kRequirePass); !pass.empty())
    acl_->set_requirepass(pass);
  sync_eviction_options();
  size_t n = static_cast<size_t>(config_.num(Key::kThreads));
  for (size_t i = 0; i < n; ++i) workers_.push_back(std::make_unique<Worker>(commands_.size()));
  // Scripts run off the I/O threads (docs/scripting.md): as many script threads as I/O
  // threads, at least 2, so a long script does not hold up the scripts of other keys.
  scripts_.start(std::max<size_t>(2, n));
  // Large fast-path copies run off the I/O threads (docs/fast-path.md).
  if (const int64_t t = config_.num(Key::kTransferThreads); t > 0)
    transfers_ = std::make_unique<TransferPool>(static_cast<size_t>(t));
}

Server::~Server() {
  // The topology's threads call the hooks into replication_ and migrations_: they end first.
  if (cluster_) cluster_->stop();
  scripts_.stop();
  for (auto& w : workers_)
    if (w->thread.joinable()) w->thread.join();
  if (transfers_) transfers_->stop();
}

std::optional<std::string> Server::listen() {
  std::string bind = config_.str(Key::kBind);
  // `bind` may list several addresses; the first is used for now.
  if (auto sp = bind.find(' '); sp != std::string::npos) bind.resize(sp);
  if (bind.empty() || bind == "*") bind = "0.0.0.0";
  const auto port = static_cast<uint16_t>(config_.num(Key::kPort));
  const auto tls_port = static_cast<uint16_t>(config_.num(Key::kTlsPort));
  const std::string path = config_.str(Key::kUnixSocket);
  // Opens a TCP listener on `p` (0: a free port); returns the port it got.
  auto open_tcp = [&](std::optional<asio::ip::tcp::acceptor>& acceptor, uint16_t p) {
    asio::ip::tcp::endpoint ep(asio::ip::make_address(bind), p);
    acceptor.emplace(main_io_);
    acceptor->open(ep.protocol());
    acceptor->set_option(asio::socket_base::reuse_address(true));
    acceptor->bind(ep);
    acceptor->listen(static_cast<int>(config_.num(Key::kTcpBacklog)));
    acceptor->non_blocking(true);  // accept_batch drains it until EAGAIN
    return acceptor->local_endpoint().port();
  };
  // TLS first, as Redis: files that do not load stop the start before any port is open.
  if (tls_wanted() && configure_tls())
    return std::string("Failed to configure TLS. Check logs for more info.");
  // Port 0 turns plain TCP off when another listener is set (Redis: "port 0" with tls-port).
  if (port != 0 || (tls_port == 0 && path.empty())) {
    try {
      tcp_port_ = open_tcp(tcp_acceptor_, port);
      wait_accept(*tcp_acceptor_, Listener::kTcp);
    } catch (const std::exception& e) {
      return "could not listen on " + config_.str(Key::kBind) + ":" + std::to_string(port) +
             ": " + e.what();
    }
  }
  if (tls_port != 0) {
    try {
      tls_port_ = open_tcp(tls_acceptor_, tls_port);
      wait_accept(*tls_acceptor_, Listener::kTls);
    } catch (const std::exception& e) {
      return "could not listen on " + config_.str(Key::kBind) + ":" + std::to_string(tls_port) +
             " (tls-port): " + e.what();
    }
  }
  if (!path.empty()) {
    try {
      ::unlink(path.c_str());
      unix_acceptor_.emplace(main_io_, asio::local::stream_protocol::endpoint(path));
      if (int perm = static_cast<int>(config_.num(Key::kUnixSocketPerm)); perm != 0)
        ::chmod(path.c_str(), perm);
      unix_acceptor_->non_blocking(true);
      wait_accept(*unix_acceptor_, Listener::kUnix);
    } catch (const std::exception& e) {
      return "could not listen on unix socket " + path + ": " + e.what();
    }
  }
  // Cluster mode: the node's id and first topology, now that its port is known.
  return cluster_->start(tcp_port_ != 0 ? tcp_port_ : tls_port_);
}

std::optional<std::string> Server::configure_tls() {
  std::string error;
  std::shared_ptr<TlsContext> ctx = TlsContext::create(config_, &error);
  if (ctx == nullptr) {
    log::warning(error);
    return error;
  }
  std::lock_guard lock(tls_mu_);
  tls_ctx_ = std::move(ctx);
  return std::nullopt;
}

std::shared_ptr<TlsContext> Server::tls_context() const {
  std::lock_guard lock(tls_mu_);
  return tls_ctx_;
}

std::shared_ptr<ssl_ctx_st> Server::tls_client() const { return TlsContext::client(tls_context()); }

bool Server::tls_wanted() const {
  return config_.num(Key::kTlsPort) != 0 || config_.num(Key::kTlsReplication) ||
         config_.num(Key::kTlsCluster);
}

tiering::ValueRef Server::allocate_value(size_t size, size_t capacity, bool may_evict) {
  // Eviction locks shards: never from under one (need_room.h).
  if (tiering::ShardMutex::held_by_this_thread() != 0) may_evict = false;
  // A value larger than the limit could never stay: evicting every other key for it would
  // empty the cache for nothing.
  if (std::max(size, capacity) > memory_limit()) may_evict = false;
  tiering::ValueRef v = tiering::ValueRef::allocate(size, capacity);
  if (!v && !may_evict) stats_.value_alloc_failures.fetch_add(1, std::memory_order_relaxed);
  // The region is full: free memory now per maxmemory-policy until the block fits (a few
  // tries, since the freed extents may not be contiguous), else the caller replies OOM. Never
  // waits: with the SSD tier, a connection waits for demotions before the command runs
  // (Connection::ssd_throttle), so here only values with an SSD copy, or as a last resort
  // values not yet written, leave (Evictor::make_room).
  for (int tries = 0; !v && may_evict && tries < 8; ++tries) {
    stats_.value_alloc_failures.fetch_add(1, std::memory_order_relaxed);
    const size_t cap = std::max(size, capacity);
    const size_t need = cap + tiering::Value::region_overhead(cap);
    if (!evictor_.make_room(need, true, tiering::now_ms())) break;
    v = tiering::ValueRef::allocate(size, capacity);
  }
  // (Under noeviction a full region is the policy's answer, not news for the log. While copies
  // on the transfer pool or values queued for the disk hold memory, the write waits for them:
  // Connection::may_wait_for_room logs if that wait runs out.)
  if (!v && may_evict && evictor_.policy() != tiering::EvictionPolicy::kNoEviction &&
      (transfers_ == nullptr || transfers_->held() <= 0) && (ssd_ == nullptr || ssd_->pending_bytes() == 0))
    log_no_room(std::max(size, capacity), ssd_ ? ssd_->pending_bytes() : 0);
  return v;
}

bool Server::make_room_for_write(int64_t now_ms) {
  const int64_t threshold = config_.num(Key::kLatencyMonitorThreshold);
  if (threshold == 0) return evictor_.make_room(0, false, now_ms);
  // LATENCY's "eviction-cycle" (evict.c performEvictions): how long the write waited for room.
  const auto start = std::chrono::steady_clock::now();
  const bool room = evictor_.make_room(0, false, now_ms);
  add_latency_sample("eviction-cycle", start, threshold);
  return room;
}

void Server::add_latency_sample(std::string_view event, std::chrono::steady_clock::time_point start,
                                int64_t threshold_ms) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - start)
                      .count();
  latency_.add_if_needed(event, ms, threshold_ms, tiering::now_ms() / 1000);
}

void Server::sync_eviction_options() {
  tiering::EvictionOptions o = evictor_.options();
  // The config holds only valid names: the fallback is never taken.
  o.policy = tiering::parse_eviction_policy(config_.choice(Key::kMaxMemoryPolicy))
                 .value_or(tiering::EvictionPolicy::kNoEviction);
  o.maxmemory = memory_limit();
  // A replica keeps what its primary keeps (replica-ignore-maxmemory, Redis's default): no
  // eviction by used memory (0: no limit); only a value its region cannot fit makes room
  // (allocate_value), so the region alone bounds it (docs/replication.md, "A replica's keys").
  if (replication_ && replication_->is_replica() && config_.num(Key::kReplicaIgnoreMaxmemory))
    o.maxmemory = 0;
  o.high_watermark = config_.fraction(Key::kEvictionHighWatermark);
  o.low_watermark = std::min(config_.fraction(Key::kEvictionLowWatermark), o.high_watermark);
  o.lfu_decay_minutes = static_cast<int>(config_.num(Key::kLfuDecayTime));
  tiering::lfu_params.decay_minutes.store(o.lfu_decay_minutes, std::memory_order_relaxed);
  tiering::lfu_params.log_factor.store(static_cast<int>(config_.num(Key::kLfuLogFactor)),
                                       std::memory_order_relaxed);
  evictor_.set_options(o);
}

uint64_t Server::used_memory_now() const {
  uint64_t used = stats_.used_memory_base.load(std::memory_order_relaxed) +
                  tiering::MemoryTier::region().direct_allocated();
  // Not counted, as Redis leaves replication buffers out of eviction: requests still being
  // received (their large bulks' blocks here; their copied arguments, and the SSD tier's heap,
  // RocksDB's buffers, are left out of used_memory_base at each refresh). Values queued for
  // demotion are counted: they are in the region until written.
  const uint64_t excluded = stats_.reserved_bulk_bytes.load(std::memory_order_relaxed);
  return used - std::min(used, excluded);
}

uint64_t Server::memory_limit() const {
  const int64_t maxmemory = config_.num(Key::kMaxMemory);
  return maxmemory > 0 ? static_cast<uint64_t>(maxmemory) : tiering::MemoryTier::region().size();
}

std::string_view Server::memory_limit_name() const {
  return config_.num(Key::kMaxMemory) > 0 ? "maxmemory" : "memory.capacity";
}

tiering::MemoryFigures Server::refresh_memory() {
  const tiering::MemoryFigures f = tiering::MemoryTier::figures();
  uint64_t tier_heap = 0;
  if (ssd_ != nullptr) {
    ssd_->refresh_memory();  // same allocator statistics epoch as `f`
    tier_heap = ssd_->heap_bytes();
  }
  const uint64_t used = f.used();
  stats_.used_memory.store(used, std::memory_order_relaxed);
  uint64_t base = used - std::min<uint64_t>(used, f.region.direct_allocated);
  // Requests being received (their copied arguments) are left out as of this same moment.
  base -= std::min(base, tier_heap + stats_.query_heap_bytes.load(std::memory_order_relaxed));
  stats_.used_memory_base.store(base, std::memory_order_relaxed);
  uint64_t peak = stats_.used_memory_peak.load(std::memory_order_relaxed);
  while (used > peak && !stats_.used_memory_peak.compare_exchange_weak(peak, used)) {
  }
  return f;
}

void Server::cron() {
  const int64_t hz = config_.num(Key::kHz);
  cron_timer_.expires_after(std::chrono::milliseconds(1000 / hz));
  cron_timer_.async_wait([this](asio::error_code ec) {
    if (ec || stopping_) return;
    const int64_t now = tiering::now_ms();
    // Active expiry: up to 200 due keys per shard per tick; a long one is LATENCY's
    // "expire-cycle" (expire.c activeExpireCycle).
    const int64_t latency = config_.num(Key::kLatencyMonitorThreshold);
    const auto expire_start = std::chrono::steady_clock::now();
    keyspace_.active_expire(now, 200);
    if (latency != 0) add_latency_sample("expire-cycle", expire_start, latency);
    // Finish resizes of idle shards' tables (busy ones advance on every access).
    keyspace_.rehash_step(100);
    replication_->cron(now);
    const tiering::MemoryFigures memory = refresh_memory();
    // Freed value pages stay resident for reuse; they go back to the OS only once used memory
    // stays far below its limit (resident_policy.h), a step per tick.
    if (size_t n = resident_policy_.to_purge(now, memory.used(), memory_limit(), memory.region.dirty))
      tiering::MemoryTier::region().trim(memory.region.dirty - n);
    sync_eviction_options();
    // The operator's log: a line when eviction starts and one when it has stopped.
    if (std::string line = eviction_log_.tick(now, evictor_.evicted_keys(), memory.used(),
                                              memory_limit(),
                                              config_.choice(Key::kMaxMemoryPolicy));
        !line.empty())
      log::notice(line);
    if (ssd_ != nullptr) {
      ssd_->set_promote_after(static_cast<uint32_t>(config_.num(Key::kPromoteAfter)));
      ssd_->reclaimer().set_enabled(config_.num(Key::kSsdReclaim) != 0);
      ssd_->reclaimer().set_space_amp(
          static_cast<uint32_t>(config_.num(Key::kSsdReclaimSpaceAmp)));
      ssd_->set_admission(ssd_admission());
      ssd_->set_max_write_rate(static_cast<uint64_t>(config_.num(Key::kSsdMaxWriteRate)));
    }
    // instantaneous_ops_per_sec over the last tick.
    uint64_t ops = sum(&WorkerStats::commands);
    if (last_ops_ms_ != 0 && now > last_ops_ms_ && ops >= last_ops_)
      stats_.ops_per_sec.store((ops - last_ops_) * 1000 / (now - last_ops_ms_));
    last_ops_ = ops;
    last_ops_ms_ = now;
    // Idle clients (`timeout` seconds, 0 = never); subscribers wait for messages, and are
    // never idle (clientsCronHandleTimeout). Once a second, clients idle for 2 s give their
    // read buffers back (clientsCronResizeQueryBuffer).
    const int64_t timeout = config_.num(Key::kTimeout);
    const bool sweep_buffers = now - last_buffer_sweep_ms_ >= 1000;
    if (sweep_buffers) last_buffer_sweep_ms_ = now;
    if (timeout > 0 || sweep_buffers) {
      clients_.for_each([&](Connection& c) {
        if (timeout > 0 && c.idle_ms(now) > timeout * 1000 && !c.pubsub().active()) c.close();
        else if (sweep_buffers) c.release_idle_buffers(now);
      });
    }
    cron();
  });
}

void Server::run() {
  std::vector<asio::executor_work_guard<asio::io_context::executor_type>> guards;
  for (auto& w : workers_) {
    guards.push_back(asio::make_work_guard(w->io));
    w->thread = std::thread([&io = w->io] {
      tiering::enable_thread_caches();  // small values without the arena's lock (thread_cache.h)
      io.run();
    });
  }
  signals_.async_wait([this](asio::error_code ec, int sig) {
    if (ec) return;
    log::notice(std::string("received ") + (sig == SIGINT ? "SIGINT" : "SIGTERM") +
                " scheduling shutdown");
    stop();
  });
  stats_.used_memory_startup.store(refresh_memory().used(), std::memory_order_relaxed);
  cron();
  evictor_.start();
  replication_->start();
  migrations_->start();
  main_io_.run();
  migrations_->stop();
  replication_->stop();
  evictor_.stop();
  // Stopping: close every client, let the workers finish, join them.
  clients_.for_each([](Connection& c) { c.close(); });
  guards.clear();
  for (auto& w : workers_) {
    w->io.stop();
    if (w->thread.joinable()) w->thread.join();
  }
  // Running scripts are stopped (SHUTDOWN NOSAVE during a busy script) and their threads joined.
  scripts_.stop();
  // Copies in flight finish (their connections' resumptions are never run).
  if (transfers_) transfers_->stop();
  stop_ssd_tier();
  std::string path = config_.str(Key::kUnixSocket);
  if (!path.empty()) ::unlink(path.c_str());
  log::notice("stratakv is now ready to exit, bye bye...");
}

void Server::stop(ShutdownSave save) {
  if (stopping_.exchange(true)) return;
  shutdown_save_.store(save);
  asio::post(main_io_, [this] {
    asio::error_code ec;
    if (tcp_acceptor_) tcp_acceptor_->close(ec);
    if (tls_acceptor_) tls_acceptor_->close(ec);
    if (unix_acceptor_) unix_acceptor_->close(ec);
    cron_timer_.cancel();
    signals_.cancel();
    main_io_.stop();
  });
}

uint64_t Server::sum(std::atomic<uint64_t> WorkerStats::*counter) const {
  uint64_t total = 0;
  for (const auto& w : workers_) total += (w->stats.*counter).load(std::memory_order_relaxed);
  return total;
}

void Server::reset_stats() {
  // Counters are owned by their worker threads; a reset from another thread may lose an
  // increment racing with it, which CONFIG RESETSTAT tolerates.
  for (auto& w : workers_) {
    w->stats.commands = 0;
    w->stats.net_in = 0;
    w->stats.net_out = 0;
    w->stats.errors = 0;
    for (size_t i = 0; i < w->stats.command_count; ++i) {
      CommandCounters& c = w->stats.per_command[i];
      c.calls = c.usec = c.rejected = c.failed = 0;
    }
    w->stats.error_codes.reset();
  }
  stats_.connections_received = 0;
  stats_.connections_rejected = 0;
  stats_.used_memory_peak = stats_.used_memory.load();
  keyspace_.reset_stats();
  evictor_.reset_stats();
  if (ssd_ != nullptr) {
    ssd_->stats().reset();
    ssd_->reclaimer().stats().reset();
  }
}

}  // namespace server
