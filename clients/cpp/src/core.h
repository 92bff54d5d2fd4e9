// core.h - one node's connection pool: the connections of a Client to one server, each with the
// payload transport chosen when the first one connected (verbs, shm or RESP). A Client on one
// server has one ClientCore; a Client on a cluster has one per node (cluster_core.h). What the
// nodes share (the RDMA device, the buffers) lives in ClientShared (client_shared.h).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "rdma/verbs_transport.h"
#include "session.h"
#include "client_shared.h"
#include "transport.h"
#include "url.h"

namespace stratakv::detail {

class ClientCore : public std::enable_shared_from_this<ClientCore> {
 public:
  /// A pool for the server at `url`, with the options and buffers of `shared`.
  ClientCore(Url url, std::shared_ptr<ClientShared> shared);
  ~ClientCore();

  /// Opens the first connection and settles the transport (verbs when both sides have a
  /// device, else shm on a unix:// URL when the server offers it, else RESP; or what
  /// Options::transport demands). Call once, right after making. Throws Error.
  void start();
  TransportChoice choice() const { return choice_; }
  const Options& options() const { return shared_->options(); }
  const Url& url() const { return url_; }
  ClientShared& shared() const { return *shared_; }
  /// The Client's RDMA device, when this node's transport is verbs (else null).
  rdma::VerbsDevice* verbs_device() const { return shared_->device(); }

  /// Runs f(Session&) on a pooled connection; a connection that failed is closed, not reused.
  template <class F>
  decltype(auto) with_session(F&& f) {
    Lease lease(*this);
    return guarded(*lease.session, f);
  }

  /// Runs f(Session&) on the client's lease connection: the one connection that sends every
  /// KV.PREFIX ... PIN and KV.UNPIN, since the server keeps leases per connection (so an unpin
  /// reaches the leases of any earlier prefix_match of this client). Calls are serialized.
  template <class F>
  decltype(auto) with_lease_session(F&& f) {
    std::lock_guard lk(lease_mu_);
    if (!lease_session_ || lease_session_->broken()) {
      lease_session_.reset();
      auto s = std::make_unique<Session>(url_, options());
      s->set_transport(make_resp_transport(*s));
      lease_session_ = std::move(s);
    }
    return guarded(*lease_session_, f);
  }

  /// A buffer that contains [p, p+n) and that this node's transport reaches directly, kept
  /// alive by the returned pointer; null when none does.
  std::shared_ptr<BufferState> find_zero_copy(const void* p, size_t n) const {
    return shared_->find(p, n, choice_);
  }
  /// Queues the unregistration of buffer `id` on every open connection (ClientShared::retire).
  void retire(uint64_t id);

 private:
  struct Lease {
    explicit Lease(ClientCore& core);
    ~Lease();
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    ClientCore& core;
    std::unique_ptr<Session> session;
  };
  // Only Error(kServer) and Error(kUsage) leave a connection reusable (they are thrown
  // between replies); any other exception may leave a reply half read.
  template <class F>
  static decltype(auto) guarded(Session& s, F& f) {
    try {
      return f(s);
    } catch (const Error& e) {
      if (e.kind() != Error::Kind::kServer && e.kind() != Error::Kind::kUsage) s.mark_broken();
      throw;
    } catch (...) {
      s.mark_broken();
      throw;
    }
  }
  /// Tries the verbs transport on `s` (probing the device first). False, device closed, when
  /// either side has no RDMA; throws when kVerbs was demanded or on any other error.
  bool try_verbs(Session& s);
  std::unique_ptr<Session> acquire();
  /// Returns a session to the pool, or closes it when it is broken.
  void release(std::unique_ptr<Session> s);
  /// Closes a session and forgets it.
  void drop(std::unique_ptr<Session> s);

  const Url url_;
  const std::shared_ptr<ClientShared> shared_;  // the device outlives every session
  TransportChoice choice_ = TransportChoice::kResp;

  std::mutex pool_mu_;
  std::condition_variable pool_cv_;
  std::vector<std::unique_ptr<Session>> idle_;
  std::vector<Session*> open_;  // every open session, idle or lent (for retire)
  size_t opening_ = 0;          // connections being opened (count against max_connections)

  std::mutex lease_mu_;
  std::unique_ptr<Session> lease_session_;  // opened on the first PIN
};

}  // namespace stratakv::detail
