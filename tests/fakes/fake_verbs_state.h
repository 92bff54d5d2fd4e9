// tests/fakes/fake_verbs_state.h - the objects of FakeVerbs (private to tests/fakes/).
//
// Each fake object embeds the libibverbs struct it hands out and is found again by that
// struct's address. Everything is guarded by State::mu.
#pragma once

#include <array>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "tests/fakes/fake_verbs.h"

namespace fakes {

struct FakeDevice {
  ibv_device dev{};
  std::array<uint8_t, 16> gid{};
};

struct FakeContext {
  ibv_context ctx{};
  FakeDevice* device = nullptr;
};

struct FakePd {
  ibv_pd pd{};
};

struct FakeMr {
  ibv_mr mr{};
  int access = 0;
};

struct FakeCqe {
  ibv_wc wc{};
  uint64_t seq = 0;  // the request's sequence number in its queue pair
};

struct FakeCq {
  ibv_cq cq{};
  std::deque<FakeCqe> entries;
};

// A posted request, copied (the caller's list may go away after post_send returns).
struct FakeWr {
  uint64_t wr_id = 0;
  ibv_wr_opcode opcode = IBV_WR_RDMA_WRITE;
  bool signaled = false;
  uint64_t remote_addr = 0;
  uint32_t rkey = 0;
  std::vector<ibv_sge> sges;
  uint64_t seq = 0;
};

struct FakeQp {
  ibv_qp qp{};
  ibv_qp_state state = IBV_QPS_RESET;
  FakeDevice* device = nullptr;
  FakeCq* cq = nullptr;
  uint32_t max_send_wr = 0, max_send_sge = 0;
  int access = 0;  // qp_access_flags
  ibv_mtu mtu = IBV_MTU_256;
  std::array<uint8_t, 16> dgid{};
  uint32_t dest_qpn = 0, rq_psn = 0, sq_psn = 0;
  uint8_t max_dest_rd_atomic = 0;
  std::deque<uint64_t> in_queue;  // sequence numbers of requests holding a send-queue slot
  std::deque<FakeWr> stalled;
  bool stall = false;
  uint64_t next_seq = 1;
};

struct FakeVerbs::State {
  FakeVerbsConfig config;
  mutable std::mutex mu;
  std::vector<std::unique_ptr<FakeDevice>> devices;
  std::map<const ibv_context*, std::unique_ptr<FakeContext>> contexts;
  std::map<const ibv_pd*, std::unique_ptr<FakePd>> pds;
  std::map<const ibv_mr*, std::unique_ptr<FakeMr>> mrs;
  std::map<const ibv_cq*, std::unique_ptr<FakeCq>> cqs;
  std::map<const ibv_qp*, std::unique_ptr<FakeQp>> qps;
  std::map<uint32_t, FakeQp*> qps_by_num;
  std::map<uint32_t, FakeMr*> by_lkey, by_rkey;
  uint32_t next_key = 0x100;
  uint32_t next_qpn = 0x40;
  uint64_t cq_overruns = 0;
  uint64_t executed = 0;
  int max_sge_seen = 0;

  // In fake_verbs_post.cc.
  void complete(FakeQp& qp, const FakeWr& wr, ibv_wc_status status);
  void execute(FakeQp& qp, const FakeWr& wr);
  void flush(FakeQp& qp);  // completes every stalled request with IBV_WC_WR_FLUSH_ERR
};

}  // namespace fakes
