// core.h - the shared state behind a Client: the connection pool and the registry of buffers.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <vector>

#include "session.h"
#include "shared_memory.h"
#include "transport.h"
#include "url.h"

namespace stratakv::detail {

/// The memory behind a Buffer. For an owned buffer it unmaps (and closes its memfd) when the
/// last handle goes, and tells the Client so every connection unregisters it.
struct BufferState {
  uint64_t id = 0;
  std::byte* base = nullptr;
  size_t size = 0;
  int fd = -1;             ///< memfd (shared memory) or -1
  bool owned = false;      ///< unmap on destruction
  bool zero_copy = false;  ///< the server can reach it directly
  std::weak_ptr<ClientCore> core;
  ~BufferState();
};

class ClientCore : public std::enable_shared_from_this<ClientCore> {
 public:
  ClientCore(Url url, Options options);
  ~ClientCore();

  /// Opens the first connection and settles the transport. Call once, right after making.
  void start();
  TransportChoice choice() const { return choice_; }
  const Options& options() const { return options_; }

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
      auto s = std::make_unique<Session>(url_, options_);
      s->set_transport(make_resp_transport(*s));
      lease_session_ = std::move(s);
    }
    return guarded(*lease_session_, f);
  }

  /// A zero-copy buffer that contains [p, p+n), kept alive by the returned pointer; null when
  /// none does.
  std::shared_ptr<BufferState> find_zero_copy(const void* p, size_t n) const;
  /// Makes an owned buffer of `size` bytes (memfd memory when the transport shares memory).
  std::shared_ptr<BufferState> alloc(size_t size);
  /// Wraps caller memory.
  std::shared_ptr<BufferState> wrap(void* p, size_t size);
  /// Called by ~BufferState: queues its unregistration on every open connection.
  void retire(const BufferState& b);

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
  std::unique_ptr<Session> acquire();
  /// Returns a session to the pool, or closes it when it is broken.
  void release(std::unique_ptr<Session> s);
  /// Closes a session and forgets it.
  void drop(std::unique_ptr<Session> s);

  const Url url_;
  const Options options_;
  TransportChoice choice_ = TransportChoice::kResp;

  std::mutex pool_mu_;
  std::condition_variable pool_cv_;
  std::vector<std::unique_ptr<Session>> idle_;
  std::vector<Session*> open_;  // every open session, idle or lent (for retire)
  size_t opening_ = 0;          // connections being opened (count against max_connections)

  std::mutex lease_mu_;
  std::unique_ptr<Session> lease_session_;  // opened on the first PIN

  mutable std::shared_mutex buffers_mu_;
  std::map<uintptr_t, std::weak_ptr<BufferState>> buffers_;  // zero-copy buffers by address
  uint64_t next_buffer_id_ = 1;                               // under buffers_mu_
};

}  // namespace stratakv::detail
