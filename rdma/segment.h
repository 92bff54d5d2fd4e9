// rdma/segment.h - client memory registered with the server: segments and scatter-gather lists.
//
// A client exposes memory to the server once (a registration) and then names pieces of it in
// commands as descriptors (segment id, offset, length). The server never exposes its own
// memory; it reads from or writes into these segments itself (DESIGN.md, "The fast path").
//
// A SegmentTable belongs to one connection: a descriptor can only name a segment that the same
// connection registered, and every segment is unmapped when the table is destroyed (the
// connection closed). Segment ids are unique in the process, so a descriptor that names another
// connection's segment is recognisably foreign rather than silently someone else's memory.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace rdma {

/// One piece of a scatter-gather list: `length` bytes at `offset` in segment `segment`.
struct Descriptor {
  uint64_t segment = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
};

/// How a segment's bytes are reached.
enum class SegmentKind {
  kShm,    ///< same host: a memfd the client passed over the Unix socket, mapped here
  kVerbs,  ///< RDMA: (remote address, rkey) in the client's memory, reached by READ/WRITE
};

/// A registered piece of client memory. For kShm, `base` is this process's mapping of it.
struct Segment {
  uint64_t id = 0;
  SegmentKind kind = SegmentKind::kShm;
  std::byte* base = nullptr;   ///< kShm: local mapping; kVerbs: null
  uint64_t length = 0;         ///< bytes
  uint64_t remote_addr = 0;    ///< kVerbs: the client's virtual address of byte 0
  uint32_t rkey = 0;           ///< kVerbs: the client's memory region key
};

/// The segments of one connection. Not thread-safe: one connection uses it at a time.
class SegmentTable {
 public:
  SegmentTable() = default;
  ~SegmentTable();
  SegmentTable(const SegmentTable&) = delete;
  SegmentTable& operator=(const SegmentTable&) = delete;

  /// Maps `length` bytes of the shared-memory file `fd` (MAP_SHARED, read/write) and takes
  /// ownership of `fd` (closed here, success or not). Returns the new segment id, or 0 with
  /// `error` set (Redis-style text without the leading '-'): not a regular file or memfd,
  /// smaller than `length`, a zero length, or mmap failure.
  uint64_t add_shm(int fd, uint64_t length, std::string& error);
  /// Records an RDMA segment (no mapping). Returns its id.
  uint64_t add_verbs(uint64_t remote_addr, uint64_t length, uint32_t rkey);
  /// Unmaps and forgets a segment. False when it is not registered here.
  bool remove(uint64_t id);

  const Segment* find(uint64_t id) const;
  /// The segment of one descriptor after the checks every transport makes: registered here,
  /// of `kind`, and the piece inside it with a nonzero length. Null with `error` set (the
  /// texts of docs/fast-path.md) otherwise.
  const Segment* check(const Descriptor& d, SegmentKind kind, std::string& error) const;
  size_t size() const { return segments_.size(); }
  /// Sum of the lengths of the registered segments, in bytes.
  uint64_t bytes() const { return bytes_; }

  /// Checks a scatter-gather list of shm segments and turns it into iovecs of local mappings.
  /// Every descriptor must name a shm segment of this table, lie inside it, and have a nonzero
  /// length, and the lengths must add up to at most 2^64-1 (add_length). Returns false with
  /// `error` set on the first bad descriptor; `out` is then unspecified and nothing may be
  /// moved. `total` receives the sum of the lengths.
  bool resolve(std::span<const Descriptor> sgl, std::vector<iovec>& out, uint64_t& total,
               std::string& error) const;

  /// Segments registered in the whole process (INFO fastpath_segments).
  static uint64_t live_segments();
  /// Bytes of the segments registered in the whole process.
  static uint64_t live_bytes();

 private:
  uint64_t add(Segment s);  // gives `s` an id and records it

  std::map<uint64_t, Segment> segments_;
  uint64_t bytes_ = 0;
};

/// Adds a descriptor's `length` to its list's running `total`. False with `error` set ("ERR
/// scatter-gather list is longer than 2^64-1 bytes") when the sum does not fit in 64 bits:
/// each piece lies inside its segment, but a list may name the same large segment many times.
bool add_length(uint64_t& total, uint64_t length, std::string& error);

/// Copies `src` into the pieces of `dst` in order, from the first piece on, until `src` is
/// exhausted; `src.size()` must not exceed the pieces' total.
void scatter(std::span<const std::byte> src, std::span<const iovec> dst);
/// Copies the pieces of `src` in order into `dst`; `dst.size()` must equal their total.
void gather(std::span<const iovec> src, std::span<std::byte> dst);

}  // namespace rdma
