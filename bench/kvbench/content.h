// bench/kvbench/content.h - the bytes of a chunk, a function of its key's hash and its size
// only, so whatever is loaded can be checked against what was stored without remembering it.
//
// Layout, in 8-byte little-endian words (the size is a multiple of 8, at least 64 bytes):
//   words 0-3   header: magic, hash, size, a check word of the three
//   stamp words every word i with i % kStampWords == kStampWords - 1 (one per 4 KiB), and
//               the last word: stamp(hash, i)
//   the rest    base(i): the same for every chunk of this size
// So turning a buffer that holds some chunk into another chunk rewrites only the header and
// the stamps (size / 4096 words), which keeps the client from being the bottleneck on stores.
// A sampled check reads the header, every stamp and a few base words; a full check compares
// every byte. A load slot is poisoned (header and stamps overwritten) before each load, so a
// server that writes nothing, or only part of a value, fails even the sampled check.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

namespace kvbench {

class Content {
 public:
  /// Words between stamps: one stamp per 4 KiB page.
  static constexpr size_t kStampWords = 512;
  /// Returned by the checks when every byte checked matches.
  static constexpr size_t kOk = ~size_t{0};

  /// Prepares the base image for chunks of `size` bytes (size % 8 == 0, size >= 64).
  explicit Content(size_t size);

  size_t size() const { return size_; }

  /// Writes the whole content of chunk `hash` into `dst` (size() bytes).
  void fill(std::byte* dst, uint64_t hash) const;
  /// Turns `dst`, which holds the content of some chunk of this size (from fill()), into the
  /// content of chunk `hash` by rewriting the header and the stamps only.
  void restamp(std::byte* dst, uint64_t hash) const;
  /// Overwrites the header and every stamp with words no chunk has.
  void poison(std::byte* dst) const;

  /// Checks the header, every stamp and 16 base words picked by `hash`. Returns the offset of
  /// the first wrong byte found, or kOk.
  size_t check_sampled(const std::byte* p, uint64_t hash) const;
  /// Checks every byte. Returns the offset of the first wrong byte, or kOk.
  size_t check_full(const std::byte* p, uint64_t hash) const;

 private:
  uint64_t expected_word(uint64_t hash, size_t i) const;
  bool is_stamp(size_t i) const { return i % kStampWords == kStampWords - 1 || i == words_ - 1; }

  size_t size_;
  size_t words_;
  std::unique_ptr<uint64_t[]> base_;  // base(i) for every word, header and stamps included
};

}  // namespace kvbench
