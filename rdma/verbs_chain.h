// rdma/verbs_chain.h - one transfer as a chain of RDMA READ or WRITE work requests.
//
// A transfer moves bytes between two scatter-gather lists of the same total length: local
// pieces (in memory registered with this side's device, named by lkey) and remote pieces (in
// the peer's registered memory, named by address and rkey). The two lists may cut the bytes at
// different places. One work request targets one contiguous remote range, so a new request
// starts at every remote piece boundary, and also when the request reaches the device's limit
// of scatter-gather entries (ibv_qp_cap.max_send_sge, and ibv_device_attr.max_sge_rd for READ)
// or of message size (ibv_port_attr.max_msg_sz). Local piece boundaries become entries
// (ibv_sge) of the request, a local piece split across two requests gives an entry to each.
// Rules: man ibv_post_send; RDMA Aware Networks Programming User Manual, "ibv_post_send".
#pragma once

#include <infiniband/verbs.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

namespace rdma {

/// `length` bytes at virtual address `addr` of the peer, in its memory region `rkey`.
struct RemotePiece {
  uint64_t addr = 0;
  uint32_t rkey = 0;
  uint64_t length = 0;  ///< bytes
};

/// `length` bytes at `addr` in this process, in the local memory region `lkey`.
struct LocalPiece {
  void* addr = nullptr;
  uint64_t length = 0;  ///< bytes
  uint32_t lkey = 0;
};

/// Limits of one work request.
struct ChainLimits {
  uint32_t max_sge = 1;          ///< scatter-gather entries per request (>= 1)
  uint64_t max_message = 1u << 30;  ///< bytes per request (>= 1, at most 2^31)
};

/// The work requests of one transfer. `wrs[i].sg_list` points into `sges`, so a chain is not
/// copyable; the poster sets wr_id, send_flags and next. Reused between transfers to avoid
/// allocating on the data path.
struct WorkChain {
  std::vector<ibv_send_wr> wrs;
  std::vector<ibv_sge> sges;
  uint64_t bytes = 0;  ///< total bytes of the transfer

  WorkChain() = default;
  WorkChain(const WorkChain&) = delete;
  WorkChain& operator=(const WorkChain&) = delete;
};

/// Fills `out` with the requests that move the bytes of `remote` to/from `local` in order,
/// with `opcode` IBV_WR_RDMA_READ (remote -> local) or IBV_WR_RDMA_WRITE (local -> remote).
/// Zero-length pieces are skipped. Returns false with `error` set (Redis style, "ERR ...") when
/// the totals differ or do not fit in 64 bits, or a limit is zero; `out` is then unspecified.
bool build_chain(std::span<const LocalPiece> local, std::span<const RemotePiece> remote,
                 ibv_wr_opcode opcode, const ChainLimits& limits, WorkChain& out,
                 std::string& error);

}  // namespace rdma
