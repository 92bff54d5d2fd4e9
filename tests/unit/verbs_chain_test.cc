// Unit tests of the verbs transport's pure parts and start-up: splitting two scatter-gather
// lists into work requests (rdma/verbs_chain.h), GID text, resolution of RDMA descriptors, and
// VerbsDevice::probe's one log line against the fake and against this machine's libibverbs.
#include <doctest.h>

#include <cstddef>
#include <string>
#include <vector>

#include "rdma/verbs_transport.h"
#include "tests/fakes/fake_verbs.h"

using rdma::ChainLimits;
using rdma::LocalPiece;
using rdma::RemotePiece;
using rdma::WorkChain;

namespace {

struct Sge {
  uint64_t addr;
  uint32_t length;
  uint32_t lkey;
};

std::vector<Sge> sges_of(const ibv_send_wr& wr) {
  std::vector<Sge> out;
  for (int i = 0; i < wr.num_sge; ++i) {
    out.push_back({wr.sg_list[i].addr, wr.sg_list[i].length, wr.sg_list[i].lkey});
  }
  return out;
}

bool operator==(const Sge& a, const Sge& b) {
  return a.addr == b.addr && a.length == b.length && a.lkey == b.lkey;
}

}  // namespace

TEST_CASE("build_chain cuts at every remote boundary and maps local boundaries to entries") {
  std::byte buf[200];
  const auto base = reinterpret_cast<uint64_t>(buf);
  const LocalPiece local[] = {{buf, 100, 7}, {buf + 100, 0, 7}, {buf + 150, 50, 8}};
  const RemotePiece remote[] = {{0x1000, 11, 30}, {0x9000, 12, 120}};
  WorkChain chain;
  std::string err;

  SUBCASE("enough entries and message size") {
    REQUIRE(rdma::build_chain(local, remote, IBV_WR_RDMA_WRITE, {16, 1u << 30}, chain, err));
    CHECK(chain.bytes == 150);
    REQUIRE(chain.wrs.size() == 2);
    CHECK(chain.wrs[0].opcode == IBV_WR_RDMA_WRITE);
    CHECK(chain.wrs[0].wr.rdma.remote_addr == 0x1000);
    CHECK(chain.wrs[0].wr.rdma.rkey == 11);
    CHECK(sges_of(chain.wrs[0]) == std::vector<Sge>{{base, 30, 7}});
    CHECK(chain.wrs[1].wr.rdma.remote_addr == 0x9000);
    CHECK(chain.wrs[1].wr.rdma.rkey == 12);
    CHECK(sges_of(chain.wrs[1]) == std::vector<Sge>{{base + 30, 70, 7}, {base + 150, 50, 8}});
  }
  SUBCASE("one entry per request") {
    REQUIRE(rdma::build_chain(local, remote, IBV_WR_RDMA_READ, {1, 1u << 30}, chain, err));
    REQUIRE(chain.wrs.size() == 3);
    CHECK(chain.wrs[1].wr.rdma.remote_addr == 0x9000);
    CHECK(sges_of(chain.wrs[1]) == std::vector<Sge>{{base + 30, 70, 7}});
    CHECK(chain.wrs[2].wr.rdma.remote_addr == 0x9000 + 70);
    CHECK(sges_of(chain.wrs[2]) == std::vector<Sge>{{base + 150, 50, 8}});
  }
  SUBCASE("message size limit") {
    REQUIRE(rdma::build_chain(local, remote, IBV_WR_RDMA_READ, {16, 40}, chain, err));
    REQUIRE(chain.wrs.size() == 4);  // 30 | 40 40 40
    CHECK(chain.wrs[2].wr.rdma.remote_addr == 0x9000 + 40);
    CHECK(sges_of(chain.wrs[2]) == std::vector<Sge>{{base + 70, 30, 7}, {base + 150, 10, 8}});
    CHECK(sges_of(chain.wrs[3]) == std::vector<Sge>{{base + 160, 40, 8}});
  }
  SUBCASE("lists of different lengths") {
    const RemotePiece short_remote[] = {{0x1000, 11, 149}};
    CHECK_FALSE(rdma::build_chain(local, short_remote, IBV_WR_RDMA_READ, {16, 64}, chain, err));
    CHECK(err == "ERR RDMA scatter-gather lists differ in length (local 150 bytes, remote 149 "
                 "bytes)");
  }
}

TEST_CASE("QpAddress GIDs are 32 hex digits") {
  rdma::QpAddress a;
  a.gid = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x1a, 0x4b, 0xff, 0xfe, 0x0c, 0xde, 0xf1};
  CHECK(a.gid_hex() == "fe80000000000000021a4bfffe0cdef1");
  std::array<uint8_t, 16> g{};
  REQUIRE(rdma::QpAddress::parse_gid("FE80000000000000021A4BFFFE0CDEF1", g));
  CHECK(g == a.gid);
  CHECK_FALSE(rdma::QpAddress::parse_gid("fe80000000000000021a4bfffe0cdef", g));
  CHECK_FALSE(rdma::QpAddress::parse_gid("ge80000000000000021a4bfffe0cdef1", g));
  CHECK(rdma::mtu_bytes(rdma::mtu_from_bytes(2048)) == 2048);
  CHECK(rdma::mtu_from_bytes(1500) == 0);
}

TEST_CASE("build_chain refuses lists whose lengths add up past 2^64") {
  std::byte buf[8];
  const LocalPiece local[] = {{buf, 8, 7}};
  // 4 * 2^62 + 8 wraps to 8, the local total: without a checked sum the chain would walk past
  // the one local piece.
  const RemotePiece remote[] = {{0x1000, 11, 1ull << 62}, {0x1000, 11, 1ull << 62},
                                {0x1000, 11, 1ull << 62}, {0x1000, 11, 1ull << 62},
                                {0x1000, 11, 8}};
  WorkChain chain;
  std::string err;
  CHECK_FALSE(rdma::build_chain(local, remote, IBV_WR_RDMA_READ, {16, 1u << 30}, chain, err));
  CHECK(err == "ERR RDMA scatter-gather list is longer than 2^64-1 bytes");
  CHECK(chain.wrs.empty());
}

TEST_CASE("resolve_remote refuses descriptors whose lengths add up past 2^64") {
  rdma::SegmentTable table;
  const uint64_t id = table.add_verbs(0x10000, 1ull << 62, 77);
  std::vector<rdma::Descriptor> sgl(4, rdma::Descriptor{id, 0, 1ull << 62});
  sgl.push_back({id, 0, 8});  // 4 * 2^62 + 8 = 8 (mod 2^64)
  std::vector<RemotePiece> out;
  uint64_t total = 0;
  std::string err;
  CHECK_FALSE(rdma::resolve_remote(table, sgl, out, total, err));
  CHECK(err == "ERR scatter-gather list is longer than 2^64-1 bytes");
  sgl.resize(3);  // 3 * 2^62 fits
  REQUIRE(rdma::resolve_remote(table, sgl, out, total, err));
  CHECK(total == 3 * (1ull << 62));
}

TEST_CASE("resolve_remote checks descriptors like the shm transport") {
  rdma::SegmentTable table;
  const uint64_t id = table.add_verbs(0x10000, 4096, 77);
  const rdma::Descriptor good[] = {{id, 0, 100}, {id, 4000, 96}};
  std::vector<RemotePiece> out;
  uint64_t total = 0;
  std::string err;
  REQUIRE(rdma::resolve_remote(table, good, out, total, err));
  CHECK(total == 196);
  REQUIRE(out.size() == 2);
  CHECK((out[1].addr == 0x10000 + 4000 && out[1].rkey == 77 && out[1].length == 96));

  const rdma::Descriptor outside[] = {{id, 4000, 97}};
  CHECK_FALSE(rdma::resolve_remote(table, outside, out, total, err));
  CHECK(err == "ERR descriptor (" + std::to_string(id) +
                   " 4000 97) is outside its segment of 4096 bytes");
  const rdma::Descriptor empty[] = {{id, 0, 0}};
  CHECK_FALSE(rdma::resolve_remote(table, empty, out, total, err));
  const rdma::Descriptor unknown[] = {{id + 1000, 0, 1}};
  CHECK_FALSE(rdma::resolve_remote(table, unknown, out, total, err));
  CHECK(err ==
        "ERR segment " + std::to_string(id + 1000) + " is not registered on this connection");
}

TEST_CASE("probe logs one line: enabled, or why not") {
  std::string line;
  SUBCASE("no device") {
    fakes::FakeVerbsConfig cfg;
    cfg.devices.clear();
    fakes::FakeVerbs fake(cfg);
    CHECK(rdma::VerbsDevice::probe(fake, {}, line) == nullptr);
    CHECK(line == "RDMA: no device found, fast path over verbs disabled");
  }
  SUBCASE("first device") {
    fakes::FakeVerbs fake;
    auto d = rdma::VerbsDevice::probe(fake, {}, line);
    REQUIRE(d != nullptr);
    CHECK(d->name() == "fake0");
    CHECK(line == "RDMA: device fake0 port 1, mtu 4096, fast path over verbs enabled");
  }
  SUBCASE("named device, present and missing") {
    fakes::FakeVerbs fake;
    rdma::DeviceOptions o;
    o.name = "fake1";
    auto d = rdma::VerbsDevice::probe(fake, o, line);
    REQUIRE(d != nullptr);
    CHECK(d->name() == "fake1");
    o.name = "mlx5_9";
    CHECK(rdma::VerbsDevice::probe(fake, o, line) == nullptr);
    CHECK(line == "RDMA: device mlx5_9 not found (have: fake0 fake1), fast path over verbs "
                  "disabled");
  }
  SUBCASE("port down, InfiniBand port, missing GID") {
    fakes::FakeVerbsConfig cfg;
    cfg.port_state = IBV_PORT_DOWN;
    fakes::FakeVerbs down(cfg);
    CHECK(rdma::VerbsDevice::probe(down, {}, line) == nullptr);
    CHECK(line == "RDMA: device fake0 port 1 is down, fast path over verbs disabled");
    cfg.port_state = IBV_PORT_ACTIVE;
    cfg.link_layer = IBV_LINK_LAYER_INFINIBAND;
    fakes::FakeVerbs ib(cfg);
    CHECK(rdma::VerbsDevice::probe(ib, {}, line) == nullptr);
    CHECK(line.find("only RoCE is supported") != std::string::npos);
    fakes::FakeVerbs fake;
    rdma::DeviceOptions o;
    o.gid_index = 3;
    CHECK(rdma::VerbsDevice::probe(fake, o, line) == nullptr);
    CHECK(line == "RDMA: device fake0 port 1 has no GID at index 3, fast path over verbs "
                  "disabled");
  }
  SUBCASE("this machine's libibverbs") {
    int n = 0;
    ibv_device** list = rdma::real_verbs().get_device_list(&n);
    if (list != nullptr) rdma::real_verbs().free_device_list(list);
    auto d = rdma::VerbsDevice::probe(rdma::real_verbs(), {}, line);
    MESSAGE(line);
    if (list == nullptr || n == 0) {  // the build machines: no RDMA device
      CHECK(d == nullptr);
      CHECK(line == "RDMA: no device found, fast path over verbs disabled");
    } else {
      CHECK(line.find("RDMA: ") == 0);
    }
  }
}
