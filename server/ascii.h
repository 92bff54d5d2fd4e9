// server/ascii.h - ASCII case folding of command, option and config names (Redis compares them
// with strcasecmp). A leaf header.
#pragma once

#include <string_view>

namespace server {

/// Case-insensitive ASCII equality (bytes outside A-Z compare as they are).
inline bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    unsigned char x = static_cast<unsigned char>(a[i]), y = static_cast<unsigned char>(b[i]);
    if (x >= 'A' && x <= 'Z') x = static_cast<unsigned char>(x + ('a' - 'A'));
    if (y >= 'A' && y <= 'Z') y = static_cast<unsigned char>(y + ('a' - 'A'));
    if (x != y) return false;
  }
  return true;
}

}  // namespace server
