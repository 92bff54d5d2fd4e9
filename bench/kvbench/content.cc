// bench/kvbench/content.cc - chunk contents: fill, restamp, poison, sampled and full checks.
#include "content.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "hash.h"

namespace kvbench {
namespace {

constexpr uint64_t kMagic = 0x31484342564B4B53ull;  // "SKKVBCH1" read little-endian
constexpr uint64_t kCheck = 0xA5A5F00DC0FFEE11ull;
constexpr uint64_t kPoison = 0xDEADDEADDEADDEADull;
constexpr size_t kHeaderWords = 4;

inline uint64_t base_word(size_t i) { return mix64(i * 0xD6E8FEB86659FD93ull + 0x5851F42D4C957F2Dull); }
inline uint64_t stamp_word(uint64_t hash, size_t i) { return mix64(hash ^ (i * 0x9E3779B97F4A7C15ull)); }

inline uint64_t load_word(const std::byte* p, size_t i) {
  uint64_t w;
  std::memcpy(&w, p + i * 8, 8);
  return w;
}
inline void store_word(std::byte* p, size_t i, uint64_t w) { std::memcpy(p + i * 8, &w, 8); }

// Offset of the first byte where word i of p differs from w.
size_t first_wrong_byte(const std::byte* p, size_t i, uint64_t w) {
  const auto* want = reinterpret_cast<const std::byte*>(&w);
  for (size_t b = 0; b < 8; ++b)
    if (p[i * 8 + b] != want[b]) return i * 8 + b;
  return i * 8;
}

}  // namespace

Content::Content(size_t size) : size_(size), words_(size / 8) {
  if (size % 8 != 0 || size < 64) throw std::invalid_argument("chunk size must be a multiple of 8, at least 64");
  base_.reset(new uint64_t[words_]);
  for (size_t i = 0; i < words_; ++i) base_[i] = base_word(i);
}

uint64_t Content::expected_word(uint64_t hash, size_t i) const {
  switch (i) {
    case 0: return kMagic;
    case 1: return hash;
    case 2: return size_;
    case 3: return kMagic ^ hash ^ size_ ^ kCheck;
    default: return is_stamp(i) ? stamp_word(hash, i) : base_[i];
  }
}

void Content::fill(std::byte* dst, uint64_t hash) const {
  std::memcpy(dst, base_.get(), size_);
  restamp(dst, hash);
}

void Content::restamp(std::byte* dst, uint64_t hash) const {
  for (size_t i = 0; i < kHeaderWords; ++i) store_word(dst, i, expected_word(hash, i));
  for (size_t i = kStampWords - 1; i < words_; i += kStampWords) store_word(dst, i, stamp_word(hash, i));
  store_word(dst, words_ - 1, stamp_word(hash, words_ - 1));
}

void Content::poison(std::byte* dst) const {
  for (size_t i = 0; i < kHeaderWords; ++i) store_word(dst, i, kPoison);
  for (size_t i = kStampWords - 1; i < words_; i += kStampWords) store_word(dst, i, kPoison);
  store_word(dst, words_ - 1, kPoison);
}

size_t Content::check_sampled(const std::byte* p, uint64_t hash) const {
  auto check = [&](size_t i) {
    const uint64_t w = expected_word(hash, i);
    return load_word(p, i) == w ? kOk : first_wrong_byte(p, i, w);
  };
  for (size_t i = 0; i < kHeaderWords; ++i)
    if (size_t bad = check(i); bad != kOk) return bad;
  for (size_t i = kStampWords - 1; i < words_; i += kStampWords)
    if (size_t bad = check(i); bad != kOk) return bad;
  if (size_t bad = check(words_ - 1); bad != kOk) return bad;
  Rng rng(hash);
  for (int k = 0; k < 16; ++k)
    if (size_t bad = check(rng.below(words_)); bad != kOk) return bad;
  return kOk;
}

size_t Content::check_full(const std::byte* p, uint64_t hash) const {
  // Runs of base words are compared with memcmp against the base image; the header and the
  // stamps one word at a time.
  const auto* base = reinterpret_cast<const std::byte*>(base_.get());
  size_t i = 0;
  while (i < words_) {
    if (i < kHeaderWords || is_stamp(i)) {
      const uint64_t w = expected_word(hash, i);
      if (load_word(p, i) != w) return first_wrong_byte(p, i, w);
      ++i;
      continue;
    }
    // The next stamp: the next multiple of kStampWords minus one, or the last word.
    const size_t end = std::min(words_ - 1, (i / kStampWords + 1) * kStampWords - 1);
    if (std::memcmp(p + i * 8, base + i * 8, (end - i) * 8) != 0) {
      for (size_t j = i; j < end; ++j)
        if (load_word(p, j) != base_[j]) return first_wrong_byte(p, j, base_[j]);
    }
    i = end;
  }
  return kOk;
}

}  // namespace kvbench
