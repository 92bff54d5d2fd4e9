// transport.h - how a connection moves payloads: the seam between the Client's calls and the
// wire. One Transport object per connection (Session), used by one thread at a time.
//
// Implementations:
//   resp_transport.cc     plain RESP: SET/GET with the payload in the socket (any URL)
//   segment_transport.cc  the fast path: KV.PUT/KV.GET naming registered segments
//                         (docs/fast-path.md), over a SegmentBackend:
//   shm_transport.cc        same host: memfd segments (KV.REGISTER SHM)
//   verbs_transport.cc      RDMA: segments registered with the NIC (KV.REGISTER VERBS), one
//                           queue pair per connection (KV.CONNECT VERBS), reconnect and retry
//                           once after a failed transfer
// ClientCore::start() picks one: verbs when both sides have a device, else shm on unix://,
// else RESP.
#pragma once

#include <memory>
#include <optional>
#include <span>
#include <string_view>

#include "stratakv/client.h"

namespace stratakv::detail {

class Session;
class ClientCore;

/// One key of a put: the value is the concatenation of `pieces` (`total` bytes).
struct PutItem {
  std::string_view key;
  std::span<const ConstBytes> pieces;
  uint64_t total = 0;
};

/// One key of a get: the value fills the window of `pieces` (`window` bytes) from the start.
struct GetItem {
  std::string_view key;
  std::span<const MutableBytes> pieces;
  uint64_t window = 0;
};

class Transport {
 public:
  virtual ~Transport() = default;
  virtual std::string_view name() const = 0;

  /// Stores items[i], writing its outcome to out[i] (kOk, kMiss when NX refused, kError with
  /// the server's text). Throws only when the connection fails (Session::fail).
  virtual void put(std::span<const PutItem> items, const PutOptions& options,
                   std::span<Result> out) = 0;
  /// Reads items[i] into its pieces; out[i] is kOk with the length, kMiss, or kError (a window
  /// too small: "ERR window of W bytes is smaller than the value (V bytes)", nothing written).
  virtual void get_into(std::span<const GetItem> items, std::span<Result> out) = 0;
  /// Reads a value of unknown length: learns it, calls alloc(length), fills what alloc gave.
  /// nullopt when the key is missing. Throws Error(kServer) on an error reply.
  virtual std::optional<size_t> get_with(std::string_view key, const Allocator& alloc) = 0;
  /// Forgets buffers (by id) that were destroyed: unregisters them from this connection.
  virtual void forget_buffers(std::span<const uint64_t> ids) { (void)ids; }
};

/// What the Client needs to know about a transport before any connection exists.
struct TransportTraits {
  std::string_view name;
  bool shared_memory = false;  ///< alloc_buffer makes memfd memory the server maps (zero copy)
};

/// The transports a ClientCore can be configured with.
enum class TransportChoice { kResp, kShm, kVerbs };

TransportTraits traits(TransportChoice choice);

/// Makes connection `s`'s transport. kShm and kVerbs register the connection's staging buffer
/// at once and throw Error(kServer) when the server refuses (no KV.REGISTER, not a Unix
/// socket, "ERR RDMA is not available on this server").
std::unique_ptr<Transport> make_transport(TransportChoice choice, Session& s, ClientCore& core);

/// `asking`: every command goes after an ASKING (for a key a cluster node named in -ASK).
std::unique_ptr<Transport> make_resp_transport(Session& s, bool asking = false);
std::unique_ptr<Transport> make_shm_transport(Session& s, ClientCore& core);
/// Needs core.verbs_device(). Client-side RDMA failures throw Error(kUsage, "RDMA: ...").
std::unique_ptr<Transport> make_verbs_transport(Session& s, ClientCore& core);

/// The fast path's and the RESP fallback's text for a window too small for the value.
std::string window_error(uint64_t window, uint64_t value);
/// The value's size in such a text ("... smaller than the value (V bytes)" -> V); nullopt for
/// another text.
std::optional<uint64_t> window_error_value(std::string_view error);

}  // namespace stratakv::detail
