#include "rdma/verbs_chain.h"

#include <algorithm>

namespace rdma {

namespace {

// The sum of the pieces' lengths; false when it does not fit in 64 bits.
template <class Piece>
bool total_of(std::span<const Piece> pieces, uint64_t& n) {
  n = 0;
  for (const Piece& p : pieces)
    if (__builtin_add_overflow(n, p.length, &n)) return false;
  return true;
}

}  // namespace

bool build_chain(std::span<const LocalPiece> local, std::span<const RemotePiece> remote,
                 ibv_wr_opcode opcode, const ChainLimits& limits, WorkChain& out,
                 std::string& error) {
  out.wrs.clear();
  out.sges.clear();
  out.bytes = 0;
  if (limits.max_sge == 0 || limits.max_message == 0 || limits.max_message > (1ull << 31)) {
    error = "ERR RDMA work request limits are invalid";
    return false;
  }
  uint64_t local_total = 0, remote_total = 0;
  if (!total_of(local, local_total) || !total_of(remote, remote_total)) {
    error = "ERR RDMA scatter-gather list is longer than 2^64-1 bytes";
    return false;
  }
  if (local_total != remote_total) {
    error = "ERR RDMA scatter-gather lists differ in length (local " +
            std::to_string(local_total) + " bytes, remote " + std::to_string(remote_total) +
            " bytes)";
    return false;
  }
  out.bytes = local_total;

  std::vector<size_t> first_sge;  // index into out.sges of each request's first entry
  size_t li = 0;                  // local cursor: piece and offset in it
  uint64_t lo = 0;
  for (const RemotePiece& r : remote) {
    uint64_t ro = 0;
    while (ro < r.length) {
      ibv_send_wr wr{};
      wr.opcode = opcode;
      wr.wr.rdma.remote_addr = r.addr + ro;
      wr.wr.rdma.rkey = r.rkey;
      first_sge.push_back(out.sges.size());
      const uint64_t want = std::min(r.length - ro, limits.max_message);
      uint64_t len = 0;
      while (len < want && static_cast<uint32_t>(wr.num_sge) < limits.max_sge) {
        while (local[li].length == lo) {  // skip finished and zero-length local pieces
          ++li;
          lo = 0;
        }
        const LocalPiece& l = local[li];
        const uint64_t take = std::min(l.length - lo, want - len);
        out.sges.push_back(ibv_sge{reinterpret_cast<uint64_t>(l.addr) + lo,
                                   static_cast<uint32_t>(take), l.lkey});
        ++wr.num_sge;
        lo += take;
        len += take;
      }
      ro += len;
      out.wrs.push_back(wr);
    }
  }
  for (size_t i = 0; i < out.wrs.size(); ++i) out.wrs[i].sg_list = &out.sges[first_sge[i]];
  return true;
}

}  // namespace rdma
