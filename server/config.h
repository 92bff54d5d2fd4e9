// server/config.h - configuration: one table of keys with Redis's names, defaults and units.
//
// Sources, later ones winning: built-in defaults, the TOML file (`--config FILE`; nested tables
// flatten to dotted names, so `[memory] capacity = "1gb"` is `memory.capacity`), the command line
// (`--<key> <value>`), and CONFIG SET at run time for keys marked mutable. Sizes accept Redis's
// units (util.c memtoull): k=1000, kb=1024, m=1000^2, mb=1024^2, g=1000^3, gb=1024^3.
// Numeric values are atomics, so any thread may read them while CONFIG SET writes.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/output_limit.h"

namespace server {

/// memory.capacity 0 resolves to this share of the machine's memory (os_tuning.h
/// auto_memory_capacity; Dragonfly's maxmemory default is about 80% of it too). The rest is left
/// to the heap (keys, connections, the SSD tier's RocksDB) and the OS.
inline constexpr double kAutoCapacityShare = 0.8;

/// Every config key. The order matches the table in config.cc.
enum class Key {
  kBind,
  kPort,
  kUnixSocket,
  kUnixSocketPerm,
  kThreads,
  kMaxClients,
  kTimeout,
  kTcpKeepalive,
  kTcpBacklog,
  kRequirePass,
  kAclFile,
  kAclLogMaxLen,
  kProtectedMode,
  kTlsPort,
  kTlsCertFile,
  kTlsKeyFile,
  kTlsKeyFilePass,
  kTlsCaCertFile,
  kTlsCaCertDir,
  kTlsAuthClients,
  kTlsProtocols,
  kTlsCiphers,
  kTlsCiphersuites,
  kTlsPreferServerCiphers,
  kTlsSessionCaching,
  kTlsSessionCacheSize,
  kTlsSessionCacheTimeout,
  kTlsReplication,
  kTlsCluster,
  kTlsClientCertFile,
  kTlsClientKeyFile,
  kTlsClientKeyFilePass,
  kProtoMaxBulkLen,
  kClientQueryBufferLimit,
  kClientOutputBufferLimit,
  kNotifyKeyspaceEvents,
  kMaxMemory,
  kMaxMemoryPolicy,
  kMemoryCapacity,
  kMemoryHugepages,
  kMemoryPrefault,
  kEvictionHighWatermark,
  kEvictionLowWatermark,
  kLfuLogFactor,
  kLfuDecayTime,
  kLeaseTtl,
  kSsdEnabled,
  kSsdPath,
  kSsdCapacity,
  kSsdRecover,
  kSsdFlushOnShutdown,
  kSsdFlushOnShutdownTimeout,
  kSsdSync,
  kSsdCompression,
  kSsdMinBlobSize,
  kSsdIoThreads,
  kSsdDirectReads,
  kSsdWriteBufferSize,
  kSsdBlobGc,
  kSsdWalValues,
  kSsdReclaim,
  kSsdReclaimSpaceAmp,
  kSsdMaxWriteWait,
  kSsdAdmission,
  kSsdMaxWriteRate,
  kPromoteAfter,
  kRdmaEnabled,
  kRdmaDevice,
  kRdmaGidIndex,
  kRdmaTimeout,
  kTransferThreads,
  kTransferOffloadThreshold,
  kMaxRoomWait,
  kSlowlogLogSlowerThan,
  kSlowlogMaxLen,
  kLatencyMonitorThreshold,
  kBusyReplyThreshold,
  kHz,
  kDatabases,
  kLogLevel,
  kLogFile,
  kPidFile,
  kSave,
  kAppendOnly,
  kDir,
  kClusterEnabled,
  kClusterConfigFile,
  kClusterAnnounceIp,
  kClusterAnnouncePort,
  kClusterRequireFullCoverage,
  kClusterTopologyFile,
  kClusterSavedTopology,
  kClusterHostId,
  kClusterEtcdEndpoints,
  kClusterEtcdPrefix,
  kClusterEtcdUser,
  kClusterEtcdPassword,
  kClusterEtcdCaFile,
  kClusterEtcdCertFile,
  kClusterEtcdKeyFile,
  kClusterEtcdLeaseTtl,
  kReplicaOf,
  kMasterAuth,
  kMasterUser,
  kReplBacklogSize,
  kReplTimeout,
  kReplPingReplicaPeriod,
  kReplicaReadOnly,
  kReplicaIgnoreMaxmemory,
  kCount,
};

/// The server's configuration. Thread-safe.
class Config {
 public:
  Config();

  /// Loads a TOML file. Returns an error text on failure (file unreadable, bad TOML, unknown
  /// key, bad value).
  std::optional<std::string> load_file(const std::string& path);
  /// Loads TOML text (what load_file reads); `name` names it in errors. Same errors.
  std::optional<std::string> load_text(std::string text, const std::string& name);

  /// Sets `name` (case-insensitive) to `value`. `runtime` = from CONFIG SET, which refuses
  /// immutable keys. Returns an error text (without "ERR") on failure.
  std::optional<std::string> set(std::string_view name, std::string_view value, bool runtime);

  /// Every (name, value) whose name matches the glob `pattern`, as CONFIG GET shows them.
  std::vector<std::pair<std::string, std::string>> get(std::string_view pattern) const;

  /// The value of a numeric, size, boolean (0/1) or enum (index) key; for a string key, 1 when
  /// it is non-empty (so `num(Key::kRequirePass)` says whether a password is set).
  int64_t num(Key k) const { return nums_[static_cast<int>(k)].load(std::memory_order_relaxed); }
  /// The value of a fraction key (eviction watermarks), in [0, 1].
  double fraction(Key k) const { return static_cast<double>(num(k)) / kFractionScale; }
  /// Fractions are kept as integers of this many parts per unit.
  static constexpr int64_t kFractionScale = 1'000'000;
  /// The value of a string key.
  std::string str(Key k) const;
  /// The name an enum key is set to ("allkeys-lru" for maxmemory-policy); empty for a key that
  /// is not an enum. Map it to a type by name, never by num()'s position in the list.
  std::string_view choice(Key k) const;
  /// client-output-buffer-limit's limits of one client class (server/output_limit.h).
  OutputLimit output_limit(ClientClass c) const {
    const auto& a = obuf_[static_cast<size_t>(c)];
    return {a[0].load(std::memory_order_relaxed), a[1].load(std::memory_order_relaxed),
            a[2].load(std::memory_order_relaxed)};
  }
  /// Whether `name` is a known key.
  static bool known(std::string_view name);

  /// Parses a size with Redis's units ("64mb", "4gb", "100"). Null on error.
  static std::optional<int64_t> parse_size(std::string_view s);
  /// Formats bytes the way INFO's *_human fields do: "1.50M", "976.56K", "100B".
  static std::string human_bytes(uint64_t n);

 private:
  std::atomic<int64_t> nums_[static_cast<int>(Key::kCount)];
  std::atomic<int64_t> obuf_[3][3] = {};  // client-output-buffer-limit: hard, soft, seconds
  mutable std::mutex mu_;
  std::string strs_[static_cast<int>(Key::kCount)];
};

}  // namespace server
