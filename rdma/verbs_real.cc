// rdma/verbs_real.cc - VerbsApi over the real libibverbs (link -libverbs).
#include <infiniband/verbs.h>

#include "rdma/verbs_api.h"

namespace rdma {

namespace {

class RealVerbs final : public VerbsApi {
 public:
  ibv_device** get_device_list(int* num) override { return ibv_get_device_list(num); }
  void free_device_list(ibv_device** list) override { ibv_free_device_list(list); }
  const char* get_device_name(ibv_device* device) override {
    return ibv_get_device_name(device);
  }
  ibv_context* open_device(ibv_device* device) override { return ibv_open_device(device); }
  int close_device(ibv_context* context) override { return ibv_close_device(context); }
  int query_device(ibv_context* context, ibv_device_attr* attr) override {
    return ibv_query_device(context, attr);
  }
  int query_port(ibv_context* context, uint8_t port, ibv_port_attr* attr) override {
    return ibv_query_port(context, port, attr);
  }
  int query_gid(ibv_context* context, uint8_t port, int index, ibv_gid* gid) override {
    return ibv_query_gid(context, port, index, gid);
  }

  ibv_pd* alloc_pd(ibv_context* context) override { return ibv_alloc_pd(context); }
  int dealloc_pd(ibv_pd* pd) override { return ibv_dealloc_pd(pd); }
  ibv_mr* reg_mr(ibv_pd* pd, void* addr, size_t length, int access) override {
    return ibv_reg_mr(pd, addr, length, access);
  }
  int dereg_mr(ibv_mr* mr) override { return ibv_dereg_mr(mr); }

  ibv_cq* create_cq(ibv_context* context, int cqe) override {
    return ibv_create_cq(context, cqe, nullptr, nullptr, 0);
  }
  int destroy_cq(ibv_cq* cq) override { return ibv_destroy_cq(cq); }
  int poll_cq(ibv_cq* cq, int num_entries, ibv_wc* wc) override {
    return ibv_poll_cq(cq, num_entries, wc);
  }

  ibv_qp* create_qp(ibv_pd* pd, ibv_qp_init_attr* attr) override {
    return ibv_create_qp(pd, attr);
  }
  int destroy_qp(ibv_qp* qp) override { return ibv_destroy_qp(qp); }
  int modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask) override {
    return ibv_modify_qp(qp, attr, attr_mask);
  }
  int query_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask,
               ibv_qp_init_attr* init_attr) override {
    return ibv_query_qp(qp, attr, attr_mask, init_attr);
  }
  int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr) override {
    return ibv_post_send(qp, wr, bad_wr);
  }
};

}  // namespace

VerbsApi& real_verbs() {
  static RealVerbs api;
  return api;
}

}  // namespace rdma
