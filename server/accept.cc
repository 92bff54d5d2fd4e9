// server/accept.cc - accepting clients: the listeners' batches on the main thread, each new
// socket's setup on its worker (Server::wait_accept, accept_batch, adopt; see server.h).
//
// A storm of connects is drained, not taken one per turn of the event loop: on each readiness
// of a listener, non-blocking accept4 calls take every queued connection (up to
// kMaxAcceptsPerCall, Redis's MAX_ACCEPTS_PER_CALL in networking.c acceptTcpHandler), so the
// listen queue (tcp-backlog) empties as fast as the kernel fills it. The main thread does only
// what must be serial (maxclients, protected-mode) and hands the descriptor to the next worker;
// socket options, addresses and the Connection are made there, spread over the I/O threads.
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "server/connection.h"
#include "server/errors.h"
#include "server/log.h"
#include "server/os_tuning.h"
#include "server/server.h"

namespace server {

namespace {

// Connections accepted per readiness of a listener before the loop serves other work (Redis's
// MAX_ACCEPTS_PER_CALL).
constexpr int kMaxAcceptsPerCall = 1000;
// After accept4 failed for lack of descriptors or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM):
// the queue stays readable, so the listener waits this long instead of spinning.
constexpr auto kAcceptRetry = std::chrono::milliseconds(100);

std::string endpoint_text(const asio::ip::tcp::endpoint& ep) {
  auto addr = ep.address();
  if (addr.is_v6() && addr.to_v6().is_v4_mapped())
    addr = asio::ip::make_address_v4(asio::ip::v4_mapped, addr.to_v6());
  std::string host = addr.to_string();
  if (addr.is_v6()) host = "[" + host + "]";
  return host + ":" + std::to_string(ep.port());
}

asio::ip::tcp::endpoint to_endpoint(const sockaddr_storage& ss, socklen_t len) {
  asio::ip::tcp::endpoint ep;
  std::memcpy(ep.data(), &ss, std::min<size_t>(len, ep.capacity()));
  ep.resize(std::min<size_t>(len, ep.capacity()));
  return ep;
}

bool is_loopback(const asio::ip::address& a) {
  if (a.is_v4()) return a.to_v4().is_loopback();
  auto v6 = a.to_v6();
  return v6.is_loopback() ||
         (v6.is_v4_mapped() && asio::ip::make_address_v4(asio::ip::v4_mapped, v6).is_loopback());
}

// Writes a refusal line to a socket just accepted and closes it. Never waits: a fresh socket's
// send buffer has room for one line.
void refuse(int fd, std::string_view text, bool send_text) {
  if (send_text) {
    std::string line = "-" + std::string(text) + "\r\n";
    (void)::send(fd, line.data(), line.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
  }
  ::close(fd);
}

}  // namespace

template <typename Acceptor>
void Server::wait_accept(Acceptor& acceptor, Listener kind) {
  acceptor.async_wait(asio::socket_base::wait_read, [this, &acceptor, kind](asio::error_code ec) {
    if (stopping_ || ec == asio::error::operation_aborted) return;
    if (!ec && !accept_batch(acceptor.native_handle(), kind)) {
      auto timer = std::make_shared<asio::steady_timer>(main_io_, kAcceptRetry);
      timer->async_wait([this, &acceptor, kind, timer](asio::error_code e) {
        if (!e && !stopping_) wait_accept(acceptor, kind);
      });
      return;
    }
    wait_accept(acceptor, kind);
  });
}

template void Server::wait_accept(asio::ip::tcp::acceptor&, Listener);
template void Server::wait_accept(asio::local::stream_protocol::acceptor&, Listener);

bool Server::accept_batch(int listen_fd, Listener kind) {
  const auto maxclients = static_cast<size_t>(config_.num(Key::kMaxClients));
  for (int i = 0; i < kMaxAcceptsPerCall; ++i) {
    sockaddr_storage peer{};
    socklen_t peer_len = sizeof peer;
    const int fd = ::accept4(listen_fd, reinterpret_cast<sockaddr*>(&peer), &peer_len,
                             SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      // A connection reset while queued, or a signal: the next one may be fine.
      if (errno == EINTR || errno == ECONNABORTED || errno == EPROTO) continue;
      // networking.c acceptTcpHandler's line (anet.c's "accept: <strerror>").
      log::warning(std::string("Accepting client connection: accept: ") + std::strerror(errno));
      return !(errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM);
    }
    stats_.connections_received.fetch_add(1, std::memory_order_relaxed);
    // On tls-port no plain text goes out before the handshake: the client is only dropped.
    const bool send_text = kind != Listener::kTls;
    if (clients_.count() + adopting_.load(std::memory_order_relaxed) >= maxclients) {
      refuse(fd, err::kMaxClients, send_text);
      stats_.connections_rejected.fetch_add(1, std::memory_order_relaxed);
      continue;
    }
    if (kind != Listener::kUnix && config_.num(Key::kProtectedMode) &&
        config_.num(Key::kRequirePass) == 0 &&
        !is_loopback(to_endpoint(peer, peer_len).address())) {
      sockaddr_storage local{};
      socklen_t local_len = sizeof local;
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len);
      if (!is_loopback(to_endpoint(local, local_len).address())) {
        refuse(fd, err::kProtectedMode, send_text);
        stats_.connections_rejected.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
    }
    Worker& worker = *workers_[next_worker_.fetch_add(1, std::memory_order_relaxed) %
                               workers_.size()];
    adopting_.fetch_add(1, std::memory_order_relaxed);
    const uint64_t id = clients_.next_id();
    asio::post(worker.io, [this, &worker, fd, id, kind, peer, peer_len] {
      adopt(worker, fd, id, kind, peer, peer_len);
    });
  }
  return true;
}

void Server::adopt(Worker& worker, int fd, uint64_t id, Listener kind,
                   const sockaddr_storage& peer, socklen_t peer_len) {
  // Registered (Connection::start) before adopting_ drops, so maxclients never counts it out.
  struct Adopted {
    std::atomic<size_t>& n;
    ~Adopted() { n.fetch_sub(1, std::memory_order_relaxed); }
  } adopted{adopting_};
  if (stopping_) {
    ::close(fd);
    return;
  }
  try {
    if (kind == Listener::kUnix) {
      Connection::Socket socket(worker.io, asio::generic::stream_protocol(AF_UNIX, 0), fd);
      const std::string path = config_.str(Key::kUnixSocket);
      std::make_shared<Connection>(*this, worker, id, std::move(socket), path, path, true)
          ->start();
      return;
    }
    const int one = 1;
    (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    (void)set_tcp_keepalive(fd, config_.num(Key::kTcpKeepalive));
    sockaddr_storage local{};
    socklen_t local_len = sizeof local;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &local_len);
    const int family = peer.ss_family == AF_INET6 ? AF_INET6 : AF_INET;
    Connection::Socket socket(worker.io, asio::generic::stream_protocol(family, IPPROTO_TCP), fd);
    std::make_shared<Connection>(*this, worker, id, std::move(socket),
                                 endpoint_text(to_endpoint(peer, peer_len)),
                                 endpoint_text(to_endpoint(local, local_len)), false,
                                 kind == Listener::kTls ? tls_context() : nullptr)
        ->start();
  } catch (const std::exception& e) {
    // Registering with the worker's reactor failed (out of memory): the client is dropped.
    log::warning(std::string("Error registering fd event for the new client: ") + e.what());
  }
}

}  // namespace server
