#include "cluster/slot.h"

#include <array>
#include <cstring>

namespace cluster {
namespace {

// CRC16-CCITT/XMODEM, slicing-by-8. kTables[0] is the classic byte table (T); kTables[k][x]
// is the CRC state after feeding byte x and then k zero bytes from state 0. CRC is linear over
// XOR, so for 8 input bytes b0..b7 and state c:
//   c' = W7[(c >> 8) ^ b0] ^ W6[(c & 0xff) ^ b1] ^ W5[b2] ^ ... ^ W0[b7]
// (8 table lookups per 8 bytes instead of a dependent chain of 8). Built at compile time.
using Table = std::array<uint16_t, 256>;
constexpr std::array<Table, 8> make_tables() {
  std::array<Table, 8> t{};
  for (unsigned i = 0; i < 256; ++i) {
    uint16_t crc = static_cast<uint16_t>(i << 8);
    for (int b = 0; b < 8; ++b)
      crc = static_cast<uint16_t>((crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1);
    t[0][i] = crc;
  }
  for (int k = 1; k < 8; ++k)
    for (unsigned i = 0; i < 256; ++i) {
      const uint16_t s = t[k - 1][i];  // one more zero byte: s' = (s << 8) ^ T[s >> 8]
      t[k][i] = static_cast<uint16_t>((s << 8) ^ t[0][s >> 8]);
    }
  return t;
}
constexpr std::array<Table, 8> kTables = make_tables();

// The CRC state after 8 more bytes at p.
inline uint32_t crc_step8(uint32_t crc, const unsigned char* p) {
  return kTables[7][(crc >> 8) ^ p[0]] ^ kTables[6][(crc & 0xff) ^ p[1]] ^ kTables[5][p[2]] ^
         kTables[4][p[3]] ^ kTables[3][p[4]] ^ kTables[2][p[5]] ^ kTables[1][p[6]] ^
         kTables[0][p[7]];
}
// The CRC state after one more byte.
inline uint32_t crc_step1(uint32_t crc, unsigned char b) {
  return ((crc << 8) ^ kTables[0][((crc >> 8) ^ b) & 0xff]) & 0xffff;
}

// Whether any of the 8 bytes of w is '{' (the zero-byte test of "Bit Twiddling Hacks",
// "Determine if a word has a byte equal to n": exact, no false positive).
inline bool has_brace(uint64_t w) {
  constexpr uint64_t kOnes = 0x0101010101010101ULL, kHighs = 0x8080808080808080ULL;
  const uint64_t x = w ^ (kOnes * '{');
  return ((x - kOnes) & ~x & kHighs) != 0;
}

}  // namespace

uint16_t crc16(std::string_view bytes) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  size_t n = bytes.size();
  uint32_t crc = 0;
  for (; n >= 8; n -= 8, p += 8) crc = crc_step8(crc, p);
  for (; n > 0; --n, ++p) crc = crc_step1(crc, *p);
  return static_cast<uint16_t>(crc);
}

uint16_t key_slot(std::string_view key) noexcept {
  const auto* p = reinterpret_cast<const unsigned char*>(key.data());
  size_t n = key.size();
  uint32_t crc = 0;
  // The whole key's CRC, as long as no '{' shows up; a key with one takes the hash tag rule.
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t w;
    std::memcpy(&w, p, sizeof w);
    if (has_brace(w)) return static_cast<uint16_t>(crc16(hash_tag(key)) & (kSlots - 1));
    crc = crc_step8(crc, p);
  }
  for (; n > 0; --n, ++p) {
    if (*p == '{') return static_cast<uint16_t>(crc16(hash_tag(key)) & (kSlots - 1));
    crc = crc_step1(crc, *p);
  }
  return static_cast<uint16_t>(crc & (kSlots - 1));
}

std::string_view hash_tag(std::string_view key) noexcept {
  const size_t open = key.find('{');
  if (open == std::string_view::npos) return key;
  const size_t close = key.find('}', open + 1);
  if (close == std::string_view::npos || close == open + 1) return key;
  return key.substr(open + 1, close - open - 1);
}

}  // namespace cluster
