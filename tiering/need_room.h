// tiering/need_room.h - the signal that a write could not allocate while it held shard locks.
//
// No lock is ever held while making room (DESIGN.md, "The request pipeline and the write
// path"): making room evicts, and eviction locks shards. So an allocation made while the
// calling thread holds a shard lock never evicts; when the region has no room it throws
// NeedRoom. The handler's locks are released as the exception unwinds, and the request
// pipeline (server/pipeline.cc) makes room with no lock held and runs the handler again. A
// handler therefore allocates before it changes anything or replies.
#pragma once

#include <cstdint>
#include <new>

namespace tiering {

/// Thrown by an allocation that found no room while the thread held a shard lock. `bytes` is
/// what the allocation needs in the region (block header included). A std::bad_alloc, so a
/// caller that does not retry answers -OOM.
struct NeedRoom : std::bad_alloc {
  explicit NeedRoom(uint64_t b) : bytes(b) {}
  const char* what() const noexcept override { return "tiering::NeedRoom"; }
  uint64_t bytes;
};

}  // namespace tiering
