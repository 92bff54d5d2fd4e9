// rdma/verbs_transport.h - the `verbs` transport: one-sided RDMA READ/WRITE on RC queue pairs.
//
// The server opens one VerbsDevice at start-up (probe()), registers its whole value region with
// it once (one memory region, one lkey), and creates one VerbsEndpoint (an RC queue pair) per
// client connection that sends KV.CONNECT VERBS. The client's address (GID, QP number, PSN,
// MTU) arrives in that command; the server's comes back in the reply (docs/fast-path.md). Then
// KV.PUT reads the client's pieces into the region with RDMA READ, KV.GET writes the value into
// the client's pieces with RDMA WRITE. The server is never the target of a one-sided operation:
// its region is registered for local access only and its queue pairs grant no remote access.
//
// A client SDK uses the same classes the other way round: it opens its device, registers its
// buffers (register_buffer(), which grants remote read and write), creates an endpoint with
// EndpointOptions::remote_access, and connects it to the server's address.
//
// Only RoCE ports (link layer Ethernet) are used: the protocol exchanges GIDs and no LIDs.
// Sources of the rules: man ibv_modify_qp, ibv_post_send, ibv_poll_cq, ibv_reg_mr; the RDMA
// Aware Networks Programming User Manual (Mellanox/NVIDIA), "RC QP state transitions".
#pragma once

#include <infiniband/verbs.h>
#include <sys/uio.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "rdma/segment.h"
#include "rdma/verbs_api.h"
#include "rdma/verbs_chain.h"

namespace rdma {

/// A queue pair's address, as KV.CONNECT VERBS exchanges it.
struct QpAddress {
  std::array<uint8_t, 16> gid{};  ///< port GID, network byte order
  uint32_t qpn = 0;               ///< QP number (24 bits)
  uint32_t psn = 0;               ///< first packet sequence number it sends (24 bits)
  uint32_t mtu = 0;               ///< path MTU in bytes: 256, 512, 1024, 2048 or 4096

  /// The GID as 32 lowercase hex digits.
  std::string gid_hex() const;
  /// Parses 32 hex digits (either case). False, `gid` unchanged, on anything else.
  static bool parse_gid(std::string_view hex, std::array<uint8_t, 16>& gid);
};

/// Path MTU in bytes of an ibv_mtu, 0 for an invalid value.
uint32_t mtu_bytes(ibv_mtu mtu);
/// The ibv_mtu of 256/512/1024/2048/4096 bytes; ibv_mtu(0) for any other value.
ibv_mtu mtu_from_bytes(uint32_t bytes);
/// A short English text for a completion status ("remote access error").
const char* wc_status_text(ibv_wc_status status);

/// Checks a scatter-gather list of RDMA segments of `table` and turns it into remote pieces:
/// every descriptor must name a kVerbs segment of this table, lie inside it and have a nonzero
/// length. The error texts are those of SegmentTable::resolve (docs/fast-path.md). `total`
/// receives the sum of the lengths in bytes. Returns false with `error` on the first bad one.
bool resolve_remote(const SegmentTable& table, std::span<const Descriptor> sgl,
                    std::vector<RemotePiece>& out, uint64_t& total, std::string& error);

/// How VerbsDevice::open picks and sizes its resources.
struct DeviceOptions {
  std::string name;                ///< device name (ibv_get_device_name); empty: the first one
  uint8_t port = 1;                ///< port number (1-based)
  int gid_index = 0;               ///< GID table index (RoCE v2 is usually not index 0)
  uint32_t cq_entries = 65536;     ///< shared CQ size, clamped to ibv_device_attr.max_cqe
  uint32_t send_queue_depth = 64;  ///< work requests in flight per endpoint (max_send_wr)
  uint32_t max_sge = 16;           ///< scatter-gather entries per work request (max_send_sge)
  uint64_t max_message = 1u << 30;  ///< bytes per work request, clamped to port max_msg_sz
};

/// A buffer registered with register_buffer(). `rkey` is what the peer names it by.
struct BufferRegistration {
  uint64_t addr = 0;
  uint64_t length = 0;  ///< bytes
  uint32_t lkey = 0;
  uint32_t rkey = 0;
  ibv_mr* handle = nullptr;  ///< for unregister_buffer()
};

/// One opened RDMA device: its context, one protection domain, one completion queue shared by
/// all endpoints, and the memory registrations. Thread-safe: endpoints on several threads share
/// it. Must outlive its endpoints; `api` must outlive it.
class VerbsDevice {
 public:
  /// Opens the device named in `options` (or the first one), checks the port is active and
  /// RoCE, reads its GID, and allocates the PD and CQ. Returns null with `error` set to one
  /// line starting "RDMA: " ("RDMA: no device found") on failure.
  static std::unique_ptr<VerbsDevice> open(VerbsApi& api, const DeviceOptions& options,
                                           std::string& error);
  /// open() for the server's start-up: `log_line` always receives the one line to log, either
  /// "RDMA: no device found, fast path over verbs disabled" (or another reason) with null
  /// returned, or "RDMA: device <name> port <n>, mtu <bytes>, fast path over verbs enabled".
  static std::unique_ptr<VerbsDevice> probe(VerbsApi& api, const DeviceOptions& options,
                                            std::string& log_line);
  ~VerbsDevice();
  VerbsDevice(const VerbsDevice&) = delete;
  VerbsDevice& operator=(const VerbsDevice&) = delete;

  const std::string& name() const { return name_; }
  uint8_t port() const { return options_.port; }
  const std::array<uint8_t, 16>& gid() const { return gid_; }
  /// The port's active MTU in bytes.
  uint32_t mtu() const { return mtu_bytes(active_mtu_); }

  /// Server: registers the whole value region, [base, base + size) bytes, as one memory region
  /// with local access only (IBV_ACCESS_LOCAL_WRITE: RDMA READ lands in it; the server never
  /// exposes it). The memory is pinned for the device's life. Once per device; false with
  /// `error` ("ERR ...") if already done or ibv_reg_mr fails.
  bool register_region(void* base, uint64_t size, std::string& error);
  /// The region's lkey (0 before register_region).
  uint32_t region_lkey() const { return region_ ? region_->lkey : 0; }

  /// Client: registers [addr, addr + length) bytes with local write access plus
  /// `remote_access` (by default remote read and write, what KV.REGISTER VERBS expects; a
  /// buffer only ever put from may grant IBV_ACCESS_REMOTE_READ alone, one only read into
  /// IBV_ACCESS_REMOTE_WRITE alone). False with `error` ("ERR ...") on failure.
  bool register_buffer(void* addr, uint64_t length, BufferRegistration& out, std::string& error,
                       int remote_access = IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE);
  /// Deregisters a buffer of register_buffer(). No transfer may use it meanwhile. False if
  /// unknown.
  bool unregister_buffer(const BufferRegistration& reg);
  /// The lkey of the registration that holds all of [addr, addr + length). False if none.
  bool find_lkey(const void* addr, uint64_t length, uint32_t& lkey) const;

  /// Endpoints created on this device and not yet destroyed.
  size_t endpoints() const;

 private:
  friend class VerbsEndpoint;
  VerbsDevice(VerbsApi& api, const DeviceOptions& options) : api_(api), options_(options) {}
  bool attach(uint32_t qp_num, uint32_t depth, std::string& error);
  void detach(uint32_t qp_num, uint32_t depth);
  /// Moves the completions of QP `qp_num` polled so far (from the shared CQ, by any endpoint)
  /// into `out`. Returns false if ibv_poll_cq failed.
  bool poll(uint32_t qp_num, std::vector<ibv_wc>& out);
  uint64_t next_transfer_id() { return transfer_ids_.fetch_add(1, std::memory_order_relaxed); }

  VerbsApi& api_;
  DeviceOptions options_;
  std::string name_;
  std::array<uint8_t, 16> gid_{};
  ibv_mtu active_mtu_ = IBV_MTU_1024;
  ibv_context* context_ = nullptr;
  ibv_pd* pd_ = nullptr;
  ibv_cq* cq_ = nullptr;
  // Limits from ibv_query_device / ibv_query_port, already clamped by options_.
  uint32_t cq_capacity_ = 0, max_send_wr_ = 0, max_send_sge_ = 0, max_sge_rd_ = 0;
  uint32_t max_rd_atomic_ = 0, max_dest_rd_atomic_ = 0;
  uint64_t max_message_ = 0;

  mutable std::shared_mutex regs_mu_;
  ibv_mr* region_ = nullptr;
  std::vector<ibv_mr*> regs_;  // region_ and every registered buffer

  mutable std::mutex poll_mu_;  // the CQ, the mailboxes and cq_reserved_
  std::unordered_map<uint32_t, std::vector<ibv_wc>> mailboxes_;  // by QP number
  uint32_t cq_reserved_ = 0;  // CQ entries promised to endpoints (their send queue depths)
  std::vector<ibv_wc> batch_;
  std::atomic<uint64_t> transfer_ids_{1};
};

/// What an endpoint lets its peer do.
struct EndpointOptions {
  /// Grants the peer RDMA READ and WRITE on this side's registered buffers (their rkeys must
  /// still be known to it). Client SDK: true. Server: false, it never exposes memory.
  bool remote_access = false;
};

/// One RC queue pair connected to one peer. Not thread-safe: one connection uses it at a time
/// (endpoints of one device may run on different threads). Destroy before the device.
class VerbsEndpoint {
 public:
  /// Creates the queue pair (state RESET) with a fresh PSN. Null with `error` ("ERR ...") when
  /// ibv_create_qp fails or the shared CQ has no room for another send queue.
  static std::unique_ptr<VerbsEndpoint> create(VerbsDevice& device,
                                               const EndpointOptions& options,
                                               std::string& error);
  ~VerbsEndpoint();
  VerbsEndpoint(const VerbsEndpoint&) = delete;
  VerbsEndpoint& operator=(const VerbsEndpoint&) = delete;

  /// This side's address, to send to the peer. The PSN changes with reconnect().
  QpAddress local_address() const;
  uint32_t qp_num() const { return qp_->qp_num; }

  /// Connects to `remote` from any state: RESET -> INIT -> RTR -> RTS (ibv_modify_qp with the
  /// attribute masks its man page requires for RC). The path MTU is the smaller of the two.
  /// False with `error` ("ERR ...") on an invalid address or a failed transition.
  bool connect(const QpAddress& remote, std::string& error);
  /// Restores a queue pair in error state: picks a fresh PSN and connects again to the last
  /// remote address. The peer must then connect() to the new local_address() before the next
  /// transfer: its expected PSN is ours (a stale one fails, or on real hardware may be taken
  /// for duplicates and silently dropped). False if never connected or a transition fails.
  bool reconnect(std::string& error);
  /// reconnect() toward a new remote address (the peer reset its queue pair too, as it must
  /// after a remote access error: the responder's queue pair also goes to error).
  bool reconnect(const QpAddress& remote, std::string& error);

  /// RDMA READ: copies the bytes of `remote` (peer memory) into `local` (this process's
  /// memory, each piece inside one registration of the device), in order; the totals must be
  /// equal. Busy-polls the shared CQ (yielding the CPU between empty polls) for at most
  /// `timeout_ms` milliseconds. On return, success or not, the device no longer touches
  /// `local`: an unfinished transfer is flushed by moving the queue pair to error and waiting
  /// (up to 1 s more) for the flush; only "did not flush" below breaks that promise.
  /// Errors ("ERR ..."), refused before anything is posted (the queue pair stays usable):
  /// "ERR RDMA local buffer is not registered with the device", "ERR RDMA scatter-gather lists
  /// differ in length (...)"; refused because needs_reconnect(): "ERR RDMA queue pair is not
  /// connected", "ERR RDMA queue pair is in error state; reconnect it". After these the queue
  /// pair is in error and needs_reconnect() is true: "ERR RDMA transfer failed: <status>" for
  /// a bad completion ("remote access error": wrong rkey, out of bounds, or a region without
  /// the remote access; "remote invalid request": the peer's queue pair grants no remote
  /// access; "transport retry counter exceeded (peer unreachable)": peer gone, not connected
  /// to us or expecting another PSN; "work request flushed ...": the queue pair was already in
  /// error), "ERR RDMA post failed: <strerror>", "ERR RDMA transfer timed out after N ms"
  /// (" and the queue pair did not flush").
  bool read(std::span<const iovec> local, std::span<const RemotePiece> remote,
            uint32_t timeout_ms, std::string& error);
  /// RDMA WRITE: copies `local` into `remote`. As read() otherwise.
  bool write(std::span<const iovec> local, std::span<const RemotePiece> remote,
             uint32_t timeout_ms, std::string& error);

  /// True before the first connect() and after a failed transfer or transition.
  bool needs_reconnect() const { return !connected_ || broken_; }
  /// The queue pair's state as the device reports it (ibv_query_qp); IBV_QPS_UNKNOWN on error.
  ibv_qp_state query_state();

 private:
  VerbsEndpoint(VerbsDevice& device, const EndpointOptions& options)
      : device_(device), options_(options) {}
  bool modify(ibv_qp_attr& attr, int mask, const char* state, std::string& error);
  bool transfer(ibv_wr_opcode opcode, std::span<const iovec> local,
                std::span<const RemotePiece> remote, uint32_t timeout_ms, std::string& error);
  bool run_chain(uint32_t timeout_ms, std::string& error);
  void move_to_error();

  VerbsDevice& device_;
  EndpointOptions options_;
  ibv_qp* qp_ = nullptr;
  uint32_t depth_ = 0;  // send queue depth: work requests in flight
  uint32_t psn_ = 0;
  QpAddress remote_{};
  bool connected_ = false;
  bool broken_ = false;
  // Scratch of one transfer, kept to avoid allocating on the data path.
  std::vector<LocalPiece> local_;
  WorkChain chain_;
  std::vector<ibv_wc> wcs_;
};

}  // namespace rdma
