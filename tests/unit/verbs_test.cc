// Unit tests of the verbs transport (rdma/verbs_transport.h) against tests/fakes/fake_verbs:
// a "server" device with a registered value region and a "client" device with a registered
// buffer, in one process, with one connected queue pair each. Every transfer is checked byte
// for byte, and every failure for its error text and for the bytes it must not have written.
#include <doctest.h>

#include <algorithm>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "rdma/verbs_transport.h"
#include "tests/fakes/fake_verbs.h"

using rdma::RemotePiece;
using rdma::VerbsDevice;
using rdma::VerbsEndpoint;

namespace {

constexpr uint32_t kTimeoutMs = 2000;
using Bytes = std::vector<std::byte>;

void fill(std::byte* p, size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<std::byte>(rng());
}

// Splits `total` bytes into `n` nonzero lengths at random places.
std::vector<uint64_t> cut(uint64_t total, size_t n, std::mt19937& rng) {
  std::vector<uint64_t> at{0, total};
  while (at.size() < n + 1) {
    const uint64_t c = 1 + rng() % (total - 1);
    if (std::find(at.begin(), at.end(), c) == at.end()) at.push_back(c);
  }
  std::sort(at.begin(), at.end());
  std::vector<uint64_t> lengths;
  for (size_t i = 1; i < at.size(); ++i) lengths.push_back(at[i] - at[i - 1]);
  return lengths;
}

// A server (fake0, value region) and a client (fake1, one registered buffer), connected.
struct Pair {
  fakes::FakeVerbs fake;
  std::unique_ptr<VerbsDevice> server_dev, client_dev;
  Bytes region, buffer;
  rdma::BufferRegistration reg;
  std::unique_ptr<VerbsEndpoint> server, client;
  std::string err;

  explicit Pair(fakes::FakeVerbsConfig cfg = {}, rdma::DeviceOptions opts = {})
      : fake(std::move(cfg)), region(1 << 20), buffer(1 << 20) {
    opts.name = "fake0";
    server_dev = VerbsDevice::open(fake, opts, err);
    REQUIRE(server_dev != nullptr);
    opts.name = "fake1";
    client_dev = VerbsDevice::open(fake, opts, err);
    REQUIRE(client_dev != nullptr);
    REQUIRE(server_dev->register_region(region.data(), region.size(), err));
    REQUIRE(client_dev->register_buffer(buffer.data(), buffer.size(), reg, err));
    server = VerbsEndpoint::create(*server_dev, {}, err);
    client = VerbsEndpoint::create(*client_dev, {.remote_access = true}, err);
    REQUIRE((server && client));
    connect();
  }
  void connect() {
    REQUIRE(server->connect(client->local_address(), err));
    REQUIRE(client->connect(server->local_address(), err));
  }
  // Both sides reset after an error, each with a fresh PSN (the flow of a repeated KV.CONNECT).
  void reconnect_both() {
    REQUIRE(client->reconnect(err));
    REQUIRE(server->reconnect(client->local_address(), err));
    REQUIRE(client->connect(server->local_address(), err));
  }
  RemotePiece remote(uint64_t offset, uint64_t length, uint32_t rkey = 0) const {
    return {reg.addr + offset, rkey != 0 ? rkey : reg.rkey, length};
  }
  iovec local(uint64_t offset, uint64_t length) { return {region.data() + offset, length}; }
  bool put(uint64_t region_off, uint64_t client_off, uint64_t n, uint32_t rkey = 0) {
    const iovec l[] = {local(region_off, n)};
    const RemotePiece r[] = {remote(client_off, n, rkey)};
    return server->read(l, r, kTimeoutMs, err);
  }
  bool get(uint64_t region_off, uint64_t client_off, uint64_t n, uint32_t rkey = 0) {
    const iovec l[] = {local(region_off, n)};
    const RemotePiece r[] = {remote(client_off, n, rkey)};
    return server->write(l, r, kTimeoutMs, err);
  }
  bool same(uint64_t region_off, uint64_t client_off, uint64_t n) const {
    return std::equal(region.begin() + region_off, region.begin() + region_off + n,
                      buffer.begin() + client_off);
  }
};

}  // namespace

TEST_CASE("put (RDMA READ) and get (RDMA WRITE) move the exact bytes") {
  Pair p;
  CHECK(p.server->local_address().gid_hex() != p.client->local_address().gid_hex());
  CHECK(p.server->query_state() == IBV_QPS_RTS);
  for (uint64_t n : {1ull, 4095ull, 4096ull, 65537ull, 512ull * 1024}) {
    CAPTURE(n);
    fill(p.buffer.data(), n, static_cast<uint32_t>(n));
    REQUIRE_MESSAGE(p.put(4096, 0, n), p.err);
    CHECK(p.same(4096, 0, n));
    std::fill(p.buffer.begin(), p.buffer.end(), std::byte{0});
    REQUIRE_MESSAGE(p.get(4096, 8192, n), p.err);
    CHECK(p.same(4096, 8192, n));
    CHECK(p.buffer[8191] == std::byte{0});
    CHECK(p.buffer[8192 + n] == std::byte{0});
  }
  CHECK(p.fake.cq_overruns() == 0);
}

TEST_CASE("scatter-gather with different boundaries on both sides, 1 to 64 pieces") {
  fakes::FakeVerbsConfig cfg;
  rdma::DeviceOptions opts;
  SUBCASE("roomy device") {}
  SUBCASE("tight limits: 4 entries (2 for READ), 1000-byte messages, 4 requests in flight") {
    cfg.max_sge = 4;
    cfg.max_sge_rd = 2;
    cfg.max_msg_sz = 1000;
    opts.send_queue_depth = 4;
  }
  Pair p(cfg, opts);
  std::mt19937 rng(42);
  for (size_t n = 1; n <= 64; ++n) {
    const size_t m = 1 + rng() % 64;  // remote pieces
    const uint64_t total = 64 + rng() % (64 * 1024);
    CAPTURE(n);
    CAPTURE(m);
    CAPTURE(total);
    // Local pieces in the region at [0, 512K), remote ones in the client buffer: both with gaps.
    std::vector<iovec> local;
    std::vector<RemotePiece> remote;
    uint64_t at = 0;
    for (uint64_t len : cut(total, n, rng)) {
      at += rng() % 64;
      local.push_back(p.local(at, len));
      at += len;
    }
    std::vector<iovec> client_view;  // the remote pieces as the client sees them
    at = 0;
    for (uint64_t len : cut(total, m, rng)) {
      at += rng() % 64;
      remote.push_back(p.remote(at, len));
      client_view.push_back({p.buffer.data() + at, len});
      at += len;
    }
    Bytes value(total);
    fill(value.data(), total, static_cast<uint32_t>(n));
    rdma::scatter(value, client_view);
    REQUIRE_MESSAGE(p.server->read(local, remote, kTimeoutMs, p.err), p.err);
    Bytes got(total);
    rdma::gather(local, got);
    CHECK(got == value);

    // Back into the client at other places, cut differently.
    std::fill(p.buffer.begin(), p.buffer.end(), std::byte{0});
    remote.clear();
    at = 600 * 1024;
    client_view.clear();
    for (uint64_t len : cut(total, 1 + rng() % 64, rng)) {
      at += rng() % 64;
      remote.push_back(p.remote(at, len));
      client_view.push_back({p.buffer.data() + at, len});
      at += len;
    }
    REQUIRE_MESSAGE(p.server->write(local, remote, kTimeoutMs, p.err), p.err);
    std::fill(got.begin(), got.end(), std::byte{0});
    rdma::gather(client_view, got);
    CHECK(got == value);
  }
  CHECK(p.fake.max_sge_seen() <= cfg.max_sge);
  CHECK(p.fake.cq_overruns() == 0);
}

TEST_CASE("a wrong rkey fails with a remote access error and writes nothing") {
  Pair p;
  fill(p.buffer.data(), 4096, 1);
  const Bytes before = p.region;
  SUBCASE("put") {
    CHECK_FALSE(p.put(0, 0, 4096, p.reg.rkey ^ 0x40000000u));
    CHECK(p.region == before);
  }
  SUBCASE("get, with the lkey given as rkey") {
    const Bytes client_before = p.buffer;
    CHECK_FALSE(p.get(0, 0, 4096, p.reg.lkey));
    CHECK(p.buffer == client_before);
  }
  CHECK(p.err == "ERR RDMA transfer failed: remote access error");
  CHECK(p.server->needs_reconnect());
  CHECK(p.fake.state_of(p.client->qp_num()) == IBV_QPS_ERR);  // the responder errs too
  CHECK_FALSE(p.put(0, 0, 16));
  CHECK(p.err == "ERR RDMA queue pair is in error state; reconnect it");
  p.reconnect_both();
  REQUIRE_MESSAGE(p.put(0, 0, 4096), p.err);
  CHECK(p.same(0, 0, 4096));
}

TEST_CASE("out of bounds fails and writes nothing") {
  Pair p;
  fill(p.buffer.data(), p.buffer.size(), 2);
  const Bytes region_before = p.region, client_before = p.buffer;
  SUBCASE("put reading past the client's buffer") {
    CHECK_FALSE(p.put(0, p.buffer.size() - 100, 101));
    CHECK(p.err == "ERR RDMA transfer failed: remote access error");
  }
  SUBCASE("get writing past the client's buffer") {
    CHECK_FALSE(p.get(0, p.buffer.size() - 1, 2));
    CHECK(p.err == "ERR RDMA transfer failed: remote access error");
  }
  SUBCASE("local piece outside the registered region") {
    const iovec l[] = {{p.region.data() + p.region.size() - 10, 20}};
    const RemotePiece r[] = {p.remote(0, 20)};
    CHECK_FALSE(p.server->read(l, r, kTimeoutMs, p.err));
    CHECK(p.err == "ERR RDMA local buffer is not registered with the device");
    CHECK_FALSE(p.server->needs_reconnect());  // refused before anything was posted
  }
  CHECK(p.region == region_before);
  CHECK(p.buffer == client_before);
}

TEST_CASE("access flags: a read-only buffer cannot be written, the server exposes nothing") {
  Pair p;
  Bytes ro(8192);
  fill(ro.data(), ro.size(), 3);
  rdma::BufferRegistration ro_reg;
  REQUIRE(p.client_dev->register_buffer(ro.data(), ro.size(), ro_reg, p.err,
                                        IBV_ACCESS_REMOTE_READ));
  const RemotePiece r[] = {{ro_reg.addr, ro_reg.rkey, 4096}};
  const iovec l[] = {p.local(0, 4096)};
  REQUIRE_MESSAGE(p.server->read(l, r, kTimeoutMs, p.err), p.err);  // put from it: fine
  CHECK(std::equal(ro.begin(), ro.begin() + 4096, p.region.begin()));
  const Bytes ro_before = ro;
  fill(p.region.data(), 4096, 4);
  CHECK_FALSE(p.server->write(l, r, kTimeoutMs, p.err));  // get into it: no remote write
  CHECK(p.err == "ERR RDMA transfer failed: remote access error");
  CHECK(ro == ro_before);
  CHECK(p.client_dev->unregister_buffer(ro_reg));

  // The client's queue pair can target the server, but the server grants no remote access.
  p.reconnect_both();
  const Bytes region_before = p.region;
  const iovec cl[] = {{p.buffer.data(), 64}};
  const RemotePiece sr[] = {{reinterpret_cast<uint64_t>(p.region.data()), 0x80000100u, 64}};
  CHECK_FALSE(p.client->write(cl, sr, kTimeoutMs, p.err));
  CHECK(p.err == "ERR RDMA transfer failed: remote invalid request");
  CHECK(p.region == region_before);
}

TEST_CASE("a queue pair forced into error fails, and reconnect restores it") {
  Pair p;
  fill(p.buffer.data(), 4096, 5);
  REQUIRE(p.fake.force_error(p.server->qp_num()));
  CHECK_FALSE(p.put(0, 0, 4096));
  CHECK(p.err == "ERR RDMA transfer failed: work request flushed (queue pair in error state)");
  CHECK(p.server->needs_reconnect());
  CHECK(p.server->query_state() == IBV_QPS_ERR);
  CHECK(p.region[0] == std::byte{0});

  const uint32_t old_psn = p.server->local_address().psn;
  REQUIRE(p.server->reconnect(p.err));
  CHECK(p.server->local_address().psn != old_psn);
  CHECK(p.server->query_state() == IBV_QPS_RTS);
  // The client still expects the old PSN: nothing arrives until it connects to the new one.
  CHECK_FALSE(p.put(0, 0, 4096));
  CHECK(p.err == "ERR RDMA transfer failed: transport retry counter exceeded (peer unreachable)");
  REQUIRE(p.server->reconnect(p.err));
  REQUIRE(p.client->connect(p.server->local_address(), p.err));
  REQUIRE_MESSAGE(p.put(0, 0, 4096), p.err);
  CHECK(p.same(0, 0, 4096));
}

TEST_CASE("a transfer that does not complete times out, is flushed and writes nothing") {
  Pair p;
  fill(p.buffer.data(), 4096, 6);
  REQUIRE(p.fake.stall(p.server->qp_num(), true));
  const iovec l[] = {p.local(0, 4096)};
  const RemotePiece r[] = {p.remote(0, 4096)};
  CHECK_FALSE(p.server->read(l, r, 30, p.err));
  CHECK(p.err == "ERR RDMA transfer timed out after 30 ms");
  CHECK(p.server->needs_reconnect());
  REQUIRE(p.fake.stall(p.server->qp_num(), false));
  CHECK(p.region[0] == std::byte{0});
  p.reconnect_both();
  REQUIRE_MESSAGE(p.put(0, 0, 4096), p.err);
  CHECK(p.same(0, 0, 4096));
}

TEST_CASE("misuse is refused without breaking the queue pair") {
  Pair p;
  const iovec l[] = {p.local(0, 100)};
  const RemotePiece r[] = {p.remote(0, 99)};
  CHECK_FALSE(p.server->read(l, r, kTimeoutMs, p.err));
  CHECK(p.err.find("ERR RDMA scatter-gather lists differ in length") == 0);
  CHECK_FALSE(p.server->needs_reconnect());
  rdma::QpAddress bad = p.client->local_address();
  bad.mtu = 1500;
  CHECK_FALSE(p.server->connect(bad, p.err));
  CHECK(p.err == "ERR RDMA path MTU must be 256, 512, 1024, 2048 or 4096");
  auto fresh = VerbsEndpoint::create(*p.server_dev, {}, p.err);
  REQUIRE(fresh != nullptr);
  CHECK_FALSE(fresh->write(l, r, kTimeoutMs, p.err));
  CHECK(p.err == "ERR RDMA queue pair is not connected");
}

TEST_CASE("endpoints on several threads share the device's completion queue") {
  Pair p;
  constexpr int kThreads = 3, kRounds = 200;
  std::vector<std::unique_ptr<VerbsEndpoint>> servers, clients;
  for (int t = 0; t < kThreads; ++t) {
    servers.push_back(VerbsEndpoint::create(*p.server_dev, {}, p.err));
    clients.push_back(VerbsEndpoint::create(*p.client_dev, {.remote_access = true}, p.err));
    REQUIRE(servers[t]->connect(clients[t]->local_address(), p.err));
    REQUIRE(clients[t]->connect(servers[t]->local_address(), p.err));
  }
  std::vector<int> failures(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      const uint64_t off = static_cast<uint64_t>(t) * 64 * 1024, n = 16 * 1024 + t;
      std::string err;
      for (int i = 0; i < kRounds; ++i) {
        fill(p.buffer.data() + off, n, static_cast<uint32_t>(t * kRounds + i));
        const iovec l[] = {p.local(off, n / 3), p.local(off + n / 3, n - n / 3)};
        const RemotePiece put[] = {p.remote(off, n)};
        const RemotePiece get[] = {p.remote(off + 32 * 1024, n)};
        if (!servers[t]->read(l, put, kTimeoutMs, err) ||
            !servers[t]->write(l, get, kTimeoutMs, err) ||
            !std::equal(p.buffer.begin() + off, p.buffer.begin() + off + n,
                        p.buffer.begin() + off + 32 * 1024)) {
          ++failures[t];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(failures == std::vector<int>(kThreads, 0));
  CHECK(p.fake.cq_overruns() == 0);
}

TEST_CASE("the shared CQ admits only the endpoints it can hold; nothing leaks") {
  fakes::FakeVerbs fake;
  std::string err;
  {
    rdma::DeviceOptions o;
    o.cq_entries = 128;
    o.send_queue_depth = 64;
    auto dev = VerbsDevice::open(fake, o, err);
    REQUIRE(dev != nullptr);
    auto a = VerbsEndpoint::create(*dev, {}, err);
    auto b = VerbsEndpoint::create(*dev, {}, err);
    REQUIRE((a && b));
    CHECK(VerbsEndpoint::create(*dev, {}, err) == nullptr);
    CHECK(err == "ERR RDMA completion queue is full (2 queue pairs)");
    b.reset();
    CHECK(dev->endpoints() == 1);
    CHECK(VerbsEndpoint::create(*dev, {}, err) != nullptr);
    Bytes buf(4096);
    rdma::BufferRegistration r;
    REQUIRE(dev->register_buffer(buf.data(), buf.size(), r, err));
    uint32_t lkey = 0;
    CHECK(dev->find_lkey(buf.data() + 100, 3996, lkey));
    CHECK(lkey == r.lkey);
    CHECK_FALSE(dev->find_lkey(buf.data() + 100, 3997, lkey));
  }
  CHECK(fake.live_objects() == 0);
}
