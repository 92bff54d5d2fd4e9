// tests/fakes/fake_verbs.cc - FakeVerbs: devices, PDs, MRs, CQs, QPs and the QP state machine.
// The data path (post_send, poll_cq, flushes) is in fake_verbs_post.cc.
#include <cerrno>
#include <cstring>

#include "tests/fakes/fake_verbs_state.h"

namespace fakes {

namespace {

template <class Map>
auto* find(Map& map, const void* key) {
  auto it = map.find(static_cast<typename Map::key_type>(key));
  return it == map.end() ? nullptr : it->second.get();
}

template <class T>
T* fail(int err) {
  errno = err;
  return nullptr;
}

bool has(int mask, int required) { return (mask & required) == required; }

}  // namespace

FakeVerbs::FakeVerbs(FakeVerbsConfig config) : s_(std::make_unique<State>()) {
  s_->config = std::move(config);
  for (size_t i = 0; i < s_->config.devices.size(); ++i) {
    auto d = std::make_unique<FakeDevice>();
    std::strncpy(d->dev.name, s_->config.devices[i].c_str(), sizeof(d->dev.name) - 1);
    d->dev.node_type = IBV_NODE_CA;
    d->dev.transport_type = IBV_TRANSPORT_IB;
    d->gid = {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0, 0, 0xff, 0xfe, 0, 0,
              static_cast<uint8_t>(i + 1)};
    s_->devices.push_back(std::move(d));
  }
}

FakeVerbs::~FakeVerbs() = default;

ibv_device** FakeVerbs::get_device_list(int* num) {
  std::lock_guard lock(s_->mu);
  auto** list = new ibv_device*[s_->devices.size() + 1];
  for (size_t i = 0; i < s_->devices.size(); ++i) list[i] = &s_->devices[i]->dev;
  list[s_->devices.size()] = nullptr;
  if (num != nullptr) *num = static_cast<int>(s_->devices.size());
  return list;
}

void FakeVerbs::free_device_list(ibv_device** list) { delete[] list; }

const char* FakeVerbs::get_device_name(ibv_device* device) { return device->name; }

ibv_context* FakeVerbs::open_device(ibv_device* device) {
  std::lock_guard lock(s_->mu);
  for (auto& d : s_->devices) {
    if (&d->dev != device) continue;
    auto c = std::make_unique<FakeContext>();
    c->ctx.device = device;
    c->ctx.num_comp_vectors = 1;
    c->device = d.get();
    ibv_context* p = &c->ctx;
    s_->contexts.emplace(p, std::move(c));
    return p;
  }
  return fail<ibv_context>(ENODEV);
}

int FakeVerbs::close_device(ibv_context* context) {
  std::lock_guard lock(s_->mu);
  return s_->contexts.erase(context) == 1 ? 0 : -1;
}

int FakeVerbs::query_device(ibv_context* context, ibv_device_attr* attr) {
  std::lock_guard lock(s_->mu);
  if (find(s_->contexts, context) == nullptr) return EINVAL;
  *attr = ibv_device_attr{};
  std::strcpy(attr->fw_ver, "fake");
  attr->max_mr_size = UINT64_MAX;
  attr->max_qp = 1 << 16;
  attr->max_qp_wr = s_->config.max_qp_wr;
  attr->max_sge = s_->config.max_sge;
  attr->max_sge_rd = s_->config.max_sge_rd;
  attr->max_cq = 1 << 16;
  attr->max_cqe = s_->config.max_cqe;
  attr->max_mr = 1 << 20;
  attr->max_pd = 1 << 16;
  attr->max_qp_rd_atom = 16;
  attr->max_qp_init_rd_atom = 16;
  attr->phys_port_cnt = 1;
  return 0;
}

int FakeVerbs::query_port(ibv_context* context, uint8_t port, ibv_port_attr* attr) {
  std::lock_guard lock(s_->mu);
  if (find(s_->contexts, context) == nullptr || port != 1) return EINVAL;
  *attr = ibv_port_attr{};
  attr->state = s_->config.port_state;
  attr->max_mtu = IBV_MTU_4096;
  attr->active_mtu = s_->config.active_mtu;
  attr->gid_tbl_len = 1;
  attr->max_msg_sz = s_->config.max_msg_sz;
  attr->pkey_tbl_len = 1;
  attr->link_layer = s_->config.link_layer;
  return 0;
}

int FakeVerbs::query_gid(ibv_context* context, uint8_t port, int index, ibv_gid* gid) {
  std::lock_guard lock(s_->mu);
  FakeContext* c = find(s_->contexts, context);
  if (c == nullptr || port != 1 || index != 0) {
    errno = EINVAL;
    return -1;
  }
  std::memcpy(gid->raw, c->device->gid.data(), 16);
  return 0;
}

ibv_pd* FakeVerbs::alloc_pd(ibv_context* context) {
  std::lock_guard lock(s_->mu);
  if (find(s_->contexts, context) == nullptr) return fail<ibv_pd>(EINVAL);
  auto p = std::make_unique<FakePd>();
  p->pd.context = context;
  ibv_pd* pd = &p->pd;
  s_->pds.emplace(pd, std::move(p));
  return pd;
}

int FakeVerbs::dealloc_pd(ibv_pd* pd) {
  std::lock_guard lock(s_->mu);
  for (auto& [k, mr] : s_->mrs) if (mr->mr.pd == pd) return EBUSY;
  for (auto& [k, qp] : s_->qps) if (qp->qp.pd == pd) return EBUSY;
  return s_->pds.erase(pd) == 1 ? 0 : EINVAL;
}

ibv_mr* FakeVerbs::reg_mr(ibv_pd* pd, void* addr, size_t length, int access) {
  std::lock_guard lock(s_->mu);
  if (find(s_->pds, pd) == nullptr || addr == nullptr || length == 0) return fail<ibv_mr>(EINVAL);
  // man ibv_reg_mr: remote write (or atomic) access requires local write access.
  if ((access & IBV_ACCESS_REMOTE_WRITE) && !(access & IBV_ACCESS_LOCAL_WRITE)) {
    return fail<ibv_mr>(EINVAL);
  }
  auto m = std::make_unique<FakeMr>();
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = addr;
  m->mr.length = length;
  m->mr.lkey = s_->next_key;
  m->mr.rkey = s_->next_key | 0x80000000u;  // never equal to any lkey: a mix-up is caught
  ++s_->next_key;
  m->access = access;
  s_->by_lkey[m->mr.lkey] = m.get();
  s_->by_rkey[m->mr.rkey] = m.get();
  ibv_mr* mr = &m->mr;
  s_->mrs.emplace(mr, std::move(m));
  return mr;
}

int FakeVerbs::dereg_mr(ibv_mr* mr) {
  std::lock_guard lock(s_->mu);
  if (find(s_->mrs, mr) == nullptr) return EINVAL;
  s_->by_lkey.erase(mr->lkey);
  s_->by_rkey.erase(mr->rkey);
  s_->mrs.erase(mr);
  return 0;
}

ibv_cq* FakeVerbs::create_cq(ibv_context* context, int cqe) {
  std::lock_guard lock(s_->mu);
  if (find(s_->contexts, context) == nullptr || cqe < 1 || cqe > s_->config.max_cqe) {
    return fail<ibv_cq>(EINVAL);
  }
  auto c = std::make_unique<FakeCq>();
  c->cq.context = context;
  c->cq.cqe = cqe;
  ibv_cq* cq = &c->cq;
  s_->cqs.emplace(cq, std::move(c));
  return cq;
}

int FakeVerbs::destroy_cq(ibv_cq* cq) {
  std::lock_guard lock(s_->mu);
  for (auto& [k, qp] : s_->qps) if (qp->qp.send_cq == cq) return EBUSY;
  return s_->cqs.erase(cq) == 1 ? 0 : EINVAL;
}

ibv_qp* FakeVerbs::create_qp(ibv_pd* pd, ibv_qp_init_attr* attr) {
  std::lock_guard lock(s_->mu);
  FakeCq* cq = find(s_->cqs, attr->send_cq);
  const ibv_qp_cap& cap = attr->cap;
  if (find(s_->pds, pd) == nullptr || cq == nullptr || attr->qp_type != IBV_QPT_RC ||
      cap.max_send_wr == 0 || cap.max_send_wr > static_cast<uint32_t>(s_->config.max_qp_wr) ||
      cap.max_send_sge > static_cast<uint32_t>(s_->config.max_sge)) {
    return fail<ibv_qp>(EINVAL);
  }
  auto q = std::make_unique<FakeQp>();
  q->qp.context = pd->context;
  q->qp.pd = pd;
  q->qp.send_cq = attr->send_cq;
  q->qp.recv_cq = attr->recv_cq;
  q->qp.qp_num = s_->next_qpn++;
  q->qp.state = IBV_QPS_RESET;
  q->qp.qp_type = IBV_QPT_RC;
  q->device = s_->contexts.at(pd->context)->device;
  q->cq = cq;
  q->max_send_wr = cap.max_send_wr;
  q->max_send_sge = cap.max_send_sge;
  ibv_qp* qp = &q->qp;
  s_->qps_by_num[qp->qp_num] = q.get();
  s_->qps.emplace(qp, std::move(q));
  return qp;
}

int FakeVerbs::destroy_qp(ibv_qp* qp) {
  std::lock_guard lock(s_->mu);
  if (find(s_->qps, qp) == nullptr) return EINVAL;
  s_->qps_by_num.erase(qp->qp_num);
  s_->qps.erase(qp);
  return 0;
}

// The RC transitions of man ibv_modify_qp, with the attributes it requires for each.
int FakeVerbs::modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int mask) {
  std::lock_guard lock(s_->mu);
  FakeQp* q = find(s_->qps, qp);
  if (q == nullptr || !(mask & IBV_QP_STATE)) return EINVAL;
  const ibv_qp_state to = attr->qp_state;
  switch (to) {
    case IBV_QPS_RESET:  // any state -> RESET: everything queued is discarded
      q->stalled.clear();
      q->in_queue.clear();
      q->access = 0;
      q->dest_qpn = q->rq_psn = q->sq_psn = 0;
      break;
    case IBV_QPS_ERR:  // any state -> ERR: queued requests are flushed
      q->state = IBV_QPS_ERR;
      s_->flush(*q);
      break;
    case IBV_QPS_INIT:
      if (q->state != IBV_QPS_RESET && q->state != IBV_QPS_INIT) return EINVAL;
      if (!has(mask, IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS)) return EINVAL;
      if (attr->port_num != 1 || attr->pkey_index != 0) return EINVAL;
      q->access = static_cast<int>(attr->qp_access_flags);
      break;
    case IBV_QPS_RTR:
      if (q->state != IBV_QPS_INIT) return EINVAL;
      if (!has(mask, IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                         IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER)) {
        return EINVAL;
      }
      // RoCE: the address vector must carry a GRH with a valid source GID index.
      if (attr->path_mtu < IBV_MTU_256 || attr->path_mtu > s_->config.active_mtu ||
          !attr->ah_attr.is_global || attr->ah_attr.grh.sgid_index != 0 ||
          attr->ah_attr.port_num != 1 || attr->dest_qp_num > 0xffffff) {
        return EINVAL;
      }
      q->mtu = attr->path_mtu;
      std::memcpy(q->dgid.data(), attr->ah_attr.grh.dgid.raw, 16);
      q->dest_qpn = attr->dest_qp_num;
      q->rq_psn = attr->rq_psn & 0xffffff;
      q->max_dest_rd_atomic = attr->max_dest_rd_atomic;
      break;
    case IBV_QPS_RTS:
      if (q->state != IBV_QPS_RTR) return EINVAL;
      if (!has(mask, IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                         IBV_QP_MAX_QP_RD_ATOMIC)) {
        return EINVAL;
      }
      q->sq_psn = attr->sq_psn & 0xffffff;
      break;
    default:
      return EINVAL;  // SQD/SQE are not modelled
  }
  q->state = to;
  q->qp.state = to;
  return 0;
}

int FakeVerbs::query_qp(ibv_qp* qp, ibv_qp_attr* attr, int, ibv_qp_init_attr* init_attr) {
  std::lock_guard lock(s_->mu);
  FakeQp* q = find(s_->qps, qp);
  if (q == nullptr) return EINVAL;
  *attr = ibv_qp_attr{};
  attr->qp_state = q->state;
  attr->cur_qp_state = q->state;
  attr->path_mtu = q->mtu;
  attr->dest_qp_num = q->dest_qpn;
  attr->rq_psn = q->rq_psn;
  attr->sq_psn = q->sq_psn;
  attr->qp_access_flags = static_cast<unsigned>(q->access);
  attr->cap.max_send_wr = q->max_send_wr;
  attr->cap.max_send_sge = q->max_send_sge;
  if (init_attr != nullptr) {
    *init_attr = ibv_qp_init_attr{};
    init_attr->send_cq = qp->send_cq;
    init_attr->recv_cq = qp->recv_cq;
    init_attr->cap = attr->cap;
    init_attr->qp_type = IBV_QPT_RC;
  }
  return 0;
}

size_t FakeVerbs::live_objects() const {
  std::lock_guard lock(s_->mu);
  return s_->contexts.size() + s_->pds.size() + s_->mrs.size() + s_->cqs.size() +
         s_->qps.size();
}

}  // namespace fakes
