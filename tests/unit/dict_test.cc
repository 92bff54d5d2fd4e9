// Unit tests of tiering::Dict: operations against a std::unordered_map oracle (through grow,
// shrink and incremental rehashing), node stability, iteration while rehashing, Redis's SCAN
// guarantee across resizes between calls, random_node. (Keyspace::scan's guarantee is tested
// in keyspace_test.cc.)
#include <doctest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "tiering/dict.h"
#include "tiering/keyspace.h"

using tiering::Dict;

namespace {

using IntDict = Dict<uint64_t>;

std::string name(std::string_view prefix, long i) {
  std::string s(prefix);
  s += std::to_string(i);
  return s;
}

// Checks that `d` holds exactly `oracle` (each element once, by iteration and by find).
void check_same(IntDict& d, const std::unordered_map<std::string, uint64_t>& oracle) {
  REQUIRE(d.size() == oracle.size());
  size_t n = 0;
  std::unordered_set<std::string> seen;
  for (const auto& [key, value] : d) {
    ++n;
    auto it = oracle.find(std::string(key));
    REQUIRE(it != oracle.end());
    CHECK(it->second == value);
    CHECK(seen.insert(std::string(key)).second);
  }
  CHECK(n == oracle.size());
  for (const auto& [k, v] : oracle) {
    const IntDict& cd = d;
    const auto* node = cd.find(k);
    REQUIRE(node != nullptr);
    CHECK(node->second == v);
  }
}

// Tracks the table size at rest (no resize in progress): how often it grew and shrank.
struct ResizeLog {
  size_t last = 0, grows = 0, shrinks = 0;
  template <class D> void note(const D& d) {
    if (d.rehashing()) return;
    size_t b = d.bucket_count();
    if (last != 0 && b > last) ++grows;
    if (last != 0 && b < last) ++shrinks;
    last = b;
  }
};

}  // namespace

TEST_CASE("dict: insert, find, erase, keys inline, structured bindings") {
  IntDict d;
  CHECK(d.empty());
  CHECK(d.bucket_count() == 0);
  CHECK(d.find("a") == nullptr);
  CHECK_FALSE(d.erase("a"));

  auto [a, inserted] = d.try_emplace("a");
  CHECK(inserted);
  a->second = 1;
  CHECK(a->key() == "a");
  CHECK(a->first == "a");
  CHECK(std::string(a->first) == "a");
  std::string copy = a->first;  // converts like the std::string key it replaces
  CHECK(copy == "a");
  CHECK(d.try_emplace("a").first == a);
  CHECK_FALSE(d.try_emplace("a").second);
  CHECK(d.find("a") == a);
  CHECK(d.count("a") == 1);
  CHECK(d.count("b") == 0);

  // Binary-safe keys, the empty key, a long key.
  std::string bin("x\0y", 3), lng(1000, 'k');
  d.try_emplace(bin).first->entry() = 2;
  d.try_emplace("").first->entry() = 3;
  d.try_emplace(lng).first->entry() = 4;
  CHECK(d.find(bin)->key() == bin);
  CHECK(d.find(std::string_view("x\0z", 3)) == nullptr);
  CHECK(d.find("x") == nullptr);
  CHECK(d.find("")->second == 3);
  CHECK(d.find(lng)->second == 4);
  CHECK(d.size() == 4);

  auto& [k, v] = *d.find(lng);
  CHECK(std::string_view(k) == lng);
  v = 5;
  CHECK(d.find(lng)->second == 5);

  CHECK(d.erase(bin));
  CHECK_FALSE(d.erase(bin));
  d.erase(d.find(""));
  CHECK(d.size() == 2);
  d.clear();
  CHECK(d.empty());
  CHECK(d.find("a") == nullptr);
}

TEST_CASE("dict: the keyspace node is one 56-byte header plus the key") {
  // next, Entry (ValueRef: 8, deadline, access stats, the slot list's two links), hash, length.
  // The slot links (16 bytes) are Redis 7's slot_to_keys metadata: per-slot counts and
  // iteration at O(keys in the slot).
  static_assert(sizeof(tiering::Shard::Item) == 56);
  static_assert(sizeof(IntDict::Node) == 24);
}

TEST_CASE("dict: grows at load factor 1, shrinks at 1/8, incrementally") {
  IntDict d;
  ResizeLog log;
  for (int i = 0; i < 4; ++i) d.try_emplace(name("k", i));
  CHECK(d.bucket_count() == 4);
  CHECK_FALSE(d.rehashing());
  d.try_emplace("k4");  // used == size: a resize to 8 starts
  CHECK(d.rehashing());
  CHECK(d.bucket_count() == 4 + 8);
  while (d.rehash_step(1)) {
  }
  CHECK(d.bucket_count() == 8);
  for (int i = 5; i < 10'000; ++i) {
    d.try_emplace(name("k", i));
    log.note(d);
  }
  CHECK(log.grows >= 10);
  while (d.rehash_step(100)) {
  }
  CHECK(d.bucket_count() == 16384);
  // Erase down to 1/8 of 16384: a shrink starts.
  for (int i = 0; i < 10'000 - 2048; ++i) d.erase(name("k", i));
  CHECK(d.rehashing());
  while (d.rehash_step(100)) {
  }
  CHECK(d.bucket_count() == 2048);
  for (int i = 0; i < 10'000; ++i) d.erase(name("k", i));
  while (d.rehash_step(100)) {
  }
  CHECK(d.empty());
  CHECK(d.bucket_count() == 4);
}

TEST_CASE("dict: random operations against an unordered_map oracle, through many resizes") {
  std::mt19937_64 rng(42);
  IntDict d;
  std::unordered_map<std::string, uint64_t> oracle;
  std::unordered_map<std::string, const IntDict::Node*> nodes;  // nodes never move
  ResizeLog log;
  size_t ops_while_rehashing = 0;
  auto key_of = [&](uint64_t r) {
    // Mostly short keys, some long ones, some binary: about 2000 distinct keys.
    std::string k = name(r % 7 == 0 ? std::string(40, 'L') : "key:", static_cast<long>(r % 500));
    if (r % 11 == 0) k.push_back('\0');
    return k;
  };
  for (int op = 0; op < 300'000; ++op) {
    // Phases of 50k ops: insert-heavy, then erase-heavy, so the table grows and shrinks.
    const bool grow = (op / 50'000) % 2 == 0;
    const uint64_t r = rng();
    std::string k = key_of(r >> 8);
    ops_while_rehashing += d.rehashing();
    // 0-3 insert or assign (erase in an erase phase), 4-5 find, 6-8 erase, 9 rehash step.
    int kind = static_cast<int>(r % 10);
    if (!grow && kind <= 3) kind = 6;
    switch (kind) {
      case 0: case 1: case 2: case 3: {
        auto [n, ins] = d.try_emplace(k);
        REQUIRE(ins == (oracle.count(k) == 0));
        if (ins) nodes[k] = n;
        else REQUIRE(nodes[k] == n);
        n->second = r;
        oracle[k] = r;
        break;
      }
      case 4: case 5: {
        IntDict::Node* n = d.find(k);
        auto it = oracle.find(k);
        REQUIRE((n != nullptr) == (it != oracle.end()));
        if (n) {
          CHECK(n->second == it->second);
          CHECK(n == nodes[k]);
          CHECK(n->key() == k);
        }
        break;
      }
      case 6: case 7: case 8: {
        if (r % 2 == 0) {
          REQUIRE(d.erase(k) == (oracle.erase(k) == 1));
        } else if (IntDict::Node* n = d.find(k)) {
          d.erase(n);
          REQUIRE(oracle.erase(k) == 1);
        }
        nodes.erase(k);
        break;
      }
      default:
        d.rehash_step(r % 4);
    }
    log.note(d);
    if (op % 10'000 == 0) check_same(d, oracle);
  }
  check_same(d, oracle);
  CHECK(log.grows >= 5);
  CHECK(log.shrinks >= 3);  // one or more per erase phase
  CHECK(ops_while_rehashing > 1000);
  MESSAGE("grows " << log.grows << ", shrinks " << log.shrinks << ", ops while rehashing "
                   << ops_while_rehashing);
}

TEST_CASE("dict: iteration while rehashing visits every element once") {
  IntDict d;
  for (int i = 0; i < 1024; ++i) d.try_emplace(name("k", i)).first->second = i;
  while (d.rehash_step(100)) {
  }
  d.try_emplace("k1024").first->second = 1024;  // starts a resize to 2048
  REQUIRE(d.rehashing());
  for (int step = 0; step < 40; ++step) {
    CAPTURE(step);
    std::vector<int> seen(1025, 0);
    size_t n = 0;
    for (const auto& [key, value] : d) {
      ++seen[value];
      ++n;
      CHECK(key == name("k", static_cast<long>(value)));
    }
    CHECK(n == d.size());
    CHECK(std::count(seen.begin(), seen.end(), 1) == 1025);
    d.rehash_step(5);  // part of the way: both tables hold elements
  }
  CHECK(d.rehashing());
}

TEST_CASE("dict: node addresses and key views survive every resize") {
  IntDict d;
  std::vector<std::pair<std::string, IntDict::Node*>> keep;
  for (int i = 0; i < 100; ++i) keep.emplace_back(name("keep:", i), d.try_emplace(name("keep:", i)).first);
  std::vector<std::string_view> views;
  for (auto& [k, n] : keep) views.push_back(n->key());
  for (int round = 0; round < 5; ++round) {
    for (int i = 0; i < 20'000; ++i) d.try_emplace(name("tmp:", i));
    for (int i = 0; i < 20'000; ++i) d.erase(name("tmp:", i));
  }
  for (size_t i = 0; i < keep.size(); ++i) {
    CHECK(d.find(keep[i].first) == keep[i].second);
    CHECK(views[i] == keep[i].first);
  }
}

TEST_CASE("dict: scan over a static table returns every element exactly once") {
  for (int n : {0, 1, 5, 100, 5000}) {
    for (bool mid_rehash : {false, true}) {
      CAPTURE(n);
      CAPTURE(mid_rehash);
      IntDict d;
      for (int i = 0; i < n; ++i) d.try_emplace(name("k", i));
      while (d.rehash_step(100)) {
      }
      if (mid_rehash && n > 0) {
        while (!d.rehashing()) d.try_emplace(name("x", static_cast<long>(d.size())));
        d.rehash_step(3);
      }
      std::unordered_map<std::string, int> seen;
      uint64_t cursor = 0;
      do {
        cursor = d.scan(cursor, [&](const IntDict::Node& node) { ++seen[std::string(node.key())]; });
      } while (cursor != 0);
      CHECK(seen.size() == d.size());
      for (const auto& [k, c] : seen) CHECK(c == 1);
    }
  }
}

// Redis's guarantee: an element present for the whole scan is returned at least once, even
// when the table grows and shrinks (and is mid-rehash) between calls.
TEST_CASE("dict: scan guarantee across growth and shrink between calls") {
  for (uint64_t seed : {1, 2, 3}) {
    CAPTURE(seed);
    std::mt19937_64 rng(seed);
    IntDict d;
    constexpr int kOrig = 300;
    for (int i = 0; i < kOrig; ++i) d.try_emplace(name("orig:", i));
    std::set<std::string> deleted, seen;
    std::vector<std::string> tmp;  // churn keys present now
    long next_tmp = 0;
    ResizeLog log;
    size_t calls = 0, calls_rehashing = 0;
    uint64_t cursor = 0;
    do {
      calls_rehashing += d.rehashing();
      cursor = d.scan(cursor, [&](const IntDict::Node& n) { seen.insert(std::string(n.key())); });
      ++calls;
      // Between calls: swing the churn between 0 and ~5000 keys (grow 512 -> 8192 buckets,
      // then shrink back), with some rehash steps, and delete an original now and then.
      const bool grow = (calls / 20) % 2 == 0;
      for (int i = 0; i < 250; ++i) {
        if (grow) {
          tmp.push_back(name("tmp:", next_tmp++));
          d.try_emplace(tmp.back());
        } else if (!tmp.empty()) {
          size_t j = rng() % tmp.size();
          std::swap(tmp[j], tmp.back());
          CHECK(d.erase(tmp.back()));
          tmp.pop_back();
        }
        log.note(d);
      }
      if (rng() % 4 == 0) d.rehash_step(rng() % 50);
      if (rng() % 8 == 0) {
        std::string victim = name("orig:", static_cast<long>(rng() % kOrig));
        d.erase(victim);
        deleted.insert(victim);
      }
      log.note(d);
    } while (cursor != 0 && calls < 1'000'000);
    CHECK(cursor == 0);
    int missed = 0;
    for (int i = 0; i < kOrig; ++i) {
      std::string k = name("orig:", i);
      if (!deleted.count(k) && !seen.count(k)) ++missed;
    }
    CHECK(missed == 0);
    CHECK(log.grows >= 2);
    CHECK(log.shrinks >= 2);
    CHECK(calls_rehashing > 0);
    MESSAGE("scan calls " << calls << " (" << calls_rehashing << " mid-rehash), grows "
                          << log.grows << ", shrinks " << log.shrinks << ", originals deleted "
                          << deleted.size());
  }
}

TEST_CASE("dict: random_node reaches many elements, also mid-rehash and when sparse") {
  std::mt19937_64 rng(9);
  IntDict d;
  CHECK(d.random_node(rng) == nullptr);
  for (int i = 0; i < 1000; ++i) d.try_emplace(name("k", i));
  std::set<const IntDict::Node*> picked;
  for (int i = 0; i < 5000; ++i) picked.insert(d.random_node(rng));
  CHECK(picked.size() > 900);
  // A big table being shrunk, with few elements left.
  for (int i = 0; i < 1000; ++i) d.try_emplace(name("k", i));
  for (int i = 0; i < 997; ++i) d.erase(name("k", i));
  picked.clear();
  for (int i = 0; i < 1000; ++i) {
    const auto* n = d.random_node(rng);
    REQUIRE(n != nullptr);
    picked.insert(n);
  }
  CHECK(picked.size() == 3);
}

TEST_CASE("dict: move leaves the source empty and usable") {
  IntDict a;
  for (int i = 0; i < 100; ++i) a.try_emplace(name("k", i));
  IntDict b = std::move(a);
  CHECK(b.size() == 100);
  CHECK(a.empty());  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
  a.try_emplace("again");
  CHECK(a.size() == 1);
  a = std::move(b);
  CHECK(a.size() == 100);
  CHECK(a.find("again") == nullptr);
}
