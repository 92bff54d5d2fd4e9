// tests/fakes/fake_verbs.h - an in-process fake of the libibverbs calls of rdma::VerbsApi.
//
// It really moves bytes: RDMA READ and WRITE requests posted on a queue pair copy between the
// local scatter-gather entries and the memory of the connected peer queue pair (any queue pair
// of the same FakeVerbs, found by GID and QP number), with the checks a device makes:
//
//   - local entries: the lkey names a memory region of the queue pair's PD, the entry lies
//     inside it, and a READ's destination has IBV_ACCESS_LOCAL_WRITE; else IBV_WC_LOC_PROT_ERR;
//     a message longer than the port's max_msg_sz: IBV_WC_LOC_LEN_ERR;
//   - the peer: it exists, is in RTR or RTS, is connected back to this queue pair, uses the same
//     path MTU and expects this queue pair's next PSN; else IBV_WC_RETRY_EXC_ERR (the packets go
//     nowhere and the requester gives up after its retries);
//   - the peer queue pair grants IBV_ACCESS_REMOTE_READ/WRITE (qp_access_flags); else
//     IBV_WC_REM_INV_REQ_ERR; the rkey names a region of the peer's PD, the range lies inside
//     it and the region grants REMOTE_READ (READ) or REMOTE_WRITE (WRITE); else
//     IBV_WC_REM_ACCESS_ERR. Both remote errors move the peer queue pair to ERR too (IBA class
//     C responder errors).
//
// A failed request moves its queue pair to ERR; every later request (of the same list and of
// later posts) completes with IBV_WC_WR_FLUSH_ERR. Error completions are generated whether or
// not the request was signaled; successful ones only when signaled. post_send fails with
// EINVAL in RESET/INIT/RTR, with ENOMEM when the send queue (max_send_wr requests not yet
// retired by a polled completion) is full. modify_qp follows the RC state machine and the
// required attribute masks of man ibv_modify_qp. Requests execute synchronously inside
// post_send unless the queue pair is stalled (a test hook). Thread-safe (one mutex).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "rdma/verbs_api.h"

namespace fakes {

struct FakeVerbsConfig {
  std::vector<std::string> devices{"fake0", "fake1"};  ///< empty: get_device_list finds none
  int max_qp_wr = 1024;
  int max_sge = 30;
  int max_sge_rd = 30;
  int max_cqe = 1 << 16;
  uint32_t max_msg_sz = 1u << 31;  ///< bytes
  ibv_mtu active_mtu = IBV_MTU_4096;
  ibv_port_state port_state = IBV_PORT_ACTIVE;
  uint8_t link_layer = IBV_LINK_LAYER_ETHERNET;
};

class FakeVerbs final : public rdma::VerbsApi {
 public:
  explicit FakeVerbs(FakeVerbsConfig config = {});
  ~FakeVerbs() override;

  ibv_device** get_device_list(int* num) override;
  void free_device_list(ibv_device** list) override;
  const char* get_device_name(ibv_device* device) override;
  ibv_context* open_device(ibv_device* device) override;
  int close_device(ibv_context* context) override;
  int query_device(ibv_context* context, ibv_device_attr* attr) override;
  int query_port(ibv_context* context, uint8_t port, ibv_port_attr* attr) override;
  int query_gid(ibv_context* context, uint8_t port, int index, ibv_gid* gid) override;
  ibv_pd* alloc_pd(ibv_context* context) override;
  int dealloc_pd(ibv_pd* pd) override;
  ibv_mr* reg_mr(ibv_pd* pd, void* addr, size_t length, int access) override;
  int dereg_mr(ibv_mr* mr) override;
  ibv_cq* create_cq(ibv_context* context, int cqe) override;
  int destroy_cq(ibv_cq* cq) override;
  int poll_cq(ibv_cq* cq, int num_entries, ibv_wc* wc) override;
  ibv_qp* create_qp(ibv_pd* pd, ibv_qp_init_attr* attr) override;
  int destroy_qp(ibv_qp* qp) override;
  int modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask) override;
  int query_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask,
               ibv_qp_init_attr* init_attr) override;
  int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr) override;

  // Test hooks, by QP number.
  /// Moves the queue pair to ERR (as a link failure would), flushing what it holds.
  bool force_error(uint32_t qp_num);
  /// While stalled, posted requests wait (no completion) until unstalled or flushed.
  bool stall(uint32_t qp_num, bool stalled);
  /// The queue pair's state, IBV_QPS_UNKNOWN if there is no such queue pair.
  ibv_qp_state state_of(uint32_t qp_num) const;

  // Counters.
  /// Contexts, PDs, MRs, CQs and QPs not yet released (0 when everything was cleaned up).
  size_t live_objects() const;
  /// Completions dropped because a CQ was full (a fatal error on a real device).
  uint64_t cq_overruns() const;
  /// Work requests executed successfully, and the most entries seen in one of them.
  uint64_t requests_executed() const;
  int max_sge_seen() const;

  struct State;

 private:
  std::unique_ptr<State> s_;
};

}  // namespace fakes
