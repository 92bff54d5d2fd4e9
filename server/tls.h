// server/tls.h - TLS on the client port `tls-port` (docs/tls.md): the OpenSSL contexts built
// from Redis's tls-* config keys (the server's, and the client's that replication and slot
// migration use towards other nodes), and the stream one TLS connection reads and writes
// through (Asio's SSL stream over the connection's own socket).
//
// Only connection.cc, server.cc and tls.cc include this header: the rest of the server sees a
// Connection's TLS stream as an opaque pointer, so OpenSSL's headers stay out of their builds.
#pragma once

#include <asio.hpp>
#include <asio/ssl.hpp>

#include <memory>
#include <string>

namespace server {

class Config;

/// The server side of TLS: one SSL context built from the tls-* keys, as Redis's tlsConfigure
/// builds it. Immutable once built; CONFIG SET of a tls-* key builds a new one, and the
/// connections accepted before keep the one they started with.
class TlsContext {
 public:
  /// Builds the server and client contexts from `config`. On failure returns null and sets
  /// `error` to the line Redis logs for it ("Failed to load certificate: FILE: error:...").
  static std::shared_ptr<TlsContext> create(const Config& config, std::string* error);

  /// The Asio context new streams are made with.
  asio::ssl::context& ssl() { return ctx_; }
  /// The client side, for this node's links to its peers (tls-replication, tls-cluster): an
  /// SSL_CTX that shows tls-client-cert-file (else tls-cert-file) and verifies the peer's
  /// certificate against tls-ca-cert-file/dir. Shares ownership of `tls`; null for null.
  static std::shared_ptr<ssl_ctx_st> client(const std::shared_ptr<TlsContext>& tls);

 private:
  TlsContext();
  asio::ssl::context ctx_;
  asio::ssl::context client_;
};

/// tls-auth-clients: whether a client must present a certificate the CA signed.
enum class TlsAuthClients { kNo, kYes, kOptional };

/// One TLS connection's stream over the socket its Connection owns (which must outlive it).
struct TlsStream {
  using Socket = asio::generic::stream_protocol::socket;

  /// A server-side stream over `socket`, checking the client's certificate per `auth`.
  TlsStream(std::shared_ptr<TlsContext> ctx, Socket& socket, TlsAuthClients auth);

  std::shared_ptr<TlsContext> context;  ///< kept alive while the stream uses it
  asio::ssl::stream<Socket&> stream;
};

/// The text of an error from a TLS stream: OpenSSL's own for its errors
/// ("error:0A00010B:SSL routines::wrong version number"), else the error's message.
std::string tls_error_text(const asio::error_code& ec);

}  // namespace server
