// server/ascii.h - ASCII case folding of command, option and config names (Redis compares them
// with strcasecmp). Not std::tolower: that is a libc call per byte and depends on the locale.
// A leaf header.
#pragma once

#include <string>
#include <string_view>

namespace server {

/// `c` in lower case if it is an ASCII capital (A-Z), else `c` unchanged.
constexpr unsigned char fold(unsigned char c) { return c >= 'A' && c <= 'Z' ? c + ('a' - 'A') : c; }

/// Case-insensitive ASCII equality (bytes outside A-Z compare as they are).
inline bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (fold(static_cast<unsigned char>(a[i])) != fold(static_cast<unsigned char>(b[i]))) return false;
  return true;
}

/// `in` in ASCII lower case, into `*out` (resized; its capacity is reused).
inline void to_lower(std::string_view in, std::string* out) {
  out->resize(in.size());
  for (size_t i = 0; i < in.size(); ++i) (*out)[i] = static_cast<char>(fold(static_cast<unsigned char>(in[i])));
}

/// `in` in ASCII lower case.
inline std::string to_lower(std::string_view in) {
  std::string out;
  to_lower(in, &out);
  return out;
}

}  // namespace server
