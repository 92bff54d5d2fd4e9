// cluster/repl_frame.h - the frames of the replication stream (docs/replication.md).
//
// After the RESP handshake (`PSYNC replid offset` answered `+FULLRESYNC replid offset` or
// `+CONTINUE replid`), the link leaves RESP: the primary sends frames, the replica answers with
// ACK frames. A frame is a fixed 24-byte header (little-endian), then the key, then the value:
//
//   u8 type | u8 reserved[3] | u32 key_len | u64 value_len | i64 expire_ms | key | value
//
// The frames carry the keyspace's changes as states, never as commands (tiering/change.h):
// SET holds the whole value and its absolute deadline, EXPIRE the new deadline, DELETE the key.
// So applying a frame twice, or applying a stream over a snapshot taken at any moment after
// the stream's start, converges to the primary's state: the full copy relies on that.
//
// Offsets count the stream's bytes (headers, keys and values) from the replication id's start,
// as Redis's master_repl_offset counts the bytes of its command stream. Snapshot frames (a full
// copy, before SNAPSHOT_END) are outside the stream and count nothing.
#pragma once

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>

namespace cluster {

/// What a frame says.
enum class FrameType : uint8_t {
  kSet = 1,          ///< key holds value (value_len bytes) with deadline expire_ms (0: none)
  kExpire = 2,       ///< key's deadline is expire_ms (0: persisted); no-op if absent
  kDelete = 3,       ///< key is gone (deleted, expired or evicted on the primary)
  kFlush = 4,        ///< every key is gone (FLUSHALL)
  kPing = 5,         ///< heartbeat; expire_ms = the primary's wall clock (Unix ms)
  kSnapshotEnd = 6,  ///< the full copy is complete; value_len = keys it held
  kAck = 7,          ///< replica -> primary: value_len = the offset applied (every byte before)
  /// A slot migration's handover (docs/cluster.md): the key is the topology record (JSON) that
  /// gives the migrated slots to their new shard, sent by the source the moment its CAS
  /// succeeded, so the target (and the source's replicas) serve it without waiting for etcd.
  kTopology = 8,
};

/// The fixed part of a frame.
struct FrameHeader {
  FrameType type = FrameType::kPing;
  uint32_t key_len = 0;
  uint64_t value_len = 0;
  int64_t expire_ms = 0;

  static constexpr size_t kSize = 24;
  /// Bytes of the whole frame (header, key, value).
  uint64_t frame_size() const { return kSize + key_len + value_len; }
};

/// The largest key a frame may carry (Redis's largest bulk string, proto-max-bulk-len's cap).
inline constexpr uint32_t kMaxFrameKey = 512u << 20;
/// The largest value a frame may carry (a value's largest size in the region is smaller).
inline constexpr uint64_t kMaxFrameValue = uint64_t{1} << 40;

/// Writes `h` into `out` (kSize bytes), little-endian.
void encode_header(const FrameHeader& h, char* out);
/// Appends a header and `key` to `out` (the value, if any, travels apart: no copy of it).
void append_frame_head(std::string& out, FrameType type, std::string_view key,
                       uint64_t value_len, int64_t expire_ms);
/// Reads a header from `in` (kSize bytes). Nothing when the type is unknown or a length is
/// past its limit: the peer is not a stratakv node of this version, or the stream is corrupt.
std::optional<FrameHeader> decode_header(const char* in);

}  // namespace cluster
