// tests/unit/ssd_test_util.h - what the SSD tests of the ssd_test executable share: a scratch
// directory, and reading a record back into a string.
#pragma once

#include <doctest.h>
#include <stdlib.h>

#include <cstddef>
#include <filesystem>
#include <mutex>
#include <optional>
#include <span>
#include <string>

#include "tiering/ssd_store.h"
#include "tiering/ssd_tier.h"

namespace ssd_test {

/// A fresh directory under /tmp, removed with everything in it at the end of the test.
struct TempDir {
  std::string path;
  TempDir() {
    char tmpl[] = "/tmp/stratakv-ssd-test-XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
};

/// The bytes of a string, as the store's write API takes them.
inline std::span<const std::byte> span_of(const std::string& s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

/// Reads `key` from the store into a std::string; nullopt when absent. Any other failure fails
/// the test.
inline std::optional<std::string> read_value(tiering::SsdStore& s, const std::string& key) {
  std::string out;
  size_t size = 0;
  tiering::SsdStatus st = s.read(key, [&](size_t n) {
    out.resize(n);
    return std::span<std::byte>(reinterpret_cast<std::byte*>(out.data()), n);
  }, &size);
  if (st.code == tiering::SsdStatus::Code::kNotFound) return std::nullopt;
  INFO(st.message);
  REQUIRE(st.ok());
  CHECK(size == out.size());
  return out;
}

/// Offers `key`'s memory value to `tier` as the evictor does (queued), under its shard's lock;
/// returns the bytes demote() took (0: refused). The value must be in memory.
inline uint64_t demote(tiering::SsdTier& tier, tiering::Keyspace& ks, const std::string& key) {
  tiering::Shard& s = ks.shard_of(key);
  std::lock_guard lock(s.mu);
  tiering::Shard::Item* item = s.find(key, tiering::now_ms());
  REQUIRE(item != nullptr);
  return tier.demote(s, item, tiering::now_ms(), /*queue=*/true);
}

}  // namespace ssd_test
