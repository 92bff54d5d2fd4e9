#include "core.h"

#include <unistd.h>

#include <algorithm>

namespace stratakv::detail {

ClientCore::ClientCore(Url url, std::shared_ptr<ClientShared> shared)
    : url_(std::move(url)), shared_(std::move(shared)) {}

ClientCore::~ClientCore() {
  idle_.clear();  // lent sessions cannot exist: every call holds the Client alive
}

void ClientCore::start() {
  shared_->add_core(shared_from_this());
  const Options& opts = options();
  const bool on_unix = url_.scheme == Url::Scheme::kUnix;
  if (opts.transport == TransportKind::kShm && !on_unix)
    throw Error(Error::Kind::kUsage, "the shm transport needs a unix:// URL");
  // TLS: payloads stay inside it (RESP); RDMA would move them in the clear.
  if (opts.transport == TransportKind::kVerbs && url_.tls)
    throw Error(Error::Kind::kUsage, "the verbs transport bypasses TLS: use resp or auto with rediss://");
  auto s = std::make_unique<Session>(url_, opts);
  choice_ = TransportChoice::kResp;
  if (!s->is_tls() && (opts.transport == TransportKind::kVerbs ||
                       (opts.transport == TransportKind::kAuto && opts.rdma))) {
    if (try_verbs(*s)) choice_ = TransportChoice::kVerbs;
  }
  if (choice_ == TransportChoice::kResp && on_unix && !s->is_tls() &&
      (opts.transport == TransportKind::kAuto || opts.transport == TransportKind::kShm)) {
    try {
      s->set_transport(make_transport(TransportChoice::kShm, *s, *this));
      choice_ = TransportChoice::kShm;
    } catch (const Error& e) {
      // A server without the fast path (a plain Redis, an older stratakv), or one that cannot
      // receive descriptors: plain RESP, unless shm was demanded. Other errors (NOAUTH, ...)
      // are the caller's to see.
      const std::string_view what = e.what();
      const bool no_fast_path =
          e.kind() == Error::Kind::kServer &&
          (what.starts_with("ERR unknown command") || what.starts_with("ERR KV.REGISTER SHM needs"));
      if (opts.transport == TransportKind::kShm || !no_fast_path) throw;
    }
  }
  if (choice_ == TransportChoice::kResp) s->set_transport(make_transport(choice_, *s, *this));
  std::lock_guard lk(pool_mu_);
  open_.push_back(s.get());
  idle_.push_back(std::move(s));
}

bool ClientCore::try_verbs(Session& s) {
  const bool demanded = options().transport == TransportKind::kVerbs;
  std::string error;
  if (shared_->open_device(error) == nullptr) {
    if (demanded) throw Error(Error::Kind::kUsage, error);  // "RDMA: no device found", ...
    return false;
  }
  try {
    s.set_transport(make_verbs_transport(s, *this));
    return true;
  } catch (const Error& e) {
    // A server without a device ("ERR RDMA is not available on this server"), or without the
    // fast path at all, or a NIC that refused a resource ("RDMA: ..."): try the next one.
    const std::string_view what = e.what();
    const bool no_rdma = (e.kind() == Error::Kind::kServer &&
                          (what.starts_with("ERR RDMA") || what.starts_with("ERR unknown command"))) ||
                         (e.kind() == Error::Kind::kUsage && what.starts_with("RDMA: "));
    if (demanded || !no_rdma || s.broken()) throw;
    return false;
  }
}

ClientCore::Lease::Lease(ClientCore& c) : core(c), session(c.acquire()) {}

ClientCore::Lease::~Lease() { core.release(std::move(session)); }

std::unique_ptr<Session> ClientCore::acquire() {
  std::unique_ptr<Session> s;
  std::vector<uint64_t> retired;
  {
    std::unique_lock lk(pool_mu_);
    pool_cv_.wait(lk, [&] {
      return !idle_.empty() || open_.size() + opening_ < options().max_connections;
    });
    if (!idle_.empty()) {
      s = std::move(idle_.back());
      idle_.pop_back();
      retired.swap(s->retired);
    } else {
      ++opening_;
    }
  }
  if (!s) {
    try {
      s = std::make_unique<Session>(url_, options());
      s->set_transport(make_transport(choice_, *s, *this));
    } catch (...) {
      std::lock_guard lk(pool_mu_);
      --opening_;
      pool_cv_.notify_one();
      throw;
    }
    std::lock_guard lk(pool_mu_);
    --opening_;
    open_.push_back(s.get());
  }
  if (!retired.empty()) {
    try {
      s->transport().forget_buffers(retired);
    } catch (...) {
      drop(std::move(s));
      throw;
    }
  }
  return s;
}

void ClientCore::release(std::unique_ptr<Session> s) {
  if (!s) return;
  if (s->broken() || !s->idle()) return drop(std::move(s));
  std::lock_guard lk(pool_mu_);
  idle_.push_back(std::move(s));
  pool_cv_.notify_one();
}

void ClientCore::drop(std::unique_ptr<Session> s) {
  {
    std::lock_guard lk(pool_mu_);
    open_.erase(std::remove(open_.begin(), open_.end(), s.get()), open_.end());
    pool_cv_.notify_one();
  }
  s.reset();  // closes the connection: the server unregisters its segments
}

void ClientCore::retire(uint64_t id) {
  std::lock_guard lk(pool_mu_);
  for (Session* s : open_) s->retired.push_back(id);
}

}  // namespace stratakv::detail
