// client_shared.h - what every node of one Client shares: the options, the RDMA device and the
// buffers made by alloc_buffer / register_buffer. A Client on one server has one node; a
// Client on a cluster has one connection pool (ClientCore) per node, and a Buffer must work
// with every one of them: so the memory is made once here (a memfd that shm nodes map, also
// registered with the NIC when this host has one) and each node registers it on its own
// connections when first used.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <vector>

#include "rdma/verbs_transport.h"
#include "stratakv/client.h"
#include "transport.h"

namespace stratakv::detail {

class ClientCore;
class ClientShared;

/// The memory behind a Buffer. For an owned buffer it unmaps (and closes its memfd) when the
/// last handle goes, and tells the nodes so every connection unregisters it.
struct BufferState {
  uint64_t id = 0;
  std::byte* base = nullptr;
  size_t size = 0;
  int fd = -1;                   ///< memfd (shm nodes map it) or -1
  bool owned = false;            ///< unmap on destruction
  bool zero_copy = false;        ///< some transport reaches it directly (a memfd or a NIC registration)
  rdma::BufferRegistration reg;  ///< verbs: its registration with the NIC (handle null: none)
  std::weak_ptr<ClientShared> shared;
  ~BufferState();
};

/// Thread-safe.
class ClientShared : public std::enable_shared_from_this<ClientShared> {
 public:
  /// Checks the options (Error(kUsage) for a bad one).
  explicit ClientShared(Options options);
  ~ClientShared();

  const Options& options() const { return options_; }

  /// The RDMA device (Options::rdma_device, rdma_port, rdma_gid_index), opened at the first
  /// call; null, with `error` ("RDMA: no device found", ...), when it cannot be opened (the
  /// first failure is remembered).
  rdma::VerbsDevice* open_device(std::string& error);
  /// The open device, or null.
  rdma::VerbsDevice* device() const;
  /// Closes the device: no node uses verbs. Only before any buffer is made.
  void close_device();
  /// Whether alloc() makes memfd memory (a node may use shm) rather than anonymous memory.
  void set_memfd_buffers(bool on) { memfd_buffers_ = on; }

  /// An owned buffer of `size` bytes, zero-filled: a memfd when set_memfd_buffers(true), and
  /// registered with the NIC when the device is open. Throws Error(kUsage) for size 0,
  /// kConnection when the memory cannot be made (or the NIC refuses it and it is no memfd).
  std::shared_ptr<BufferState> alloc(size_t size);
  /// Wraps caller memory (registered with the NIC when the device is open).
  std::shared_ptr<BufferState> wrap(void* p, size_t size);
  /// The buffer that contains [p, p+n) and that transport `kind` reaches directly (shm: a
  /// memfd; verbs: a NIC registration), kept alive by the returned pointer; null when none.
  std::shared_ptr<BufferState> find(const void* p, size_t n, TransportChoice kind) const;

  /// Makes `core` hear of destroyed buffers (retire).
  void add_core(const std::shared_ptr<ClientCore>& core);
  /// Called by ~BufferState: unregisters it from the NIC and queues its unregistration on
  /// every open connection of every node.
  void retire(const BufferState& b);

 private:
  const Options options_;
  bool memfd_buffers_ = false;  // set before any buffer is made

  mutable std::mutex device_mu_;
  bool device_tried_ = false;
  std::string device_error_;
  std::unique_ptr<rdma::VerbsDevice> device_;

  mutable std::shared_mutex buffers_mu_;
  std::map<uintptr_t, std::weak_ptr<BufferState>> buffers_;  // zero-copy buffers by address
  uint64_t next_buffer_id_ = 1;                               // under buffers_mu_

  std::mutex cores_mu_;
  std::vector<std::weak_ptr<ClientCore>> cores_;
};

}  // namespace stratakv::detail
