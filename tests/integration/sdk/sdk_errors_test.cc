// sdk_errors_test.cc - errors carry the server's text; options (TTL, NX), prefix lookups,
// buffer lifetimes and the server-side segment count; bad URLs and lost connections.
#include <chrono>
#include <thread>
#include <vector>

#include "sdk_test_util.h"

using namespace sdktest;
using stratakv::ConstBytes;
using stratakv::Error;

TEST_CASE("a window too small: the fast path's error text, nothing written") {
  auto& kv = client();
  const std::string k = key("err:window");
  kv.put(k, pattern(5000, 1));
  std::string dst(4096, 'z');
  try {
    kv.get_into(k, bytes_of(dst));
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.kind() == Error::Kind::kServer);
    CHECK(std::string(e.what()) == "ERR window of 4096 bytes is smaller than the value (5000 bytes)");
  }
  CHECK(dst == std::string(4096, 'z'));
  kv.remove(k);
}

TEST_CASE("server errors: OOM under noeviction, AUTH") {
  ServerProcess small({"--memory.capacity", "64mb", "--maxmemory", "8mb", "--maxmemory-policy", "noeviction",
                       "--requirepass", "secret"});
  const std::string url = url_of(small, ":secret@");
  stratakv::Client kv(url);
  CHECK(kv.transport() == (unix_mode() && server_has_fast_path() ? "shm" : "resp"));
  std::string v = pattern(1 << 20, 5);
  std::string error;
  for (int i = 0; i < 32 && error.empty(); ++i) {
    try {
      kv.put("oom:" + std::to_string(i), v);
    } catch (const Error& e) {
      CHECK(e.kind() == Error::Kind::kServer);
      error = e.what();
    }
  }
  MESSAGE("error: " << error);
  CHECK(error.rfind("OOM ", 0) == 0);
  CHECK(kv.get("oom:0").value() == v);  // the connection is still good
  const std::string bad = url_of(small, ":wrong@");
  try {
    stratakv::Client nope(bad);
    FAIL("no error");
  } catch (const Error& e) {
    CHECK(e.kind() == Error::Kind::kServer);
    CHECK(std::string(e.what()).rfind("WRONGPASS", 0) == 0);
  }
  const std::string none = url_of(small);
  CHECK_THROWS_AS(stratakv::Client(none).put("k", "v"), Error);
}

TEST_CASE("bad URLs and unreachable servers") {
  for (const char* u : {"http://x", "redis://", "redis://h:0", "redis://h:99999", "unix://relative.sock",
                        "redis://h/3", "unix:///x?foo=1"}) {
    CAPTURE(u);
    try {
      stratakv::Client c(u);
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(e.kind() == Error::Kind::kUsage);
    }
  }
  CHECK_THROWS_AS(stratakv::Client("unix:///nonexistent/stratakv.sock"), Error);
  try {
    stratakv::Client c("redis://127.0.0.1:1", {.connect_timeout_ms = 500});
  } catch (const Error& e) {
    CHECK(e.kind() == Error::Kind::kConnection);
  }
  CHECK_THROWS_AS(stratakv::Client(server().tcp_url(), {.transport = stratakv::TransportKind::kShm}), Error);
}

TEST_CASE("a lost server: connection errors, no crash") {
  auto gone = std::make_unique<ServerProcess>();
  stratakv::Client kv(url_of(*gone));
  stratakv::Buffer buf = kv.alloc_buffer(1 << 20);
  CHECK(kv.put("k", ConstBytes(buf.span())));
  gone.reset();
  for (int i = 0; i < 3; ++i) {
    try {
      kv.put("k", ConstBytes(buf.span()));
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(e.kind() == Error::Kind::kConnection);
    }
  }
}

TEST_CASE("TTL, NX, exists, remove") {
  auto& kv = client();
  const std::string k = key("opt");
  CHECK(kv.put(k, std::string_view("first"), stratakv::PutOptions{.ttl_ms = 300}));
  CHECK_FALSE(kv.put(k, std::string_view("second"), {.nx = true}));
  CHECK(kv.get(k).value() == "first");
  CHECK(kv.exists(k));
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  CHECK_FALSE(kv.exists(k));
  CHECK(kv.put(k, std::string_view("third"), {.nx = true}));
  CHECK(kv.remove(k));
  CHECK_FALSE(kv.remove(k));
  // a batch with NX: existing keys are refused, others stored
  std::vector<std::string_view> ks = {"nx:a", "nx:b"};
  kv.put("nx:a", std::string_view("old"));
  std::vector<ConstBytes> vs = {stratakv::as_bytes("new"), stratakv::as_bytes("new")};
  auto r = kv.batch_put(ks, vs, {.nx = true});
  CHECK(r[0].status == stratakv::Result::Status::kMiss);
  CHECK(r[1].ok());
  CHECK(kv.get("nx:a").value() == "old");
  CHECK(kv.batch_remove(ks) == 2);
}

TEST_CASE("prefix_match counts the present leading keys; PIN and UNPIN") {
  auto& kv = client();
  std::vector<std::string> chain;
  for (int i = 0; i < 10; ++i) chain.push_back(key("chain:" + std::to_string(i)));
  std::vector<std::string_view> view(chain.begin(), chain.end());
  for (int i = 0; i < 6; ++i) kv.put(chain[i], std::string_view("x"));
  kv.put(chain[8], std::string_view("x"));
  CHECK(kv.prefix_match(view) == 6);
  CHECK(kv.prefix_match(std::span(view).first(3)) == 3);
  if (server_has_fast_path()) {
    CHECK(kv.prefix_match(view, 5000) == 6);
    CHECK(kv.unpin(view) == 6);
    CHECK(kv.unpin(view) == 0);
  }
  kv.batch_remove(view);
  CHECK(kv.prefix_match(view) == 0);
}

TEST_CASE("register_buffer stages caller memory; buffers outlive their client") {
  stratakv::Buffer survivor;
  {
    stratakv::Client kv(url());
    std::vector<std::byte> mine(300000);
    fill(mine, 77);
    stratakv::Buffer reg = kv.register_buffer(mine.data(), mine.size());
    CHECK_FALSE(reg.zero_copy());
    CHECK(reg.data() == mine.data());
    CHECK(kv.put(key("reg"), ConstBytes(reg.span())));
    std::vector<std::byte> back(mine.size());
    CHECK(kv.get_into(key("reg"), back) == mine.size());
    CHECK(same(back, mine));
    survivor = kv.alloc_buffer(4096);
    CHECK(kv.put(key("reg"), ConstBytes(survivor.span())));
    CHECK_THROWS_AS(kv.alloc_buffer(0), Error);
  }
  std::memset(survivor.data(), 1, survivor.size());  // still mapped after the client is gone
  CHECK(survivor.data()[4095] == std::byte{1});
}

TEST_CASE("buffers are unregistered from the server when destroyed") {
  if (!expect_shm()) return;
  Redis redis;
  auto segments = [&] { return std::stol(redis.info_field("fastpath", "fastpath_segments")); };
  // Clients of earlier cases may still be closing (the server drops their segments when it
  // sees the disconnect): count from a figure that has stopped moving.
  long base = segments();
  for (int stable = 0, i = 0; stable < 3 && i < 100; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    const long now = segments();
    stable = now == base ? stable + 1 : 0;
    base = now;
  }
  {
    stratakv::Client kv(url(), {.max_connections = 1});
    CHECK(segments() == base + 1);  // the connection's staging buffer
    {
      std::vector<stratakv::Buffer> bufs;
      for (int i = 0; i < 5; ++i) {
        bufs.push_back(kv.alloc_buffer(65536));
        kv.put(key("seg"), ConstBytes(bufs.back().span()));
      }
      CHECK(segments() == base + 6);
    }
    kv.exists(key("seg"));  // the next call on the connection unregisters them
    CHECK(segments() == base + 1);
  }
  for (int i = 0; i < 50 && segments() != base; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  CHECK(segments() == base);
  client().remove(key("seg"));
}

TEST_CASE("against redis-server: unix:// falls back to RESP, prefix_match to EXISTS") {
  if (::access("/usr/bin/redis-server", X_OK) != 0) return;
  ServerProcess redis({}, "/usr/bin/redis-server");
  stratakv::Client kv(url_of(redis));
  CHECK(kv.transport() == "resp");
  std::string v = pattern((1 << 20) + 3, 9);
  stratakv::Buffer buf = kv.alloc_buffer(v.size());
  CHECK_FALSE(buf.zero_copy());
  CHECK(kv.put("a", v));
  CHECK(kv.get_into("a", buf.span()) == v.size());
  CHECK(same(buf.span(), bytes_of(v)));
  std::vector<std::string_view> chain = {"a", "b"};
  CHECK(kv.prefix_match(chain) == 1);
  if (unix_mode()) {
    try {
      stratakv::Client shm(redis.unix_url(), {.transport = stratakv::TransportKind::kShm});
      FAIL("no error");
    } catch (const Error& e) {
      CHECK(e.kind() == Error::Kind::kServer);
      CHECK(std::string(e.what()).rfind("ERR unknown command", 0) == 0);
    }
  }
}

TEST_CASE("leases taken on any thread are released by unpin on any other") {
  if (!server_has_fast_path()) return;
  stratakv::Client kv(url(), {.max_connections = 4});
  Redis redis;
  auto leased = [&] { return std::stol("0" + redis.info_field("fastpath", "leased_keys")); };
  const long base = leased();
  std::vector<std::vector<std::string>> chains(4);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 5; ++i) {
        chains[t].push_back(key("lease:" + std::to_string(t) + ":" + std::to_string(i)));
        kv.put(chains[t].back(), pattern(1000, i));  // keeps pooled connections busy meanwhile
      }
      std::vector<std::string_view> v(chains[t].begin(), chains[t].end());
      CHECK(kv.prefix_match(v, 10000) == 5);
    });
  for (auto& th : threads) th.join();
  CHECK(leased() == base + 20);
  for (auto& c : chains) {
    std::vector<std::string_view> v(c.begin(), c.end());
    CHECK(kv.unpin(v) == 5);
    kv.batch_remove(v);
  }
  CHECK(leased() == base);
}
