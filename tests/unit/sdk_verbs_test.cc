// The SDK's verbs transport end to end, in one process: a real Server (TCP, as in
// kv_verbs_test.cc) whose RDMA device is the fake NIC "fake0", and a stratakv::Client on
// redis://127.0.0.1:<port> whose injected VerbsApi is the same fake (it opens "fake1"). Bytes
// move by (fake) one-sided RDMA between the client's memory and the value region.
#include <doctest.h>
#include <hiredis/hiredis.h>

#include <cstring>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "fakes/fake_verbs.h"
#include "fakes/in_process_server.h"
#include "rdma/verbs_transport.h"
#include "stratakv/client.h"

namespace {

constexpr size_t MiB = 1 << 20;
using stratakv::ConstBytes;
using stratakv::MutableBytes;

// Forwards to the fake and records the QP numbers the client creates.
class RecordingVerbs final : public rdma::VerbsApi {
 public:
  explicit RecordingVerbs(rdma::VerbsApi& f) : f_(f) {}
  std::vector<uint32_t> qps() {
    std::lock_guard lk(mu_);
    return qps_;
  }
  ibv_device** get_device_list(int* n) override { return f_.get_device_list(n); }
  void free_device_list(ibv_device** l) override { f_.free_device_list(l); }
  const char* get_device_name(ibv_device* d) override { return f_.get_device_name(d); }
  ibv_context* open_device(ibv_device* d) override { return f_.open_device(d); }
  int close_device(ibv_context* c) override { return f_.close_device(c); }
  int query_device(ibv_context* c, ibv_device_attr* a) override { return f_.query_device(c, a); }
  int query_port(ibv_context* c, uint8_t p, ibv_port_attr* a) override {
    return f_.query_port(c, p, a);
  }
  int query_gid(ibv_context* c, uint8_t p, int i, ibv_gid* g) override {
    return f_.query_gid(c, p, i, g);
  }
  ibv_pd* alloc_pd(ibv_context* c) override { return f_.alloc_pd(c); }
  int dealloc_pd(ibv_pd* pd) override { return f_.dealloc_pd(pd); }
  ibv_mr* reg_mr(ibv_pd* pd, void* a, size_t n, int acc) override { return f_.reg_mr(pd, a, n, acc); }
  int dereg_mr(ibv_mr* mr) override { return f_.dereg_mr(mr); }
  ibv_cq* create_cq(ibv_context* c, int n) override { return f_.create_cq(c, n); }
  int destroy_cq(ibv_cq* cq) override { return f_.destroy_cq(cq); }
  int poll_cq(ibv_cq* cq, int n, ibv_wc* wc) override { return f_.poll_cq(cq, n, wc); }
  ibv_qp* create_qp(ibv_pd* pd, ibv_qp_init_attr* a) override {
    ibv_qp* qp = f_.create_qp(pd, a);
    std::lock_guard lk(mu_);
    if (qp != nullptr) qps_.push_back(qp->qp_num);
    return qp;
  }
  int destroy_qp(ibv_qp* qp) override { return f_.destroy_qp(qp); }
  int modify_qp(ibv_qp* qp, ibv_qp_attr* a, int m) override { return f_.modify_qp(qp, a, m); }
  int query_qp(ibv_qp* qp, ibv_qp_attr* a, int m, ibv_qp_init_attr* i) override {
    return f_.query_qp(qp, a, m, i);
  }
  int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad) override {
    return f_.post_send(qp, wr, bad);
  }

 private:
  rdma::VerbsApi& f_;
  std::mutex mu_;
  std::vector<uint32_t> qps_;
};

// One server for the whole process (the MemoryTier region is process-wide).
struct Fixture {
  fakes::FakeVerbs fake;
  fakes::InProcessServer server{fake, 128 * MiB};

  std::string url() const { return "redis://127.0.0.1:" + std::to_string(server.port()); }
  stratakv::Options options(rdma::VerbsApi& api) {
    stratakv::Options o;
    o.verbs_api = &api;
    o.rdma_device = "fake1";
    return o;
  }
};

Fixture& fx() {
  static Fixture f;
  return f;
}

std::string random_bytes(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (auto& c : s) c = static_cast<char>(rng());
  return s;
}

MutableBytes bytes_of(std::string& s) { return {reinterpret_cast<std::byte*>(s.data()), s.size()}; }

}  // namespace

TEST_CASE("verbs: chosen when both sides have a device; values round-trip byte-exact") {
  RecordingVerbs api(fx().fake);
  stratakv::Client kv(fx().url(), fx().options(api));
  CHECK(kv.transport() == "verbs");
  CHECK(api.qps().size() == 1);  // the first connection's queue pair

  for (size_t n : {size_t{1}, MiB, 8 * MiB}) {
    INFO("size " << n);
    const std::string key = "verbs:plain:" + std::to_string(n);
    const std::string v = random_bytes(n, static_cast<unsigned>(n));
    CHECK(kv.put(key, std::string_view(v)));  // plain memory: staged
    CHECK(kv.get(key) == v);
    // Zero copy: an alloc_buffer (registered with the NIC) both ways.
    stratakv::Buffer buf = kv.alloc_buffer(n + 64);
    CHECK(buf.zero_copy());
    std::memcpy(buf.data(), v.data(), n);
    CHECK(kv.put(key + ":zc", ConstBytes(buf.data(), n)));
    std::memset(buf.data(), 0, buf.size());
    CHECK(kv.get_into(key + ":zc", buf.span()) == n);
    CHECK(std::memcmp(buf.data(), v.data(), n) == 0);
  }
  CHECK(kv.get("verbs:missing") == std::nullopt);

  // register_buffer: caller memory registered with the NIC is zero copy too.
  std::string mine(2 * MiB, '\0');
  stratakv::Buffer reg = kv.register_buffer(mine.data(), mine.size());
  CHECK(reg.zero_copy());
  CHECK(kv.get_into("verbs:plain:1048576", bytes_of(mine)) == MiB);
  CHECK(mine.substr(0, MiB) == random_bytes(MiB, MiB));
}

TEST_CASE("verbs: scatter-gather, batches, a window too small, GET over RESP") {
  RecordingVerbs api(fx().fake);
  stratakv::Client kv(fx().url(), fx().options(api));
  REQUIRE(kv.transport() == "verbs");

  // Scatter-gather put: two plain pieces around a zero-copy one.
  const std::string v = random_bytes(3 * MiB + 5, 11);
  stratakv::Buffer mid = kv.alloc_buffer(MiB);
  std::memcpy(mid.data(), v.data() + MiB, MiB);
  const ConstBytes pieces[] = {stratakv::as_bytes(std::string_view(v).substr(0, MiB)),
                               ConstBytes(mid.data(), MiB),
                               stratakv::as_bytes(std::string_view(v).substr(2 * MiB))};
  CHECK(kv.put("verbs:sg", std::span<const ConstBytes>(pieces)));
  CHECK(kv.get("verbs:sg") == v);
  // ... and scattered back.
  std::string a(MiB, '\0'), b(3 * MiB, '\0');
  const MutableBytes out[] = {bytes_of(a), bytes_of(b)};
  CHECK(kv.get_into("verbs:sg", std::span<const MutableBytes>(out)) == v.size());
  CHECK(a + b.substr(0, v.size() - MiB) == v);

  // The value written by the SDK, read with hiredis.
  redisContext* c = redisConnect("127.0.0.1", fx().server.port());
  REQUIRE((c != nullptr && c->err == 0));
  auto* r = static_cast<redisReply*>(redisCommand(c, "GET verbs:sg"));
  REQUIRE(r != nullptr);
  CHECK(std::string(r->str, r->len) == v);
  freeReplyObject(r);
  redisFree(c);

  // A window too small: an error, nothing written.
  std::string small(100, 'x');
  CHECK_THROWS_WITH(kv.get_into("verbs:sg", bytes_of(small)),
                    ("ERR window of 100 bytes is smaller than the value (" +
                     std::to_string(v.size()) + " bytes)").c_str());
  CHECK(small == std::string(100, 'x'));

  // 64 keys in one batch each way; half from a zero-copy buffer, half from plain memory.
  constexpr size_t kKeys = 64, kSize = 4096;
  std::vector<std::string> keys, vals;
  std::vector<std::string_view> key_views;
  std::vector<ConstBytes> srcs;
  stratakv::Buffer zc = kv.alloc_buffer(kKeys * kSize);
  for (size_t i = 0; i < kKeys; ++i) {
    keys.push_back("verbs:batch:" + std::to_string(i));
    vals.push_back(random_bytes(kSize - i, static_cast<unsigned>(100 + i)));
  }
  for (size_t i = 0; i < kKeys; ++i) {
    key_views.push_back(keys[i]);
    if (i % 2 == 0) {
      std::memcpy(zc.data() + i * kSize, vals[i].data(), vals[i].size());
      srcs.push_back(ConstBytes(zc.data() + i * kSize, vals[i].size()));
    } else {
      srcs.push_back(stratakv::as_bytes(vals[i]));
    }
  }
  for (const auto& res : kv.batch_put(key_views, srcs)) CHECK(res.ok());
  std::memset(zc.data(), 0, zc.size());
  std::vector<std::string> plain(kKeys, std::string(kSize, '\0'));
  std::vector<MutableBytes> dsts;
  for (size_t i = 0; i < kKeys; ++i)
    dsts.push_back(i % 2 == 0 ? MutableBytes(zc.data() + i * kSize, kSize) : bytes_of(plain[i]));
  const auto got = kv.batch_get_into(key_views, dsts);
  REQUIRE(got.size() == kKeys);
  for (size_t i = 0; i < kKeys; ++i) {
    INFO("key " << i);
    REQUIRE(got[i].ok());
    CHECK(got[i].length == vals[i].size());
    CHECK(std::memcmp(dsts[i].data(), vals[i].data(), vals[i].size()) == 0);
  }
}

TEST_CASE("verbs: after a queue-pair error the transport reconnects and retries once") {
  RecordingVerbs api(fx().fake);
  stratakv::Options o = fx().options(api);
  o.max_connections = 1;  // one connection, one queue pair
  stratakv::Client kv(fx().url(), o);
  REQUIRE(kv.transport() == "verbs");
  REQUIRE(api.qps().size() == 1);
  const uint32_t qpn = api.qps()[0];
  const std::string v = random_bytes(MiB + 3, 21);

  REQUIRE(fx().fake.force_error(qpn));  // as a link failure would
  CHECK(fx().fake.state_of(qpn) == IBV_QPS_ERR);
  CHECK(kv.put("verbs:retry", std::string_view(v)));  // fails once, reconnects, retries
  CHECK(fx().fake.state_of(qpn) == IBV_QPS_RTS);
  CHECK(kv.get("verbs:retry") == v);

  REQUIRE(fx().fake.force_error(qpn));
  std::string back(2 * MiB, '\0');
  CHECK(kv.get_into("verbs:retry", bytes_of(back)) == v.size());  // get_into: retried too
  CHECK(back.substr(0, v.size()) == v);

  REQUIRE(fx().fake.force_error(qpn));
  const std::string_view keys[] = {"verbs:retry", "verbs:retry2"};
  const ConstBytes srcs[] = {stratakv::as_bytes(v), stratakv::as_bytes(std::string_view(v).substr(7))};
  for (const auto& res : kv.batch_put(keys, srcs)) CHECK(res.ok());  // a batch: retried too
  CHECK(kv.get("verbs:retry2") == v.substr(7));
  CHECK(api.qps().size() == 1);  // the same queue pair, reset: no new connection
}

TEST_CASE("verbs: without a client device, or with rdma off, the old choice stands") {
  fakes::FakeVerbs none(fakes::FakeVerbsConfig{.devices = {}});
  stratakv::Options o = fx().options(none);
  o.rdma_device.clear();
  stratakv::Client resp(fx().url(), o);
  CHECK(resp.transport() == "resp");
  CHECK(resp.put("verbs:fallback", std::string_view("abc")));
  CHECK(resp.get("verbs:fallback") == "abc");

  RecordingVerbs api(fx().fake);
  stratakv::Options off = fx().options(api);
  off.rdma = false;
  CHECK(stratakv::Client(fx().url(), off).transport() == "resp");
  CHECK(api.qps().empty());

  o.transport = stratakv::TransportKind::kVerbs;  // demanded, but no device here
  CHECK_THROWS_AS(stratakv::Client(fx().url(), o), stratakv::Error);
}
