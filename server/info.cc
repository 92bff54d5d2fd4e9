// server/info.cc - the INFO text (Redis 7.0 field names and layout), built from the server's live
// state. (COMMAND INFO/DOCS, also declared in info.h, are in command_docs.cc.)
#include "rdma/segment.h"
#include "server/info.h"

#include "server/migration.h"

#include <sys/resource.h>
#include <sys/time.h>
#include <sys/utsname.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <type_traits>
#include <unordered_map>

#include "server/config.h"
#include "server/replication.h"
#include "server/server.h"
#include "server/version.h"
#include "tiering/allocator.h"
#include "tiering/memory_tier.h"

namespace server {
namespace {

// ---- INFO ----

// One "name:value\r\n" line; numbers are formatted as integers.
template <typename T>
void field(std::string* s, std::string_view name, const T& value) {
  s->append(name).push_back(':');
  if constexpr (std::is_arithmetic_v<T>) s->append(std::to_string(value));
  else s->append(std::string_view(value));
  s->append("\r\n");
}

// Fields whose value never changes here (features stratakv does not have: values as an idle
// Redis shows them).
void constants(std::string* s, std::initializer_list<std::pair<const char*, const char*>> kvs) {
  for (const auto& [name, value] : kvs) field(s, name, value);
}

std::string format(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, fmt, v);
  return buf;
}

// The config file named on the command line (same rules as main.cc), as an absolute path.
std::string config_file_path() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> args;
  for (std::string a; std::getline(in, a, '\0');) args.push_back(a);
  std::string file;
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--config" && i + 1 < args.size()) file = args[++i];
    else if (args[i].rfind("--", 0) == 0) ++i;  // --key value
    else if (i == 1) file = args[i];
  }
  if (file.empty()) return file;
  char buf[PATH_MAX];
  return realpath(file.c_str(), buf) ? std::string(buf) : file;
}

// Fields of "# Server" that never change while the process runs.
struct StaticInfo {
  std::string os, executable, config_file, build_id, gcc_version;
};

const StaticInfo& static_info() {
  static const StaticInfo info = [] {
    StaticInfo s;
    utsname u{};
    if (uname(&u) == 0) s.os = std::string(u.sysname) + " " + u.release + " " + u.machine;
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    if (n > 0) s.executable.assign(buf, static_cast<size_t>(n));
    s.config_file = config_file_path();
    char id[32];
    std::snprintf(id, sizeof id, "%zx",
                  std::hash<std::string_view>{}(STRATAKV_VERSION " " __DATE__ " " __TIME__));
    s.build_id = id;
    s.gcc_version = std::to_string(__GNUC__) + "." + std::to_string(__GNUC_MINOR__) + "." +
                    std::to_string(__GNUC_PATCHLEVEL__);
    return s;
  }();
  return info;
}

void section_server(Server& srv, int64_t now_ms, std::string* s) {
  const StaticInfo& st = static_info();
  const int64_t uptime = (now_ms - srv.start_ms()) / 1000;
  const int64_t hz = srv.config().num(Key::kHz);
  field(s, "redis_version", STRATAKV_REDIS_VERSION);
  constants(s, {{"redis_git_sha1", "00000000"}, {"redis_git_dirty", "0"}});
  field(s, "redis_build_id", st.build_id);
  field(s, "redis_mode", srv.cluster().enabled() ? "cluster" : "standalone");
  field(s, "os", st.os);
  field(s, "arch_bits", sizeof(void*) * 8);
  constants(s, {{"monotonic_clock", "POSIX clock_gettime"}, {"multiplexing_api", "epoll"},
                {"atomicvar_api", "c11-builtin"}});
  field(s, "gcc_version", st.gcc_version);
  field(s, "process_id", static_cast<int64_t>(getpid()));
  field(s, "process_supervised", "no");
  field(s, "run_id", srv.run_id());
  // Redis: the plain port, or the TLS port when plain TCP is off; tls_port: stratakv's own.
  field(s, "tcp_port", srv.tcp_port() != 0 ? srv.tcp_port() : srv.tls_port());
  field(s, "tls_port", srv.tls_port());
  timeval tv;
  gettimeofday(&tv, nullptr);
  field(s, "server_time_usec", int64_t(tv.tv_sec) * 1000000 + tv.tv_usec);
  field(s, "uptime_in_seconds", uptime);
  field(s, "uptime_in_days", uptime / 86400);
  field(s, "hz", hz);
  field(s, "configured_hz", hz);
  field(s, "lru_clock", (now_ms / 1000) & ((1 << 24) - 1));  // Redis's 24-bit LRU clock, 1 s
  field(s, "executable", st.executable);
  field(s, "config_file", st.config_file);
  field(s, "io_threads_active", srv.workers().size() > 1 ? 1 : 0);
  field(s, "stratakv_version", STRATAKV_VERSION);
}

void section_clients(Server& srv, int64_t, std::string* s) {
  field(s, "connected_clients", srv.clients().count());
  field(s, "cluster_connections", 0);
  field(s, "maxclients", srv.config().num(Key::kMaxClients));
  constants(s, {{"blocked_clients", "0"}, {"tracking_clients", "0"},
                {"clients_in_timeout_table", "0"}});
}

void section_memory(Server& srv, int64_t, std::string* s) {
  ServerStats& stats = srv.stats();
  // Measured now, as Redis's used_memory is exact at every call (the cron refreshes the
  // shared figure only every 1/hz s). used_memory is Redis's "all the server allocated": the
  // heap (keys, tables, buffers) plus the value blocks in the memory region.
  const tiering::MemoryFigures mem = srv.refresh_memory();
  const tiering::RegionStats& region = mem.region;
  const uint64_t used = mem.used();
  const uint64_t peak = std::max(used, stats.used_memory_peak.load(std::memory_order_relaxed));
  const uint64_t rss = tiering::process_rss();
  const uint64_t system = static_cast<uint64_t>(sysconf(_SC_PHYS_PAGES)) *
                          static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
  const uint64_t maxmemory = static_cast<uint64_t>(srv.config().num(Key::kMaxMemory));
  field(s, "used_memory", used);
  field(s, "used_memory_human", Config::human_bytes(used));
  field(s, "used_memory_rss", rss);
  field(s, "used_memory_rss_human", Config::human_bytes(rss));
  field(s, "used_memory_peak", peak);
  field(s, "used_memory_peak_human", Config::human_bytes(peak));
  field(s, "used_memory_peak_perc", format("%.2f%%", peak ? 100.0 * used / peak : 0.0));
  field(s, "used_memory_startup", stats.used_memory_startup.load(std::memory_order_relaxed));
  field(s, "total_system_memory", system);
  field(s, "total_system_memory_human", Config::human_bytes(system));
  field(s, "maxmemory", maxmemory);
  field(s, "maxmemory_human", Config::human_bytes(maxmemory));
  std::string policy = srv.config().get("maxmemory-policy").at(0).second;
  field(s, "maxmemory_policy", policy);
  field(s, "mem_fragmentation_ratio", format("%.2f", used ? double(rss) / double(used) : 0.0));
  field(s, "mem_fragmentation_bytes", static_cast<int64_t>(rss) - static_cast<int64_t>(used));
  field(s, "mem_allocator", tiering::allocator_name());
  field(s, "lazyfree_pending_objects", 0);
  // Left out of the maxmemory check, as Redis leaves replication buffers out: requests still
  // being received, and the SSD tier's heap.
  uint64_t not_counted = stats.reserved_bulk_bytes.load(std::memory_order_relaxed) +
                         stats.query_heap_bytes.load(std::memory_order_relaxed);
  if (srv.ssd() != nullptr) not_counted += srv.ssd()->heap_bytes();
  field(s, "mem_not_counted_for_evict", not_counted);
  // stratakv's own. The heap part of used_memory, the memory region (capacity: reserved;
  // allocated: value blocks' usable bytes; active: pages holding value blocks; dirty: freed
  // pages kept resident for reuse), values the region could not fit, and large bulks
  // allocated but not yet fully read.
  static const char* const kBacking[] = {"no", "transparent", "hugetlb"};
  field(s, "used_memory_heap", mem.heap);
  field(s, "region_capacity", region.capacity);
  field(s, "region_capacity_human", Config::human_bytes(region.capacity));
  field(s, "region_allocated", region.allocated());
  field(s, "region_allocated_human", Config::human_bytes(region.allocated()));
  field(s, "region_active", region.arena_active + region.direct_allocated);
  field(s, "region_dirty", region.dirty);
  field(s, "region_free", region.free);
  field(s, "region_largest_free", region.largest_free);
  field(s, "region_hugepages", kBacking[static_cast<int>(tiering::MemoryTier::region().hugepages())]);
  field(s, "region_alloc_failures", stats.value_alloc_failures.load(std::memory_order_relaxed));
  field(s, "write_room_waits", stats.write_room_waits.load(std::memory_order_relaxed));
  field(s, "query_buffers_reserved", stats.reserved_bulk_bytes.load(std::memory_order_relaxed) +
                                        stats.query_heap_bytes.load(std::memory_order_relaxed));
}

// stratakv keeps no RDB or AOF: the fields tools read, as a Redis without saves shows them.
void section_persistence(Server& srv, int64_t, std::string* s) {
  constants(s, {{"loading", "0"}, {"async_loading", "0"}, {"rdb_changes_since_last_save", "0"},
                {"rdb_bgsave_in_progress", "0"}});
  field(s, "rdb_last_save_time", srv.start_ms() / 1000);
  constants(s, {{"rdb_last_bgsave_status", "ok"}, {"rdb_last_bgsave_time_sec", "-1"},
                {"rdb_current_bgsave_time_sec", "-1"}, {"rdb_saves", "0"}, {"aof_enabled", "0"},
                {"aof_rewrite_in_progress", "0"}, {"aof_rewrite_scheduled", "0"},
                {"aof_last_rewrite_time_sec", "-1"}, {"aof_current_rewrite_time_sec", "-1"},
                {"aof_last_bgrewrite_status", "ok"}, {"aof_rewrites", "0"},
                {"aof_last_write_status", "ok"}, {"module_fork_in_progress", "0"}});
}

void section_stats(Server& srv, int64_t, std::string* s) {
  ServerStats& stats = srv.stats();
  const tiering::Keyspace::Stats ks = srv.keyspace().stats();
  field(s, "total_connections_received", stats.connections_received.load());
  field(s, "total_commands_processed", srv.sum(&WorkerStats::commands));
  field(s, "instantaneous_ops_per_sec", stats.ops_per_sec.load());
  field(s, "total_net_input_bytes", srv.sum(&WorkerStats::net_in));
  field(s, "total_net_output_bytes", srv.sum(&WorkerStats::net_out));
  field(s, "rejected_connections", stats.connections_rejected.load());
  constants(s, {{"sync_full", "0"}, {"sync_partial_ok", "0"}, {"sync_partial_err", "0"}});
  field(s, "expired_keys", ks.expired);
  // Keys dropped by tiering.ssd.capacity are evictions too.
  field(s, "evicted_keys", srv.evictor().evicted_keys() +
                               (srv.ssd() ? srv.ssd()->stats().dropped_keys.load() : 0));
  constants(s, {{"evicted_clients", "0"}});
  field(s, "keyspace_hits", ks.hits);
  field(s, "keyspace_misses", ks.misses);
  field(s, "pubsub_channels", srv.pubsub().channel_count(ChannelKind::kGlobal));
  field(s, "pubsub_patterns", srv.pubsub().numpat());
  field(s, "pubsubshard_channels", srv.pubsub().channel_count(ChannelKind::kShard));
  constants(s, {{"latest_fork_usec", "0"}, {"total_forks", "0"}});
  constants(s, {{"unexpected_error_replies", "0"}});
  field(s, "total_error_replies", srv.sum(&WorkerStats::errors));
}

void section_replication(Server& srv, int64_t, std::string* s) {
  srv.replication().info(s);
}

std::string seconds(const timeval& tv) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%ld.%06ld", static_cast<long>(tv.tv_sec),
                static_cast<long>(tv.tv_usec));
  return buf;
}

void section_cpu(Server&, int64_t, std::string* s) {
  rusage self{}, children{};
  getrusage(RUSAGE_SELF, &self);
  getrusage(RUSAGE_CHILDREN, &children);
  field(s, "used_cpu_sys", seconds(self.ru_stime));
  field(s, "used_cpu_user", seconds(self.ru_utime));
  field(s, "used_cpu_sys_children", seconds(children.ru_stime));
  field(s, "used_cpu_user_children", seconds(children.ru_utime));
}

void section_cluster(Server& srv, int64_t, std::string* s) {
  ClusterState& cluster = srv.cluster();
  field(s, "cluster_enabled", cluster.enabled() ? 1 : 0);
  const std::shared_ptr<const ClusterView> view = cluster.view();
  if (!view) return;
  // stratakv's own: where the topology comes from and which version is served.
  field(s, "cluster_topology_source", cluster.source());
  field(s, "cluster_topology_version", view->topology->version);
  field(s, "cluster_state", view->ok ? "ok" : "fail");
  field(s, "cluster_my_id", view->my_id);
  field(s, "cluster_my_role",
        view->my_shard < 0 ? "none" : (view->i_am_primary ? "primary" : "replica"));
  const ClusterState::EtcdLink link = cluster.etcd_link();
  if (!link.etcd) return;
  field(s, "cluster_etcd_link", link.connected ? "up" : "down");
  field(s, "cluster_etcd_last_contact_ms", link.last_contact_ms);
  field(s, "cluster_etcd_lease_renewed_ms", link.lease_renewed_ms);
  field(s, "cluster_saved_topology_age_s", link.saved_age_s);
  // Fencing and failover (docs/replication.md).
  field(s, "cluster_fenced", srv.slot_owner().fenced() ? 1 : 0);
  field(s, "cluster_failover_promotions", cluster.promotions());
  std::string error = link.last_error;  // one line
  for (char& c : error)
    if (c == '\r' || c == '\n') c = ' ';
  field(s, "cluster_etcd_last_error", error);
  // Slot migration (docs/cluster.md).
  srv.migrations().info(s);
}

void section_keyspace(Server& srv, int64_t, std::string* s) {
  const size_t keys = srv.keyspace().size();
  if (keys == 0) return;
  s->append("db0:keys=" + std::to_string(keys) +
            ",expires=" + std::to_string(srv.keyspace().volatile_size()) + ",avg_ttl=0\r\n");
}

void section_fastpath(Server& srv, int64_t now_ms, std::string* s) {
  field(s, "fastpath_segments", rdma::SegmentTable::live_segments());
  field(s, "fastpath_segment_bytes", rdma::SegmentTable::live_bytes());
  field(s, "leased_keys", srv.keyspace().lease_count(now_ms));
  field(s, "kv_put_bytes", srv.stats().kv_put_bytes.load());
  field(s, "kv_get_bytes", srv.stats().kv_get_bytes.load());
  // The transfer pool (server/transfer_pool.h): copies run off the I/O threads.
  const TransferPool* pool = srv.transfers();
  field(s, "transfer_threads", pool != nullptr ? pool->threads() : 0);
  field(s, "transfers_offloaded", pool != nullptr ? pool->offloaded() : 0);
  field(s, "transfer_offloaded_bytes", pool != nullptr ? pool->offloaded_bytes() : 0);
  field(s, "transfers_in_flight", pool != nullptr ? pool->in_flight() : 0);
}

// The tiers (docs/ssd-tier.md): where keys and bytes live, what moved between the tiers.
void section_tiering(Server& srv, int64_t, std::string* s) {
  tiering::SsdTier* ssd = srv.ssd();
  const bool enabled = srv.config().num(Key::kSsdEnabled) != 0;
  const uint64_t keys = srv.keyspace().size();
  const uint64_t cold = ssd ? ssd->cold_keys() : 0;
  field(s, "memory_keys", keys - std::min(keys, cold));
  field(s, "memory_bytes", tiering::MemoryTier::region().stats().allocated());
  field(s, "ssd_enabled", ssd ? 1 : 0);
  field(s, "ssd_status", ssd ? (ssd->healthy() ? "ok" : "error") : (enabled ? "error" : "off"));
  if (!enabled) return;
  field(s, "ssd_last_error", ssd ? ssd->last_error() : srv.ssd_error());
  field(s, "ssd_path", srv.config().str(Key::kSsdPath));
  if (ssd == nullptr) return;
  field(s, "ssd_read_only", ssd->store().halted() ? 1 : 0);
  tiering::SsdTierStats& st = ssd->stats();
  tiering::SsdStore& store = ssd->store();
  field(s, "ssd_capacity", store.options().capacity);
  field(s, "ssd_keys", store.live_records());
  field(s, "ssd_bytes", store.live_bytes());
  field(s, "ssd_only_keys", cold);
  field(s, "ssd_disk_bytes", store.disk_bytes());
  field(s, "ssd_memory", ssd->heap_bytes());
  field(s, "pending_demotion_bytes", ssd->pending_bytes());
  field(s, "demotions", st.demotions.load());
  field(s, "demoted_bytes", st.demoted_bytes.load());
  field(s, "ssd_copy_drops", st.free_drops.load());
  field(s, "unwritten_evictions", st.unwritten_evictions.load());
  field(s, "ssd_admission", srv.config().choice(Key::kSsdAdmission));
  field(s, "ssd_admission_state", ssd->admission_state(tiering::now_ms()));
  field(s, "ssd_admitted", st.admitted.load());
  field(s, "ssd_admitted_bytes", st.admitted_bytes.load());
  field(s, "ssd_rejected", st.rejected.load());
  field(s, "ssd_rejected_bytes", st.rejected_bytes.load());
  field(s, "ssd_write_rate", ssd->admission().measured_rate());
  field(s, "ssd_write_budget", ssd->admission().rate());
  field(s, "ssd_write_waits", st.write_waits.load());
  field(s, "ssd_write_wait_ms", st.write_wait_us.load() / 1000);
  field(s, "promotions", st.promotions.load());
  field(s, "promote_after", srv.config().num(Key::kPromoteAfter));
  field(s, "ssd_reads", st.reads.load());
  field(s, "ssd_read_bytes", st.read_bytes.load());
  field(s, "ssd_read_latency_p50_us", st.read_latency.percentile(0.50));
  field(s, "ssd_read_latency_p99_us", st.read_latency.percentile(0.99));
  field(s, "ssd_read_errors", st.read_errors.load());
  field(s, "ssd_write_batches", st.batches.load());
  field(s, "ssd_write_errors", st.write_errors.load());
  field(s, "ssd_dropped_keys", st.dropped_keys.load());
  field(s, "ssd_recovered_keys", st.recovered_keys.load());
  tiering::SsdReclaimStats& rs = ssd->reclaimer().stats();
  field(s, "ssd_reclaim_target_bytes", ssd->reclaimer().target());
  field(s, "ssd_reclaim_runs", rs.runs.load());
  field(s, "ssd_reclaimed_bytes", rs.freed_bytes.load());
  field(s, "ssd_reclaim_rewrites", rs.rewrites.load());
  field(s, "ssd_reclaim_rewritten_bytes", rs.rewritten_bytes.load());
  field(s, "ssd_reclaim_errors", rs.errors.load());
  field(s, "ssd_reclaim_last_ms", rs.last_ms.load());
}

struct SectionDef {
  const char* name;   // as INFO <section> asks for it
  const char* title;  // as the "# Title" line shows it
  void (*gen)(Server&, int64_t, std::string*);
  bool in_default;    // part of INFO / INFO default (commandstats is not, as in Redis)
};

// In Redis's order (server.c genRedisInfoString; stratakv's own before Keyspace).
constexpr SectionDef kSections[] = {
    {"server", "Server", section_server, true},
    {"clients", "Clients", section_clients, true},
    {"memory", "Memory", section_memory, true},
    {"persistence", "Persistence", section_persistence, true},
    {"stats", "Stats", section_stats, true},
    {"replication", "Replication", section_replication, true},
    {"cpu", "CPU", section_cpu, true},
    {"commandstats", "Commandstats", section_commandstats, false},
    {"errorstats", "Errorstats", section_errorstats, true},
    {"cluster", "Cluster", section_cluster, true},
    {"fastpath", "Fastpath", section_fastpath, true},
    {"tiering", "Tiering", section_tiering, true},
    {"keyspace", "Keyspace", section_keyspace, true},
};

}  // namespace

std::string info_text(Server& server, std::span<const std::string_view> sections,
                      int64_t now_ms) {
  bool all = false, defaults = sections.empty();
  std::vector<bool> wanted(std::size(kSections), false);
  for (std::string_view name : sections) {
    if (iequals(name, "all") || iequals(name, "everything")) all = true;
    else if (iequals(name, "default")) defaults = true;
    for (size_t i = 0; i < std::size(kSections); ++i)
      if (iequals(name, kSections[i].name)) wanted[i] = true;
  }
  std::string out;
  bool first = true;
  for (size_t i = 0; i < std::size(kSections); ++i) {
    if (!all && !wanted[i] && !(defaults && kSections[i].in_default)) continue;
    if (!first) out += "\r\n";
    first = false;
    out += "# " + std::string(kSections[i].title) + "\r\n";
    kSections[i].gen(server, now_ms, &out);
  }
  return out;
}

}  // namespace server
