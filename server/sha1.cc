// server/sha1.cc - a small SHA-1 (FIPS 180-4, section 6.1), one pass over the input.
#include "server/sha1.h"

#include <cstdint>
#include <cstring>

namespace server {

namespace {

inline uint32_t rol(uint32_t x, int n) { return (x << n) | (x >> (32 - n)); }

void block(uint32_t h[5], const unsigned char* p) {
  uint32_t w[80];
  for (int i = 0; i < 16; ++i)
    w[i] = uint32_t(p[4 * i]) << 24 | uint32_t(p[4 * i + 1]) << 16 | uint32_t(p[4 * i + 2]) << 8 |
           uint32_t(p[4 * i + 3]);
  for (int i = 16; i < 80; ++i) w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
  uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
  for (int i = 0; i < 80; ++i) {
    uint32_t f, k;
    if (i < 20) f = (b & c) | (~b & d), k = 0x5A827999;
    else if (i < 40) f = b ^ c ^ d, k = 0x6ED9EBA1;
    else if (i < 60) f = (b & c) | (b & d) | (c & d), k = 0x8F1BBCDC;
    else f = b ^ c ^ d, k = 0xCA62C1D6;
    const uint32_t t = rol(a, 5) + f + e + k + w[i];
    e = d, d = c, c = rol(b, 30), b = a, a = t;
  }
  h[0] += a, h[1] += b, h[2] += c, h[3] += d, h[4] += e;
}

}  // namespace

std::string sha1_hex(std::string_view bytes) {
  uint32_t h[5] = {0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0};
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  size_t n = bytes.size();
  const uint64_t bits = static_cast<uint64_t>(n) * 8;
  for (; n >= 64; p += 64, n -= 64) block(h, p);
  // The tail, 0x80, zeros, and the length in bits (big-endian): one or two blocks.
  unsigned char tail[128] = {};
  std::memcpy(tail, p, n);
  tail[n] = 0x80;
  const size_t len = n + 9 <= 64 ? 64 : 128;
  for (int i = 0; i < 8; ++i) tail[len - 1 - i] = static_cast<unsigned char>(bits >> (8 * i));
  block(h, tail);
  if (len == 128) block(h, tail + 64);
  static const char digits[] = "0123456789abcdef";
  std::string out(40, '0');
  for (int i = 0; i < 5; ++i)
    for (int j = 0; j < 8; ++j) out[i * 8 + j] = digits[(h[i] >> (28 - 4 * j)) & 15];
  return out;
}

}  // namespace server
