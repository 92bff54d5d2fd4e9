// tls_stream.h - the TLS client side of a rediss:// connection (OpenSSL), over a socket the
// Session connected. Session uses it for every byte it reads and writes on such a connection
// (hiredis then only parses replies).
#pragma once

#include <sys/uio.h>

#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "url.h"

using SSL = struct ssl_st;

namespace stratakv::detail {

/// One TLS client connection over a connected, blocking socket `fd`, which it does not own
/// (the caller closes it after destroying the stream). Reads and writes block, each bounded
/// by the socket's SO_RCVTIMEO/SO_SNDTIMEO (a timeout fails the stream, as on plain TCP). The
/// socket is written with send(MSG_NOSIGNAL) through a BIO of ours: no SIGPIPE. Used by one
/// thread at a time; OpenSSL's error queue is the calling thread's.
///
/// Errors: the constructor throws Error(kUsage) when a certificate, key or CA file cannot be
/// loaded, Error(kConnection) when the handshake fails; read and write_all throw
/// Error(kConnection). Each message carries OpenSSL's reason text (ERR_error_string), and a
/// failed certificate verification its X509 reason. After a throw the stream is unusable.
class TlsStream {
 public:
  /// Makes the context from `config` and handshakes as a client of `host` (SNI when it is a
  /// name; checked against the certificate when config.check_hostname). `where` ("host:port")
  /// names the server in messages.
  TlsStream(int fd, const TlsConfig& config, const std::string& host, const std::string& where);
  /// Sends close_notify when the stream has not failed.
  ~TlsStream();
  TlsStream(const TlsStream&) = delete;
  TlsStream& operator=(const TlsStream&) = delete;

  /// Reads 1..n plaintext bytes into p (n > 0). Throws on EOF, timeout or a TLS error.
  size_t read(void* p, size_t n);
  /// Writes every byte of the iovecs. Pieces up to 8 KiB are gathered into records of up to
  /// 16 KiB (a copy of command heads only); larger ones are passed to SSL_write where they
  /// lie (no copy beyond OpenSSL's encryption).
  void write_all(std::span<const iovec> iov);

 private:
  void write_direct(const void* p, size_t n);
  void flush_stage();
  [[noreturn]] void io_fail(int ret, const char* op);

  SSL* ssl_ = nullptr;
  std::string where_;
  bool failed_ = false;
  std::vector<char> stage_;  // small pieces waiting for one SSL_write
};

}  // namespace stratakv::detail
