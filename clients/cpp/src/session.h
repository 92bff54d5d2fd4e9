// session.h - one connection to the server: hiredis for control commands, raw socket I/O for
// payloads (writev of a command around caller memory, replies read straight into caller
// memory) and for passing a file descriptor with a command (SCM_RIGHTS).
//
// On a rediss:// URL every byte goes through a TlsStream (tls_stream.h) on the socket hiredis
// connected: hiredis then only parses replies (its reader, fed from TLS reads), payloads are
// SSL_write'n from caller memory and SSL_read into it, and no file descriptor is ever passed.
//
// A Session is used by one thread at a time (the pool hands it out). Any I/O failure marks it
// broken and throws Error(kConnection); the pool then closes it instead of reusing it.
#pragma once

#include <hiredis/hiredis.h>
#include <sys/uio.h>

#include <cstdint>
#include <deque>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "stratakv/client.h"
#include "tls_stream.h"
#include "url.h"

namespace stratakv::detail {

class Transport;

/// A command's arguments; numbers are formatted and owned here, strings are borrowed.
class Args {
 public:
  Args() = default;
  Args(std::initializer_list<std::string_view> args) {
    for (auto a : args) add(a);
  }
  Args& add(std::string_view s) {
    ptrs_.push_back(s.data());
    lens_.push_back(s.size());
    return *this;
  }
  Args& add(uint64_t n) {
    owned_.push_back(std::to_string(n));
    return add(std::string_view(owned_.back()));
  }
  int argc() const { return static_cast<int>(ptrs_.size()); }
  const char** argv() { return ptrs_.data(); }
  const size_t* lens() const { return lens_.data(); }

 private:
  std::vector<const char*> ptrs_;
  std::vector<size_t> lens_;
  std::deque<std::string> owned_;  // a deque never moves its elements
};

struct ReplyFree {
  void operator()(redisReply* r) const { freeReplyObject(r); }
};
using Reply = std::unique_ptr<redisReply, ReplyFree>;

/// The text of a string, status or error reply.
inline std::string_view text(const redisReply* r) { return {r->str, r->len}; }

class Session {
 public:
  /// Connects, handshakes TLS on a rediss:// URL (url.tls_config, overridden by the options'
  /// ssl_* fields; the handshake bounded by connect_timeout_ms), and authenticates (AUTH when a
  /// password is given), then sends READONLY when `url.readonly`. Throws Error (kConnection,
  /// kUsage for TLS files that do not load, or kServer when AUTH or READONLY fails).
  Session(const Url& url, const Options& options);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  /// Sends one command and returns its reply (which may be an error reply).
  Reply call(Args& args);
  /// Like call(), but throws Error(kServer) with the server's text on an error reply.
  Reply call_ok(Args& args);
  /// Pipelining: queue commands with append(), then read their replies in order with read()
  /// (the first read() sends what is queued).
  void append(Args& args);
  Reply read();
  /// Sends one command with `fd` attached to its first byte (SCM_RIGHTS) and returns its reply.
  /// Not on a TLS connection (fails it).
  Reply call_with_fd(Args& args, int fd);

  /// Writes the iovecs completely on the socket (nothing may be queued in hiredis).
  void write_all(std::span<const iovec> iov);
  /// Raw reply reading (payload replies). The first line of the next reply, without "\r\n";
  /// its first character is the RESP type.
  std::string read_line();
  /// Reads exactly dst.size() bytes of the reply stream into dst.
  void read_exact(MutableBytes dst);
  /// Reads and discards n bytes.
  void skip(size_t n);
  /// Reads the "\r\n" ending a bulk string.
  void read_crlf();
  /// True when no reply bytes are buffered (raw or in hiredis) and no command is queued: the
  /// stream is between replies.
  bool idle() const;

  /// Marks the connection unusable and throws Error(kConnection) with `what`.
  [[noreturn]] void fail(const std::string& what);
  /// Marks the connection unusable and throws Error(kProtocol): a reply the command does not
  /// promise ("protocol error: " + what).
  [[noreturn]] void protocol_fail(const std::string& what);
  bool broken() const { return broken_; }
  /// Marks the connection unusable (a reply may be half read) without throwing.
  void mark_broken() { broken_ = true; }

  bool is_unix() const { return unix_; }
  /// Whether the connection is TLS (rediss://): payloads only over RESP.
  bool is_tls() const { return tls_ != nullptr; }
  /// The payload transport of this connection (set by the pool after connecting).
  Transport& transport() { return *transport_; }
  void set_transport(std::unique_ptr<Transport> t);
  /// Buffer ids destroyed since this session last ran (guarded by the pool's mutex).
  std::vector<uint64_t> retired;

 private:
  void check(Reply& r, const char* what);
  // An error reply's text (no '-'): a protocol error marks the session broken.
  void note_error(std::string_view text);
  size_t fill();   // reads more bytes into in_ (at least one); fails on EOF/timeout
  size_t recv_some(void* p, size_t n);  // 1..n bytes from the socket or TLS; fails on EOF/timeout
  void* tls_reply();  // the next reply parsed by hiredis's reader, fed from TLS reads
  void flush();    // writes out_

  redisContext* c_ = nullptr;  // the socket (also on TLS) and the reply reader
  std::unique_ptr<TlsStream> tls_;  // rediss://: all I/O goes through it
  bool broken_ = false;
  bool unix_ = false;
  std::unique_ptr<Transport> transport_;
  std::string out_;       // formatted commands not yet written
  std::vector<char> in_;  // raw read buffer: bytes [in_pos_, in_len_) are unread
  size_t in_pos_ = 0, in_len_ = 0;
};

}  // namespace stratakv::detail
