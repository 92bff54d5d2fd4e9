// rdma/verbs_device.cc - VerbsDevice: the opened device, its PD, CQ and memory registrations,
// and the demultiplexing of the shared CQ's completions by queue pair.
#include <algorithm>
#include <cerrno>
#include <cstring>

#include "rdma/verbs_transport.h"

namespace rdma {

namespace {

std::string errno_text(int err) { return err > 0 ? std::strerror(err) : "unknown error"; }

const char* port_state_text(ibv_port_state s) {
  switch (s) {
    case IBV_PORT_DOWN: return "down";
    case IBV_PORT_INIT: return "init";
    case IBV_PORT_ARMED: return "armed";
    case IBV_PORT_ACTIVE: return "active";
    default: return "not active";
  }
}

uint32_t clamp_to(uint64_t want, int64_t limit) {
  if (limit <= 0) return static_cast<uint32_t>(std::min<uint64_t>(want, UINT32_MAX));
  return static_cast<uint32_t>(std::min<uint64_t>(want, static_cast<uint64_t>(limit)));
}

}  // namespace

std::unique_ptr<VerbsDevice> VerbsDevice::open(VerbsApi& api, const DeviceOptions& options,
                                               std::string& error) {
  std::unique_ptr<VerbsDevice> d(new VerbsDevice(api, options));
  int n = 0;
  ibv_device** list = api.get_device_list(&n);
  if (list == nullptr || n <= 0) {
    if (list != nullptr) api.free_device_list(list);
    error = "RDMA: no device found";
    return nullptr;
  }
  ibv_device* chosen = nullptr;
  std::string names;
  for (int i = 0; i < n && chosen == nullptr; ++i) {
    const char* name = api.get_device_name(list[i]);
    if (name == nullptr) continue;
    if (options.name.empty() || options.name == name) {
      chosen = list[i];
      d->name_ = name;
    }
    names += names.empty() ? name : std::string(" ") + name;
  }
  if (chosen == nullptr) {
    api.free_device_list(list);
    error = "RDMA: device " + options.name + " not found (have: " + names + ")";
    return nullptr;
  }
  d->context_ = api.open_device(chosen);
  const int open_errno = errno;
  api.free_device_list(list);  // allowed once the devices we need are open (ibv_get_device_list)
  const std::string prefix = "RDMA: device " + d->name_;
  if (d->context_ == nullptr) {
    error = prefix + " cannot be opened: " + errno_text(open_errno);
    return nullptr;
  }

  ibv_device_attr dev{};
  ibv_port_attr port{};
  ibv_gid gid{};
  if (int rc = api.query_device(d->context_, &dev); rc != 0) {
    error = prefix + ": ibv_query_device failed: " + errno_text(rc);
    return nullptr;
  }
  if (int rc = api.query_port(d->context_, options.port, &port); rc != 0) {
    error = prefix + " port " + std::to_string(options.port) + ": ibv_query_port failed: " +
            errno_text(rc);
    return nullptr;
  }
  const std::string where = prefix + " port " + std::to_string(options.port);
  if (port.state != IBV_PORT_ACTIVE) {
    error = where + " is " + port_state_text(port.state);
    return nullptr;
  }
  if (port.link_layer != IBV_LINK_LAYER_ETHERNET) {
    error = where + " is InfiniBand; only RoCE is supported (the protocol carries no LID)";
    return nullptr;
  }
  if (options.gid_index < 0 || options.gid_index >= port.gid_tbl_len ||
      api.query_gid(d->context_, options.port, options.gid_index, &gid) != 0 ||
      std::all_of(gid.raw, gid.raw + 16, [](uint8_t b) { return b == 0; })) {
    error = where + " has no GID at index " + std::to_string(options.gid_index);
    return nullptr;
  }
  std::copy(gid.raw, gid.raw + 16, d->gid_.begin());
  d->active_mtu_ = port.active_mtu;

  d->cq_capacity_ = clamp_to(options.cq_entries, dev.max_cqe);
  d->max_send_wr_ = clamp_to(options.send_queue_depth, dev.max_qp_wr);
  d->max_send_sge_ = clamp_to(options.max_sge, dev.max_sge);
  d->max_sge_rd_ = clamp_to(d->max_send_sge_, dev.max_sge_rd > 0 ? dev.max_sge_rd : dev.max_sge);
  d->max_rd_atomic_ = clamp_to(16, dev.max_qp_init_rd_atom);
  d->max_dest_rd_atomic_ = clamp_to(16, dev.max_qp_rd_atom);
  d->max_message_ = std::min<uint64_t>({options.max_message, 1ull << 31,
                                        port.max_msg_sz > 0 ? port.max_msg_sz : 1ull << 31});
  if (d->cq_capacity_ == 0 || d->max_send_wr_ == 0 || d->max_send_sge_ == 0 ||
      d->max_message_ == 0) {
    error = prefix + ": device limits too small (max_cqe, max_qp_wr, max_sge or max_msg_sz)";
    return nullptr;
  }

  d->pd_ = api.alloc_pd(d->context_);
  if (d->pd_ == nullptr) {
    error = prefix + ": ibv_alloc_pd failed: " + errno_text(errno);
    return nullptr;
  }
  d->cq_ = api.create_cq(d->context_, static_cast<int>(d->cq_capacity_));
  if (d->cq_ == nullptr) {
    error = prefix + ": ibv_create_cq failed: " + errno_text(errno);
    return nullptr;
  }
  d->batch_.resize(32);
  return d;
}

std::unique_ptr<VerbsDevice> VerbsDevice::probe(VerbsApi& api, const DeviceOptions& options,
                                                std::string& log_line) {
  std::string error;
  auto d = open(api, options, error);
  if (d == nullptr) {
    log_line = error + ", fast path over verbs disabled";
  } else {
    log_line = "RDMA: device " + d->name() + " port " + std::to_string(d->port()) + ", mtu " +
               std::to_string(d->mtu()) + ", fast path over verbs enabled";
  }
  return d;
}

VerbsDevice::~VerbsDevice() {
  for (ibv_mr* mr : regs_) api_.dereg_mr(mr);
  if (cq_ != nullptr) api_.destroy_cq(cq_);
  if (pd_ != nullptr) api_.dealloc_pd(pd_);
  if (context_ != nullptr) api_.close_device(context_);
}

bool VerbsDevice::register_region(void* base, uint64_t size, std::string& error) {
  std::unique_lock lock(regs_mu_);
  if (region_ != nullptr) {
    error = "ERR RDMA value region is already registered";
    return false;
  }
  ibv_mr* mr = api_.reg_mr(pd_, base, size, IBV_ACCESS_LOCAL_WRITE);
  if (mr == nullptr) {
    error = "ERR RDMA cannot register the value region (" + std::to_string(size) +
            " bytes): " + errno_text(errno);
    return false;
  }
  region_ = mr;
  regs_.push_back(mr);
  return true;
}

bool VerbsDevice::register_buffer(void* addr, uint64_t length, BufferRegistration& out,
                                  std::string& error, int remote_access) {
  const int access = IBV_ACCESS_LOCAL_WRITE |
                     (remote_access & (IBV_ACCESS_REMOTE_READ | IBV_ACCESS_REMOTE_WRITE));
  ibv_mr* mr = length == 0 ? nullptr : api_.reg_mr(pd_, addr, length, access);
  if (mr == nullptr) {
    error = "ERR RDMA cannot register a buffer of " + std::to_string(length) +
            " bytes: " + (length == 0 ? std::string("empty buffer") : errno_text(errno));
    return false;
  }
  std::unique_lock lock(regs_mu_);
  regs_.push_back(mr);
  out = BufferRegistration{reinterpret_cast<uint64_t>(addr), length, mr->lkey, mr->rkey, mr};
  return true;
}

bool VerbsDevice::unregister_buffer(const BufferRegistration& reg) {
  std::unique_lock lock(regs_mu_);
  auto it = std::find(regs_.begin(), regs_.end(), reg.handle);
  if (it == regs_.end() || *it == region_) return false;
  regs_.erase(it);
  api_.dereg_mr(reg.handle);
  return true;
}

bool VerbsDevice::find_lkey(const void* addr, uint64_t length, uint32_t& lkey) const {
  const auto a = reinterpret_cast<uintptr_t>(addr);
  std::shared_lock lock(regs_mu_);
  for (const ibv_mr* mr : regs_) {
    const auto base = reinterpret_cast<uintptr_t>(mr->addr);
    if (a >= base && a - base <= mr->length && length <= mr->length - (a - base)) {
      lkey = mr->lkey;
      return true;
    }
  }
  return false;
}

size_t VerbsDevice::endpoints() const {
  std::lock_guard lock(poll_mu_);
  return mailboxes_.size();
}

bool VerbsDevice::attach(uint32_t qp_num, uint32_t depth, std::string& error) {
  std::lock_guard lock(poll_mu_);
  // Every work request of an endpoint may complete (a flush completes even unsignaled ones),
  // so the CQ must hold all of them at once: an overrun CQ is a fatal device error.
  if (cq_capacity_ - cq_reserved_ < depth) {
    error = "ERR RDMA completion queue is full (" + std::to_string(mailboxes_.size()) +
            " queue pairs)";
    return false;
  }
  cq_reserved_ += depth;
  mailboxes_[qp_num].clear();
  return true;
}

void VerbsDevice::detach(uint32_t qp_num, uint32_t depth) {
  std::lock_guard lock(poll_mu_);
  cq_reserved_ -= depth;
  mailboxes_.erase(qp_num);
}

bool VerbsDevice::poll(uint32_t qp_num, std::vector<ibv_wc>& out) {
  out.clear();
  std::lock_guard lock(poll_mu_);
  for (;;) {
    const int n = api_.poll_cq(cq_, static_cast<int>(batch_.size()), batch_.data());
    if (n < 0) return false;
    for (int i = 0; i < n; ++i) {
      auto it = mailboxes_.find(batch_[i].qp_num);
      if (it != mailboxes_.end()) it->second.push_back(batch_[i]);  // else: a destroyed QP's
    }
    if (n < static_cast<int>(batch_.size())) break;
  }
  auto it = mailboxes_.find(qp_num);
  if (it != mailboxes_.end()) out.swap(it->second);
  return true;
}

}  // namespace rdma
