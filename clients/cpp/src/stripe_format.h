// stripe_format.h - the format of a striped value (docs/sdk.md, "Striping"): a large value
// stored as N parts, each under its own key on (if the cluster has as many) a different shard,
// plus a small manifest under the value's own key, written last.
//
// The manifest (little-endian):
//
//   offset   size   field
//   0        8      magic "SKVSTRP1"
//   8        8      total length of the value, bytes
//   16       8      version: random, different for every put; part keys carry it
//   24       4      number of parts N (2..256)
//   28       4      zero
//   32       16*N   part i: length (8), hash tag (8 ASCII characters)
//   32+16N   8      FNV-1a 64 of bytes [0, 32+16N)
//
// Part i of value `key` is stored under "{<tag i>}<key>#<version, 16 hex digits>#<i>": the hash
// tag picks its slot, and so its shard. Part i holds bytes [i*P, i*P + length_i) of the value,
// where P is the first part's length (a multiple of 4 KiB). Pure functions, thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "slot_map.h"

namespace stratakv::detail::stripe {

inline constexpr size_t kMaxParts = 256;
inline constexpr uint64_t kPartAlign = 4096;  ///< part lengths are multiples (but the last)
inline constexpr size_t kHeaderBytes = 32;
inline constexpr size_t kPartEntryBytes = 16;
inline constexpr size_t kTagBytes = 8;

struct Part {
  uint64_t length = 0;
  std::string tag;  ///< kTagBytes characters, no braces
};

struct Manifest {
  uint64_t total = 0;
  uint64_t version = 0;
  std::vector<Part> parts;
  /// Where part i starts in the value.
  uint64_t offset(size_t i) const { return i * parts.front().length; }
};

/// A manifest's size for N parts.
constexpr size_t manifest_bytes(size_t parts) { return kHeaderBytes + kPartEntryBytes * parts + 8; }
/// Whether a value of `length` bytes can be a manifest (so worth decoding).
constexpr bool may_be_manifest(uint64_t length) {
  return length >= manifest_bytes(2) && length <= manifest_bytes(kMaxParts) &&
         (length - manifest_bytes(0)) % kPartEntryBytes == 0;
}

/// The parts of a value of `total` bytes asked to be cut in `stripes`: as many parts of equal
/// length (rounded up to kPartAlign) as that gives, the last shorter; fewer than 2 (a value
/// under 2 * kPartAlign, or stripes < 2): empty, store the value whole. Tags are chosen by
/// choose_tags().
Manifest plan(uint64_t total, size_t stripes, uint64_t version);
/// Gives each part a hash tag whose slot `map` puts on a different node than the previous
/// part's, cycling over the nodes from one the version picks (parts of many values spread
/// over every node and many slots).
void choose_tags(Manifest& m, const SlotMap& map);

/// Whether `bytes` (at least the first 8 of a value) start with the manifest's magic.
bool has_magic(std::span<const std::byte> bytes);
/// The manifest's bytes.
std::string encode(const Manifest& m);
/// The manifest in `bytes`, or nullopt when they are not one (magic, size, checksum, lengths
/// that do not add up).
std::optional<Manifest> decode(std::span<const std::byte> bytes);
/// Part i's key.
std::string part_key(std::string_view key, const Manifest& m, size_t i);

/// The bytes [offset, offset+length) of the concatenation of `pieces`, as sub-spans of them.
template <class Bytes>
std::vector<Bytes> slice(std::span<const Bytes> pieces, uint64_t offset, uint64_t length) {
  std::vector<Bytes> out;
  for (const Bytes& p : pieces) {
    if (length == 0) break;
    if (offset >= p.size()) {
      offset -= p.size();
      continue;
    }
    const size_t n = static_cast<size_t>(std::min<uint64_t>(p.size() - offset, length));
    out.push_back(p.subspan(static_cast<size_t>(offset), n));
    offset = 0;
    length -= n;
  }
  return out;
}

}  // namespace stratakv::detail::stripe
