// server/config.cc - the table of config keys (names, types, defaults, limits, the Redis
// names they answer to) and CONFIG SET/GET over it (config.h). A config file is read by
// config_file.cc.
#include "server/config.h"

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstdlib>
#include <cstdio>
#include <thread>
#include <unordered_map>

#include "server/ascii.h"
#include "server/notify_flags.h"
#include "server/os_tuning.h"
#include "tiering/eviction_policy.h"
#include "tiering/glob.h"

namespace server {
namespace {

// kNotifyFlags: notify-keyspace-events' letters, kept as their bits (keyspace_events.h).
// kOutputLimits: client-output-buffer-limit's groups (output_limit.h), kept as numbers per class
// and as the text CONFIG GET prints.
enum class Type { kInt, kSize, kBool, kString, kEnum, kFraction, kNotifyFlags, kOutputLimits };

struct Spec {
  Key key;
  const char* name;
  Type type;
  const char* def;
  bool runtime;  // settable by CONFIG SET
  int64_t min = 0, max = INT64_MAX;
  std::vector<const char*> choices = {};
};

// maxmemory-policy's names, from the one table of them (tiering::eviction_policy_names).
std::vector<const char*> eviction_policy_choices() {
  std::vector<const char*> out;
  for (const auto& n : tiering::eviction_policy_names()) out.push_back(n.name.data());
  return out;
}

const std::vector<Spec>& specs() {
  static const std::vector<Spec> table = {
      {Key::kBind, "bind", Type::kString, "127.0.0.1", false},
      {Key::kPort, "port", Type::kInt, "6379", false, 0, 65535},
      {Key::kUnixSocket, "unixsocket", Type::kString, "", false},
      {Key::kUnixSocketPerm, "unixsocketperm", Type::kInt, "0", false, 0, 0777},
      {Key::kThreads, "threads", Type::kInt, "0", false, 0, 1024},
      {Key::kMaxClients, "maxclients", Type::kInt, "10000", true, 1, 1000000},
      {Key::kTimeout, "timeout", Type::kInt, "0", true, 0, INT32_MAX},
      {Key::kTcpKeepalive, "tcp-keepalive", Type::kInt, "300", true, 0, INT32_MAX},
      {Key::kTcpBacklog, "tcp-backlog", Type::kInt, "511", false, 0, INT32_MAX},
      {Key::kRequirePass, "requirepass", Type::kString, "", true},
      // ACL (docs/acl.md): the file ACL SAVE writes and ACL LOAD reads, loaded at start when
      // set ("" = none, as Redis); and how many entries ACL LOG keeps.
      {Key::kAclFile, "aclfile", Type::kString, "", false},
      {Key::kAclLogMaxLen, "acllog-max-len", Type::kInt, "128", true, 0, LONG_MAX},
      {Key::kProtectedMode, "protected-mode", Type::kBool, "yes", true},
      // TLS on a port of its own beside `port` (docs/tls.md), Redis's names and defaults.
      // tls-port 0 = no TLS. The files and settings may change at run time: CONFIG SET builds
      // a new context (connections made before keep theirs), or refuses and keeps the old.
      {Key::kTlsPort, "tls-port", Type::kInt, "0", false, 0, 65535},
      {Key::kTlsCertFile, "tls-cert-file", Type::kString, "", true},
      {Key::kTlsKeyFile, "tls-key-file", Type::kString, "", true},
      {Key::kTlsKeyFilePass, "tls-key-file-pass", Type::kString, "", true},
      {Key::kTlsCaCertFile, "tls-ca-cert-file", Type::kString, "", true},
      {Key::kTlsCaCertDir, "tls-ca-cert-dir", Type::kString, "", true},
      // Whether a client must show a certificate the CA signed: yes (required), optional
      // (checked when shown), no (neither asked nor checked). Read at each accept.
      {Key::kTlsAuthClients, "tls-auth-clients", Type::kEnum, "yes", true, 0, 0,
       {"no", "yes", "optional"}},
      {Key::kTlsProtocols, "tls-protocols", Type::kString, "", true},  // "" = TLSv1.2 TLSv1.3
      {Key::kTlsCiphers, "tls-ciphers", Type::kString, "", true},      // "" = OpenSSL's
      {Key::kTlsCiphersuites, "tls-ciphersuites", Type::kString, "", true},
      {Key::kTlsPreferServerCiphers, "tls-prefer-server-ciphers", Type::kBool, "no", true},
      {Key::kTlsSessionCaching, "tls-session-caching", Type::kBool, "yes", true},
      {Key::kTlsSessionCacheSize, "tls-session-cache-size", Type::kInt, "20480", true, 0,
       INT32_MAX},
      {Key::kTlsSessionCacheTimeout, "tls-session-cache-timeout", Type::kInt, "300", true, 0,
       INT32_MAX},
      // Node-to-node TLS (docs/tls.md, "Replication over TLS"): a replica's link to its primary
      // (tls-replication) and a slot migration's stream (tls-cluster) go to the peer's tls-port,
      // verify its certificate against the CA and show tls-client-cert-file (else
      // tls-cert-file). Read at each connection.
      {Key::kTlsReplication, "tls-replication", Type::kBool, "no", true},
      {Key::kTlsCluster, "tls-cluster", Type::kBool, "no", true},
      {Key::kTlsClientCertFile, "tls-client-cert-file", Type::kString, "", true},
      {Key::kTlsClientKeyFile, "tls-client-key-file", Type::kString, "", true},
      {Key::kTlsClientKeyFilePass, "tls-client-key-file-pass", Type::kString, "", true},
      {Key::kProtoMaxBulkLen, "proto-max-bulk-len", Type::kSize, "512mb", true, 1024 * 1024},
      {Key::kClientQueryBufferLimit, "client-query-buffer-limit", Type::kSize, "1gb", true,
       1024 * 1024},
      // Output buffer limits per client class (Redis's syntax and default; output_limit.h).
      {Key::kClientOutputBufferLimit, "client-output-buffer-limit", Type::kOutputLimits,
       kDefaultOutputLimits.data(), true},
      // Keyspace notifications: Redis's class letters, plus T (docs/pubsub.md). "" = off.
      {Key::kNotifyKeyspaceEvents, "notify-keyspace-events", Type::kNotifyFlags, "", true},
      {Key::kMaxMemory, "maxmemory", Type::kSize, "0", true},
      {Key::kMaxMemoryPolicy, "maxmemory-policy", Type::kEnum, "allkeys-lru", true, 0, 0,
       eviction_policy_choices()},
      // The memory region every value lives in (tiering/memory_tier.h): reserved at start-up,
      // backed as it fills. 0 (the default): kAutoCapacityShare of the machine's memory
      // (os_tuning.h), resolved when set; else at least 2 MiB (its rounding unit), at most
      // 16 TiB.
      {Key::kMemoryCapacity, "memory.capacity", Type::kSize, "0", false, 2 * 1024 * 1024,
       int64_t{1} << 44},
      {Key::kMemoryHugepages, "memory.hugepages", Type::kBool, "no", false},
      // Bytes of the region touched at start-up so the first values take no page faults; at
      // most maxmemory (or the capacity). Off by default: a region sized to the machine would
      // otherwise fault in most of its RAM for every server started.
      {Key::kMemoryPrefault, "memory.prefault", Type::kSize, "0", false},
      // Background eviction starts above the high and stops at the low watermark, as shares
      // of maxmemory (Mooncake Store's eviction_high_watermark_ratio; docs/eviction.md).
      {Key::kEvictionHighWatermark, "eviction.high_watermark", Type::kFraction, "0.95", true},
      {Key::kEvictionLowWatermark, "eviction.low_watermark", Type::kFraction, "0.90", true},
      // Redis's LFU tuning (redis.conf: lfu-log-factor, lfu-decay-time in minutes).
      {Key::kLfuLogFactor, "lfu-log-factor", Type::kInt, "10", true, 0, INT32_MAX},
      {Key::kLfuDecayTime, "lfu-decay-time", Type::kInt, "1", true, 0, INT32_MAX},
      // The longest a lease (KV.PREFIX ... PIN) keeps a key from eviction, in ms: Mooncake
      // Store's default_kv_lease_ttl. Bounded so no client can pin memory for ever.
      {Key::kLeaseTtl, "lease.ttl", Type::kInt, "10000", true, 1, 86'400'000},
      // The SSD tier (docs/ssd-tier.md): RocksDB under tiering.ssd.path. Off unless enabled
      // (conf/stratakv.toml enables it); sizes in bytes.
      {Key::kSsdEnabled, "tiering.ssd.enabled", Type::kBool, "no", false},
      {Key::kSsdPath, "tiering.ssd.path", Type::kString, "./data/ssd", false},
      {Key::kSsdCapacity, "tiering.ssd.capacity", Type::kSize, "0", false},
      {Key::kSsdRecover, "tiering.ssd.recover", Type::kBool, "yes", false},
      // A graceful stop writes the values held only in memory to SSD (a warm restart), for at
      // most flush_on_shutdown_timeout seconds (0: none written); docs/ssd-tier.md, "Restart".
      {Key::kSsdFlushOnShutdown, "tiering.ssd.flush_on_shutdown", Type::kBool, "yes", true},
      {Key::kSsdFlushOnShutdownTimeout, "tiering.ssd.flush_on_shutdown_timeout", Type::kInt,
       "60", true, 0, 86'400},
      {Key::kSsdSync, "tiering.ssd.sync", Type::kBool, "no", false},
      {Key::kSsdCompression, "tiering.ssd.compression", Type::kEnum, "none", false, 0, 0,
       {"none", "snappy", "lz4", "zstd"}},
      {Key::kSsdMinBlobSize, "tiering.ssd.min_blob_size", Type::kSize, "4096", false},
      {Key::kSsdIoThreads, "tiering.ssd.io_threads", Type::kInt, "4", false, 1, 256},
      {Key::kSsdDirectReads, "tiering.ssd.direct_reads", Type::kBool, "no", false},
      {Key::kSsdWriteBufferSize, "tiering.ssd.write_buffer_size", Type::kSize, "64mb", false,
       1 << 20, int64_t{1} << 34},
      {Key::kSsdBlobGc, "tiering.ssd.blob_garbage_collection", Type::kBool, "no", false},
      {Key::kSsdWalValues, "tiering.ssd.wal_values", Type::kBool, "yes", false},
      // Disk space of removed and replaced records comes back while running once the disk
      // holds more than reclaim_space_amp % of the live bytes (docs/ssd-tier.md, "Disk space").
      {Key::kSsdReclaim, "tiering.ssd.reclaim", Type::kBool, "yes", true},
      {Key::kSsdReclaimSpaceAmp, "tiering.ssd.reclaim_space_amp", Type::kInt, "150", true, 100,
       100'000},
      // How long a write waits (ms) for demotions to make room before it evicts what is not yet
      // on SSD: the back-pressure of a disk slower than the writes.
      {Key::kSsdMaxWriteWait, "tiering.ssd.max_write_wait", Type::kInt, "5000", true, 0,
       3'600'000},
      // Which victims go to SSD (tiering/admission.h): `reuse` admits by a write budget from
      // the disk's measured speed and by reuse, and evicts the rest, so writes never wait for
      // the disk; `wait` writes every victim and writes wait (max_write_wait) while it is
      // behind. max_write_rate caps the budget (bytes/s; 0 = the disk's measured speed).
      {Key::kSsdAdmission, "tiering.ssd.admission", Type::kEnum, "reuse", true, 0, 0,
       {"reuse", "wait"}},
      {Key::kSsdMaxWriteRate, "tiering.ssd.max_write_rate", Type::kSize, "0", true},
      {Key::kPromoteAfter, "tiering.promote_after", Type::kInt, "1", true, 1, 1'000'000},
      // The verbs transport (rdma/verbs_transport.h): offered when a device is found at start.
      {Key::kRdmaEnabled, "rdma.enabled", Type::kBool, "yes", false},
      {Key::kRdmaDevice, "rdma.device", Type::kString, "", false},  // "" = the first device
      {Key::kRdmaGidIndex, "rdma.gid_index", Type::kInt, "0", false, 0, 255},
      {Key::kRdmaTimeout, "rdma.timeout", Type::kInt, "10000", true, 1, 3'600'000},  // ms
      // The transfer pool (server/transfer_pool.h, docs/fast-path.md): threads that run the
      // fast path's large copies off the I/O threads (0: none, every copy inline), and the
      // bytes of a command's copies from which they go there (0: never).
      {Key::kTransferThreads, "transfer.threads", Type::kInt, "2", false, 0, 64},
      {Key::kTransferOffloadThreshold, "transfer.offload_threshold", Type::kSize, "2mb", true},
      // How long a write that found no room waits (ms) while memory that comes back soon is
      // held (copies on the transfer pool, values queued for the disk), before it gets -OOM
      // (0: -OOM at once).
      {Key::kMaxRoomWait, "memory.max_room_wait", Type::kInt, "5000", true, 0, 3'600'000},
      {Key::kSlowlogLogSlowerThan, "slowlog-log-slower-than", Type::kInt, "10000", true,
       INT64_MIN},
      {Key::kSlowlogMaxLen, "slowlog-max-len", Type::kInt, "128", true, 0, LONG_MAX},
      // LATENCY's monitor (server/latency.h): spikes of at least this many ms are recorded
      // per event; 0 = off (nothing measured).
      {Key::kLatencyMonitorThreshold, "latency-monitor-threshold", Type::kInt, "0", true, 0,
       LLONG_MAX},
      // Milliseconds a script runs before other clients touching its keys get -BUSY and SCRIPT
      // KILL may stop it (docs/scripting.md). lua-time-limit is its old name (an alias).
      {Key::kBusyReplyThreshold, "busy-reply-threshold", Type::kInt, "5000", true, 0, LONG_MAX},
      {Key::kBusyReplyThreshold, "lua-time-limit", Type::kInt, "5000", true, 0, LONG_MAX},
      {Key::kHz, "hz", Type::kInt, "10", true, 1, 500},
      {Key::kDatabases, "databases", Type::kInt, "1", false, 1, 1},
      {Key::kLogLevel, "loglevel", Type::kEnum, "notice", true, 0, 0,
       {"debug", "verbose", "notice", "warning"}},
      {Key::kLogFile, "logfile", Type::kString, "", false},
      {Key::kPidFile, "pidfile", Type::kString, "", false},
      // stratakv keeps no RDB/AOF files: these read back what redis-benchmark and tools ask.
      {Key::kSave, "save", Type::kString, "", true},
      {Key::kAppendOnly, "appendonly", Type::kBool, "no", false},
      // The node's working directory: cluster-config-file and the saved topology live there.
      {Key::kDir, "dir", Type::kString, ".", false},
      // The cluster (docs/cluster.md). Redis's names where Redis has the setting. The node's id
      // is made once and kept in cluster-config-file (relative to dir), as Redis's nodes.conf.
      {Key::kClusterEnabled, "cluster-enabled", Type::kBool, "no", false},
      {Key::kClusterConfigFile, "cluster-config-file", Type::kString, "nodes.conf", false},
      {Key::kClusterAnnounceIp, "cluster-announce-ip", Type::kString, "", false},  // "": bind's
      {Key::kClusterAnnouncePort, "cluster-announce-port", Type::kInt, "0", false, 0, 65535},
      {Key::kClusterRequireFullCoverage, "cluster-require-full-coverage", Type::kBool, "yes",
       false},
      // Static mode (no etcd): the topology record from a JSON file, the same format as etcd's.
      {Key::kClusterTopologyFile, "cluster.topology-file", Type::kString, "", false},
      // The last topology applied, kept so a restart while etcd is away still routes.
      {Key::kClusterSavedTopology, "cluster.saved-topology", Type::kString, "topology.json",
       false},
      // The machine's identity in the topology ("": /etc/machine-id): same value, same host,
      // so an SDK may use shared memory.
      {Key::kClusterHostId, "cluster.host-id", Type::kString, "", false},
      // etcd, reached over its v3 JSON gateway: endpoints comma-separated ("" = static mode),
      // one key prefix per cluster, credentials and TLS files, the node's lease TTL (s).
      {Key::kClusterEtcdEndpoints, "cluster.etcd.endpoints", Type::kString, "", false},
      {Key::kClusterEtcdPrefix, "cluster.etcd.prefix", Type::kString, "/stratakv/default",
       false},
      {Key::kClusterEtcdUser, "cluster.etcd.user", Type::kString, "", false},
      {Key::kClusterEtcdPassword, "cluster.etcd.password", Type::kString, "", false},
      {Key::kClusterEtcdCaFile, "cluster.etcd.ca-file", Type::kString, "", false},
      {Key::kClusterEtcdCertFile, "cluster.etcd.cert-file", Type::kString, "", false},
      {Key::kClusterEtcdKeyFile, "cluster.etcd.key-file", Type::kString, "", false},
      {Key::kClusterEtcdLeaseTtl, "cluster.etcd.lease-ttl", Type::kInt, "5", false, 1, 3600},
      // Replication (docs/replication.md), Redis's names. replicaof: "host port" to follow at
      // start ("" = a primary; at run time, the REPLICAOF command).
      {Key::kReplicaOf, "replicaof", Type::kString, "", false},
      {Key::kMasterAuth, "masterauth", Type::kString, "", true},
      {Key::kMasterUser, "masteruser", Type::kString, "", true},
      // Redis's 1mb default holds no 32 MiB value: 128mb keeps a few seconds of a KV-cache
      // write stream (several 32 MiB chunks), and it pins at most that much memory in
      // overwritten values (docs/replication.md, "The backlog").
      {Key::kReplBacklogSize, "repl-backlog-size", Type::kSize, "128mb", true, 16 * 1024},
      {Key::kReplTimeout, "repl-timeout", Type::kInt, "60", true, 1, INT32_MAX / 1000},
      {Key::kReplPingReplicaPeriod, "repl-ping-replica-period", Type::kInt, "10", true, 1,
       INT32_MAX / 1000},
      {Key::kReplicaReadOnly, "replica-read-only", Type::kBool, "yes", true},
      {Key::kReplicaIgnoreMaxmemory, "replica-ignore-maxmemory", Type::kBool, "yes", true},
  };
  return table;
}

// Names match case-insensitively, and '-' matches '_' (tiering.ssd.flush-on-shutdown is
// tiering.ssd.flush_on_shutdown), so dotted names read the same in Redis's dashed style. The
// name as the index below keys it: ASCII lower case, '-' as '_'.
std::string folded_name(std::string_view name) {
  std::string out(name);
  for (char& c : out) c = c == '-' ? '_' : static_cast<char>(fold(static_cast<unsigned char>(c)));
  return out;
}

// One hash probe instead of a pass over every key (CONFIG SET/GET; the config fuzz target).
const Spec* find_spec(std::string_view name) {
  static const auto* const index = [] {
    auto* m = new std::unordered_map<std::string, const Spec*>;
    for (const auto& s : specs()) m->emplace(folded_name(s.name), &s);
    return m;
  }();
  const auto it = index->find(folded_name(name));
  return it == index->end() ? nullptr : it->second;
}

std::optional<int64_t> parse_int(std::string_view s) {
  int64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || s.empty()) return std::nullopt;
  return v;
}

// save: "" or pairs of "<seconds> <changes>" (seconds >= 1, changes >= 0), checked as Redis
// 7.0's setConfigSaveOption checks them: the text split at each single space, each word read
// by strtoll to its end (an empty word reads 0). The pairs as numbers with one space between
// them, as CONFIG GET prints them; nullopt when `text` breaks a rule. stratakv saves no RDB:
// the value is only kept and shown.
std::optional<std::string> normalized_save_params(std::string_view text) {
  std::vector<std::string> words;
  for (size_t at = 0; !text.empty() && at <= text.size();) {
    const size_t space = std::min(text.find(' ', at), text.size());
    words.emplace_back(text.substr(at, space - at));
    at = space + 1;
  }
  if (words.size() % 2 != 0) return std::nullopt;
  std::string out;
  for (size_t w = 0; w < words.size(); ++w) {
    char* end = nullptr;
    const long long n = std::strtoll(words[w].c_str(), &end, 10);
    if (*end != '\0' || n < (w % 2 == 0 ? 1 : 0)) return std::nullopt;
    if (w > 0) out += ' ';
    out += std::to_string(n);
  }
  return out;
}

std::string format(const Spec& spec, int64_t num, const std::string& str) {
  switch (spec.type) {
    case Type::kInt:
    case Type::kSize:
      return std::to_string(num);
    case Type::kBool:
      return num ? "yes" : "no";
    case Type::kEnum:
      return spec.choices[num];
    case Type::kFraction: {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%g", static_cast<double>(num) / Config::kFractionScale);
      return buf;
    }
    case Type::kNotifyFlags:
      return format_notify_flags(static_cast<uint32_t>(num));
    case Type::kString:
    case Type::kOutputLimits:
      return str;
  }
  return str;
}

}  // namespace

Config::Config() {
  for (const auto& s : specs()) {
    auto err = set(s.name, s.def, false);
    (void)err;  // defaults are valid by construction
  }
}

std::optional<int64_t> Config::parse_size(std::string_view s) {
  struct Unit {
    const char* suffix;
    int64_t mul;
  };
  static const Unit units[] = {{"kb", 1024},       {"mb", 1024 * 1024}, {"gb", 1ll << 30},
                               {"k", 1000},        {"m", 1000 * 1000},  {"g", 1000000000ll},
                               {"b", 1}};
  int64_t mul = 1;
  for (const auto& u : units) {
    std::string_view suf(u.suffix);
    if (s.size() > suf.size() && iequals(s.substr(s.size() - suf.size()), suf)) {
      s.remove_suffix(suf.size());
      mul = u.mul;
      break;
    }
  }
  auto v = parse_int(s);
  if (!v || *v < 0 || *v > INT64_MAX / mul) return std::nullopt;
  return *v * mul;
}

std::string Config::human_bytes(uint64_t n) {
  char buf[64];
  const double d = static_cast<double>(n);
  if (n < 1024) std::snprintf(buf, sizeof buf, "%lluB", static_cast<unsigned long long>(n));
  else if (n < (1ull << 20)) std::snprintf(buf, sizeof buf, "%.2fK", d / 1024);
  else if (n < (1ull << 30)) std::snprintf(buf, sizeof buf, "%.2fM", d / (1 << 20));
  else if (n < (1ull << 40)) std::snprintf(buf, sizeof buf, "%.2fG", d / (1ull << 30));
  else if (n < (1ull << 50)) std::snprintf(buf, sizeof buf, "%.2fT", d / (1ull << 40));
  else std::snprintf(buf, sizeof buf, "%.2fP", d / (1ull << 50));
  return buf;
}

bool Config::known(std::string_view name) { return find_spec(name) != nullptr; }

std::optional<std::string> Config::set(std::string_view name, std::string_view value,
                                       bool runtime) {
  const Spec* spec = find_spec(name);
  if (spec == nullptr) return "Unknown option '" + std::string(name) + "'";
  if (runtime && !spec->runtime)
    return "can't set immutable config '" + std::string(spec->name) + "'";
  const int i = static_cast<int>(spec->key);
  std::optional<int64_t> v;
  switch (spec->type) {
    case Type::kInt:
      v = parse_int(value);
      if (!v) return "argument couldn't be parsed into an integer";
      break;
    case Type::kSize:
      v = parse_size(value);
      if (!v) return "argument must be a memory value";
      break;
    case Type::kBool:
      if (iequals(value, "yes")) v = 1;
      else if (iequals(value, "no")) v = 0;
      else return "argument must be 'yes' or 'no'";
      break;
    case Type::kEnum:
      for (size_t c = 0; c < spec->choices.size(); ++c)
        if (iequals(value, spec->choices[c])) v = static_cast<int64_t>(c);
      if (!v) return "argument(s) must be one of the following: " + [&] {
          std::string all;
          for (auto c : spec->choices) all += std::string(all.empty() ? "" : ", ") + c;
          return all;
        }();
      break;
    case Type::kFraction: {
      char* end = nullptr;
      const std::string text(value);
      const double d = std::strtod(text.c_str(), &end);
      if (text.empty() || end != text.c_str() + text.size() || !(d > 0.0 && d <= 1.0))
        return "argument must be a number greater than 0 and at most 1";
      // At least one part per million: a tiny fraction must not read back as 0, which CONFIG
      // SET would refuse.
      v = std::max<int64_t>(1, static_cast<int64_t>(d * kFractionScale + 0.5));
      break;
    }
    case Type::kString: {
      std::optional<std::string> save;
      if (spec->key == Key::kSave && !(save = normalized_save_params(value))) return "Invalid save parameters";
      std::lock_guard lock(mu_);
      strs_[i] = save ? std::move(*save) : std::string(value);
      nums_[i].store(strs_[i].empty() ? 0 : 1, std::memory_order_relaxed);  // "is set"
      return std::nullopt;
    }
    case Type::kNotifyFlags: {
      const auto flags = parse_notify_flags(value);
      if (!flags) return std::string(kNotifyFlagsError);
      v = *flags;
      break;
    }
    case Type::kOutputLimits: {
      std::lock_guard lock(mu_);
      OutputLimits limits;
      for (size_t c = 0; c < limits.size(); ++c)
        limits[c] = {obuf_[c][0].load(), obuf_[c][1].load(), obuf_[c][2].load()};
      if (auto err = parse_output_limits(value, &limits)) return err;
      for (size_t c = 0; c < limits.size(); ++c) {
        obuf_[c][0].store(limits[c].hard, std::memory_order_relaxed);
        obuf_[c][1].store(limits[c].soft, std::memory_order_relaxed);
        obuf_[c][2].store(limits[c].soft_seconds, std::memory_order_relaxed);
      }
      strs_[i] = format_output_limits(limits);
      nums_[i].store(1, std::memory_order_relaxed);
      return std::nullopt;
    }
  }
  // memory.capacity 0 = a share of the machine's memory (os_tuning.h), from any source.
  const bool auto_capacity = spec->key == Key::kMemoryCapacity && *v == 0;
  if (auto_capacity) v = static_cast<int64_t>(auto_memory_capacity(kAutoCapacityShare));
  if (spec->type == Type::kInt || spec->type == Type::kSize) {
    if (*v < spec->min || *v > spec->max)
      return "argument must be between " + std::to_string(spec->min) + " and " +
             std::to_string(spec->max) + " inclusive";
  }
  if (spec->key == Key::kThreads && *v == 0) {  // 0 = one per core, from any source
    const unsigned cores = std::thread::hardware_concurrency();
    v = cores ? cores : 1;
  }
  nums_[i].store(*v, std::memory_order_relaxed);
  return std::nullopt;
}

std::string_view Config::choice(Key k) const {
  const Spec& spec = *std::find_if(specs().begin(), specs().end(),
                                   [k](const Spec& s) { return s.key == k; });
  if (spec.type != Type::kEnum) return {};
  return spec.choices[static_cast<size_t>(num(k))];
}

std::string Config::str(Key k) const {
  std::lock_guard lock(mu_);
  return strs_[static_cast<int>(k)];
}

std::vector<std::pair<std::string, std::string>> Config::get(std::string_view pattern) const {
  std::vector<std::pair<std::string, std::string>> out;
  auto show = [&](const Spec& s) {
    const int i = static_cast<int>(s.key);
    out.emplace_back(s.name, format(s, nums_[i].load(std::memory_order_relaxed), str(s.key)));
  };
  // A name without glob characters is looked up, as Redis 7's configGetCommand does, by the
  // same rule as CONFIG SET (case-insensitively, '-' and '_' alike): what can be set by a name
  // can be read by it.
  if (pattern.find_first_of("*?[\\") == std::string_view::npos) {
    if (const Spec* s = find_spec(pattern)) show(*s);
    return out;
  }
  for (const auto& s : specs())
    if (tiering::glob_match(pattern, s.name, true)) show(s);
  return out;
}

}  // namespace server
