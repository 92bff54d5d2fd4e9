// rdma/verbs_endpoint.cc - VerbsEndpoint: an RC queue pair, its connection (state machine per
// man ibv_modify_qp) and transfers as chains of work requests (man ibv_post_send, ibv_poll_cq).
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <random>
#include <thread>

#include "rdma/verbs_transport.h"

namespace rdma {

namespace {

// wr_id = transfer id << kIndexBits | index of the request in its chain. Transfer ids are
// unique in the device, so a completion left over from an earlier transfer (or from a destroyed
// queue pair whose number was reused) is recognised and ignored.
constexpr int kIndexBits = 24;
constexpr uint64_t kIndexMask = (uint64_t{1} << kIndexBits) - 1;
// How long a queue pair moved to error may take to flush its requests after a timeout.
constexpr auto kFlushWait = std::chrono::milliseconds(1000);
// RC connection parameters (RDMA Aware Networks Programming User Manual, "ibv_modify_qp").
constexpr uint8_t kAckTimeout = 14;  // 4.096 us * 2^14 = 67 ms per try
constexpr uint8_t kRetryCount = 7;
constexpr uint8_t kRnrRetry = 7;
constexpr uint8_t kMinRnrTimer = 12;
constexpr uint8_t kHopLimit = 64;

uint32_t fresh_psn(uint32_t not_this) {
  thread_local std::mt19937 rng{std::random_device{}()};
  uint32_t psn;
  do {
    psn = rng() & 0xffffff;
  } while (psn == not_this);
  return psn;
}

}  // namespace

std::unique_ptr<VerbsEndpoint> VerbsEndpoint::create(VerbsDevice& device,
                                                     const EndpointOptions& options,
                                                     std::string& error) {
  std::unique_ptr<VerbsEndpoint> e(new VerbsEndpoint(device, options));
  ibv_qp_init_attr init{};
  init.send_cq = device.cq_;
  init.recv_cq = device.cq_;
  init.cap.max_send_wr = device.max_send_wr_;
  init.cap.max_recv_wr = 1;
  init.cap.max_send_sge = device.max_send_sge_;
  init.cap.max_recv_sge = 1;
  init.qp_type = IBV_QPT_RC;
  init.sq_sig_all = 0;  // only requests with IBV_SEND_SIGNALED complete when they succeed
  ibv_qp* qp = device.api_.create_qp(device.pd_, &init);
  if (qp == nullptr) {
    error = std::string("ERR RDMA cannot create a queue pair: ") + std::strerror(errno);
    return nullptr;
  }
  if (!device.attach(qp->qp_num, device.max_send_wr_, error)) {
    device.api_.destroy_qp(qp);
    return nullptr;
  }
  e->qp_ = qp;
  e->depth_ = device.max_send_wr_;
  e->psn_ = fresh_psn(0x1000000);
  return e;
}

VerbsEndpoint::~VerbsEndpoint() {
  if (qp_ == nullptr) return;
  device_.detach(qp_->qp_num, depth_);  // first: the QP number stays ours until destroyed
  device_.api_.destroy_qp(qp_);
}

QpAddress VerbsEndpoint::local_address() const {
  QpAddress a;
  a.gid = device_.gid();
  a.qpn = qp_->qp_num;
  a.psn = psn_;
  a.mtu = device_.mtu();
  return a;
}

bool VerbsEndpoint::modify(ibv_qp_attr& attr, int mask, const char* state, std::string& error) {
  const int rc = device_.api_.modify_qp(qp_, &attr, mask);
  if (rc == 0) return true;
  error = std::string("ERR RDMA cannot move the queue pair to ") + state + ": " +
          std::strerror(rc > 0 ? rc : errno);
  return false;
}

bool VerbsEndpoint::connect(const QpAddress& remote, std::string& error) {
  const ibv_mtu remote_mtu = mtu_from_bytes(remote.mtu);
  if (remote_mtu == 0) {
    error = "ERR RDMA path MTU must be 256, 512, 1024, 2048 or 4096";
    return false;
  }
  if (remote.qpn == 0 || remote.qpn > 0xffffff || remote.psn > 0xffffff) {
    error = "ERR RDMA queue pair number and PSN must be 24-bit integers";
    return false;
  }
  connected_ = false;
  broken_ = false;
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_RESET;  // from any state; drops whatever was queued
  if (!modify(a, IBV_QP_STATE, "RESET", error)) return false;

  a = ibv_qp_attr{};
  a.qp_state = IBV_QPS_INIT;
  a.pkey_index = 0;
  a.port_num = device_.port();
  a.qp_access_flags =
      options_.remote_access ? IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE : 0;
  if (!modify(a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS, "INIT",
              error)) {
    return false;
  }

  a = ibv_qp_attr{};
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = std::min(device_.active_mtu_, remote_mtu);  // enum order is size order
  a.dest_qp_num = remote.qpn;
  a.rq_psn = remote.psn;
  a.max_dest_rd_atomic = static_cast<uint8_t>(device_.max_dest_rd_atomic_);
  a.min_rnr_timer = kMinRnrTimer;
  a.ah_attr.is_global = 1;  // RoCE: addressed by GID, the GRH is mandatory
  std::copy(remote.gid.begin(), remote.gid.end(), a.ah_attr.grh.dgid.raw);
  a.ah_attr.grh.sgid_index = static_cast<uint8_t>(device_.options_.gid_index);
  a.ah_attr.grh.hop_limit = kHopLimit;
  a.ah_attr.port_num = device_.port();
  if (!modify(a,
              IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                  IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
              "RTR", error)) {
    return false;
  }

  a = ibv_qp_attr{};
  a.qp_state = IBV_QPS_RTS;
  a.timeout = kAckTimeout;
  a.retry_cnt = kRetryCount;
  a.rnr_retry = kRnrRetry;
  a.sq_psn = psn_;
  a.max_rd_atomic = static_cast<uint8_t>(device_.max_rd_atomic_);
  if (!modify(a,
              IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                  IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC,
              "RTS", error)) {
    return false;
  }
  remote_ = remote;
  connected_ = true;
  return true;
}

bool VerbsEndpoint::reconnect(std::string& error) {
  if (remote_.qpn == 0) {
    error = "ERR RDMA queue pair was never connected";
    return false;
  }
  const QpAddress remote = remote_;
  return reconnect(remote, error);
}

bool VerbsEndpoint::reconnect(const QpAddress& remote, std::string& error) {
  psn_ = fresh_psn(psn_);
  return connect(remote, error);
}

bool VerbsEndpoint::read(std::span<const iovec> local, std::span<const RemotePiece> remote,
                         uint32_t timeout_ms, std::string& error) {
  return transfer(IBV_WR_RDMA_READ, local, remote, timeout_ms, error);
}

bool VerbsEndpoint::write(std::span<const iovec> local, std::span<const RemotePiece> remote,
                          uint32_t timeout_ms, std::string& error) {
  return transfer(IBV_WR_RDMA_WRITE, local, remote, timeout_ms, error);
}

ibv_qp_state VerbsEndpoint::query_state() {
  ibv_qp_attr a{};
  ibv_qp_init_attr init{};
  if (device_.api_.query_qp(qp_, &a, IBV_QP_STATE, &init) != 0) return IBV_QPS_UNKNOWN;
  return a.qp_state;
}

void VerbsEndpoint::move_to_error() {
  ibv_qp_attr a{};
  a.qp_state = IBV_QPS_ERR;  // flushes every queued request with IBV_WC_WR_FLUSH_ERR
  device_.api_.modify_qp(qp_, &a, IBV_QP_STATE);
  broken_ = true;
}

bool VerbsEndpoint::transfer(ibv_wr_opcode opcode, std::span<const iovec> local,
                             std::span<const RemotePiece> remote, uint32_t timeout_ms,
                             std::string& error) {
  if (!connected_) {
    error = "ERR RDMA queue pair is not connected";
    return false;
  }
  if (broken_) {
    error = "ERR RDMA queue pair is in error state; reconnect it";
    return false;
  }
  local_.clear();
  for (const iovec& v : local) {
    if (v.iov_len == 0) continue;
    uint32_t lkey = 0;
    if (!device_.find_lkey(v.iov_base, v.iov_len, lkey)) {
      error = "ERR RDMA local buffer is not registered with the device";
      return false;
    }
    local_.push_back({v.iov_base, v.iov_len, lkey});
  }
  // RDMA READ may have a lower limit of entries per request (ibv_device_attr.max_sge_rd).
  const ChainLimits limits{opcode == IBV_WR_RDMA_READ ? device_.max_sge_rd_ : device_.max_send_sge_,
                           device_.max_message_};
  if (!build_chain(local_, remote, opcode, limits, chain_, error)) return false;
  if (chain_.wrs.size() > kIndexMask) {
    error = "ERR RDMA scatter-gather list needs too many work requests";
    return false;
  }
  if (chain_.wrs.empty()) return true;
  return run_chain(timeout_ms, error);
}

// Posts the chain in windows of at most depth_ requests in flight, signaling every
// depth_/2-th request and the last (an unsignaled request's send-queue slot is freed only by a
// later signaled completion), and polls until the last request completed. After an error
// completion the device has moved the queue pair to error and flushes the rest, each with a
// completion of its own (even unsignaled ones), so waiting for the last posted request leaves
// nothing of this transfer in flight.
bool VerbsEndpoint::run_chain(uint32_t timeout_ms, std::string& error) {
  std::vector<ibv_send_wr>& wrs = chain_.wrs;
  const size_t total = wrs.size();
  const uint64_t id = device_.next_transfer_id() & ((uint64_t{1} << (64 - kIndexBits)) - 1);
  const size_t every = std::max<size_t>(1, depth_ / 2);
  for (size_t i = 0; i < total; ++i) {
    wrs[i].wr_id = id << kIndexBits | i;
    wrs[i].send_flags = ((i + 1) % every == 0 || i + 1 == total) ? IBV_SEND_SIGNALED : 0;
  }
  using Clock = std::chrono::steady_clock;
  auto deadline = Clock::now() + std::chrono::milliseconds(timeout_ms);
  size_t posted = 0, retired = 0;  // requests [retired, posted) are in flight
  ibv_wc_status status = IBV_WC_SUCCESS;
  int post_error = 0;
  bool timed_out = false;
  for (;;) {
    const bool failing = status != IBV_WC_SUCCESS || post_error != 0 || timed_out;
    if (!failing && posted < total && posted - retired < depth_) {
      const size_t n = std::min<size_t>(total - posted, depth_ - (posted - retired));
      for (size_t i = posted; i + 1 < posted + n; ++i) wrs[i].next = &wrs[i + 1];
      wrs[posted + n - 1].next = nullptr;
      ibv_send_wr* bad = nullptr;
      const int rc = device_.api_.post_send(qp_, &wrs[posted], &bad);
      if (rc == 0) {
        posted += n;
      } else {
        // Requests before `bad` are queued (IBA 11.4.1.1 as libibverbs implements it).
        post_error = rc > 0 ? rc : EINVAL;
        if (bad > &wrs[posted] && bad < &wrs[posted] + n) posted += bad - &wrs[posted];
        if (posted > retired) move_to_error();
      }
      continue;
    }
    if (retired >= (failing ? posted : total)) break;
    if (!device_.poll(qp_->qp_num, wcs_)) {
      move_to_error();
      error = "ERR RDMA completion queue poll failed";
      return false;
    }
    bool progress = false;
    for (const ibv_wc& wc : wcs_) {
      if (wc.wr_id >> kIndexBits != id) continue;  // left over from an earlier transfer
      progress = true;
      if (wc.status != IBV_WC_SUCCESS && status == IBV_WC_SUCCESS) status = wc.status;
      retired = std::max<size_t>(retired, (wc.wr_id & kIndexMask) + 1);  // RC completes in order
    }
    if (progress) continue;
    const auto now = Clock::now();
    if (now < deadline) {
      std::this_thread::yield();
    } else if (!timed_out) {
      timed_out = true;
      move_to_error();
      deadline = now + kFlushWait;
    } else {
      broken_ = true;
      error = "ERR RDMA transfer timed out after " + std::to_string(timeout_ms) +
              " ms and the queue pair did not flush";
      return false;
    }
  }
  if (timed_out) {
    error = "ERR RDMA transfer timed out after " + std::to_string(timeout_ms) + " ms";
  } else if (post_error != 0) {
    broken_ = true;
    error = std::string("ERR RDMA post failed: ") + std::strerror(post_error);
  } else if (status != IBV_WC_SUCCESS) {
    broken_ = true;  // an error completion moves an RC queue pair to the error state
    error = std::string("ERR RDMA transfer failed: ") + wc_status_text(status);
  } else {
    return true;
  }
  return false;
}

}  // namespace rdma
