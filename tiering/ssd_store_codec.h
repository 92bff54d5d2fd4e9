// tiering/ssd_store_codec.h - the on-disk encodings of the SSD store (internal to ssd_store*.cc;
// docs/ssd-tier.md, "On-disk format").
//
//   record key:   slot u16 big endian (2 bytes), then the key's bytes (format 2; format 1 keyed
//                 records by the bare key), so one slot's records are one key range
//   value value:  XXH3-64 of the bytes (u64 little endian), then the bytes
//   header value: seq u64, expire_ms i64, size u64, little endian (24 bytes)
//   order key:    seq u64 big endian (8 bytes), so the family iterates oldest first; its value
//                 is the bare key (the same in both formats)
//   format:       key "version" -> the format number in decimal ("2")
#pragma once

#include <rocksdb/slice.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#ifndef XXH_INLINE_ALL
#define XXH_INLINE_ALL
#endif
#include <xxhash.h>

namespace tiering::ssd_codec {

struct Header {
  uint64_t seq = 0;
  int64_t expire_ms = 0;
  uint64_t size = 0;
};

inline constexpr size_t kHeaderSize = 24;
inline constexpr size_t kSlotBytes = 2;

/// The key of the `format` family that holds the store's format (SsdStore::kFormat).
inline constexpr std::string_view kFormatKey = "version";

/// The first bytes of every record key of `slot` (big endian: records sort by slot first).
inline std::string encode_slot(uint32_t slot) {
  std::string s(kSlotBytes, '\0');
  s[0] = static_cast<char>(slot >> 8);
  s[1] = static_cast<char>(slot);
  return s;
}

/// [slot][key]: the RocksDB key of the record of `key`.
inline std::string record_key(uint16_t slot, std::string_view key) {
  std::string s;
  s.reserve(kSlotBytes + key.size());
  s.push_back(static_cast<char>(slot >> 8));
  s.push_back(static_cast<char>(slot));
  s.append(key);
  return s;
}

/// The slot and the bare key of a record key; false when it is too short to be one.
inline bool decode_record_key(const rocksdb::Slice& rk, uint16_t* slot, std::string_view* key) {
  if (rk.size() < kSlotBytes) return false;
  const auto* p = reinterpret_cast<const unsigned char*>(rk.data());
  *slot = static_cast<uint16_t>((p[0] << 8) | p[1]);
  *key = std::string_view(rk.data() + kSlotBytes, rk.size() - kSlotBytes);
  return true;
}

inline void put_le(char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<char>(v >> (8 * i));
}
inline uint64_t get_le(const char* p) {
  uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= uint64_t(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

inline std::string encode(const Header& h) {
  std::string s(kHeaderSize, '\0');
  put_le(s.data(), h.seq);
  put_le(s.data() + 8, static_cast<uint64_t>(h.expire_ms));
  put_le(s.data() + 16, h.size);
  return s;
}

/// False when `v` is not a header (wrong length).
inline bool decode(const rocksdb::Slice& v, Header* h) {
  if (v.size() != kHeaderSize) return false;
  h->seq = get_le(v.data());
  h->expire_ms = static_cast<int64_t>(get_le(v.data() + 8));
  h->size = get_le(v.data() + 16);
  return true;
}

/// The checksum a value is stored with (XXH3-64).
inline uint64_t checksum(const void* data, size_t n) { return XXH3_64bits(data, n); }

inline std::string encode_seq(uint64_t seq) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>(seq >> (8 * (7 - i)));
  return s;
}

inline uint64_t decode_seq(const rocksdb::Slice& k) {
  uint64_t v = 0;
  for (size_t i = 0; i < 8 && i < k.size(); ++i)
    v = (v << 8) | static_cast<unsigned char>(k.data()[i]);
  return v;
}

}  // namespace tiering::ssd_codec
