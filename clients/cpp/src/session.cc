#include "session.h"

#include <errno.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstring>
#include <string_view>

#include "transport.h"

namespace stratakv::detail {
namespace {

constexpr size_t kReadChunk = 64 * 1024;

timeval to_timeval(int ms) { return {ms / 1000, (ms % 1000) * 1000}; }

// The URL's TLS settings, each overridden by the options' when set there.
TlsConfig tls_config(const Url& url, const Options& o) {
  TlsConfig c = url.tls_config;
  if (!o.ssl_ca_certs.empty()) c.ca_certs = o.ssl_ca_certs;
  if (!o.ssl_certfile.empty()) {
    c.certfile = o.ssl_certfile;
    c.keyfile = o.ssl_keyfile;
  } else if (!o.ssl_keyfile.empty()) {
    c.keyfile = o.ssl_keyfile;
  }
  if (o.ssl_verify_peer) c.verify_peer = *o.ssl_verify_peer;
  if (o.ssl_check_hostname) c.check_hostname = *o.ssl_check_hostname;
  return c;
}

}  // namespace

Session::Session(const Url& url, const Options& options) : in_(kReadChunk) {
  const timeval connect_tv = to_timeval(options.connect_timeout_ms);
  unix_ = url.scheme == Url::Scheme::kUnix;
  c_ = unix_ ? redisConnectUnixWithTimeout(url.path.c_str(), connect_tv)
             : redisConnectWithTimeout(url.host.c_str(), url.port, connect_tv);
  if (c_ == nullptr) throw Error(Error::Kind::kConnection, "cannot allocate a connection");
  if (c_->err) {
    std::string where = unix_ ? url.path : url.host + ":" + std::to_string(url.port);
    std::string why = c_->errstr;
    redisFree(c_);
    c_ = nullptr;
    throw Error(Error::Kind::kConnection, "cannot connect to " + where + ": " + why);
  }
  if (options.io_timeout_ms > 0) redisSetTimeout(c_, to_timeval(options.io_timeout_ms));
  if (url.tls) {
    try {
      // The handshake is bounded by the connect timeout; then each read and write by the I/O
      // timeout (none at 0).
      redisSetTimeout(c_, connect_tv);
      tls_ = std::make_unique<TlsStream>(c_->fd, tls_config(url, options), url.host,
                                         url.host + ":" + std::to_string(url.port));
      redisSetTimeout(c_, to_timeval(std::max(options.io_timeout_ms, 0)));
    } catch (...) {
      redisFree(c_);
      c_ = nullptr;
      throw;
    }
  }
  const std::string& user = options.password.empty() ? url.user : options.user;
  const std::string& password = options.password.empty() ? url.password : options.password;
  try {
    if (!password.empty()) {
      Args auth{"AUTH"};
      if (!user.empty()) auth.add(user);
      auth.add(password);
      call_ok(auth);
    }
    if (url.readonly) {  // a cluster replica's reads of its shard's slots are served there
      Args readonly{"READONLY"};
      call_ok(readonly);
    }
  } catch (...) {  // the destructor does not run for a throwing constructor
    tls_.reset();
    redisFree(c_);
    c_ = nullptr;
    throw;
  }
}

Session::~Session() {
  transport_.reset();  // may still talk to the server
  tls_.reset();        // before its socket closes
  if (c_) redisFree(c_);
}

void Session::set_transport(std::unique_ptr<Transport> t) { transport_ = std::move(t); }

void Session::fail(const std::string& what) {
  broken_ = true;
  throw Error(Error::Kind::kConnection, what);
}

void Session::protocol_fail(const std::string& what) {
  broken_ = true;
  throw Error(Error::Kind::kProtocol, "protocol error: " + what);
}

void Session::check(Reply& r, const char* what) {
  if (!r) fail(std::string(what) + ": " + (c_->err ? c_->errstr : "no reply"));
}

// hiredis writes with write(2), which raises SIGPIPE when the server has gone; commands are
// formatted by hiredis but written here with MSG_NOSIGNAL, and hiredis only reads replies.
void Session::append(Args& args) {
  if (broken_) fail("connection is broken");
  char* cmd = nullptr;
  const int len = redisFormatCommandArgv(&cmd, args.argc(), args.argv(), args.lens());
  if (len <= 0) fail("cannot format a command");
  out_.append(cmd, static_cast<size_t>(len));
  redisFreeCommand(cmd);
}

void Session::flush() {
  if (out_.empty()) return;
  iovec v{out_.data(), out_.size()};
  write_all({&v, 1});
  out_.clear();
}

void Session::note_error(std::string_view text) {
  // "ERR Protocol error: ..." is the server's last reply on this connection (Redis closes it
  // after one, e.g. for a value over proto-max-bulk-len): the pool must not reuse it.
  if (text.rfind("ERR Protocol error", 0) == 0) broken_ = true;
}

Reply Session::read() {
  flush();
  void* out = nullptr;
  if (tls_) out = tls_reply();
  else if (redisGetReply(c_, &out) != REDIS_OK) out = nullptr;
  Reply r(static_cast<redisReply*>(out));
  check(r, "reading a reply failed");
  if (r->type == REDIS_REPLY_ERROR) note_error(std::string_view(r->str, r->len));
  return r;
}

Reply Session::call(Args& args) {
  append(args);
  return read();
}

Reply Session::call_ok(Args& args) {
  Reply r = call(args);
  if (r->type == REDIS_REPLY_ERROR) throw Error(Error::Kind::kServer, std::string(text(r.get())));
  return r;
}

Reply Session::call_with_fd(Args& args, int fd) {
  if (broken_) fail("connection is broken");
  if (!idle() || !out_.empty()) fail("call_with_fd: the connection is not idle");
  if (tls_) fail("call_with_fd: a TLS connection cannot pass file descriptors");
  char* cmd = nullptr;
  const int len = redisFormatCommandArgv(&cmd, args.argc(), args.argv(), args.lens());
  if (len <= 0) fail("cannot format a command");
  std::unique_ptr<char, decltype(&redisFreeCommand)> own(cmd, &redisFreeCommand);
  // The descriptor travels with the first byte; the rest of the command follows normally.
  iovec iov{cmd, static_cast<size_t>(len)};
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  msg.msg_control = control;
  msg.msg_controllen = sizeof control;
  cmsghdr* cm = CMSG_FIRSTHDR(&msg);
  cm->cmsg_level = SOL_SOCKET;
  cm->cmsg_type = SCM_RIGHTS;
  cm->cmsg_len = CMSG_LEN(sizeof(int));
  std::memcpy(CMSG_DATA(cm), &fd, sizeof(int));
  ssize_t n;
  do {
    n = ::sendmsg(c_->fd, &msg, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  if (n <= 0) fail(std::string("sendmsg with a file descriptor failed: ") + std::strerror(errno));
  if (n < len) {
    iovec rest{cmd + n, static_cast<size_t>(len - n)};
    write_all({&rest, 1});
  }
  return read();
}

void Session::write_all(std::span<const iovec> iov_in) {
  if (broken_) fail("connection is broken");
  if (tls_) {
    try {
      tls_->write_all(iov_in);
    } catch (...) {
      broken_ = true;
      throw;
    }
    return;
  }
  std::vector<iovec> iov(iov_in.begin(), iov_in.end());
  size_t at = 0;
  while (at < iov.size()) {
    const int cnt = static_cast<int>(std::min<size_t>(iov.size() - at, IOV_MAX));
    msghdr msg{};
    msg.msg_iov = &iov[at];
    msg.msg_iovlen = cnt;
    ssize_t n = ::sendmsg(c_->fd, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      fail(errno == EAGAIN || errno == EWOULDBLOCK ? "write timed out"
                                                   : std::string("write failed: ") + std::strerror(errno));
    }
    size_t done = static_cast<size_t>(n);
    while (at < iov.size() && done >= iov[at].iov_len) done -= iov[at++].iov_len;
    if (done > 0) {
      iov[at].iov_base = static_cast<char*>(iov[at].iov_base) + done;
      iov[at].iov_len -= done;
    }
  }
}

bool Session::idle() const {
  const redisReader* r = c_->reader;
  return out_.empty() && in_pos_ == in_len_ && (r == nullptr || r->pos >= r->len);
}

size_t Session::fill() {
  if (in_pos_ == in_len_) in_pos_ = in_len_ = 0;
  if (in_len_ == in_.size()) {  // compact
    std::memmove(in_.data(), in_.data() + in_pos_, in_len_ - in_pos_);
    in_len_ -= in_pos_;
    in_pos_ = 0;
    if (in_len_ == in_.size()) fail("reply line too long");
  }
  const size_t n = recv_some(in_.data() + in_len_, in_.size() - in_len_);
  in_len_ += n;
  return n;
}

size_t Session::recv_some(void* p, size_t len) {
  if (tls_) {
    try {
      return tls_->read(p, len);
    } catch (...) {
      broken_ = true;
      throw;
    }
  }
  for (;;) {
    ssize_t n = ::recv(c_->fd, p, len, 0);
    if (n > 0) return static_cast<size_t>(n);
    if (n == 0) fail("the server closed the connection");
    if (errno == EINTR) continue;
    fail(errno == EAGAIN || errno == EWOULDBLOCK ? "read timed out"
                                                 : std::string("read failed: ") + std::strerror(errno));
  }
}

void* Session::tls_reply() {
  redisReader* reader = c_->reader;
  for (;;) {
    void* out = nullptr;
    if (redisReaderGetReply(reader, &out) != REDIS_OK) protocol_fail(reader->errstr);
    if (out != nullptr) return out;
    char buf[16 * 1024];  // one TLS record
    const size_t n = recv_some(buf, sizeof buf);
    if (redisReaderFeed(reader, buf, n) != REDIS_OK) protocol_fail(reader->errstr);
  }
}

std::string Session::read_line() {
  if (broken_) fail("connection is broken");
  size_t scanned = 0;  // bytes after in_pos_ already searched (fill() may move in_pos_)
  for (;;) {
    const char* begin = in_.data() + in_pos_;
    const size_t avail = in_len_ - in_pos_;
    const char* lf = static_cast<const char*>(std::memchr(begin + scanned, '\n', avail - scanned));
    if (lf != nullptr) {
      if (lf == begin || lf[-1] != '\r') protocol_fail("a reply line without \\r\\n");
      std::string line(begin, lf - 1);
      in_pos_ += static_cast<size_t>(lf + 1 - begin);
      if (line.empty()) protocol_fail("an empty reply line");
      if (line[0] == '-') note_error(std::string_view(line).substr(1));
      return line;
    }
    scanned = avail;
    fill();
  }
}

void Session::read_exact(MutableBytes dst) {
  size_t got = std::min(dst.size(), in_len_ - in_pos_);
  std::memcpy(dst.data(), in_.data() + in_pos_, got);
  in_pos_ += got;
  while (got < dst.size())  // large payloads: straight from the socket (or TLS) into dst
    got += recv_some(dst.data() + got, dst.size() - got);
}

void Session::skip(size_t n) {
  std::vector<std::byte> sink(std::min<size_t>(n, 1 << 20));
  while (n > 0) {
    const size_t step = std::min(n, sink.size());
    read_exact({sink.data(), step});
    n -= step;
  }
}

void Session::read_crlf() {
  char crlf[2];
  read_exact({reinterpret_cast<std::byte*>(crlf), 2});
  if (crlf[0] != '\r' || crlf[1] != '\n') protocol_fail("a bulk string without \\r\\n");
}

}  // namespace stratakv::detail
