// tests/unit/ssd_fault_util.h - what the SSD fault tests share: a per-key byte pattern (so a
// value read back is checked byte for byte against its key and generation) and a bounded wait.
#pragma once

#include <doctest.h>

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>

namespace ssd_fault {

/// `n` bytes that depend on `key`, `generation` and the position: a value of one key (or of an
/// older write of it), shifted or cut, never matches.
inline std::string pattern(const std::string& key, uint32_t generation, size_t n) {
  uint64_t h = std::hash<std::string>{}(key) ^ (uint64_t{generation} * 0x9E3779B97F4A7C15ull);
  std::string s(n, '\0');
  for (size_t i = 0; i < n; ++i) {
    h = h * 6364136223846793005ull + 1442695040888963407ull;
    s[i] = static_cast<char>(h >> 56);
  }
  return s;
}

/// Polls `done` every 10 ms until it holds or `limit_s` seconds passed; whether it held. A bound
/// against a hang, not a measure of speed.
inline bool wait_until(const std::function<bool()>& done, int limit_s = 30) {
  const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(limit_s);
  while (!done()) {
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return true;
}

}  // namespace ssd_fault
