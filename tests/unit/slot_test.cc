// Unit tests of cluster/slot.h against the values of the Redis Cluster specification and of
// redis-server's CLUSTER KEYSLOT (tests/integration/test_pipeline.py compares the two live).
#include <doctest.h>

#include <string>

#include "cluster/slot.h"

TEST_CASE("crc16 is XMODEM: the check value of the specification") {
  CHECK(cluster::crc16("123456789") == 0x31C3);
  CHECK(cluster::crc16("") == 0);
}

TEST_CASE("key_slot: values redis-server's CLUSTER KEYSLOT gives") {
  CHECK(cluster::key_slot("foo") == 12182);
  CHECK(cluster::key_slot("bar") == 5061);
  CHECK(cluster::key_slot("somekey") == 11058);
  CHECK(cluster::key_slot("") == 0);
  CHECK(cluster::key_slot("{user1000}.following") == 3443);
  CHECK(cluster::key_slot("foo{}{bar}") == 8363);
  CHECK(cluster::key_slot("foo{{bar}}zap") == 4015);
  CHECK(cluster::key_slot("}{x}") == 16287);
}

TEST_CASE("hash tags: the first non-empty {...} is hashed") {
  CHECK(cluster::hash_tag("{user1000}.following") == "user1000");
  CHECK(cluster::key_slot("{user1000}.following") == cluster::key_slot("{user1000}.followers"));
  CHECK(cluster::hash_tag("foo{}{bar}") == "foo{}{bar}");    // empty first tag: whole key
  CHECK(cluster::hash_tag("foo{{bar}}zap") == "{bar");        // up to the first '}'
  CHECK(cluster::hash_tag("foo{bar}{zap}") == "bar");         // only the first tag
  CHECK(cluster::hash_tag("no-close{abc") == "no-close{abc");
  CHECK(cluster::hash_tag("}{x}") == "x");
}

// The definition, one bit at a time (the specification's reference), against the table-driven one.
static uint16_t crc16_bitwise(std::string_view bytes) {
  uint16_t crc = 0;
  for (unsigned char c : bytes) {
    crc ^= static_cast<uint16_t>(c << 8);
    for (int i = 0; i < 8; ++i)
      crc = static_cast<uint16_t>((crc & 0x8000) ? (crc << 1) ^ 0x1021 : crc << 1);
  }
  return crc;
}

TEST_CASE("crc16 (slicing-by-8) equals the bitwise definition for every length and content") {
  std::string s;
  uint64_t x = 0x9E3779B97F4A7C15ull;
  for (size_t len = 0; len < 200; ++len) {
    CHECK(cluster::crc16(s) == crc16_bitwise(s));
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    s.push_back(static_cast<char>(x & 0xff));
  }
  CHECK(cluster::crc16(std::string(1000, '\xff')) == crc16_bitwise(std::string(1000, '\xff')));
}

TEST_CASE("every slot is in range") {
  for (int i = 0; i < 100000; ++i) CHECK(cluster::key_slot(std::to_string(i)) < cluster::kSlots);
}

TEST_CASE("key_slot (one pass, brace check per word) equals crc16(hash_tag(key)) & 16383") {
  // Keys of every length up to 40 with '{' and '}' at every position, and bytes that differ
  // from '{' by one bit (0x7a, 0x7f, 0xfb), which a word-at-a-time brace test must not confuse.
  const char fill[] = {'a', '\x7a', '\x7f', '\xfb', '}'};
  for (size_t len = 0; len <= 40; ++len) {
    for (char f : fill) {
      std::string key(len, f);
      CHECK(cluster::key_slot(key) == (cluster::crc16(cluster::hash_tag(key)) & 16383));
      for (size_t open = 0; open < len; ++open) {
        std::string k = key;
        k[open] = '{';
        for (size_t close = open; close < len; ++close) {
          std::string kc = k;
          if (close > open) kc[close] = '}';
          CHECK(cluster::key_slot(kc) == (cluster::crc16(cluster::hash_tag(kc)) & 16383));
        }
      }
    }
  }
}
