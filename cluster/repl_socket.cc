#include "cluster/repl_socket.h"

#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>

namespace cluster {

namespace {
// Pieces below this are gathered into one record; larger ones are encrypted where they lie.
constexpr size_t kRecord = 16 * 1024;

void set_blocking(int fd, bool blocking) {
  const int flags = ::fcntl(fd, F_GETFL);
  ::fcntl(fd, F_SETFL, blocking ? flags & ~O_NONBLOCK : flags | O_NONBLOCK);
}

void set_timeout(int fd, int opt, int ms) {
  timeval tv{ms / 1000, (ms % 1000) * 1000};
  ::setsockopt(fd, SOL_SOCKET, opt, &tv, sizeof tv);
}

// OpenSSL's text of the oldest error queued ("error:0A000086:SSL routines::certificate verify
// failed"), the queue cleared; `fallback` when none is queued.
std::string openssl_error(const std::string& fallback) {
  const unsigned long e = ERR_get_error();
  ERR_clear_error();
  if (e == 0) return fallback;
  char buf[256];
  ERR_error_string_n(e, buf, sizeof buf);
  return buf;
}
}  // namespace

ReplSocket::ReplSocket(int fd) : fd_(fd) {}

ReplSocket::ReplSocket(int fd, ssl_st* ssl) : fd_(fd), ssl_(ssl) {
  // The session's records now go straight to the socket (a connection's session came through
  // Asio's memory BIO).
  BIO* bio = BIO_new_socket(fd, BIO_NOCLOSE);
  SSL_set_bio(ssl_, bio, bio);
  set_blocking(fd_, false);
}

ReplSocket::~ReplSocket() {
  if (ssl_ != nullptr) SSL_free(ssl_);
  if (fd_ >= 0) ::close(fd_);
}

std::unique_ptr<ReplSocket> ReplSocket::connect_tls(int fd, ssl_ctx_st* ctx, int timeout_ms,
                                                    const std::atomic<bool>& stop,
                                                    std::string* error) {
  ERR_clear_error();
  SSL* ssl = SSL_new(ctx);
  if (ssl == nullptr) {
    *error = "TLS: " + openssl_error("SSL_new failed");
    ::close(fd);
    return nullptr;
  }
  auto sock = std::make_unique<ReplSocket>(fd, ssl);  // owns fd and ssl from here
  SSL_set_connect_state(ssl);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (;;) {
    ERR_clear_error();
    const int rc = SSL_do_handshake(ssl);
    if (rc == 1) return sock;
    const int why = SSL_get_error(ssl, rc);
    if (why != SSL_ERROR_WANT_READ && why != SSL_ERROR_WANT_WRITE) {
      const long verify = SSL_get_verify_result(ssl);
      *error = "TLS handshake failed: " +
               openssl_error(why == SSL_ERROR_SYSCALL ? "connection closed by the peer"
                                                      : "SSL error " + std::to_string(why));
      if (verify != X509_V_OK)
        *error += " (certificate: " + std::string(X509_verify_cert_error_string(verify)) + ")";
      return nullptr;
    }
    if (stop.load()) {
      *error = "stopped";
      return nullptr;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      *error = "TLS handshake timed out";
      return nullptr;
    }
    pollfd p{fd, static_cast<short>(why == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT), 0};
    ::poll(&p, 1, 100);
  }
}

void ReplSocket::set_timeouts(int recv_ms, int send_ms) {
  recv_ms_ = recv_ms;
  send_ms_ = send_ms;
  if (ssl_ != nullptr) return;  // non-blocking; waits are polls bounded by these
  set_blocking(fd_, true);
  set_timeout(fd_, SO_RCVTIMEO, recv_ms);
  set_timeout(fd_, SO_SNDTIMEO, send_ms);
}

void ReplSocket::shutdown() { ::shutdown(fd_, SHUT_RDWR); }

bool ReplSocket::wait(short events, int ms) {
  pollfd p{fd_, events, 0};
  for (;;) {
    const int r = ::poll(&p, 1, ms);
    if (r > 0) return true;
    if (r == 0) {
      errno = EAGAIN;
      return false;
    }
    if (errno != EINTR) return true;  // let the next call report it
  }
}

ssize_t ReplSocket::recv(void* buf, size_t n) {
  if (ssl_ == nullptr) return ::recv(fd_, buf, n, 0);
  return tls_read(buf, n);
}

ssize_t ReplSocket::tls_read(void* buf, size_t n) {
  const int want = static_cast<int>(std::min<size_t>(n, INT32_MAX));
  for (;;) {
    int rc, why;
    {
      std::lock_guard lock(mu_);
      ERR_clear_error();
      rc = SSL_read(ssl_, buf, want);
      why = rc > 0 ? SSL_ERROR_NONE : SSL_get_error(ssl_, rc);
      if (why == SSL_ERROR_SSL) ERR_clear_error();
    }
    if (rc > 0) return rc;
    if (why == SSL_ERROR_ZERO_RETURN) return 0;  // close_notify
    if (why == SSL_ERROR_WANT_READ || why == SSL_ERROR_WANT_WRITE) {
      if (!wait(why == SSL_ERROR_WANT_READ ? POLLIN : POLLOUT, recv_ms_)) return -1;
      continue;
    }
    if (why == SSL_ERROR_SYSCALL) {
      if (errno == 0 || errno == EAGAIN) return 0;  // the peer closed without close_notify
      return -1;
    }
    errno = EPROTO;  // a TLS protocol error: the link ends
    return -1;
  }
}

bool ReplSocket::tls_write(const char* p, size_t n) {
  while (n > 0) {
    const int chunk = static_cast<int>(std::min<size_t>(n, 1u << 30));
    int rc, why;
    {
      std::lock_guard lock(mu_);
      ERR_clear_error();
      rc = SSL_write(ssl_, p, chunk);  // partial writes on (SSL_MODE_ENABLE_PARTIAL_WRITE)
      why = rc > 0 ? SSL_ERROR_NONE : SSL_get_error(ssl_, rc);
      if (why == SSL_ERROR_SSL) ERR_clear_error();
    }
    if (rc > 0) {
      p += rc;
      n -= static_cast<size_t>(rc);
      continue;
    }
    if (why == SSL_ERROR_WANT_READ || why == SSL_ERROR_WANT_WRITE) {
      // Retried with the same bytes, as OpenSSL requires.
      if (!wait(why == SSL_ERROR_WANT_WRITE ? POLLOUT : POLLIN, send_ms_)) return false;
      continue;
    }
    if (why != SSL_ERROR_SYSCALL || errno == 0) errno = EPIPE;
    return false;
  }
  return true;
}

ssize_t ReplSocket::writev(const iovec* iov, int count) {
  if (ssl_ == nullptr) return ::writev(fd_, iov, count);
  ssize_t total = 0;
  stage_.clear();
  for (int i = 0; i < count; ++i) {
    const char* p = static_cast<const char*>(iov[i].iov_base);
    const size_t n = iov[i].iov_len;
    total += static_cast<ssize_t>(n);
    if (n < kRecord) {
      if (stage_.size() + n > kRecord) {
        if (!tls_write(stage_.data(), stage_.size())) return -1;
        stage_.clear();
      }
      stage_.append(p, n);
      continue;
    }
    if (!stage_.empty()) {
      if (!tls_write(stage_.data(), stage_.size())) return -1;
      stage_.clear();
    }
    if (!tls_write(p, n)) return -1;
  }
  if (!stage_.empty() && !tls_write(stage_.data(), stage_.size())) return -1;
  stage_.clear();
  return total;
}

bool ReplSocket::send_all(const char* p, size_t n) {
  if (ssl_ != nullptr) return tls_write(p, n);
  while (n > 0) {
    const ssize_t w = ::send(fd_, p, n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

}  // namespace cluster
