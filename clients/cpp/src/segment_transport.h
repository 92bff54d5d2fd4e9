// segment_transport.h - the fast path's transports share one implementation
// (segment_transport.cc): KV.PUT/KV.GET/KV.MPUT/KV.MGET naming registered segments, a staging
// buffer for plain memory, RESP for what cannot be staged. What differs is how memory becomes
// a segment of the connection: a SegmentBackend (shm: a memfd, verbs: a NIC registration).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string_view>

#include "session.h"
#include "transport.h"

namespace stratakv::detail {

struct BufferState;

/// Staging memory registered on one connection as segment `seg` (`size` bytes at `data`).
/// Its destructor releases the memory (the transport unregisters `seg` first).
struct Staging {
  virtual ~Staging() = default;
  std::byte* data = nullptr;
  size_t size = 0;
  uint64_t seg = 0;
};

/// How one connection registers memory with the server.
class SegmentBackend {
 public:
  virtual ~SegmentBackend() = default;
  /// The transport's name ("shm", "verbs").
  virtual std::string_view name() const = 0;
  /// Registers zero-copy buffer `b` on the connection (KV.REGISTER ...); returns the segment
  /// id. Throws Error(kServer) with the server's text when it refuses.
  virtual uint64_t register_segment(const BufferState& b) = 0;
  /// Makes `size` bytes of staging memory and registers it on the connection. Throws as
  /// register_segment.
  virtual std::unique_ptr<Staging> make_staging(size_t size) = 0;
};

/// The segment id of a KV.REGISTER reply; throws Error(kServer) on an error reply.
uint64_t segment_id(Session& s, const Reply& r);

/// A fast-path transport over `backend`. Makes the first staging buffer at once (so it throws
/// what the backend throws when the server refuses).
std::unique_ptr<Transport> make_segment_transport(Session& s, ClientCore& core,
                                                  std::unique_ptr<SegmentBackend> backend);

}  // namespace stratakv::detail
