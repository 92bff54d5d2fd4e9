#include "client_shared.h"

#include <unistd.h>

#include <algorithm>

#include "core.h"
#include "shared_memory.h"

namespace stratakv::detail {

BufferState::~BufferState() {
  if (auto s = shared.lock()) s->retire(*this);
  if (owned) {
    unmap(base, size);
    if (fd >= 0) ::close(fd);
  }
}

ClientShared::ClientShared(Options options) : options_(std::move(options)) {
  if (options_.max_connections == 0)
    throw Error(Error::Kind::kUsage, "max_connections must be at least 1");
  if (options_.initial_staging_bytes == 0 ||
      options_.initial_staging_bytes > options_.max_staging_bytes)
    throw Error(Error::Kind::kUsage, "initial_staging_bytes must be in 1..max_staging_bytes");
  if (options_.cluster_max_attempts < 1)
    throw Error(Error::Kind::kUsage, "cluster_max_attempts must be at least 1");
}

ClientShared::~ClientShared() = default;

rdma::VerbsDevice* ClientShared::open_device(std::string& error) {
  std::lock_guard lk(device_mu_);
  if (!device_tried_) {
    device_tried_ = true;
    rdma::DeviceOptions o;
    o.name = options_.rdma_device;
    o.port = options_.rdma_port;
    o.gid_index = options_.rdma_gid_index;
    device_ = rdma::VerbsDevice::open(options_.verbs_api ? *options_.verbs_api : rdma::real_verbs(),
                                      o, device_error_);
  }
  if (!device_) error = device_error_;
  return device_.get();
}

rdma::VerbsDevice* ClientShared::device() const {
  std::lock_guard lk(device_mu_);
  return device_.get();
}

void ClientShared::close_device() {
  std::lock_guard lk(device_mu_);
  device_.reset();
}

std::shared_ptr<BufferState> ClientShared::alloc(size_t size) {
  if (size == 0) throw Error(Error::Kind::kUsage, "a buffer's size must be positive");
  auto b = std::make_shared<BufferState>();
  b->size = size;
  b->owned = true;
  if (memfd_buffers_) {
    SharedMemory mem(size, "stratakv-buffer");
    b->fd = mem.fd();
    b->base = mem.data();
    mem.release();
  } else {
    b->base = map_anonymous(size);
  }
  if (rdma::VerbsDevice* dev = device()) {
    std::string error;
    if (!dev->register_buffer(b->base, b->size, b->reg, error) && b->fd < 0) {
      unmap(b->base, size);
      b->owned = false;
      throw Error(Error::Kind::kConnection, "RDMA: the NIC cannot register a buffer of " +
                                                std::to_string(size) + " bytes");
    }
  }
  b->zero_copy = b->fd >= 0 || b->reg.handle != nullptr;
  std::unique_lock lk(buffers_mu_);
  b->id = next_buffer_id_++;
  if (b->zero_copy) buffers_[reinterpret_cast<uintptr_t>(b->base)] = b;
  b->shared = weak_from_this();
  return b;
}

std::shared_ptr<BufferState> ClientShared::wrap(void* p, size_t size) {
  if (p == nullptr || size == 0)
    throw Error(Error::Kind::kUsage, "register_buffer needs a non-null pointer and a positive size");
  auto b = std::make_shared<BufferState>();
  b->base = static_cast<std::byte*>(p);
  b->size = size;
  // On verbs the NIC registers any memory: zero copy (or staged, if the NIC refuses it). On
  // shm or RESP it is never looked up, never registered.
  if (rdma::VerbsDevice* dev = device()) {
    std::string error;
    b->zero_copy = dev->register_buffer(b->base, b->size, b->reg, error);
  }
  std::unique_lock lk(buffers_mu_);
  b->id = next_buffer_id_++;
  if (b->zero_copy) {
    buffers_[reinterpret_cast<uintptr_t>(b->base)] = b;
    b->shared = weak_from_this();
  }
  return b;
}

std::shared_ptr<BufferState> ClientShared::find(const void* p, size_t n, TransportChoice kind) const {
  const auto addr = reinterpret_cast<uintptr_t>(p);
  std::shared_ptr<BufferState> found;
  {
    std::shared_lock lk(buffers_mu_);
    auto it = buffers_.upper_bound(addr);
    if (it == buffers_.begin()) return nullptr;
    --it;
    found = it->second.lock();
  }
  // Checked outside the lock: dropping `found` may run ~BufferState, which takes the lock.
  if (!found) return nullptr;
  const auto base = reinterpret_cast<uintptr_t>(found->base);
  if (addr < base || n > found->size || addr - base > found->size - n) return nullptr;
  const bool reachable = kind == TransportChoice::kShm     ? found->fd >= 0
                         : kind == TransportChoice::kVerbs ? found->reg.handle != nullptr
                                                           : false;
  return reachable ? found : nullptr;
}

void ClientShared::add_core(const std::shared_ptr<ClientCore>& core) {
  std::lock_guard lk(cores_mu_);
  std::erase_if(cores_, [](const std::weak_ptr<ClientCore>& c) { return c.expired(); });
  cores_.push_back(core);
}

void ClientShared::retire(const BufferState& b) {
  if (b.reg.handle != nullptr) {
    if (rdma::VerbsDevice* dev = device()) dev->unregister_buffer(b.reg);  // nothing uses it now
  }
  if (!b.zero_copy) return;
  {
    std::unique_lock lk(buffers_mu_);
    auto it = buffers_.find(reinterpret_cast<uintptr_t>(b.base));
    if (it != buffers_.end() && it->second.expired()) buffers_.erase(it);
  }
  std::vector<std::shared_ptr<ClientCore>> cores;
  {
    std::lock_guard lk(cores_mu_);
    for (const auto& w : cores_)
      if (auto c = w.lock()) cores.push_back(std::move(c));
  }
  for (const auto& c : cores) c->retire(b.id);
}

}  // namespace stratakv::detail
