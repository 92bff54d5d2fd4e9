// tests/fakes/in_process_server.h - a whole stratakv Server inside the test process, whose RDMA
// device is the fake NIC "fake0" (fake_verbs.h): TCP on a free port, one I/O thread, run on a
// thread of its own. For tests of the server's verbs glue (kv_verbs_test.cc) and of the SDK's
// verbs transport (sdk_verbs_test.cc). The memory region is process-wide: one server per
// process at a time. Header-only; uses doctest's REQUIRE, so include it from tests only.
#pragma once

#include <doctest.h>

#include <cstddef>
#include <memory>
#include <string>
#include <thread>

#include "fakes/fake_verbs.h"
#include "rdma/verbs_transport.h"
#include "server/config.h"
#include "server/server.h"
#include "tiering/memory_tier.h"

namespace fakes {

struct InProcessServer {
  server::Config config;
  std::unique_ptr<server::Server> srv;
  std::thread thread;

  /// Starts the server with a memory region of `region_bytes`, registered with the fake NIC.
  InProcessServer(FakeVerbs& fake, size_t region_bytes) {
    REQUIRE_FALSE(config.set("port", "0", false));
    REQUIRE_FALSE(config.set("threads", "1", false));
    tiering::RegionOptions region;
    region.capacity = region_bytes;
    region.purge = false;  // a registered region keeps its pages
    std::string err;
    REQUIRE(tiering::MemoryTier::start(region, &err));
    rdma::DeviceOptions o;
    o.name = "fake0";
    auto device = rdma::VerbsDevice::open(fake, o, err);
    REQUIRE(device != nullptr);
    auto& r = tiering::MemoryTier::region();
    REQUIRE(device->register_region(r.base(), r.size(), err));
    srv = std::make_unique<server::Server>(config);
    srv->set_verbs(std::move(device));
    REQUIRE_FALSE(srv->listen());
    thread = std::thread([this] { srv->run(); });
  }
  ~InProcessServer() {
    srv->stop();
    thread.join();
  }
  InProcessServer(const InProcessServer&) = delete;
  InProcessServer& operator=(const InProcessServer&) = delete;

  /// The TCP port it listens on.
  int port() const { return srv->tcp_port(); }
};

}  // namespace fakes
