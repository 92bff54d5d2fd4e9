// cluster/etcd_client.h - a small client of etcd's v3 API through its JSON gateway (etcd 3.4
// serves it under /v3/: /v3/kv/range|put|deleterange|txn, /v3/lease/grant|keepalive|revoke,
// /v3/watch, /v3/auth/authenticate), with libcurl and nlohmann-json. What the topology agent and
// the admin tool need, no more: get, prefix get, put, compare-and-swap on mod_revision, delete,
// leases, and a watch.
//
// Wire facts (etcd's rpc.proto through grpc-gateway): keys and values are base64 in JSON; 64-bit
// integers come back as JSON strings; fields with a zero value are left out (a PUT event has no
// "type", an empty value no "value", a keepalive reply for a lost lease no "TTL"); an error is
// {"error","message","code"} with a gRPC status code, and on a stream {"error":{...}}.
//
// Endpoints are tried in turn on connection errors (and on gRPC UNAVAILABLE replies such as
// "no leader"); the one that answered is tried first next time. With a user name the client
// authenticates at /v3/auth/authenticate, sends the token in the Authorization header, and
// authenticates again once when etcd calls the token invalid.
//
// Thread-safety: every method may be called from any number of threads at once, including
// while one or more watch() calls run on other threads. Each call uses its thread's own CURL
// easy handle (kept per thread for connection reuse); the preferred endpoint and the auth token
// are shared under a mutex.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <stop_token>
#include <string>
#include <string_view>
#include <vector>

namespace cluster {

/// How to reach etcd.
struct EtcdOptions {
  /// Client URLs tried in turn: "http://127.0.0.1:2379" or "https://...". At least one.
  std::vector<std::string> endpoints;
  /// etcd user and password; user "" = no authentication.
  std::string user, password;
  /// TLS: CA bundle to verify the server (curl's CAINFO; "" = the system's), client
  /// certificate and key (SSLCERT / SSLKEY, PEM; "" = none).
  std::string ca_file, cert_file, key_file;
  /// Limit for one request to one endpoint, connect included. A call that tries every endpoint
  /// may take up to endpoints.size() times this. Watches use it for connecting only.
  std::chrono::milliseconds timeout{2000};
};

/// The endpoints of a comma-separated list ("10.0.0.1:2379, https://etcd:2379"): blanks
/// trimmed, empty items skipped, "http://" added where no scheme is given. The form of the
/// server's `cluster.etcd.endpoints` and of stratakv-admin's --etcd.
std::vector<std::string> parse_endpoints(std::string_view list);

/// No endpoint answered (connection refused, timeout, TLS failure, gRPC UNAVAILABLE), or a
/// watch stream broke. The message names each endpoint's failure. Retry later.
class EtcdUnavailable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// etcd answered with an error ("etcdserver: requested lease not found", permission denied,
/// ...). code() is the gRPC status code etcd gave (0 when the reply was not etcd's).
class EtcdError : public std::runtime_error {
 public:
  EtcdError(const std::string& message, int code) : std::runtime_error(message), code_(code) {}
  int code() const { return code_; }

 private:
  int code_;
};

/// A watch's start revision has been compacted away: read the key again and watch from the
/// revision of that read + 1.
class EtcdCompacted : public EtcdError {
 public:
  EtcdCompacted(const std::string& message, int64_t compact_revision)
      : EtcdError(message, 11), compact_revision_(compact_revision) {}
  /// The oldest revision etcd still has.
  int64_t compact_revision() const { return compact_revision_; }

 private:
  int64_t compact_revision_;
};

/// One key as etcd holds it (mvccpb.KeyValue). Revisions are etcd's store revisions.
struct KeyValue {
  std::string key;
  std::string value;
  int64_t create_revision = 0;  ///< revision of the key's creation
  int64_t mod_revision = 0;     ///< revision of its last change: what compare_and_swap compares
  int64_t version = 0;          ///< number of changes since creation (1 after the first put)
  int64_t lease = 0;            ///< lease it is attached to, 0 = none
};

/// One change seen by a watch. For kDelete, kv holds the key and its mod_revision (the delete's
/// revision) only.
struct WatchEvent {
  enum class Type { kPut, kDelete };
  Type type = Type::kPut;
  KeyValue kv;
};

/// A connection to one etcd cluster (several endpoints). Cheap to construct; no I/O until the
/// first call. See the file comment for thread-safety and failover.
class EtcdClient {
 public:
  /// Throws std::invalid_argument when options.endpoints is empty.
  explicit EtcdClient(EtcdOptions options);
  ~EtcdClient();
  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  /// The value of `key`, nullopt when absent. `revision`, when given, receives the store's
  /// revision at the time of the read (watch from it + 1 to miss nothing).
  std::optional<KeyValue> get(std::string_view key, int64_t* revision = nullptr);
  /// Every key starting with `prefix` (all keys for ""), sorted by key.
  std::vector<KeyValue> get_prefix(std::string_view prefix, int64_t* revision = nullptr);
  /// Sets `key` (attached to lease `lease_id` unless 0). Returns the new store revision.
  /// EtcdError code 5 when the lease does not exist.
  int64_t put(std::string_view key, std::string_view value, int64_t lease_id = 0);
  /// Sets `key` only if its mod_revision is `expected_mod_revision` (0: only if it does not
  /// exist): one /v3/kv/txn comparing MOD. True when written, false when the comparison failed.
  /// Never retried on another endpoint once sent: EtcdUnavailable then means "outcome unknown",
  /// read the key again.
  bool compare_and_swap(std::string_view key, int64_t expected_mod_revision, std::string_view value,
                        int64_t lease_id = 0);
  /// compare_and_swap(key, 0, value, lease_id): creates `key` unless it exists.
  bool create_if_absent(std::string_view key, std::string_view value, int64_t lease_id = 0) {
    return compare_and_swap(key, 0, value, lease_id);
  }
  /// Deletes `key`. True when it existed.
  bool erase(std::string_view key);

  /// A new lease of `ttl_seconds` (etcd may raise it to its minimum). Returns its id.
  int64_t lease_grant(int64_t ttl_seconds);
  /// Renews lease `lease_id` once. Returns its TTL in seconds again, or 0 when the lease is gone
  /// (expired or revoked: the reply carries no TTL).
  int64_t lease_keepalive(int64_t lease_id);
  /// Revokes lease `lease_id`, deleting every key attached to it. False when it did not exist.
  bool lease_revoke(int64_t lease_id);

  /// Watches `key` from `start_revision` (0 = from now), calling `on_event` for each change in
  /// revision order on the calling thread, until `stop` is requested (returns at once, within
  /// milliseconds) or the stream ends. A stream that breaks or ends throws EtcdUnavailable:
  /// resume with start_revision = the last event's mod_revision + 1. A start revision older
  /// than etcd's compaction throws EtcdCompacted; a cancel by etcd throws EtcdError. Exceptions
  /// from `on_event` propagate. Idle streams are probed with TCP keepalives (a peer gone without
  /// a reset is noticed within about 30 s).
  void watch(std::string_view key, int64_t start_revision,
             const std::function<void(const WatchEvent&)>& on_event, std::stop_token stop);
  /// As watch(), for every key starting with `prefix`.
  void watch_prefix(std::string_view prefix, int64_t start_revision,
                    const std::function<void(const WatchEvent&)>& on_event, std::stop_token stop);

  /// Posts `json_body` to `path` (e.g. "/v3/auth/enable", "/v3/kv/compaction") and returns the
  /// reply's JSON text: for the v3 calls the typed methods above do not cover. Same failover,
  /// auth and errors as they have; retried on another endpoint only on connection errors.
  std::string post(std::string_view path, std::string_view json_body);

  /// The endpoint tried first (the last one that answered).
  std::string endpoint() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  void watch_range(std::string_view key, std::string_view range_end, int64_t start_revision,
                   const std::function<void(const WatchEvent&)>& on_event, std::stop_token stop);
};

}  // namespace cluster
