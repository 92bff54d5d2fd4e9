// stratakv/client.h - the C++ client of stratakv (libstratakv).
//
//   stratakv::Client kv("unix:///run/stratakv.sock");          // shm fast path
//   stratakv::Buffer buf = kv.alloc_buffer(32 << 20);           // registered memory
//   fill(buf.data(), buf.size());
//   kv.put("model@0@1@abcd@bf16", buf.span());                  // one copy, by the server
//   kv.get_into("model@0@1@abcd@bf16", buf.span());             // one copy, by the server
//
// Transport: a `unix://` URL uses the shm fast path (KV.PUT/KV.GET over a memfd the server
// maps, docs/fast-path.md) when the server offers it, else plain RESP; a `redis://` URL uses
// plain RESP (SET/GET). Both give the same results; `transport()` says which one is in use.
// See docs/sdk.md.
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

namespace stratakv {

using ConstBytes = std::span<const std::byte>;
using MutableBytes = std::span<std::byte>;

/// The bytes of a string (no copy).
inline ConstBytes as_bytes(std::string_view s) noexcept {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

/// Which transport moves payloads.
enum class TransportKind {
  kAuto,  ///< shm on a unix:// URL when the server offers KV.REGISTER SHM, else RESP
  kShm,   ///< shm, or the constructor throws (unix:// URLs only)
  kResp,  ///< plain RESP SET/GET on any URL
  // kVerbs: reserved for the RDMA transport (a seam in src/transport.h).
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
  /// Password for AUTH (overrides one in the URL); `user` for AUTH user password.
  std::string user;
  std::string password;
};

struct PutOptions {
  uint64_t ttl_ms = 0;  ///< expire after this many milliseconds (0 = never)
  bool nx = false;      ///< store only when the key does not exist
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
/// (exactly `length` bytes). It may throw; the call then throws the same exception.
using Allocator = std::function<MutableBytes(size_t length)>;

namespace detail {
class ClientCore;
}

class Client {
 public:
  /// Connects (one connection now, more on demand). `url`: `redis://[[user]:password@]host[:port]`
  /// (default port 6379) or `unix://[[user]:password@]/path/to.sock` (also `?password=`).
  /// Throws Error: kUsage for a bad URL, kConnection when the server cannot be reached,
  /// kServer when AUTH fails or `TransportKind::kShm` is asked and the server refuses it.
  explicit Client(std::string_view url, Options options = {});
  ~Client();
  /// Moving hands the connections over; a moved-from Client may only be destroyed or assigned.
  Client(Client&&) noexcept;
  Client& operator=(Client&&) noexcept;

  /// "shm" or "resp".
  std::string_view transport() const;

  /// Stores `value` under `key`. Returns false only when `nx` is set and the key exists.
  bool put(std::string_view key, ConstBytes value, PutOptions options = {});
  bool put(std::string_view key, ConstBytes value, uint64_t ttl_ms);
  bool put(std::string_view key, std::string_view value, PutOptions options = {});
  /// Stores the concatenation of `pieces` (gathered; one copy per piece on shm).
  bool put(std::string_view key, std::span<const ConstBytes> pieces, PutOptions options = {});

  /// The value, or nullopt when the key does not exist.
  std::optional<std::string> get(std::string_view key);
  /// Reads a value of unknown length into memory from `alloc`. Returns its length, or nullopt
  /// (alloc not called) when the key does not exist.
  std::optional<size_t> get_with(std::string_view key, const Allocator& alloc);
  /// Reads the value into `dst` (from its start). Returns its length, or nullopt when the key
  /// does not exist. Throws Error ("ERR window of N bytes is smaller than the value (M bytes)")
  /// and writes nothing when it does not fit.
  std::optional<size_t> get_into(std::string_view key, MutableBytes dst);
  /// Reads the value into the window formed by `pieces` (scattered, in order).
  std::optional<size_t> get_into(std::string_view key, std::span<const MutableBytes> pieces);

  /// Stores many keys in one round trip per connection (KV.MPUT on shm, a pipeline of SET on
  /// RESP). Result i belongs to item i.
  std::vector<Result> batch_put(std::span<const PutRequest> items, PutOptions options = {});
  std::vector<Result> batch_put(std::span<const std::string_view> keys,
                                std::span<const ConstBytes> values, PutOptions options = {});
  /// Reads many keys in one round trip (KV.MGET on shm, a pipeline of GET on RESP).
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
  /// serialized; without one they use the pool).
  size_t prefix_match(std::span<const std::string_view> keys,
                      std::optional<uint64_t> pin_ms = std::nullopt);
  /// Ends this Client's leases of the keys (taken by prefix_match with a pin); returns how
  /// many keys it held a lease on (KV.UNPIN). Other clients' leases stay.
  size_t unpin(std::span<const std::string_view> keys);
  /// Deletes the key; false when it did not exist.
  bool remove(std::string_view key);
  /// Deletes the keys; returns how many existed.
  size_t batch_remove(std::span<const std::string_view> keys);

  /// `size` bytes of registered memory (zero-filled). On shm: a memfd mapping registered with
  /// the server on each connection when first used (KV.REGISTER SHM), so puts from it and gets
  /// into it move the bytes once. Throws Error(kUsage) for size 0, kConnection when the memory
  /// cannot be made.
  Buffer alloc_buffer(size_t size);
  /// Makes caller memory [ptr, ptr+size) known to the client (not owned, not copied). Over
  /// shm the server cannot map arbitrary process memory, so transfers from and into it are
  /// staged through the connection's registered staging buffer (one more memcpy in the
  /// client); `zero_copy()` is false. Use alloc_buffer for zero copy. (The verbs transport
  /// would register it with the NIC instead.) The caller keeps the memory alive while the
  /// Buffer is used.
  Buffer register_buffer(void* ptr, size_t size);

 private:
  std::shared_ptr<detail::ClientCore> core_;
};

}  // namespace stratakv
