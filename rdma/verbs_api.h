// rdma/verbs_api.h - the libibverbs calls the verbs transport makes, behind one interface.
//
// The transport (rdma/verbs_transport.h) never calls ibv_* directly: it calls a VerbsApi. The
// real one (real_verbs(), rdma/verbs_real.cc) forwards to libibverbs; the tests use an
// in-process fake (tests/fakes/fake_verbs.h) that moves bytes between registered buffers and
// enforces keys, bounds and access flags, because the build machines have no RDMA device.
//
// Every method has the signature, the ownership and the error convention of the libibverbs
// function of the same name (man ibv_get_device_list, ibv_open_device, ibv_query_device,
// ibv_query_port, ibv_query_gid, ibv_alloc_pd, ibv_reg_mr, ibv_create_cq, ibv_create_qp,
// ibv_modify_qp, ibv_query_qp, ibv_post_send, ibv_poll_cq): pointer results are null on
// failure with errno set; int results are 0 on success, else an errno value (or -1 with errno,
// as the man page of that call says). Thread-safety is that of libibverbs: every call may be made
// from any thread; post_send on one QP and poll_cq on one CQ must not race with themselves.
#pragma once

#include <infiniband/verbs.h>

#include <cstddef>
#include <cstdint>

namespace rdma {

class VerbsApi {
 public:
  virtual ~VerbsApi() = default;

  // Devices. The list is null-terminated; `num` (may be null) receives its length.
  virtual ibv_device** get_device_list(int* num) = 0;
  virtual void free_device_list(ibv_device** list) = 0;
  virtual const char* get_device_name(ibv_device* device) = 0;
  virtual ibv_context* open_device(ibv_device* device) = 0;
  virtual int close_device(ibv_context* context) = 0;
  virtual int query_device(ibv_context* context, ibv_device_attr* attr) = 0;
  virtual int query_port(ibv_context* context, uint8_t port, ibv_port_attr* attr) = 0;
  virtual int query_gid(ibv_context* context, uint8_t port, int index, ibv_gid* gid) = 0;

  // Protection domains and memory regions.
  virtual ibv_pd* alloc_pd(ibv_context* context) = 0;
  virtual int dealloc_pd(ibv_pd* pd) = 0;
  virtual ibv_mr* reg_mr(ibv_pd* pd, void* addr, size_t length, int access) = 0;
  virtual int dereg_mr(ibv_mr* mr) = 0;

  // Completion queues (no completion channel: the transport polls).
  virtual ibv_cq* create_cq(ibv_context* context, int cqe) = 0;
  virtual int destroy_cq(ibv_cq* cq) = 0;
  /// libibverbs' ibv_poll_cq is static inline in verbs.h; this is a real function around it.
  virtual int poll_cq(ibv_cq* cq, int num_entries, ibv_wc* wc) = 0;

  // Queue pairs.
  virtual ibv_qp* create_qp(ibv_pd* pd, ibv_qp_init_attr* attr) = 0;
  virtual int destroy_qp(ibv_qp* qp) = 0;
  virtual int modify_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask) = 0;
  virtual int query_qp(ibv_qp* qp, ibv_qp_attr* attr, int attr_mask,
                       ibv_qp_init_attr* init_attr) = 0;
  /// libibverbs' ibv_post_send is static inline in verbs.h; this is a real function around it.
  virtual int post_send(ibv_qp* qp, ibv_send_wr* wr, ibv_send_wr** bad_wr) = 0;
};

/// The process's libibverbs. Lives for the whole process.
VerbsApi& real_verbs();

}  // namespace rdma
