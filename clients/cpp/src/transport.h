// transport.h - how a connection moves payloads: the seam between the Client's calls and the
// wire. One Transport object per connection (Session), used by one thread at a time.
//
// Implementations:
//   resp_transport.cc  plain RESP: SET/GET with the payload in the socket (any URL)
//   shm_transport.cc   same host: KV.PUT/KV.GET naming memfd segments (docs/fast-path.md)
// The RDMA transport plugs in here (not implemented yet). A VerbsTransport would use the
// rdma/ library's client side (rdma/verbs_transport.h): one rdma::VerbsDevice per ClientCore
// (probed once; TransportChoice::kVerbs only when it opens and the server's KV.CONNECT VERBS
// succeeds), one rdma::VerbsEndpoint per connection created with EndpointOptions::remote_access
// and connected with KV.CONNECT VERBS (the reply is the server's QpAddress); each zero-copy
// Buffer registered with the device once (VerbsDevice::register_buffer, any memory, so
// register_buffer() becomes zero copy too) and with the connection on first use
// (KV.REGISTER VERBS addr len rkey -> segment id, kept like ShmTransport::segs_); then the same
// KV.PUT/KV.GET/KV.MPUT/KV.MGET descriptors as shm. A transfer error ("ERR RDMA transfer
// failed: ...") means: reset the endpoint, KV.CONNECT VERBS again, retry once.
// Wiring: add kVerbs to TransportChoice, traits() (shared_memory = false, but a "registered"
// flag so alloc_buffer registers with the NIC), make_transport(), and ClientCore::start()'s
// probe order (verbs, then shm on unix://, then RESP).
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
enum class TransportChoice { kResp, kShm };

TransportTraits traits(TransportChoice choice);

/// Makes connection `s`'s transport. kShm registers the connection's staging buffer at once
/// and throws Error(kServer) when the server refuses (no KV.REGISTER, or not a Unix socket).
std::unique_ptr<Transport> make_transport(TransportChoice choice, Session& s, ClientCore& core);

std::unique_ptr<Transport> make_resp_transport(Session& s);
std::unique_ptr<Transport> make_shm_transport(Session& s, ClientCore& core);

/// The fast path's and the RESP fallback's text for a window too small for the value.
std::string window_error(uint64_t window, uint64_t value);

}  // namespace stratakv::detail
