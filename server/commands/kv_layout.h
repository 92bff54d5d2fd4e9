// server/commands/kv_layout.h - the argument layout of the fast path's batches, declared once:
//
//   KV.MPUT count key total_length nsegs seg off len [seg off len ...] ... [EX s|PX ms] [NX]
//   KV.MGET count key nsegs seg off len [seg off len ...] ...
//
// One reader of that layout feeds the handlers (cmd_kv.cc), the key finder (COMMAND GETKEYS, the
// SSD tier's loads, the slot stage: CommandSpec::find_keys) and the bytes a KV.MPUT writes (the
// room stage: CommandSpec::write_bytes), so the three can never disagree on where a key is.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rdma/segment.h"

namespace server {

/// One entry of a batch, as positions in the command's arguments.
struct BatchEntry {
  size_t key = 0;      ///< index of the key
  uint64_t total = 0;  ///< KV.MPUT: the value's length (total_length), bytes; 0 for KV.MGET
  size_t segs = 0;     ///< index of the first descriptor's `seg` (valid when nsegs > 0)
  size_t nsegs = 0;    ///< number of descriptors, three arguments each (seg, off, len >= 0)
};

/// Reads a batch's entries left to right, from args[1] (count) on, one per next(). Every number
/// is checked (a strict int64, not negative). No count from the client is trusted past the
/// arguments: no arithmetic is done with count or nsegs (no overflow), each entry and each
/// descriptor is read only when the arguments left hold it, and a count or nsegs larger than
/// what follows is a syntax error where the arguments end. Errors are the texts the handler
/// replies, the first one found wins: "ERR value is not an integer or out of range", "ERR
/// count must be positive", "ERR syntax error". Not thread-safe; no allocation.
class BatchLayout {
 public:
  enum class Kind { kPut, kGet };  ///< KV.MPUT (entries carry total_length) or KV.MGET

  BatchLayout(std::span<const std::string_view> args, Kind kind);

  /// The next entry into `e`; false after the last one or at an error (then error() is set).
  /// With `sgl`, the entry's descriptors are appended to it as they are read (each argument is
  /// parsed once).
  bool next(BatchEntry& e, std::vector<rdma::Descriptor>* sgl = nullptr);
  /// After next() returned false without an error: the index of the first argument after the
  /// batch (KV.MPUT's options start there; KV.MGET has none).
  size_t end() const { return at_; }
  /// Empty while the layout is well-formed so far.
  std::string_view error() const { return error_; }
  /// The count the client sent (0 when it was not a positive integer). Not checked against the
  /// arguments until the entries are read: bound it before reserving for it.
  uint64_t count() const { return count_; }

 private:
  void fail(std::string_view text);

  std::span<const std::string_view> args_;
  Kind kind_;
  size_t at_ = 2;
  uint64_t count_ = 0, read_ = 0;
  std::string_view error_;
};

/// KV.MPUT's key finder: the key of every entry. False when the batch is malformed.
bool mput_keys(std::span<const std::string_view> args, std::vector<size_t>& out);
/// KV.MGET's key finder: the key of every entry; false when the batch is malformed or arguments
/// follow it.
bool mget_keys(std::span<const std::string_view> args, std::vector<size_t>& out);
/// The bytes a KV.MPUT writes: the sum of its total_length values (saturating at UINT64_MAX);
/// 0 when the batch is malformed (the handler replies the error).
uint64_t mput_bytes(std::span<const std::string_view> args);

}  // namespace server
