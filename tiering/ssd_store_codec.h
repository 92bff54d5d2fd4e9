// tiering/ssd_store_codec.h - the on-disk encodings of the SSD store (internal to ssd_store*.cc).
//
//   data value: XXH3-64 of the bytes (u64 little endian), then the bytes
//   meta value: seq u64, expire_ms i64, size u64, little endian (24 bytes)
//   order key:  seq u64 big endian (8 bytes), so the family iterates oldest first
#pragma once

#include <rocksdb/slice.h>

#include <cstdint>
#include <cstring>
#include <string>

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
