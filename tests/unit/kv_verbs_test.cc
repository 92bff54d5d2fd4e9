// The verbs fast path through the whole server, in one process: a real Server (listening on
// TCP, driven by hiredis) whose RDMA device is the fake NIC of tests/fakes, and a client that
// registers its buffer with the same fake. KV.CONNECT VERBS / KV.REGISTER VERBS / KV.PUT /
// KV.GET then move bytes by (fake) one-sided RDMA between the client's buffer and the value
// region, exactly as they would on a NIC: the server-side glue of server/kv_family.cc is what
// this covers; rdma/'s own tests cover the transport.
#include <doctest.h>
#include <hiredis/hiredis.h>

#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "fakes/fake_verbs.h"
#include "fakes/in_process_server.h"
#include "rdma/verbs_transport.h"

namespace {

constexpr size_t MiB = 1 << 20;
unsigned long long ull(size_t v) { return v; }  // hiredis's format has no %zu

struct Reply {
  redisReply* r;
  Reply(redisContext* c, void* p) : r(static_cast<redisReply*>(p)) {
    INFO("hiredis: " << c->errstr);
    REQUIRE(r != nullptr);
  }
  ~Reply() { freeReplyObject(r); }
  std::string str() const { return std::string(r->str, r->len); }
};

}  // namespace

TEST_CASE("KV.PUT / KV.GET over (fake) RDMA through the server") {
  fakes::FakeVerbs fake;
  fakes::InProcessServer s(fake, 64 * MiB);
  redisContext* c = redisConnect("127.0.0.1", s.port());
  REQUIRE((c != nullptr && c->err == 0));

  // The client's side: its device, its registered buffer, its queue pair.
  std::string err;
  rdma::DeviceOptions o;
  o.name = "fake1";
  auto dev = rdma::VerbsDevice::open(fake, o, err);
  REQUIRE(dev != nullptr);
  std::vector<char> buf(8 * MiB);
  rdma::BufferRegistration reg;
  REQUIRE(dev->register_buffer(buf.data(), buf.size(), reg, err));
  auto ep = rdma::VerbsEndpoint::create(*dev, {.remote_access = true}, err);
  REQUIRE(ep != nullptr);

  // Before KV.CONNECT, an RDMA segment cannot be registered.
  {
    Reply r(c, redisCommand(c, "KV.REGISTER VERBS %llu %llu %u", (unsigned long long)reg.addr,
                         (unsigned long long)reg.length, reg.rkey));
    CHECK(r.str() == "ERR KV.REGISTER VERBS needs KV.CONNECT VERBS first");
  }
  const rdma::QpAddress mine = ep->local_address();
  rdma::QpAddress theirs;
  {
    Reply r(c, redisCommand(c, "KV.CONNECT VERBS %s %u %u %u", mine.gid_hex().c_str(), mine.qpn,
                         mine.psn, mine.mtu));
    REQUIRE(r.r->type == REDIS_REPLY_ARRAY);
    REQUIRE(r.r->elements == 4);
    REQUIRE(rdma::QpAddress::parse_gid(std::string(r.r->element[0]->str), theirs.gid));
    theirs.qpn = static_cast<uint32_t>(r.r->element[1]->integer);
    theirs.psn = static_cast<uint32_t>(r.r->element[2]->integer);
    theirs.mtu = static_cast<uint32_t>(r.r->element[3]->integer);
  }
  REQUIRE(ep->connect(theirs, err));
  long long seg = 0;
  {
    Reply r(c, redisCommand(c, "KV.REGISTER VERBS %llu %llu %u", (unsigned long long)reg.addr,
                         (unsigned long long)reg.length, reg.rkey));
    REQUIRE(r.r->type == REDIS_REPLY_INTEGER);
    seg = r.r->integer;
  }

  // Put 3 MiB gathered from two pieces; GET over RESP sees it.
  std::mt19937 rng(7);
  std::string value(3 * MiB, '\0');
  for (auto& ch : value) ch = static_cast<char>(rng());
  std::memcpy(buf.data() + 100, value.data(), MiB);
  std::memcpy(buf.data() + 4 * MiB, value.data() + MiB, 2 * MiB);
  {
    Reply r(c, redisCommand(c, "KV.PUT k %llu %lld 100 %llu %lld %llu %llu", ull(value.size()), seg,
                         ull(MiB), seg, ull(4 * MiB), ull(2 * MiB)));
    CHECK(r.str() == "OK");
  }
  {
    Reply r(c, redisCommand(c, "GET k"));
    CHECK(r.str() == value);
  }
  // Get it back, into a window larger than the value: the first 3 MiB are written.
  std::memset(buf.data(), 0, buf.size());
  {
    Reply r(c, redisCommand(c, "KV.GET k %lld 0 %llu", seg, ull(4 * MiB)));
    REQUIRE(r.r->type == REDIS_REPLY_INTEGER);
    CHECK(r.r->integer == static_cast<long long>(value.size()));
  }
  CHECK(std::memcmp(buf.data(), value.data(), value.size()) == 0);
  CHECK(buf[value.size()] == 0);
  // Both transfers (3 MiB, over transfer.offload_threshold's 2 MiB) ran on the transfer pool;
  // with the threshold off the same RDMA WRITE runs inline on the connection's thread.
  auto offloaded = [&] {
    Reply r(c, redisCommand(c, "INFO fastpath"));
    const std::string info = r.str();
    const size_t at = info.find("transfers_offloaded:");
    REQUIRE(at != std::string::npos);
    return std::stoll(info.substr(at + 20));
  };
  CHECK(offloaded() == 2);
  {
    Reply r(c, redisCommand(c, "CONFIG SET transfer.offload_threshold 0"));
    CHECK(r.str() == "OK");
  }
  std::memset(buf.data(), 0, buf.size());
  {
    Reply r(c, redisCommand(c, "KV.GET k %lld 0 %llu", seg, ull(4 * MiB)));
    REQUIRE(r.r->type == REDIS_REPLY_INTEGER);
    CHECK(r.r->integer == static_cast<long long>(value.size()));
  }
  CHECK(std::memcmp(buf.data(), value.data(), value.size()) == 0);
  CHECK(offloaded() == 2);
  // Out of the segment: refused before any transfer.
  {
    Reply r(c, redisCommand(c, "KV.GET k %lld %llu 4096", seg, ull(8 * MiB - 100)));
    CHECK(r.str().find("is outside its segment") != std::string::npos);
  }
  // Pieces that each lie inside a (claimed) 2^62-byte segment but add up past 2^64: refused
  // before anything moves, not wrapped around to the 8 bytes of total_length.
  long long huge = 0;
  {
    Reply r(c, redisCommand(c, "KV.REGISTER VERBS %llu %llu %u", (unsigned long long)reg.addr,
                         1ull << 62, reg.rkey));
    REQUIRE(r.r->type == REDIS_REPLY_INTEGER);
    huge = r.r->integer;
  }
  const std::string wrap = [&] {
    std::string d;
    for (int i = 0; i < 4; ++i) d += " " + std::to_string(huge) + " 0 " + std::to_string(1ull << 62);
    return d + " " + std::to_string(seg) + " 0 8";  // 4 * 2^62 + 8 = 8 (mod 2^64)
  }();
  const std::string overflow = "ERR scatter-gather list is longer than 2^64-1 bytes";
  {
    Reply r(c, redisCommand(c, ("KV.PUT big 8" + wrap).c_str()));
    CHECK(r.r->type == REDIS_REPLY_ERROR);
    CHECK(r.str() == overflow);
  }
  {
    Reply r(c, redisCommand(c, ("KV.MPUT 1 big 8 5" + wrap).c_str()));
    REQUIRE(r.r->type == REDIS_REPLY_ARRAY);
    REQUIRE(r.r->elements == 1);
    CHECK(std::string(r.r->element[0]->str, r.r->element[0]->len) == overflow);
  }
  {
    Reply r(c, redisCommand(c, ("KV.GET k" + wrap).c_str()));
    CHECK(r.str() == overflow);
  }
  {
    Reply r(c, redisCommand(c, "EXISTS big"));
    CHECK(r.r->integer == 0);
  }
  {
    Reply r(c, redisCommand(c, "PING"));  // the server still answers
    CHECK(r.str() == "PONG");
  }
  redisFree(c);
}
