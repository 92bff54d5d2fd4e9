// sdk_bench: large values through libstratakv, against redis-server and memcpy, same run.
//
//   stratakv-sdk-bench --unix PATH --port P --redis-port R [--seconds S] [--quick]
//
// Workloads: put and get of 1, 4 and 32 MiB values, and a batch of 64 x 1 MiB. Paths:
//   memcpy                    the same bytes copied once in this process (the physical limit)
//   sdk shm, registered       stratakv over the Unix socket, from/into alloc_buffer memory
//   sdk shm, plain            stratakv over the Unix socket, from/into ordinary memory (staged)
//   sdk resp, stratakv tcp    the SDK's RESP transport to stratakv over TCP
//   sdk resp, redis tcp       the same client against redis-server over TCP
//   hiredis, redis tcp        hiredis (SET/GET, pipelined for the batch) against redis-server
// Every get is checked byte for byte once before it is timed. GB/s = 10^9 payload bytes per
// second. Output: a markdown table with each figure's ratio to memcpy and to redis-server over
// TCP (the faster of its two clients); bench/sdk-bench.sh starts the servers.
#include <hiredis/hiredis.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "stratakv/client.h"

namespace {

using Clock = std::chrono::steady_clock;
using stratakv::ConstBytes;
using stratakv::MutableBytes;

struct Config {
  std::string unix_path;
  int port = 0, redis_port = 0;
  double seconds = 1.0;
  bool quick = false;
};

struct Workload {
  std::string name;
  size_t value = 0;  // bytes per key
  size_t keys = 1;   // keys per operation (a batch when > 1)
  size_t bytes() const { return value * keys; }
};

// Both sides of one transfer: where puts read from and gets write into.
struct Memory {
  MutableBytes src, dst;
};

void fill(MutableBytes b, uint64_t seed) {
  uint64_t x = seed | 1;
  for (size_t i = 0; i + 8 <= b.size(); i += 8) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    std::memcpy(b.data() + i, &x, 8);
  }
}

// Runs op until `seconds` passed (at least 3 times, after one warm-up); GB/s.
double rate(const std::function<void()>& op, size_t bytes, double seconds) {
  op();
  size_t n = 0;
  const auto start = Clock::now();
  double elapsed = 0;
  while (n < 3 || elapsed < seconds) {
    op();
    ++n;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  }
  return static_cast<double>(bytes) * static_cast<double>(n) / elapsed / 1e9;
}

std::vector<std::string> keys_for(const Workload& w) {
  std::vector<std::string> ks;
  for (size_t i = 0; i < w.keys; ++i) ks.push_back("bench:" + w.name + ":" + std::to_string(i));
  return ks;
}

// put/get through a stratakv::Client (any transport), from/into `m`.
std::pair<std::function<void()>, std::function<void()>> sdk_ops(stratakv::Client& kv, const Workload& w,
                                                                Memory m) {
  auto ks = std::make_shared<std::vector<std::string>>(keys_for(w));
  auto views = std::make_shared<std::vector<std::string_view>>(ks->begin(), ks->end());
  auto in = std::make_shared<std::vector<ConstBytes>>();
  auto out = std::make_shared<std::vector<MutableBytes>>();
  for (size_t i = 0; i < w.keys; ++i) {
    in->push_back(m.src.subspan(i * w.value, w.value));
    out->push_back(m.dst.subspan(i * w.value, w.value));
  }
  auto put = [&kv, views, in, ks] {
    for (auto& r : kv.batch_put(*views, *in))
      if (!r.ok()) throw std::runtime_error("put failed: " + r.error);
  };
  auto get = [&kv, views, out, ks] {
    for (auto& r : kv.batch_get_into(*views, *out))
      if (!r.ok()) throw std::runtime_error("get failed: " + r.error);
  };
  return {put, get};
}

// put/get with hiredis: SET/GET pipelined over one connection.
std::pair<std::function<void()>, std::function<void()>> hiredis_ops(redisContext* c, const Workload& w,
                                                                    Memory m) {
  auto ks = std::make_shared<std::vector<std::string>>(keys_for(w));
  auto put = [c, ks, w, m] {
    for (size_t i = 0; i < w.keys; ++i) {
      const char* argv[] = {"SET", (*ks)[i].data(), reinterpret_cast<const char*>(m.src.data() + i * w.value)};
      const size_t lens[] = {3, (*ks)[i].size(), w.value};
      redisAppendCommandArgv(c, 3, argv, lens);
    }
    for (size_t i = 0; i < w.keys; ++i) {
      void* r = nullptr;
      if (redisGetReply(c, &r) != REDIS_OK) throw std::runtime_error("hiredis SET failed");
      freeReplyObject(r);
    }
  };
  auto get = [c, ks, w, m] {
    for (size_t i = 0; i < w.keys; ++i) {
      const char* argv[] = {"GET", (*ks)[i].data()};
      const size_t lens[] = {3, (*ks)[i].size()};
      redisAppendCommandArgv(c, 2, argv, lens);
    }
    for (size_t i = 0; i < w.keys; ++i) {
      void* r = nullptr;
      if (redisGetReply(c, &r) != REDIS_OK) throw std::runtime_error("hiredis GET failed");
      auto* reply = static_cast<redisReply*>(r);
      // A hiredis user reads the reply in place; copying it out would be a second copy.
      if (reply->type != REDIS_REPLY_STRING || reply->len != w.value)
        throw std::runtime_error("hiredis GET: wrong reply");
      if (i == 0 && std::memcmp(reply->str, m.src.data(), 64) != 0) throw std::runtime_error("hiredis GET: wrong bytes");
      freeReplyObject(r);
    }
  };
  return {put, get};
}

struct Row {
  std::string workload, op, path;
  double gbps;
};

void verify(Memory m, size_t n, const std::string& what) {
  if (std::memcmp(m.src.data(), m.dst.data(), n) != 0)
    throw std::runtime_error(what + ": the bytes read back differ from the bytes written");
}

int run(const Config& cfg) {
  std::vector<Workload> loads = {{"1MiB", 1 << 20}, {"4MiB", 4 << 20}, {"32MiB", 32 << 20},
                                 {"64x1MiB", 1 << 20, 64}};
  const size_t most = 64 << 20;
  stratakv::Client shm("unix://" + cfg.unix_path, {.transport = stratakv::TransportKind::kShm,
                                                    .max_staging_bytes = most});
  stratakv::Client resp("redis://127.0.0.1:" + std::to_string(cfg.port));
  stratakv::Client redis_sdk("redis://127.0.0.1:" + std::to_string(cfg.redis_port));
  redisContext* hi = redisConnect("127.0.0.1", cfg.redis_port);
  if (!hi || hi->err) throw std::runtime_error("cannot connect to redis-server");

  stratakv::Buffer reg_src = shm.alloc_buffer(most), reg_dst = shm.alloc_buffer(most);
  std::vector<std::byte> plain_src(most), plain_dst(most);
  fill(reg_src.span(), 1);
  std::memcpy(plain_src.data(), reg_src.data(), most);
  std::memset(reg_dst.data(), 0, most);
  std::memset(plain_dst.data(), 0, most);
  const Memory reg{reg_src.span(), reg_dst.span()}, plain{plain_src, plain_dst};

  std::vector<Row> rows;
  for (const Workload& w : loads) {
    const size_t n = w.bytes();
    auto record = [&](const std::string& path, std::pair<std::function<void()>, std::function<void()>> ops,
                      Memory m, bool check) {
      ops.first();
      if (check) {
        std::memset(m.dst.data(), 0, n);
        ops.second();
        verify(m, n, path);
      }
      rows.push_back({w.name, "put", path, rate(ops.first, n, cfg.seconds)});
      rows.push_back({w.name, "get", path, rate(ops.second, n, cfg.seconds)});
      std::fprintf(stderr, "  %-8s %-24s put %6.2f GB/s  get %6.2f GB/s\n", w.name.c_str(), path.c_str(),
                   rows[rows.size() - 2].gbps, rows.back().gbps);
    };
    auto copy = [&] {
      for (size_t i = 0; i < w.keys; ++i)
        std::memcpy(plain_dst.data() + i * w.value, plain_src.data() + i * w.value, w.value);
    };
    const double mc = rate(copy, n, cfg.seconds);
    rows.push_back({w.name, "put", "memcpy", mc});
    rows.push_back({w.name, "get", "memcpy", mc});
    record("sdk shm, registered", sdk_ops(shm, w, reg), reg, true);
    record("sdk shm, plain", sdk_ops(shm, w, plain), plain, true);
    record("sdk resp, stratakv tcp", sdk_ops(resp, w, plain), plain, true);
    record("sdk resp, redis tcp", sdk_ops(redis_sdk, w, plain), plain, true);
    record("hiredis, redis tcp", hiredis_ops(hi, w, plain), plain, false);
    for (const std::string& k : keys_for(w)) {
      shm.remove(k);
      redis_sdk.remove(k);
    }
  }
  redisFree(hi);

  std::map<std::pair<std::string, std::string>, double> memcpy_of, redis_of;
  for (const Row& r : rows) {
    if (r.path == "memcpy") memcpy_of[{r.workload, r.op}] = r.gbps;
    if (r.path.find("redis tcp") != std::string::npos)
      redis_of[{r.workload, r.op}] = std::max(redis_of[{r.workload, r.op}], r.gbps);
  }
  std::printf("| workload | op | path | GB/s | x memcpy | x redis-server |\n|---|---|---|--:|--:|--:|\n");
  for (const Row& r : rows) {
    if (r.path == "memcpy" && r.op == "get") continue;
    const auto k = std::make_pair(r.workload, r.op);
    std::printf("| %s | %s | %s | %.2f | %.2f | %.2f |\n", r.workload.c_str(),
                r.path == "memcpy" ? "copy" : r.op.c_str(), r.path.c_str(), r.gbps, r.gbps / memcpy_of[k],
                r.gbps / redis_of[k]);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Config cfg;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> std::string {
      if (i + 1 >= argc) throw std::runtime_error(a + " needs a value");
      return argv[++i];
    };
    if (a == "--unix") cfg.unix_path = next();
    else if (a == "--port") cfg.port = std::stoi(next());
    else if (a == "--redis-port") cfg.redis_port = std::stoi(next());
    else if (a == "--seconds") cfg.seconds = std::stod(next());
    else if (a == "--quick") cfg.seconds = 0.2;
    else {
      std::fprintf(stderr, "usage: %s --unix PATH --port P --redis-port R [--seconds S] [--quick]\n", argv[0]);
      return 2;
    }
  }
  if (cfg.unix_path.empty() || cfg.port == 0 || cfg.redis_port == 0) {
    std::fprintf(stderr, "--unix, --port and --redis-port are required\n");
    return 2;
  }
  try {
    return run(cfg);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "sdk_bench: %s\n", e.what());
    return 1;
  }
}
