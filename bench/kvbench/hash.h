// bench/kvbench/hash.h - the 64-bit mixing functions every part of stratakv-bench derives
// keys, tokens and chunk contents from. Deterministic across runs and machines, so a key can
// be regenerated from its request and a chunk's bytes from its key.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace kvbench {

/// SplitMix64 finaliser: a bijective, well-mixing function of one 64-bit word.
inline uint64_t mix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

/// Combines a running hash with one more word (order-sensitive).
inline uint64_t mix_in(uint64_t h, uint64_t word) { return mix64(h ^ mix64(word + 0x632BE59BD9B4E019ull)); }

/// The hex form of a chunk hash used in keys: 16 lower-case digits.
inline std::string hex64(uint64_t h) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(h));
  return b;
}

/// A small deterministic PRNG (SplitMix64 stream) for workload generation.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t next() { return mix64(s_ += 0x9E3779B97F4A7C15ull); }
  /// Uniform in [0, n) (n > 0).
  uint64_t below(uint64_t n) { return static_cast<uint64_t>((static_cast<unsigned __int128>(next()) * n) >> 64); }
  /// Uniform in [0, 1).
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t s_;
};

}  // namespace kvbench
