#include "core.h"

#include <unistd.h>

#include <algorithm>

namespace stratakv::detail {

BufferState::~BufferState() {
  if (auto c = core.lock()) c->retire(*this);
  if (owned) {
    unmap(base, size);
    if (fd >= 0) ::close(fd);
  }
}

ClientCore::ClientCore(Url url, Options options) : url_(std::move(url)), options_(std::move(options)) {
  if (options_.max_connections == 0)
    throw Error(Error::Kind::kUsage, "max_connections must be at least 1");
  if (options_.initial_staging_bytes == 0 ||
      options_.initial_staging_bytes > options_.max_staging_bytes)
    throw Error(Error::Kind::kUsage, "initial_staging_bytes must be in 1..max_staging_bytes");
}

ClientCore::~ClientCore() {
  idle_.clear();  // lent sessions cannot exist: every call holds the Client alive
}

void ClientCore::start() {
  const bool on_unix = url_.scheme == Url::Scheme::kUnix;
  if (options_.transport == TransportKind::kShm && !on_unix)
    throw Error(Error::Kind::kUsage, "the shm transport needs a unix:// URL");
  auto s = std::make_unique<Session>(url_, options_);
  choice_ = TransportChoice::kResp;
  if (on_unix && options_.transport != TransportKind::kResp) {
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
      if (options_.transport == TransportKind::kShm || !no_fast_path) throw;
    }
  }
  if (choice_ == TransportChoice::kResp) s->set_transport(make_transport(choice_, *s, *this));
  std::lock_guard lk(pool_mu_);
  open_.push_back(s.get());
  idle_.push_back(std::move(s));
}

ClientCore::Lease::Lease(ClientCore& c) : core(c), session(c.acquire()) {}

ClientCore::Lease::~Lease() { core.release(std::move(session)); }

std::unique_ptr<Session> ClientCore::acquire() {
  std::unique_ptr<Session> s;
  std::vector<uint64_t> retired;
  {
    std::unique_lock lk(pool_mu_);
    pool_cv_.wait(lk, [&] {
      return !idle_.empty() || open_.size() + opening_ < options_.max_connections;
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
      s = std::make_unique<Session>(url_, options_);
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

std::shared_ptr<BufferState> ClientCore::find_zero_copy(const void* p, size_t n) const {
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
  return found;
}

std::shared_ptr<BufferState> ClientCore::alloc(size_t size) {
  if (size == 0) throw Error(Error::Kind::kUsage, "a buffer's size must be positive");
  auto b = std::make_shared<BufferState>();
  b->size = size;
  b->owned = true;
  if (traits(choice_).shared_memory) {
    SharedMemory mem(size, "stratakv-buffer");
    b->fd = mem.fd();
    b->base = mem.data();
    mem.release();
    b->zero_copy = true;
  } else {
    b->base = map_anonymous(size);
  }
  std::unique_lock lk(buffers_mu_);
  b->id = next_buffer_id_++;
  if (b->zero_copy) buffers_[reinterpret_cast<uintptr_t>(b->base)] = b;
  b->core = weak_from_this();
  return b;
}

std::shared_ptr<BufferState> ClientCore::wrap(void* p, size_t size) {
  if (p == nullptr || size == 0)
    throw Error(Error::Kind::kUsage, "register_buffer needs a non-null pointer and a positive size");
  auto b = std::make_shared<BufferState>();
  b->base = static_cast<std::byte*>(p);
  b->size = size;
  std::unique_lock lk(buffers_mu_);
  b->id = next_buffer_id_++;
  return b;  // not zero-copy on shm or RESP: never looked up, never registered
}

void ClientCore::retire(const BufferState& b) {
  if (!b.zero_copy) return;
  {
    std::unique_lock lk(buffers_mu_);
    auto it = buffers_.find(reinterpret_cast<uintptr_t>(b.base));
    if (it != buffers_.end() && it->second.expired()) buffers_.erase(it);
  }
  std::lock_guard lk(pool_mu_);
  for (Session* s : open_) s->retired.push_back(b.id);
}

}  // namespace stratakv::detail
