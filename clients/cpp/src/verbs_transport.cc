// verbs_transport.cc - the RDMA fast path (docs/fast-path.md, "The verbs transport"): the
// server moves payloads by one-sided RDMA READ/WRITE between the client's memory and the
// value's home, on one RC queue pair per connection.
//
// Each connection creates its own rdma::VerbsEndpoint (remote access granted: the server reads
// and writes our registered memory) on the ClientCore's device and connects it to the server's
// queue pair with KV.CONNECT VERBS. Memory is registered with the device once (alloc_buffer and
// register_buffer, in ClientCore) and with each connection on first use (KV.REGISTER VERBS
// addr len rkey -> segment id); plain memory goes through a staging buffer registered the same
// way. The commands are those of shm (segment_transport.cc).
//
// A failed transfer ("ERR RDMA transfer failed: ...", a timeout, a queue pair in error) fails
// the command and publishes nothing; both queue pairs are then in error. The transport resets
// its endpoint (fresh PSN), sends KV.CONNECT VERBS with the new address (the server resets its
// queue pair too), connects to the server's new address, and retries the failed keys once.
#include <sys/mman.h>

#include <string>
#include <vector>

#include "core.h"
#include "segment_transport.h"
#include "shared_memory.h"

namespace stratakv::detail {
namespace {

// The errors after which both queue pairs must be reset ("ERR RDMA transfer failed: ...",
// "... timed out ...", "... queue pair is in error state ...", "... post failed ...").
bool is_transfer_error(std::string_view error) {
  return error.starts_with("ERR RDMA ") && !error.starts_with("ERR RDMA is not available");
}

[[noreturn]] void rdma_fail(const std::string& error) {
  throw Error(Error::Kind::kUsage, "RDMA: " + error);
}

// Anonymous memory registered with the NIC and with one connection.
struct VerbsStaging final : Staging {
  explicit VerbsStaging(rdma::VerbsDevice& d) : device(d) {}
  ~VerbsStaging() override {
    if (reg.handle != nullptr) device.unregister_buffer(reg);
    if (data != nullptr) unmap(data, size);
  }
  rdma::VerbsDevice& device;
  rdma::BufferRegistration reg;
};

class VerbsBackend final : public SegmentBackend {
 public:
  VerbsBackend(Session& s, rdma::VerbsDevice& device) : s_(s), device_(device) {}
  std::string_view name() const override { return "verbs"; }

  uint64_t register_segment(const BufferState& b) override { return register_reg(b.reg); }

  std::unique_ptr<Staging> make_staging(size_t size) override {
    auto st = std::make_unique<VerbsStaging>(device_);
    st->data = map_anonymous(size);
    st->size = size;
    std::string error;
    if (!device_.register_buffer(st->data, size, st->reg, error)) rdma_fail(error);
    st->seg = register_reg(st->reg);
    return st;
  }

 private:
  uint64_t register_reg(const rdma::BufferRegistration& reg) {
    Args a{"KV.REGISTER", "VERBS"};
    a.add(reg.addr).add(reg.length).add(uint64_t{reg.rkey});
    return segment_id(s_, s_.call(a));
  }

  Session& s_;
  rdma::VerbsDevice& device_;
};

class VerbsTransport final : public Transport {
 public:
  VerbsTransport(Session& s, ClientCore& core) : s_(s) {
    rdma::VerbsDevice* device = core.verbs_device();
    if (device == nullptr) throw Error(Error::Kind::kUsage, "RDMA: no device");
    std::string error;
    ep_ = rdma::VerbsEndpoint::create(*device, {.remote_access = true}, error);
    if (!ep_) rdma_fail(error);
    connect_server();  // throws the server's "ERR RDMA is not available on this server"
    inner_ = make_segment_transport(s, core, std::make_unique<VerbsBackend>(s, *device));
  }
  std::string_view name() const override { return "verbs"; }

  void put(std::span<const PutItem> items, const PutOptions& o, std::span<Result> out) override {
    inner_->put(items, o, out);
    retry_failed(items, out, [&](std::span<const PutItem> again, std::span<Result> again_out) {
      inner_->put(again, o, again_out);
    });
  }

  void get_into(std::span<const GetItem> items, std::span<Result> out) override {
    inner_->get_into(items, out);
    retry_failed(items, out, [&](std::span<const GetItem> again, std::span<Result> again_out) {
      inner_->get_into(again, again_out);
    });
  }

  std::optional<size_t> get_with(std::string_view key, const Allocator& alloc) override {
    try {
      return inner_->get_with(key, alloc);
    } catch (const Error& e) {
      if (!e.is_server_error() || !is_transfer_error(e.what())) throw;
    }
    reconnect();
    return inner_->get_with(key, alloc);
  }

  void forget_buffers(std::span<const uint64_t> ids) override { inner_->forget_buffers(ids); }

 private:
  // Items whose result is a transfer error: reconnect, run them once more, write their new
  // results in place. (Nothing was published for them, so NX and TTL apply afresh.)
  template <class Item, class Run>
  void retry_failed(std::span<const Item> items, std::span<Result> out, Run&& run) {
    std::vector<size_t> failed;
    for (size_t i = 0; i < items.size(); ++i)
      if (out[i].status == Result::Status::kError && is_transfer_error(out[i].error))
        failed.push_back(i);
    if (failed.empty()) return;
    reconnect();
    std::vector<Item> again;
    again.reserve(failed.size());
    for (size_t i : failed) again.push_back(items[i]);
    std::vector<Result> again_out(failed.size());
    run(std::span<const Item>(again), std::span<Result>(again_out));
    for (size_t j = 0; j < failed.size(); ++j) out[failed[j]] = std::move(again_out[j]);
  }

  // Resets the endpoint with a fresh PSN, then both sides connect anew. A failure here
  // leaves the connection unusable: it is dropped (the pool opens a new one later).
  void reconnect() {
    std::string error;
    if (!ep_->reconnect(error)) s_.fail("RDMA: " + error);
    try {
      connect_server();
    } catch (const Error& e) {
      if (e.kind() == Error::Kind::kConnection) throw;
      s_.fail(std::string("RDMA reconnect failed: ") + e.what());
    }
  }

  // KV.CONNECT VERBS with our address; connects our queue pair to the one in the reply.
  void connect_server() {
    const rdma::QpAddress mine = ep_->local_address();
    const std::string gid = mine.gid_hex();
    Args a{"KV.CONNECT", "VERBS", gid};
    a.add(uint64_t{mine.qpn}).add(uint64_t{mine.psn}).add(uint64_t{mine.mtu});
    Reply r = s_.call(a);
    if (r->type == REDIS_REPLY_ERROR) throw Error(Error::Kind::kServer, std::string(text(r.get())));
    const auto* e = r->element;
    if (r->type != REDIS_REPLY_ARRAY || r->elements != 4 || e[0]->type != REDIS_REPLY_STRING ||
        e[1]->type != REDIS_REPLY_INTEGER || e[2]->type != REDIS_REPLY_INTEGER ||
        e[3]->type != REDIS_REPLY_INTEGER)
      s_.protocol_fail("unexpected reply to KV.CONNECT VERBS");
    rdma::QpAddress theirs;
    if (!rdma::QpAddress::parse_gid(text(e[0]), theirs.gid))
      s_.protocol_fail("a bad GID in the reply to KV.CONNECT VERBS");
    theirs.qpn = static_cast<uint32_t>(e[1]->integer);
    theirs.psn = static_cast<uint32_t>(e[2]->integer);
    theirs.mtu = static_cast<uint32_t>(e[3]->integer);
    std::string error;
    if (!ep_->connect(theirs, error)) rdma_fail(error);  // keeps the PSN the server was told
  }

  Session& s_;
  std::unique_ptr<rdma::VerbsEndpoint> ep_;
  std::unique_ptr<Transport> inner_;  // after ep_: its staging is unregistered first
};

}  // namespace

std::unique_ptr<Transport> make_verbs_transport(Session& s, ClientCore& core) {
  return std::make_unique<VerbsTransport>(s, core);
}

}  // namespace stratakv::detail
