// tests/fakes/fake_verbs_post.cc - FakeVerbs' data path: post_send executes RDMA READ/WRITE
// requests against the peer queue pair's memory with a device's checks, completions go to the
// CQ, poll_cq hands them out and frees send-queue slots. Test hooks: force_error, stall.
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "tests/fakes/fake_verbs_state.h"

namespace fakes {

namespace {

constexpr uint32_t kPsnMask = 0xffffff;

// Packets (PSNs) one request uses: its length in path-MTU units, at least one.
uint32_t packets(uint64_t length, ibv_mtu mtu) {
  const uint64_t m = uint64_t{128} << mtu;  // IBV_MTU_256 = 1
  return static_cast<uint32_t>(std::max<uint64_t>(1, (length + m - 1) / m));
}

// Whether [addr, addr + length) lies inside the region.
bool inside(const ibv_mr& mr, uint64_t addr, uint64_t length) {
  const auto base = reinterpret_cast<uint64_t>(mr.addr);
  return addr >= base && addr - base <= mr.length && length <= mr.length - (addr - base);
}

}  // namespace

void FakeVerbs::State::complete(FakeQp& qp, const FakeWr& wr, ibv_wc_status status) {
  if (status == IBV_WC_SUCCESS && !wr.signaled) return;  // its slot is freed by a later one
  FakeCqe e;
  e.wc.wr_id = wr.wr_id;
  e.wc.status = status;
  e.wc.opcode = wr.opcode == IBV_WR_RDMA_READ ? IBV_WC_RDMA_READ : IBV_WC_RDMA_WRITE;
  e.wc.qp_num = qp.qp.qp_num;
  for (const ibv_sge& s : wr.sges) e.wc.byte_len += s.length;
  e.seq = wr.seq;
  if (qp.cq->entries.size() >= static_cast<size_t>(qp.cq->cq.cqe)) {
    ++cq_overruns;  // a real device raises IBV_EVENT_CQ_ERR; the completion is lost
    return;
  }
  qp.cq->entries.push_back(e);
}

void FakeVerbs::State::flush(FakeQp& qp) {
  while (!qp.stalled.empty()) {
    complete(qp, qp.stalled.front(), IBV_WC_WR_FLUSH_ERR);
    qp.stalled.pop_front();
  }
}

void FakeVerbs::State::execute(FakeQp& qp, const FakeWr& wr) {
  const bool is_read = wr.opcode == IBV_WR_RDMA_READ;
  auto fail = [&](ibv_wc_status status, FakeQp* peer) {
    qp.state = qp.qp.state = IBV_QPS_ERR;
    complete(qp, wr, status);
    if (peer != nullptr) {  // a responder's class C error moves it to ERR as well
      peer->state = peer->qp.state = IBV_QPS_ERR;
      flush(*peer);
    }
  };
  // Local entries: key, PD, bounds, and local write access for a READ's destination.
  uint64_t length = 0;
  for (const ibv_sge& s : wr.sges) {
    auto it = by_lkey.find(s.lkey);
    const FakeMr* mr = it == by_lkey.end() ? nullptr : it->second;
    if (mr == nullptr || mr->mr.pd != qp.qp.pd || !inside(mr->mr, s.addr, s.length) ||
        (is_read && !(mr->access & IBV_ACCESS_LOCAL_WRITE))) {
      return fail(IBV_WC_LOC_PROT_ERR, nullptr);
    }
    length += s.length;
  }
  if (length > config.max_msg_sz) return fail(IBV_WC_LOC_LEN_ERR, nullptr);

  // The peer: reachable, connected back to us, same MTU, expecting our PSN.
  auto pit = qps_by_num.find(qp.dest_qpn);
  FakeQp* peer = pit == qps_by_num.end() ? nullptr : pit->second;
  if (peer == nullptr || peer->device->gid != qp.dgid ||
      (peer->state != IBV_QPS_RTR && peer->state != IBV_QPS_RTS) ||
      peer->dest_qpn != qp.qp.qp_num || peer->dgid != qp.device->gid || peer->mtu != qp.mtu ||
      peer->rq_psn != qp.sq_psn) {
    return fail(IBV_WC_RETRY_EXC_ERR, nullptr);
  }
  // The responder: QP access flags, then the rkey's region (PD, bounds, access).
  const int need = is_read ? IBV_ACCESS_REMOTE_READ : IBV_ACCESS_REMOTE_WRITE;
  if (!(peer->access & need) || (is_read && peer->max_dest_rd_atomic == 0)) {
    return fail(IBV_WC_REM_INV_REQ_ERR, peer);
  }
  auto rit = by_rkey.find(wr.rkey);
  if (rit == by_rkey.end() || rit->second->mr.pd != peer->qp.pd ||
      !inside(rit->second->mr, wr.remote_addr, length) || !(rit->second->access & need)) {
    return fail(IBV_WC_REM_ACCESS_ERR, peer);
  }

  auto* remote = reinterpret_cast<std::byte*>(wr.remote_addr);
  for (const ibv_sge& s : wr.sges) {
    auto* local = reinterpret_cast<std::byte*>(s.addr);
    if (is_read) {
      std::memmove(local, remote, s.length);
    } else {
      std::memmove(remote, local, s.length);
    }
    remote += s.length;
  }
  const uint32_t n = packets(length, qp.mtu);
  qp.sq_psn = (qp.sq_psn + n) & kPsnMask;
  peer->rq_psn = (peer->rq_psn + n) & kPsnMask;
  ++executed;
  max_sge_seen = std::max(max_sge_seen, static_cast<int>(wr.sges.size()));
  complete(qp, wr, IBV_WC_SUCCESS);
}

int FakeVerbs::post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr) {
  std::lock_guard lock(s_->mu);
  auto it = s_->qps.find(qp);
  if (it == s_->qps.end()) {
    *bad_wr = wr;
    return EINVAL;
  }
  FakeQp& q = *it->second;
  for (ibv_send_wr* w = wr; w != nullptr; w = w->next) {
    // Immediate errors: nothing of this request is queued (ibv_post_send, RETURN VALUE).
    const bool bad_state = q.state == IBV_QPS_RESET || q.state == IBV_QPS_INIT ||
                           q.state == IBV_QPS_RTR;
    const bool bad_op = w->opcode != IBV_WR_RDMA_READ && w->opcode != IBV_WR_RDMA_WRITE;
    const int max_sge = w->opcode == IBV_WR_RDMA_READ
                            ? std::min<int>(q.max_send_sge, s_->config.max_sge_rd)
                            : static_cast<int>(q.max_send_sge);
    if (bad_state || bad_op || w->num_sge < 0 || w->num_sge > max_sge) {
      *bad_wr = w;
      return EINVAL;
    }
    if (q.in_queue.size() >= q.max_send_wr) {
      *bad_wr = w;
      return ENOMEM;
    }
    FakeWr f;
    f.wr_id = w->wr_id;
    f.opcode = w->opcode;
    f.signaled = (w->send_flags & IBV_SEND_SIGNALED) != 0;
    f.remote_addr = w->wr.rdma.remote_addr;
    f.rkey = w->wr.rdma.rkey;
    f.sges.assign(w->sg_list, w->sg_list + w->num_sge);
    f.seq = q.next_seq++;
    q.in_queue.push_back(f.seq);
    if (q.state == IBV_QPS_ERR) {
      s_->complete(q, f, IBV_WC_WR_FLUSH_ERR);
    } else if (q.stall || !q.stalled.empty()) {
      q.stalled.push_back(std::move(f));
    } else {
      s_->execute(q, f);
    }
  }
  return 0;
}

int FakeVerbs::poll_cq(ibv_cq* cq, int num_entries, ibv_wc* wc) {
  std::lock_guard lock(s_->mu);
  auto it = s_->cqs.find(cq);
  if (it == s_->cqs.end()) return -1;
  FakeCq& c = *it->second;
  int n = 0;
  while (n < num_entries && !c.entries.empty()) {
    const FakeCqe& e = c.entries.front();
    // A polled completion frees its request's send-queue slot and those of the unsignaled
    // requests before it.
    auto q = s_->qps_by_num.find(e.wc.qp_num);
    if (q != s_->qps_by_num.end()) {
      auto& in = q->second->in_queue;
      while (!in.empty() && in.front() <= e.seq) in.pop_front();
    }
    wc[n++] = e.wc;
    c.entries.pop_front();
  }
  return n;
}

bool FakeVerbs::force_error(uint32_t qp_num) {
  std::lock_guard lock(s_->mu);
  auto it = s_->qps_by_num.find(qp_num);
  if (it == s_->qps_by_num.end()) return false;
  it->second->state = it->second->qp.state = IBV_QPS_ERR;
  s_->flush(*it->second);
  return true;
}

bool FakeVerbs::stall(uint32_t qp_num, bool stalled) {
  std::lock_guard lock(s_->mu);
  auto it = s_->qps_by_num.find(qp_num);
  if (it == s_->qps_by_num.end()) return false;
  FakeQp& q = *it->second;
  q.stall = stalled;
  while (!q.stall && !q.stalled.empty()) {
    FakeWr f = std::move(q.stalled.front());
    q.stalled.pop_front();
    if (q.state == IBV_QPS_RTS) {
      s_->execute(q, f);
    } else {
      s_->complete(q, f, IBV_WC_WR_FLUSH_ERR);
    }
  }
  return true;
}

ibv_qp_state FakeVerbs::state_of(uint32_t qp_num) const {
  std::lock_guard lock(s_->mu);
  auto it = s_->qps_by_num.find(qp_num);
  return it == s_->qps_by_num.end() ? IBV_QPS_UNKNOWN : it->second->state;
}

uint64_t FakeVerbs::cq_overruns() const {
  std::lock_guard lock(s_->mu);
  return s_->cq_overruns;
}

uint64_t FakeVerbs::requests_executed() const {
  std::lock_guard lock(s_->mu);
  return s_->executed;
}

int FakeVerbs::max_sge_seen() const {
  std::lock_guard lock(s_->mu);
  return s_->max_sge_seen;
}

}  // namespace fakes
