// sdk_concurrency_test.cc - 8 client threads on one Client, each mixing single puts/gets,
// scatter-gather, batches and plain RESP SET/GET, byte-exact; plus concurrent writers and
// readers of one key, whose readers must always see one whole value.
#include <atomic>
#include <functional>
#include <mutex>
#include <random>
#include <thread>

#include "sdk_test_util.h"

using namespace sdktest;
using stratakv::ConstBytes;
using stratakv::MutableBytes;

namespace {

constexpr int kThreads = 8;

// A value that says which seed made it: 8 bytes of seed, then pattern(seed).
std::string stamped(size_t n, uint64_t seed) {
  std::string v = pattern(n, seed);
  std::memcpy(v.data(), &seed, 8);
  return v;
}

bool whole(const std::string& v) {
  if (v.size() < 8) return false;
  uint64_t seed;
  std::memcpy(&seed, v.data(), 8);
  return v == stamped(v.size(), seed);
}

}  // namespace

TEST_CASE("8 threads, every kind of call, byte-exact") {
  auto& kv = client();
  std::atomic<int> failures{0};
  std::function<void(int)> work;
  std::atomic<long> checked{0};
  std::mutex mu;
  std::string first_error;
  auto worker = [&](int t) {
    try {
      work(t);
    } catch (const std::exception& e) {  // an exception must not terminate the test binary
      ++failures;
      std::lock_guard lk(mu);
      if (first_error.empty()) first_error = e.what();
    } catch (...) {  // a failed REQUIRE
      ++failures;
    }
  };
  work = [&](int t) {
    std::mt19937_64 rng(t);
    Redis redis;
    stratakv::Buffer buf = kv.alloc_buffer(8 << 20);
    for (int it = 0; it < 40; ++it) {
      const size_t n = 1 + rng() % ((it % 5 == 0) ? (4 << 20) : 70000);
      const std::string k = key("mt:" + std::to_string(t) + ":" + std::to_string(it));
      const std::string v = pattern(n, rng());
      std::string got;
      switch (it % 5) {
        case 0: {  // plain memory, then a RESP GET
          kv.put(k, v);
          got = redis.str({"GET", k});
          break;
        }
        case 1: {  // RESP SET, then get_into a registered buffer
          redis.str({"SET", k, v});
          auto len = kv.get_into(k, buf.span());
          if (len) got.assign(reinterpret_cast<char*>(buf.data()), *len);
          break;
        }
        case 2: {  // gathered from a registered buffer in 4 pieces, read back whole
          std::memcpy(buf.data(), v.data(), n);
          std::vector<ConstBytes> pieces;
          for (size_t at = 0, step = n / 4 + 1; at < n; at += step)
            pieces.push_back(buf.span().subspan(at, std::min(step, n - at)));
          kv.put(k, std::span<const ConstBytes>(pieces));
          got = kv.get(k).value_or("");
          break;
        }
        case 3: {  // a batch of 8 keys of this thread
          std::vector<std::string> ks, vs;
          for (int j = 0; j < 8; ++j) ks.push_back(k + ":" + std::to_string(j)), vs.push_back(pattern(n / 8 + j + 1, j + n));
          std::vector<std::string_view> kvs(ks.begin(), ks.end());
          std::vector<ConstBytes> cvs;
          for (auto& x : vs) cvs.push_back(stratakv::as_bytes(x));
          for (auto& r : kv.batch_put(kvs, cvs)) if (!r.ok()) ++failures;
          std::vector<std::string> outs;
          std::vector<MutableBytes> ds;
          for (auto& x : vs) outs.emplace_back(x.size(), '\0');
          for (auto& o : outs) ds.push_back(bytes_of(o));
          auto res = kv.batch_get_into(kvs, ds);
          for (int j = 0; j < 8; ++j) if (!res[j].ok() || outs[j] != vs[j]) ++failures;
          kv.batch_remove(kvs);
          kv.put(k, v);
          got = kv.get(k).value_or("");
          break;
        }
        default: {  // into a registered buffer, scattered in 3 pieces
          kv.put(k, v);
          std::vector<MutableBytes> out = {buf.span().subspan(0, n / 3), buf.span().subspan(n / 3, n / 3 + 1),
                                           buf.span().subspan(2 * (n / 3) + 1, n)};
          auto len = kv.get_into(k, std::span<const MutableBytes>(out));
          if (len) got.assign(reinterpret_cast<char*>(buf.data()), *len);
        }
      }
      if (got != v) ++failures;
      ++checked;
      kv.remove(k);
    }
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) threads.emplace_back(worker, t);
  for (auto& th : threads) th.join();
  CHECK_MESSAGE(failures.load() == 0, first_error);
  CHECK(checked.load() == kThreads * 40);
}

TEST_CASE("concurrent writers and readers of one key see whole values") {
  auto& kv = client();
  const std::string k = key("hot");
  kv.put(k, stamped(1 << 20, 1));
  std::atomic<bool> stop{false};
  std::atomic<int> torn{0}, reads{0};
  std::vector<std::thread> threads;
  auto guard = [&](auto f) {
    return [&, f](int t) {
      try {
        f(t);
      } catch (...) {  // an error or a failed REQUIRE: counted, never a terminate
        ++torn;
        stop = true;
      }
    };
  };
  for (int t = 0; t < 3; ++t)  // writers: SDK, SDK with a buffer, RESP SET
    threads.emplace_back(guard([&](int t) {
      Redis redis;
      stratakv::Buffer buf = kv.alloc_buffer(2 << 20);
      for (uint64_t i = 0; !stop; ++i) {
        const std::string v = stamped((1 << 20) + (i % 3) * 4099, 1000 * t + i);
        if (t == 0) kv.put(k, v);
        else if (t == 1) std::memcpy(buf.data(), v.data(), v.size()), kv.put(k, ConstBytes(buf.span().first(v.size())));
        else redis.str({"SET", k, v});
      }
    }), t);
  for (int t = 0; t < 5; ++t)  // readers
    threads.emplace_back(guard([&](int t) {
      Redis redis;
      stratakv::Buffer buf = kv.alloc_buffer(2 << 20);
      for (int i = 0; i < 60; ++i) {
        std::string v;
        if (t == 0) v = redis.str({"GET", k});
        else if (t == 1) v = kv.get(k).value_or("");
        else if (auto len = kv.get_into(k, buf.span())) v.assign(reinterpret_cast<char*>(buf.data()), *len);
        if (!whole(v)) ++torn;
        ++reads;
      }
    }), t);
  for (size_t t = 3; t < threads.size(); ++t) threads[t].join();
  stop = true;
  for (size_t t = 0; t < 3; ++t) threads[t].join();
  CHECK(torn.load() == 0);
  CHECK(reads.load() == 5 * 60);
  kv.remove(k);
}
