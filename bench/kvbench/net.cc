// bench/kvbench/net.cc - blocking socket connection (see net.h).
#include "net.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <utility>

namespace kvbench {
namespace {

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

std::string ssl_text(const char* what) {
  char buf[256];
  ERR_error_string_n(ERR_get_error(), buf, sizeof buf);
  ERR_clear_error();
  return std::string(what) + ": " + buf;
}

// SSL_read/SSL_write take an int.
int io_len(size_t n) { return static_cast<int>(std::min<size_t>(n, 1 << 30)); }

}  // namespace

Conn Conn::tcp(const std::string& host, int port, size_t staging_chunk) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  const std::string port_s = std::to_string(port);
  if (int rc = getaddrinfo(host.c_str(), port_s.c_str(), &hints, &res); rc != 0)
    throw IoError("getaddrinfo " + host + ": " + gai_strerror(rc));
  int fd = -1;
  std::string err = "no address";
  for (addrinfo* ai = res; ai; ai = ai->ai_next) {
    fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
      err = errno_text("socket");
      continue;
    }
    if (::connect(fd, ai->ai_addr, ai->ai_addrlen) == 0) break;
    err = errno_text("connect");
    ::close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  if (fd < 0) throw IoError(host + ":" + port_s + ": " + err);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return Conn(fd, staging_chunk);
}

Conn Conn::tls(const std::string& host, int port, const TlsFiles& files, size_t staging_chunk) {
  Conn c = tcp(host, port, staging_chunk);
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  if (ctx == nullptr) throw IoError(ssl_text("SSL_CTX_new"));
  auto fail = [&](const char* what) {
    SSL_CTX_free(ctx);
    throw IoError(ssl_text(what));
  };
  if (!files.ca.empty()) {
    if (SSL_CTX_load_verify_locations(ctx, files.ca.c_str(), nullptr) != 1) fail(files.ca.c_str());
    SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nullptr);
  }
  if (!files.cert.empty() && SSL_CTX_use_certificate_chain_file(ctx, files.cert.c_str()) != 1)
    fail(files.cert.c_str());
  if (!files.key.empty() && SSL_CTX_use_PrivateKey_file(ctx, files.key.c_str(), SSL_FILETYPE_PEM) != 1)
    fail(files.key.c_str());
  SSL* ssl = SSL_new(ctx);
  SSL_CTX_free(ctx);  // the SSL holds its own reference
  if (ssl == nullptr) throw IoError(ssl_text("SSL_new"));
  SSL_set_fd(ssl, c.fd_);
  SSL_set_read_ahead(ssl, 1);  // whole socket reads, not a record header and then its body
  c.ssl_ = ssl;  // freed with c
  if (SSL_connect(ssl) != 1) throw IoError(ssl_text("TLS handshake"));
  return c;
}

Conn Conn::unix_socket(const std::string& path) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  if (path.size() >= sizeof addr.sun_path) throw IoError("unix socket path too long: " + path);
  std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw IoError(errno_text("socket"));
  if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    std::string err = path + ": " + errno_text("connect");
    ::close(fd);
    throw IoError(err);
  }
  return Conn(fd);
}

Conn::Conn(int fd, size_t staging_chunk)
    : fd_(fd), chunk_(std::clamp<size_t>(staging_chunk, 1, kCap)), buf_(kCap) {}
Conn::Conn(Conn&& o) noexcept
    : fd_(std::exchange(o.fd_, -1)),
      chunk_(o.chunk_),
      buf_(std::move(o.buf_)),
      begin_(o.begin_),
      end_(o.end_),
      ssl_(std::exchange(o.ssl_, nullptr)) {}
Conn& Conn::operator=(Conn&& o) noexcept {
  if (this != &o) {
    if (ssl_ != nullptr) SSL_free(ssl_);
    ssl_ = std::exchange(o.ssl_, nullptr);
    if (fd_ >= 0) ::close(fd_);
    fd_ = std::exchange(o.fd_, -1);
    chunk_ = o.chunk_;
    buf_ = std::move(o.buf_);
    begin_ = o.begin_;
    end_ = o.end_;
  }
  return *this;
}
Conn::~Conn() {
  if (ssl_ != nullptr) SSL_free(ssl_);
  if (fd_ >= 0) ::close(fd_);
}

void Conn::send_all(const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (ssl_ != nullptr && n > 0) {
    const int w = SSL_write(ssl_, p, io_len(n));
    if (w <= 0) throw IoError(ssl_text("SSL_write"));
    p += w;
    n -= static_cast<size_t>(w);
  }
  while (n > 0) {
    ssize_t w = ::send(fd_, p, n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw IoError(errno_text("send"));
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

void Conn::writev_all(iovec* iov, size_t cnt) {
  if (ssl_ != nullptr) {
    // One TLS record per piece but for small pieces side by side, gathered first.
    std::string small;
    for (size_t i = 0; i < cnt; ++i) {
      if (iov[i].iov_len < 16384) {
        small.append(static_cast<const char*>(iov[i].iov_base), iov[i].iov_len);
        continue;
      }
      send_all(small);
      small.clear();
      send_all(iov[i].iov_base, iov[i].iov_len);
    }
    send_all(small);
    return;
  }
  while (cnt > 0) {
    const int batch = static_cast<int>(std::min<size_t>(cnt, IOV_MAX));
    ssize_t w = ::writev(fd_, iov, batch);
    if (w < 0) {
      if (errno == EINTR) continue;
      throw IoError(errno_text("writev"));
    }
    size_t left = static_cast<size_t>(w);
    while (cnt > 0 && left >= iov->iov_len) {
      left -= iov->iov_len;
      ++iov;
      --cnt;
    }
    if (cnt > 0 && left > 0) {
      iov->iov_base = static_cast<char*>(iov->iov_base) + left;
      iov->iov_len -= left;
    }
  }
}

void Conn::send_with_fd(std::string_view s, int fd) {
  if (ssl_ != nullptr) throw IoError("file descriptors cannot be passed over TLS");
  iovec iov{const_cast<char*>(s.data()), s.size()};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* c = CMSG_FIRSTHDR(&msg);
  c->cmsg_level = SOL_SOCKET;
  c->cmsg_type = SCM_RIGHTS;
  c->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(c), &fd, sizeof(int));
  ssize_t w;
  do w = ::sendmsg(fd_, &msg, MSG_NOSIGNAL);
  while (w < 0 && errno == EINTR);
  if (w < 0) throw IoError(errno_text("sendmsg"));
  if (static_cast<size_t>(w) < s.size()) send_all(s.data() + w, s.size() - static_cast<size_t>(w));
}

std::string_view Conn::line() {
  size_t scan = begin_;
  for (;;) {
    for (size_t i = scan; i + 1 < end_; ++i) {
      if (buf_[i] == '\r' && buf_[i + 1] == '\n') {
        std::string_view v(buf_.data() + begin_, i - begin_);
        begin_ = i + 2;
        return v;
      }
    }
    scan = end_ > begin_ ? end_ - 1 : begin_;
    if (end_ - begin_ >= kCap - 1) throw IoError("reply line too long");
    const size_t shift = begin_;
    fill();
    scan -= std::min(scan, shift);
  }
}

void Conn::read_exact(void* dst, size_t n) {
  char* d = static_cast<char*>(dst);
  const size_t staged = std::min(n, end_ - begin_);
  std::memcpy(d, buf_.data() + begin_, staged);
  begin_ += staged;
  size_t got = staged;
  while (ssl_ != nullptr && got < n) {
    const int r = SSL_read(ssl_, d + got, io_len(n - got));
    if (r <= 0) throw IoError(ssl_text("SSL_read"));
    got += static_cast<size_t>(r);
  }
  while (got < n) {
    ssize_t r = ::recv(fd_, d + got, n - got, MSG_WAITALL);
    if (r < 0) {
      if (errno == EINTR) continue;
      throw IoError(errno_text("recv"));
    }
    if (r == 0) throw IoError("connection closed by server");
    got += static_cast<size_t>(r);
  }
}

void Conn::skip(size_t n) {
  char tmp[16384];
  while (n > 0) {
    const size_t k = std::min(n, sizeof tmp);
    read_exact(tmp, k);
    n -= k;
  }
}

// Receives more bytes into the staging buffer (compacting it first). Small receives, so a
// payload that follows a header mostly lands in the caller's buffer, not here.
void Conn::fill() {
  if (begin_ > 0) {
    std::memmove(buf_.data(), buf_.data() + begin_, end_ - begin_);
    end_ -= begin_;
    begin_ = 0;
  }
  const size_t room = std::min(kCap - end_, chunk_);
  if (ssl_ != nullptr) {
    const int r = SSL_read(ssl_, buf_.data() + end_, io_len(room));
    if (r <= 0) throw IoError(ssl_text("SSL_read"));
    end_ += static_cast<size_t>(r);
    return;
  }
  for (;;) {
    ssize_t r = ::recv(fd_, buf_.data() + end_, room, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      throw IoError(errno_text("recv"));
    }
    if (r == 0) throw IoError("connection closed by server");
    end_ += static_cast<size_t>(r);
    return;
  }
}

}  // namespace kvbench
