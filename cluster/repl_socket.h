// cluster/repl_socket.h - the socket of a replication or slot-migration stream, plain TCP or TLS
// (docs/tls.md, "Replication over TLS"), with the blocking calls the link and the feed make.
//
// Plain: the calls are the system's (recv, writev) on a blocking socket whose timeouts are
// SO_RCVTIMEO/SO_SNDTIMEO, exactly as before TLS existed. TLS: OpenSSL over the same socket,
// made non-blocking, each wait a poll() bounded by the same timeouts, so the callers see the same
// results: > 0 bytes, 0 at the peer's close, -1 with errno (EAGAIN: the timeout passed).
//
// Copies: a large buffer is encrypted straight from where it lies and decrypted straight into
// where it goes (the one copy TLS itself makes); only pieces below a record's size (frame heads,
// small values) are gathered into one 16 KiB record first, so small frames do not each cost a
// record.
//
// Thread-safety: one thread may read while another writes (a primary's feed: ACKs in, frames
// out); OpenSSL's session is used under a mutex that is never held while waiting for the
// socket. shutdown() may be called from any thread and wakes both. Other calls: one thread.
#pragma once

#include <sys/types.h>
#include <sys/uio.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>

struct ssl_st;
struct ssl_ctx_st;

namespace cluster {

class ReplSocket {
 public:
  /// A plain TCP socket `fd` (owned: closed by the destructor).
  explicit ReplSocket(int fd);
  /// A TLS session `ssl` already past its handshake (a primary's side: the client connection
  /// that sent PSYNC), moved onto `fd`. Takes one reference of `ssl` and `fd`.
  ReplSocket(int fd, ssl_st* ssl);
  ~ReplSocket();
  ReplSocket(const ReplSocket&) = delete;
  ReplSocket& operator=(const ReplSocket&) = delete;

  /// The client side of TLS over the connected socket `fd` (a replica, a migration's target):
  /// the handshake with `ctx` (which verifies the peer's certificate against its CAs and shows
  /// its own), within `timeout_ms`, checking `stop` every 100 ms. Null with `*error` set (the
  /// OpenSSL reason and, for a certificate, the verification's) on failure; `fd` is closed then.
  static std::unique_ptr<ReplSocket> connect_tls(int fd, ssl_ctx_st* ctx, int timeout_ms,
                                                 const std::atomic<bool>& stop,
                                                 std::string* error);

  /// Blocking mode with these timeouts (ms) for recv and writev (SO_RCVTIMEO/SO_SNDTIMEO).
  void set_timeouts(int recv_ms, int send_ms);
  /// Up to `n` bytes into `buf`: as ::recv (see above).
  ssize_t recv(void* buf, size_t n);
  /// Plain: one ::writev (a part may be written). TLS: every byte, or -1 with errno.
  ssize_t writev(const iovec* iov, int count);
  /// Every byte of [p, p+n): false on error or timeout.
  bool send_all(const char* p, size_t n);
  /// Ends both directions now (from any thread): a blocked recv or writev returns.
  void shutdown();
  int fd() const { return fd_; }
  bool tls() const { return ssl_ != nullptr; }

 private:
  // TLS: one SSL_read/SSL_write (under mu_), waiting outside it while OpenSSL wants the socket.
  ssize_t tls_read(void* buf, size_t n);
  bool tls_write(const char* p, size_t n);
  // Waits for `events` on the socket for up to `ms`: false (errno EAGAIN) when it timed out.
  bool wait(short events, int ms);

  int fd_;
  ssl_st* ssl_ = nullptr;
  std::mutex mu_;  // the SSL session (TLS only)
  int recv_ms_ = 1000, send_ms_ = 60'000;
  std::string stage_;  // small pieces gathered into one record (TLS writev)
};

}  // namespace cluster
