#include "tls_stream.h"

#include <arpa/inet.h>
#include <errno.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <sys/socket.h>

#include <cstdint>
#include <cstring>
#include <memory>

#include "stratakv/error.h"

namespace stratakv::detail {
namespace {

constexpr size_t kGather = 8 * 1024;   // pieces up to this size are gathered ...
constexpr size_t kRecord = 16 * 1024;  // ... into writes of up to one TLS record

// The reasons in this thread's OpenSSL error queue ("error:0A000086:SSL routines::certificate
// verify failed; ..."), emptying it.
std::string ssl_reasons() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof buf);
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out;
}

// A socket BIO that sends with MSG_NOSIGNAL: OpenSSL's own writes with write(2), which raises
// SIGPIPE when the server has gone. Its data is the descriptor. A timeout (EAGAIN from
// SO_RCVTIMEO/SO_SNDTIMEO) is a retry, which SSL_get_error reports as WANT_READ/WANT_WRITE.
int fd_of(BIO* b) { return static_cast<int>(reinterpret_cast<intptr_t>(BIO_get_data(b))); }

int bio_write(BIO* b, const char* data, int len) {
  BIO_clear_retry_flags(b);
  for (;;) {
    const ssize_t n = ::send(fd_of(b), data, static_cast<size_t>(len), MSG_NOSIGNAL);
    if (n >= 0) return static_cast<int>(n);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) BIO_set_retry_write(b);
    return -1;
  }
}

int bio_read(BIO* b, char* data, int len) {
  BIO_clear_retry_flags(b);
  for (;;) {
    const ssize_t n = ::recv(fd_of(b), data, static_cast<size_t>(len), 0);
    if (n >= 0) return static_cast<int>(n);
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) BIO_set_retry_read(b);
    return -1;
  }
}

long bio_ctrl(BIO*, int cmd, long, void*) { return cmd == BIO_CTRL_FLUSH ? 1 : 0; }

int bio_create(BIO* b) {
  BIO_set_init(b, 1);
  return 1;
}

BIO_METHOD* socket_method() {
  static BIO_METHOD* const method = [] {
    BIO_METHOD* m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "stratakv socket");
    if (m == nullptr) return m;
    BIO_meth_set_write(m, bio_write);
    BIO_meth_set_read(m, bio_read);
    BIO_meth_set_ctrl(m, bio_ctrl);
    BIO_meth_set_create(m, bio_create);
    return m;
  }();
  return method;
}

struct CtxFree {
  void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
};

// The client context of `config`. Throws Error(kUsage) naming a file that does not load.
std::unique_ptr<SSL_CTX, CtxFree> make_context(const TlsConfig& config) {
  ERR_clear_error();
  std::unique_ptr<SSL_CTX, CtxFree> ctx(SSL_CTX_new(TLS_client_method()));
  auto bad = [](const std::string& what) {
    throw Error(Error::Kind::kUsage, "TLS: " + what + ": " + ssl_reasons());
  };
  if (!ctx) bad("cannot make a context");
  SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
  SSL_CTX_set_mode(ctx.get(), SSL_MODE_AUTO_RETRY);
  // Read what the socket has (several records) in one recv, not a record's header and body
  // in two: large replies arrive as thousands of 16 KiB records.
  SSL_CTX_set_read_ahead(ctx.get(), 1);
  SSL_CTX_set_default_read_buffer_len(ctx.get(), 64 * 1024);
  if (!config.ca_certs.empty()) {
    if (SSL_CTX_load_verify_locations(ctx.get(), config.ca_certs.c_str(), nullptr) != 1)
      bad("cannot load ssl_ca_certs '" + config.ca_certs + "'");
  } else if (config.verify_peer && SSL_CTX_set_default_verify_paths(ctx.get()) != 1) {
    bad("cannot load the system's CA certificates");
  }
  if (!config.certfile.empty()) {
    const std::string& key = config.keyfile.empty() ? config.certfile : config.keyfile;
    if (SSL_CTX_use_certificate_chain_file(ctx.get(), config.certfile.c_str()) != 1)
      bad("cannot load ssl_certfile '" + config.certfile + "'");
    if (SSL_CTX_use_PrivateKey_file(ctx.get(), key.c_str(), SSL_FILETYPE_PEM) != 1)
      bad("cannot load ssl_keyfile '" + key + "'");
    if (SSL_CTX_check_private_key(ctx.get()) != 1) bad("ssl_keyfile does not match ssl_certfile");
  }
  SSL_CTX_set_verify(ctx.get(), config.verify_peer ? SSL_VERIFY_PEER : SSL_VERIFY_NONE, nullptr);
  return ctx;
}

bool is_ip_address(const std::string& host) {
  unsigned char addr[16];
  return inet_pton(AF_INET, host.c_str(), addr) == 1 || inet_pton(AF_INET6, host.c_str(), addr) == 1;
}

}  // namespace

TlsStream::TlsStream(int fd, const TlsConfig& config, const std::string& host, const std::string& where)
    : where_(where) {
  if (config.check_hostname && !config.verify_peer)
    throw Error(Error::Kind::kUsage, "TLS: ssl_check_hostname needs ssl_cert_reqs=required");
  if (!config.keyfile.empty() && config.certfile.empty())
    throw Error(Error::Kind::kUsage, "TLS: ssl_keyfile needs ssl_certfile");
  auto ctx = make_context(config);
  BIO_METHOD* method = socket_method();
  ssl_ = SSL_new(ctx.get());  // holds its own reference to the context
  BIO* bio = method ? BIO_new(method) : nullptr;
  if (ssl_ == nullptr || bio == nullptr) {
    BIO_free(bio);
    SSL_free(ssl_);
    throw Error(Error::Kind::kConnection, "TLS: out of memory: " + ssl_reasons());
  }
  BIO_set_data(bio, reinterpret_cast<void*>(static_cast<intptr_t>(fd)));
  SSL_set_bio(ssl_, bio, bio);  // ssl_ owns it
  const bool ip = is_ip_address(host);
  if (!ip) SSL_set_tlsext_host_name(ssl_, host.c_str());
  if (config.check_hostname) {
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl_);
    const int ok = ip ? X509_VERIFY_PARAM_set1_ip_asc(param, host.c_str())
                      : X509_VERIFY_PARAM_set1_host(param, host.c_str(), 0);
    if (ok != 1) {
      SSL_free(ssl_);
      throw Error(Error::Kind::kUsage, "TLS: cannot check the host name '" + host + "'");
    }
  }
  ERR_clear_error();
  const int r = SSL_connect(ssl_);
  if (r != 1) {
    const int err = SSL_get_error(ssl_, r);
    const int saved_errno = errno;
    std::string why = ssl_reasons();
    const long verify = SSL_get_verify_result(ssl_);
    if (config.verify_peer && verify != X509_V_OK)
      why += std::string(" (certificate verification: ") + X509_verify_cert_error_string(verify) + ")";
    if (why.empty())
      why = err == SSL_ERROR_WANT_READ || err == SSL_ERROR_WANT_WRITE
                ? "timed out (no TLS answer: is the port the server's tls-port?)"
            : saved_errno != 0 ? std::strerror(saved_errno)
                               : "the server closed the connection";
    SSL_free(ssl_);
    throw Error(Error::Kind::kConnection, "TLS handshake with " + where + " failed: " + why);
  }
  stage_.reserve(kRecord);
}

TlsStream::~TlsStream() {
  if (!failed_) {
    ERR_clear_error();
    SSL_shutdown(ssl_);  // close_notify, not waiting for the server's
  }
  SSL_free(ssl_);
  ERR_clear_error();
}

void TlsStream::io_fail(int ret, const char* op) {
  failed_ = true;
  const int saved_errno = errno;
  const int err = SSL_get_error(ssl_, ret);
  std::string why;
  switch (err) {
    case SSL_ERROR_WANT_READ:
    case SSL_ERROR_WANT_WRITE:
      why = std::string(op) + " timed out";
      break;
    case SSL_ERROR_ZERO_RETURN:
      why = "the server closed the connection (TLS close_notify)";
      break;
    case SSL_ERROR_SYSCALL:
      why = ssl_reasons();
      if (why.empty())
        why = saved_errno != 0 ? std::string(op) + " failed: " + std::strerror(saved_errno)
                               : "the server closed the connection";
      break;
    default: {
      const unsigned long first = ERR_peek_error();
      const bool eof = ERR_GET_LIB(first) == ERR_LIB_SSL &&
                       ERR_GET_REASON(first) == SSL_R_UNEXPECTED_EOF_WHILE_READING;
      why = (eof ? "the server closed the connection (TLS: " : std::string("TLS ") + op + " failed (") +
            ssl_reasons() + ")";
    }
  }
  ERR_clear_error();
  throw Error(Error::Kind::kConnection, "TLS connection to " + where_ + ": " + why);
}

size_t TlsStream::read(void* p, size_t n) {
  ERR_clear_error();
  size_t got = 0;
  const int r = SSL_read_ex(ssl_, p, n, &got);
  if (r != 1) io_fail(r, "read");
  return got;
}

void TlsStream::write_direct(const void* p, size_t n) {
  ERR_clear_error();
  size_t done = 0;  // blocking, without SSL_MODE_ENABLE_PARTIAL_WRITE: all of it or a failure
  const int r = SSL_write_ex(ssl_, p, n, &done);
  if (r != 1) io_fail(r, "write");
}

void TlsStream::flush_stage() {
  if (stage_.empty()) return;
  write_direct(stage_.data(), stage_.size());
  stage_.clear();
}

void TlsStream::write_all(std::span<const iovec> iov) {
  if (failed_) throw Error(Error::Kind::kConnection, "TLS connection to " + where_ + " is broken");
  for (const iovec& v : iov) {
    const char* p = static_cast<const char*>(v.iov_base);
    if (v.iov_len == 0) continue;
    if (v.iov_len > kGather) {
      flush_stage();
      write_direct(p, v.iov_len);
      continue;
    }
    if (stage_.size() + v.iov_len > kRecord) flush_stage();
    stage_.insert(stage_.end(), p, p + v.iov_len);
  }
  flush_stage();
}

}  // namespace stratakv::detail
