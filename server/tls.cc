#include "server/tls.h"

#include <openssl/err.h>
#include <openssl/ssl.h>

#include <cstdint>
#include <string_view>

#include "server/ascii.h"
#include "server/config.h"

namespace server {
namespace {

// tls-protocols' versions (Redis's REDIS_TLS_PROTO_*).
constexpr int kTlsV1 = 1 << 0;
constexpr int kTlsV1_1 = 1 << 1;
constexpr int kTlsV1_2 = 1 << 2;
constexpr int kTlsV1_3 = 1 << 3;

// tls-protocols: space-separated versions, case-insensitive; "" = TLSv1.2 and TLSv1.3. -1 and
// Redis's log line in `error` on a name it does not know (parseProtocolsConfig).
int parse_protocols(std::string_view text, std::string* error) {
  if (text.empty()) return kTlsV1_2 | kTlsV1_3;
  int protocols = 0;
  while (!text.empty()) {
    const size_t sp = text.find(' ');
    const std::string_view token = text.substr(0, sp);
    text = sp == std::string_view::npos ? std::string_view{} : text.substr(sp + 1);
    if (token.empty()) continue;
    if (iequals(token, "tlsv1")) protocols |= kTlsV1;
    else if (iequals(token, "tlsv1.1")) protocols |= kTlsV1_1;
    else if (iequals(token, "tlsv1.2")) protocols |= kTlsV1_2;
    else if (iequals(token, "tlsv1.3")) protocols |= kTlsV1_3;
    else {
      *error = "Invalid tls-protocols specified. Use a combination of 'TLSv1', 'TLSv1.1', "
               "'TLSv1.2' and 'TLSv1.3'.";
      return -1;
    }
  }
  return protocols;
}

// OpenSSL's text of the oldest error queued (and the queue cleared).
std::string openssl_error() {
  char buf[256];
  ERR_error_string_n(ERR_get_error(), buf, sizeof buf);
  ERR_clear_error();
  return buf;
}

}  // namespace

TlsContext::TlsContext()
    : ctx_(asio::ssl::context::tls_server), client_(asio::ssl::context::tls_client) {}

namespace {

// One SSL_CTX from the tls-* keys, as Redis's createSSLContext builds its server and its client
// context: the client's shows tls-client-cert-file/key when set (else the server's certificate)
// and verifies the peer's certificate against the CA. False with Redis's log line in `error`.
bool configure(SSL_CTX* ctx, const Config& config, int protocols, bool client,
               asio::ssl::context& owner, std::string* error) {
  std::string cert = config.str(Key::kTlsCertFile);
  std::string key = config.str(Key::kTlsKeyFile);
  std::string pass = config.str(Key::kTlsKeyFilePass);
  if (client && !config.str(Key::kTlsClientCertFile).empty()) {
    cert = config.str(Key::kTlsClientCertFile);
    key = config.str(Key::kTlsClientKeyFile);
    pass = config.str(Key::kTlsClientKeyFilePass);
  }
  const std::string ca_file = config.str(Key::kTlsCaCertFile);
  const std::string ca_dir = config.str(Key::kTlsCaCertDir);
  ERR_clear_error();
  uint64_t options = SSL_OP_NO_SSLv2 | SSL_OP_NO_SSLv3 | SSL_OP_DONT_INSERT_EMPTY_FRAGMENTS |
                 SSL_OP_NO_COMPRESSION | SSL_OP_SINGLE_DH_USE;
#ifdef SSL_OP_NO_CLIENT_RENEGOTIATION  // OpenSSL 3.1+ (Redis guards it the same way)
  options |= SSL_OP_NO_CLIENT_RENEGOTIATION;
#endif
  if (!(protocols & kTlsV1)) options |= SSL_OP_NO_TLSv1;
  if (!(protocols & kTlsV1_1)) options |= SSL_OP_NO_TLSv1_1;
  if (!(protocols & kTlsV1_2)) options |= SSL_OP_NO_TLSv1_2;
  if (!(protocols & kTlsV1_3)) options |= SSL_OP_NO_TLSv1_3;
  if (config.num(Key::kTlsPreferServerCiphers)) options |= SSL_OP_CIPHER_SERVER_PREFERENCE;
  SSL_CTX_set_options(ctx, options);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  // Server: each stream sets its own mode from tls-auth-clients (TlsStream); this is the
  // default. Client (a replica): the primary's certificate must chain to the CA.
  SSL_CTX_set_verify(ctx, client ? SSL_VERIFY_PEER
                                 : SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  // The key's passphrase, through Asio's callback (which the context owns). Always set, so an
  // encrypted key without tls-key-file-pass fails to load instead of prompting on a terminal.
  owner.set_password_callback(
      [pass](size_t, asio::ssl::context::password_purpose) { return pass; });
  if (SSL_CTX_use_certificate_chain_file(ctx, cert.c_str()) <= 0) {
    *error = "Failed to load certificate: " + cert + ": " + openssl_error();
    return false;
  }
  if (SSL_CTX_use_PrivateKey_file(ctx, key.c_str(), SSL_FILETYPE_PEM) <= 0) {
    *error = "Failed to load private key: " + key + ": " + openssl_error();
    return false;
  }
  if ((!ca_file.empty() || !ca_dir.empty()) &&
      SSL_CTX_load_verify_locations(ctx, ca_file.empty() ? nullptr : ca_file.c_str(),
                                    ca_dir.empty() ? nullptr : ca_dir.c_str()) <= 0) {
    *error = "Failed to configure CA certificate(s) file/directory: " + openssl_error();
    return false;
  }
  const std::string ciphers = config.str(Key::kTlsCiphers);
  if (!ciphers.empty() && !SSL_CTX_set_cipher_list(ctx, ciphers.c_str())) {
    *error = "Failed to configure ciphers: " + ciphers;
    return false;
  }
  const std::string suites = config.str(Key::kTlsCiphersuites);
  if (!suites.empty() && !SSL_CTX_set_ciphersuites(ctx, suites.c_str())) {
    *error = "Failed to configure ciphersuites: " + suites;
    return false;
  }
  return true;
}

}  // namespace

std::shared_ptr<TlsContext> TlsContext::create(const Config& config, std::string* error) {
  // The checks and texts of Redis's tlsConfigure and createSSLContext (tls.c), in its order.
  if (config.str(Key::kTlsCertFile).empty()) {
    *error = "No tls-cert-file configured!";
    return nullptr;
  }
  if (config.str(Key::kTlsKeyFile).empty()) {
    *error = "No tls-key-file configured!";
    return nullptr;
  }
  const bool peers = config.num(Key::kTlsReplication) || config.num(Key::kTlsCluster);
  if ((config.choice(Key::kTlsAuthClients) != "no" || peers) &&
      config.str(Key::kTlsCaCertFile).empty() && config.str(Key::kTlsCaCertDir).empty()) {
    *error = "Either tls-ca-cert-file or tls-ca-cert-dir must be specified when tls-cluster, "
             "tls-replication or tls-auth-clients are enabled!";
    return nullptr;
  }
  const int protocols = parse_protocols(config.str(Key::kTlsProtocols), error);
  if (protocols < 0) return nullptr;

  std::shared_ptr<TlsContext> tls(new TlsContext());
  SSL_CTX* ctx = tls->ctx_.native_handle();
  if (!configure(ctx, config, protocols, false, tls->ctx_, error)) return nullptr;
  if (config.num(Key::kTlsSessionCaching)) {
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_SERVER);
    SSL_CTX_sess_set_cache_size(ctx, config.num(Key::kTlsSessionCacheSize));
    SSL_CTX_set_timeout(ctx, config.num(Key::kTlsSessionCacheTimeout));
    static const unsigned char kSessionContext[] = "stratakv";
    SSL_CTX_set_session_id_context(ctx, kSessionContext, sizeof kSessionContext - 1);
  } else {
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
  }
  SSL_CTX_set_dh_auto(ctx, 1);
  if (!configure(tls->client_.native_handle(), config, protocols, true, tls->client_, error))
    return nullptr;
  return tls;
}

std::shared_ptr<ssl_ctx_st> TlsContext::client(const std::shared_ptr<TlsContext>& tls) {
  if (tls == nullptr) return nullptr;
  return std::shared_ptr<ssl_ctx_st>(tls, tls->client_.native_handle());
}

TlsStream::TlsStream(std::shared_ptr<TlsContext> ctx, Socket& socket, TlsAuthClients auth)
    : context(std::move(ctx)), stream(socket, context->ssl()) {
  // connCreateAcceptedTLS: the mode of tls-auth-clients as the connection was accepted.
  int mode = SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
  if (auth == TlsAuthClients::kNo) mode = SSL_VERIFY_NONE;
  else if (auth == TlsAuthClients::kOptional) mode = SSL_VERIFY_PEER;
  SSL_set_verify(stream.native_handle(), mode, nullptr);
}

std::string tls_error_text(const asio::error_code& ec) {
  if (ec.category() == asio::error::get_ssl_category()) {
    char buf[256];
    ERR_error_string_n(static_cast<unsigned long>(ec.value()), buf, sizeof buf);
    return buf;
  }
  return ec.message();
}

}  // namespace server
