// stratakv/client.h - the C++ client of stratakv (libstratakv).
//
//   stratakv::Client kv("unix:///run/stratakv.sock");          // shm fast path
//   stratakv::Buffer buf = kv.alloc_buffer(32 << 20);           // registered memory
//   fill(buf.data(), buf.size());
//   kv.put("model@0@1@abcd@bf16", buf.span());                  // one copy, by the server
//   kv.get_into("model@0@1@abcd@bf16", buf.span());             // one copy, by the server
//
// Transport: the verbs fast path (KV.PUT/KV.GET by one-sided RDMA into memory registered
// with the NIC, docs/fast-path.md) when this host has an RDMA device and the server offers
// KV.CONNECT VERBS; else, on a `unix://` URL, the shm fast path (a memfd the server maps) when
// the server offers it; else plain RESP (SET/GET). All give the same results; `transport()`
// says which one is in use. On a `rediss://` (TLS) URL it is always RESP, inside TLS.
//
// Cluster: on a `redis+cluster://host:port[,host:port...]` URL the Client learns the slot map
// from a seed, keeps one connection pool per node (each with its own transport: shm for a node
// on this host, found by its Unix socket; verbs; else RESP), routes every key by its slot,
// splits batches by node and runs the parts in parallel, and follows -MOVED and -ASK. Reads may
// go to replicas (Options::read_from, or `?read_from=replicas|nearest` in the URL), falling
// back to the primary on a replica's miss. See docs/sdk.md.
//
// Thread-safety: a Client may be used from any number of threads at once. Each call borrows
// one connection from a pool (at most Options::max_connections, opened on demand; a call
// waits when all are busy) and returns it when done. A connection that failed (I/O error,
// timeout) is closed and replaced by a new one on a later call.
//
// Errors: a call that fails as a whole throws stratakv::Error (error.h), whose what() is the
// server's exact error text when the server replied one. In batches each key has its own
// Result; one failing key does not fail the others.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "stratakv/buffer.h"
#include "stratakv/error.h"

namespace rdma {
class VerbsApi;  // rdma/verbs_api.h: the libibverbs calls (a fake NIC in tests)
}

namespace stratakv {

using ConstBytes = std::span<const std::byte>;
using MutableBytes = std::span<std::byte>;

/// The bytes of a string (no copy).
inline ConstBytes as_bytes(std::string_view s) noexcept {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

/// Which transport moves payloads.
enum class TransportKind {
  kAuto,   ///< verbs when both sides have an RDMA device (Options::rdma), else shm on a
           ///< unix:// URL when the server offers KV.REGISTER SHM, else RESP
  kShm,    ///< shm, or the constructor throws (unix:// URLs only)
  kResp,   ///< plain RESP SET/GET on any URL
  kVerbs,  ///< verbs (RDMA), or the constructor throws
};

/// Which node of a shard serves a cluster client's reads (get, get_with, get_into, batch_get_into,
/// exists, batch_exists, prefix_match without a pin; striped values' parts too). Writes,
/// removes, pinning prefix_match and unpin always go to the primary. A replica may lag its primary (asynchronous replication): a read from a
/// replica that misses is asked again of the primary, but a replica may still return an older
/// value of a key overwritten just before (WAIT on the primary, or kPrimary, when you need your
/// own write back). docs/sdk.md "Reading from replicas".
enum class ReadFrom {
  kPrimary,   ///< every read to the slot's primary (the default)
  kReplicas,  ///< a replica of the slot's shard, in turn over its replicas (the primary when
              ///< the shard has none)
  kNearest,   ///< the node of the shard (primary or replica) with the lowest measured round
              ///< trip (an average of PINGs and reads; docs/sdk.md)
};

struct Options {
  /// Most connections open at once (each call uses one; calls beyond this wait).
  size_t max_connections = 8;
  /// Connect timeout, milliseconds.
  int connect_timeout_ms = 5000;
  /// Timeout of each send/receive on a connection, milliseconds (0 = none).
  int io_timeout_ms = 60000;
  TransportKind transport = TransportKind::kAuto;
  /// shm: size of a connection's staging buffer at first (it grows on demand), bytes.
  size_t initial_staging_bytes = size_t{1} << 20;
  /// shm: the most a connection's staging buffer grows to, bytes. Plain-memory payloads
  /// larger than this go over RESP instead.
  size_t max_staging_bytes = size_t{256} << 20;
  /// Whether kAuto may choose the verbs transport: probes this host's RDMA device once.
  bool rdma = true;
  /// RDMA device to open (empty: the first one), its port and GID table index (RoCE v2 often
  /// needs an index other than 0).
  std::string rdma_device;
  uint8_t rdma_port = 1;
  int rdma_gid_index = 0;
  /// The libibverbs the verbs transport calls; null: the real one. Tests inject a fake NIC
  /// (tests/fakes/fake_verbs.h). It must outlive the Client.
  rdma::VerbsApi* verbs_api = nullptr;
  /// Password for AUTH (overrides one in the URL); `user` for AUTH user password.
  std::string user;
  std::string password;
  /// TLS, for a `rediss://` URL (ignored on others; docs/sdk.md "TLS"). A non-empty path or a
  /// set flag overrides the URL's `ssl_*` query parameter of the same meaning.
  /// PEM file of the CAs that sign the server's certificate (empty: the URL's, else the
  /// system's default CA paths).
  std::string ssl_ca_certs;
  /// PEM client certificate and its private key (empty keyfile: the key is in certfile), for
  /// a server with tls-auth-clients yes.
  std::string ssl_certfile;
  std::string ssl_keyfile;
  /// Verify the server's certificate against the CAs (redis-py's ssl_cert_reqs=required;
  /// unset: the URL's, else true). false accepts any certificate (encryption only).
  std::optional<bool> ssl_verify_peer;
  /// Check that the certificate names the URL's host (DNS name or IP address; unset: the
  /// URL's ssl_check_hostname, else false, as redis-py; needs ssl_verify_peer).
  std::optional<bool> ssl_check_hostname;
  /// Cluster: how many rounds one call makes at most (the first try and the retries after
  /// -MOVED, -ASK or a lost connection); a key still redirected after them keeps the -MOVED
  /// as its error, a node still unreachable throws Error(kConnection).
  int cluster_max_attempts = 5;
  /// Cluster: reach a node on this host over its Unix socket (so shm applies), found by
  /// `CONFIG GET unixsocket` and checked by `CLUSTER MYID` over that socket.
  bool cluster_unix_sockets = true;
  /// Cluster: where reads go (ReadFrom). kPrimary here lets a URL's `?read_from=` decide;
  /// another value overrides the URL's. Ignored on a one-server (redis://, unix://) client.
  ReadFrom read_from = ReadFrom::kPrimary;
  /// Striping: the TTL of a striped value put without one, milliseconds (a striped value
  /// always expires, so parts of a put that died, or of an evicted manifest, go too).
  uint64_t stripe_ttl_ms = 3600 * 1000;
};

struct PutOptions {
  uint64_t ttl_ms = 0;  ///< expire after this many milliseconds (0 = never)
  bool nx = false;      ///< store only when the key does not exist
  /// Cut each value in this many parts stored on different shards (parallel puts and gets of
  /// one large value; docs/sdk.md "Striping"); 0 or 1: whole. Values under 8 KiB, and parts
  /// under 4 KiB, are not cut. A striped value expires at ttl_ms, or Options::stripe_ttl_ms.
  uint32_t stripes = 0;
};

/// One key of a batch put: the value is the concatenation of `pieces` (scatter-gather).
struct PutRequest {
  std::string_view key;
  std::span<const ConstBytes> pieces;
};

/// One key of a batch get: the value fills the window formed by `pieces`, in order, from the
/// start.
struct GetRequest {
  std::string_view key;
  std::span<const MutableBytes> pieces;
};

/// The outcome of one key of a batch.
struct Result {
  enum class Status : uint8_t {
    kOk,     ///< stored / read (`length` bytes)
    kMiss,   ///< get: the key does not exist; put with NX: the key existed, nothing stored
    kError,  ///< this key failed; `error` is the server's text; nothing moved for it
  };
  Status status = Status::kOk;
  uint64_t length = 0;  ///< get: the value's length; put: the bytes stored
  std::string error;
  bool ok() const noexcept { return status == Status::kOk; }
};

/// Called by `get_with` once the value's length is known; returns where to write it
/// (exactly `length` bytes). It may throw; the call then throws the same exception. On a
/// cluster a call retried after a lost connection may call it again.
using Allocator = std::function<MutableBytes(size_t length)>;

namespace detail {
class ClusterCore;
}

class Client {
 public:
  /// Connects (one connection now, more on demand). `url`: `redis://[[user]:password@]host[:port]`
  /// (default port 6379), `rediss://...` (the same over TLS, with redis-py's `?ssl_ca_certs=`,
  /// `ssl_certfile=`, `ssl_keyfile=`, `ssl_cert_reqs=required|none`, `ssl_check_hostname=`;
  /// payloads over RESP), `unix://[[user]:password@]/path/to.sock` (also `?password=`), or
  /// `redis+cluster://[[user]:password@]host:port[,host:port...]` (seeds of a cluster: the map
  /// is read from the first that answers, then every primary is connected), or
  /// `rediss+cluster://...` (a cluster over TLS: seeds and nodes at their tls-ports, the query
  /// and Options' ssl_* as rediss://).
  /// Throws Error: kUsage for a bad URL, kConnection when the server (every seed) cannot be
  /// reached or its TLS handshake fails (OpenSSL's reason in what()), kServer when AUTH fails or `TransportKind::kShm` is asked and the server refuses it.
  explicit Client(std::string_view url, Options options = {});
  ~Client();
  /// Moving hands the connections over; a moved-from Client may only be destroyed or assigned.
  Client(Client&&) noexcept;
  Client& operator=(Client&&) noexcept;

  /// "verbs", "shm" or "resp"; on a cluster the nodes' common transport, or "mixed".
  std::string_view transport() const;
  /// Whether this Client is on a cluster (a redis+cluster:// URL).
  bool cluster() const;

  /// Stores `value` under `key`. Returns false only when `nx` is set and the key exists.
  bool put(std::string_view key, ConstBytes value, PutOptions options = {});
  bool put(std::string_view key, ConstBytes value, uint64_t ttl_ms);
  bool put(std::string_view key, std::string_view value, PutOptions options = {});
  /// Stores the concatenation of `pieces` (gathered; one copy per piece on shm).
  bool put(std::string_view key, std::span<const ConstBytes> pieces, PutOptions options = {});

  /// The value, or nullopt when the key does not exist.
  std::optional<std::string> get(std::string_view key);
  /// Reads a value of unknown length into memory from `alloc`. Returns its length, or nullopt
  /// when the key does not exist (alloc not called, unless a striped value lost a part).
  std::optional<size_t> get_with(std::string_view key, const Allocator& alloc);
  /// Reads the value into `dst` (from its start). Returns its length, or nullopt when the key
  /// does not exist. Throws Error ("ERR window of N bytes is smaller than the value (M bytes)")
  /// and writes nothing when it does not fit.
  std::optional<size_t> get_into(std::string_view key, MutableBytes dst);
  /// Reads the value into the window formed by `pieces` (scattered, in order).
  std::optional<size_t> get_into(std::string_view key, std::span<const MutableBytes> pieces);

  /// Stores many keys in one round trip per connection (KV.MPUT on shm, a pipeline of SET on
  /// RESP); on a cluster, one per node, the nodes in parallel. Result i belongs to item i.
  std::vector<Result> batch_put(std::span<const PutRequest> items, PutOptions options = {});
  std::vector<Result> batch_put(std::span<const std::string_view> keys,
                                std::span<const ConstBytes> values, PutOptions options = {});
  /// Reads many keys in one round trip (KV.MGET on shm, a pipeline of GET on RESP); on a
  /// cluster, one per node, the nodes in parallel.
  std::vector<Result> batch_get_into(std::span<const GetRequest> items);
  std::vector<Result> batch_get_into(std::span<const std::string_view> keys,
                                     std::span<const MutableBytes> dsts);

  bool exists(std::string_view key);
  /// One answer per key (a pipeline of EXISTS).
  std::vector<bool> batch_exists(std::span<const std::string_view> keys);
  /// How many leading keys of the chain exist (KV.PREFIX). With `pin_ms`, those keys are
  /// leased: eviction skips them for that many milliseconds (0 = the server's lease.ttl,
  /// which also caps it). Against a server without KV.PREFIX: EXISTS until the first miss,
  /// and no lease. The server keeps leases per connection, so every pinning prefix_match and
  /// every unpin of a Client go through one connection of their own (calls with a pin are
  /// serialized; without one they use the pool). On a cluster each node gets its own keys of
  /// the chain, all nodes at once, and every node involved takes leases (docs/sdk.md).
  size_t prefix_match(std::span<const std::string_view> keys,
                      std::optional<uint64_t> pin_ms = std::nullopt);
  /// Ends this Client's leases of the keys (taken by prefix_match with a pin); returns how
  /// many keys it held a lease on (KV.UNPIN). Other clients' leases stay.
  size_t unpin(std::span<const std::string_view> keys);
  /// Deletes the key; false when it did not exist.
  bool remove(std::string_view key);
  /// Deletes the keys; returns how many existed.
  size_t batch_remove(std::span<const std::string_view> keys);

  /// Every key matching the glob `pattern` (Redis's SCAN MATCH syntax: `*`, `?`, `[...]`,
  /// `\\` escapes), one SCAN loop per node (on a cluster, every primary, in parallel). Not a
  /// snapshot: keys written or deleted meanwhile may or may not be listed; each key once. For
  /// administration (listing, clearing a namespace), not for the data path.
  std::vector<std::string> scan(std::string_view pattern);

  /// `size` bytes of registered memory (zero-filled). On shm: a memfd mapping registered with
  /// the server on each connection when first used (KV.REGISTER SHM); on verbs: memory
  /// registered with the NIC, then with each connection when first used (KV.REGISTER VERBS).
  /// Either way puts from it and gets into it move the bytes once. Throws Error(kUsage) for size 0, kConnection when the memory
  /// cannot be made.
  Buffer alloc_buffer(size_t size);
  /// Makes caller memory [ptr, ptr+size) known to the client (not owned, not copied). Over
  /// shm the server cannot map arbitrary process memory, so transfers from and into it are
  /// staged through the connection's registered staging buffer (one more memcpy in the
  /// client); `zero_copy()` is false. Use alloc_buffer for zero copy. On verbs the memory is
  /// registered with the NIC instead, and is zero copy (unless the NIC refuses it). The
  /// caller keeps the memory alive while the Buffer is used.
  Buffer register_buffer(void* ptr, size_t size);

 private:
  std::shared_ptr<detail::ClusterCore> core_;
};

}  // namespace stratakv
