#include "cluster/slot.h"

#include <array>

namespace cluster {
namespace {

// The byte-wise table of CRC16-CCITT/XMODEM, built at compile time.
constexpr std::array<uint16_t, 256> make_table() {
  std::array<uint16_t, 256> t{};
  for (unsigned i = 0; i < 256; ++i) {
    uint16_t crc = static_cast<uint16_t>(i << 8);
    for (int b = 0; b < 8; ++b)
      crc = static_cast<uint16_t>((crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1);
    t[i] = crc;
  }
  return t;
}
constexpr std::array<uint16_t, 256> kTable = make_table();

}  // namespace

uint16_t crc16(std::string_view bytes) noexcept {
  uint16_t crc = 0;
  for (unsigned char c : bytes)
    crc = static_cast<uint16_t>((crc << 8) ^ kTable[((crc >> 8) ^ c) & 0xff]);
  return crc;
}

std::string_view hash_tag(std::string_view key) noexcept {
  const size_t open = key.find('{');
  if (open == std::string_view::npos) return key;
  const size_t close = key.find('}', open + 1);
  if (close == std::string_view::npos || close == open + 1) return key;
  return key.substr(open + 1, close - open - 1);
}

}  // namespace cluster
