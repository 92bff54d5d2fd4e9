// bench/dict_bench.cc - tiering::Dict (the keyspace's table) against the std::unordered_map the
// keyspace used before: nanoseconds per insert, find (hit and miss) and erase, and allocated
// bytes per key, for keys like redis-benchmark's ("key:000000123456", 16 bytes).
//
//   stratakv-dict-bench [--keys N] [--rounds R]      (defaults: 1000000 keys, 3 rounds)
//
// Three tables, each holding tiering::Entry values (an empty ValueRef, so only the table's own
// memory counts): "unordered_map" is the old layout (std::string key, std::hash = murmur2),
// "unordered_map+xxh3" the same with the new hash (to separate the hash from the layout), and
// "Dict" the new table. Times are the best of R rounds; bytes come from jemalloc's
// stats.allocated when the process allocator is jemalloc.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "tiering/dict.h"
#include "tiering/keyspace.h"

#ifdef STRATAKV_JEMALLOC
#include <jemalloc/jemalloc.h>
#endif

namespace {

using tiering::Entry;

// Bytes the allocator has handed out and not taken back (0 when unknown).
size_t allocated_bytes() {
#ifdef STRATAKV_JEMALLOC
  uint64_t epoch = 1;
  size_t len = sizeof(epoch);
  mallctl("epoch", &epoch, &len, &epoch, len);
  size_t allocated = 0;
  len = sizeof(allocated);
  if (mallctl("stats.allocated", &allocated, &len, nullptr, 0) == 0) return allocated;
#endif
  return 0;
}

struct StdHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
struct Xxh3Hash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return tiering::hash_key(s); }
};
struct Eq {
  using is_transparent = void;
  bool operator()(std::string_view a, std::string_view b) const { return a == b; }
};

// The operations benchmarked, over either table type.
template <class H>
struct StdTable {
  std::unordered_map<std::string, Entry, H, Eq> m;
  void insert(std::string_view k) { m.try_emplace(std::string(k)).first->second.lfu = 1; }
  bool find(std::string_view k) {
    auto it = m.find(k);
    return it != m.end() && it->second.lfu == 1;
  }
  void erase(std::string_view k) { m.erase(m.find(k)); }
};
struct DictTable {
  tiering::Dict<Entry> m;
  void insert(std::string_view k) { m.try_emplace(k).first->second.lfu = 1; }
  bool find(std::string_view k) {
    auto* n = m.find(k);
    return n != nullptr && n->second.lfu == 1;
  }
  void erase(std::string_view k) { m.erase(m.find(k)); }
};

struct Result {
  double insert_ns = 1e30, hit_ns = 1e30, miss_ns = 1e30, erase_ns = 1e30;
  double bytes_per_key = 0;
};

template <class F>
double ns_per(size_t n, F&& f) {
  auto t0 = std::chrono::steady_clock::now();
  f();
  std::chrono::duration<double, std::nano> d = std::chrono::steady_clock::now() - t0;
  return d.count() / static_cast<double>(n);
}

template <class Table>
Result run(const std::vector<std::string>& keys, const std::vector<std::string>& absent,
           const std::vector<size_t>& order, int rounds) {
  Result r;
  const size_t n = keys.size();
  for (int round = 0; round < rounds; ++round) {
    const size_t before = allocated_bytes();
    auto* t = new Table();
    r.insert_ns = std::min(r.insert_ns, ns_per(n, [&] {
      for (const auto& k : keys) t->insert(k);
    }));
    r.bytes_per_key = static_cast<double>(allocated_bytes() - before) / static_cast<double>(n);
    size_t hits = 0;
    r.hit_ns = std::min(r.hit_ns, ns_per(n, [&] {
      for (size_t i : order) hits += t->find(keys[i]);
    }));
    r.miss_ns = std::min(r.miss_ns, ns_per(n, [&] {
      for (const auto& k : absent) hits += t->find(k);
    }));
    if (hits != n) std::fprintf(stderr, "bug: %zu hits of %zu\n", hits, n);
    r.erase_ns = std::min(r.erase_ns, ns_per(n, [&] {
      for (size_t i : order) t->erase(keys[i]);
    }));
    delete t;
  }
  return r;
}

// redis-benchmark's key shape: "key:" and 12 digits.
std::string make_key(const char* prefix, size_t i) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%s%012zu", prefix, i);
  return buf;
}

}  // namespace

int main(int argc, char** argv) {
  size_t n = 1'000'000;
  int rounds = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--keys") == 0) n = std::strtoull(argv[i + 1], nullptr, 10);
    else if (std::strcmp(argv[i], "--rounds") == 0) rounds = std::atoi(argv[i + 1]);
  }
  std::vector<std::string> keys, absent;
  keys.reserve(n);
  absent.reserve(n);
  for (size_t i = 0; i < n; ++i) keys.push_back(make_key("key:", i));
  for (size_t i = 0; i < n; ++i) absent.push_back(make_key("nop:", i));
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::shuffle(order.begin(), order.end(), std::mt19937_64(1));

  std::printf("%zu keys of %zu bytes, best of %d rounds (ns per operation)\n\n", n,
              keys[0].size(), rounds);
  std::printf("| table | insert | find hit | find miss | erase | bytes/key |\n");
  std::printf("|---|---:|---:|---:|---:|---:|\n");
  auto row = [](const char* name, const Result& r) {
    std::printf("| %s | %.1f | %.1f | %.1f | %.1f | %.1f |\n", name, r.insert_ns, r.hit_ns,
                r.miss_ns, r.erase_ns, r.bytes_per_key);
  };
  row("unordered_map (old)", run<StdTable<StdHash>>(keys, absent, order, rounds));
  row("unordered_map+xxh3", run<StdTable<Xxh3Hash>>(keys, absent, order, rounds));
  row("tiering::Dict", run<DictTable>(keys, absent, order, rounds));
  if (allocated_bytes() == 0) std::printf("\n(bytes/key needs jemalloc: not measured here)\n");
  return 0;
}
