// bench/kvbench/net.h - one blocking socket connection to the server: connect over TCP or a
// Unix socket, send (writev, file descriptors with SCM_RIGHTS), and receive reply lines through
// a small staging buffer and payloads straight into the caller's memory (at most a few
// hundred staged bytes are copied per payload), as bench/bulkbench.cc does.
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

struct ssl_st;  // OpenSSL's SSL

namespace kvbench {

/// A connection failed or the server broke the protocol: the connection is unusable.
struct IoError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Conn {
 public:
  /// Connects to host:port (TCP_NODELAY). `staging_chunk`: the most one receive into the
  /// staging buffer takes (small: a payload behind a header lands mostly in the caller's
  /// memory; up to 64 KiB for replies of small values). Throws IoError.
  static Conn tcp(const std::string& host, int port, size_t staging_chunk = kChunk);
  /// Connects to a Unix socket. Throws IoError.
  static Conn unix_socket(const std::string& path);

  /// TLS files of Conn::tls (PEM). `ca` verifies the server's certificate (its host name is
  /// not checked: a benchmark of loopback); `cert`/`key`, when set, are the client's.
  struct TlsFiles {
    std::string ca, cert, key;
  };
  /// Connects to host:port as tcp() does, then does a TLS handshake (OpenSSL, blocking):
  /// every byte after goes through it. Throws IoError.
  static Conn tls(const std::string& host, int port, const TlsFiles& files,
                  size_t staging_chunk = kChunk);

  Conn(Conn&& o) noexcept;
  Conn& operator=(Conn&& o) noexcept;
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;
  ~Conn();

  /// Sends all of [p, p+n).
  void send_all(const void* p, size_t n);
  void send_all(std::string_view s) { send_all(s.data(), s.size()); }
  /// Sends every byte the iovecs describe, resuming after partial writes (modifies `iov`).
  void writev_all(iovec* iov, size_t count);
  /// Sends `s` with file descriptor `fd` attached to its first byte (SCM_RIGHTS).
  void send_with_fd(std::string_view s, int fd);

  /// The next line without its "\r\n"; valid until the next read.
  std::string_view line();
  /// Exactly n bytes into dst: whatever is staged first, the rest straight from the socket.
  void read_exact(void* dst, size_t n);
  /// Reads and drops n bytes.
  void skip(size_t n);

 private:
  explicit Conn(int fd, size_t staging_chunk = kChunk);
  void fill();

  static constexpr size_t kCap = 64 * 1024;
  static constexpr size_t kChunk = 512;  // bounds how much of a payload gets staged
  int fd_ = -1;
  size_t chunk_ = kChunk;
  std::vector<char> buf_;
  size_t begin_ = 0, end_ = 0;
  ssl_st* ssl_ = nullptr;  // Conn::tls: reads and writes go through it
};

}  // namespace kvbench
