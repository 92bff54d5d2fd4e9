#include "cluster/repl_link.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstring>

#include "tiering/key_lock.h"

namespace cluster {

namespace {
constexpr size_t kReadBuffer = 256 * 1024;
// Values at least this large are read from the socket straight into their block.
constexpr size_t kDirectRead = 16 * 1024;
constexpr int kConnectTimeoutMs = 5000;
constexpr int kAckEveryMs = 1000;

// A connected TCP socket to host:port (blocking), or -1 with `*error` set.
int dial(const std::string& host, uint16_t port, const std::atomic<bool>& stop,
         std::string* error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res); rc != 0) {
    *error = std::string("cannot resolve: ") + ::gai_strerror(rc);
    return -1;
  }
  int fd = -1;
  for (addrinfo* ai = res; ai != nullptr && fd < 0; ai = ai->ai_next) {
    fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol);
    if (fd < 0) continue;
    int rc = ::connect(fd, ai->ai_addr, ai->ai_addrlen);
    if (rc < 0 && errno == EINPROGRESS) {
      // In steps of 100 ms, so that stop() never waits for a connect.
      pollfd p{fd, POLLOUT, 0};
      int ready = 0;
      for (int waited = 0; ready == 0 && waited < kConnectTimeoutMs && !stop.load(); waited += 100)
        ready = ::poll(&p, 1, 100);
      rc = ready == 1 ? 0 : -1;
      int err = 0;
      socklen_t len = sizeof err;
      if (rc == 0) ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      if (rc != 0 || err != 0) {
        *error = err ? std::strerror(err) : "connect timed out";
        rc = -1;
      }
    } else if (rc < 0) {
      *error = std::strerror(errno);
    }
    if (rc < 0) {
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(res);
  if (fd < 0) return -1;
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return fd;
}

}  // namespace

ReplicaLink::ReplicaLink(LinkOptions options)
    : options_(std::move(options)), replid_(options_.replid), rbuf_(kReadBuffer) {
  if (options_.offset >= 0) {
    offset_.store(static_cast<uint64_t>(options_.offset));
    have_offset_ = true;
  }
}

ReplicaLink::~ReplicaLink() { stop(); }

void ReplicaLink::log(bool warning, const std::string& line) const {
  if (options_.log)
    options_.log(warning, "primary " + options_.host + ":" + std::to_string(options_.port) + " " +
                              line);
}

std::string ReplicaLink::replid() const {
  std::lock_guard lock(id_mu_);
  return replid_;
}

void ReplicaLink::start() {
  down_since_ms_.store(tiering::now_ms());
  thread_ = std::thread([this] { run(); });
}

void ReplicaLink::stop() {
  if (!thread_.joinable()) return;
  stop_.store(true);
  drop_connection();
  thread_.join();
}

void ReplicaLink::drop_connection() {
  const int fd = fd_.load();
  if (fd >= 0) ::shutdown(fd, SHUT_RDWR);
}

void ReplicaLink::run() {
  while (!stop_.load()) {
    session();
    if (state_.load() == State::kUp || state_.load() == State::kSyncing)
      down_since_ms_.store(tiering::now_ms());
    state_.store(State::kConnecting, std::memory_order_release);
    // Redis's replicas retry once a second (replicationCron); a migration's target sooner.
    for (int waited = 0; waited < options_.retry_ms && !stop_.load(); waited += 50)
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

bool ReplicaLink::read_exact(char* dst, size_t n) {
  while (n > 0) {
    if (rpos_ < rend_) {
      const size_t take = std::min(n, rend_ - rpos_);
      std::memcpy(dst, rbuf_.data() + rpos_, take);
      rpos_ += take;
      dst += take;
      n -= take;
      continue;
    }
    // Nothing buffered: everything received is applied, which is when the primary hears it.
    if (state_.load(std::memory_order_relaxed) == State::kUp && offset_.load() != acked_ &&
        !send_ack())
      return false;
    const bool direct = n >= kDirectRead;
    char* into = direct ? dst : rbuf_.data();
    const ssize_t r = sock_->recv(into, direct ? n : rbuf_.size());
    const int64_t now = tiering::now_ms();
    if (r > 0) {
      last_io_ms_.store(now, std::memory_order_relaxed);
      if (direct) {
        dst += r;
        n -= static_cast<size_t>(r);
      } else {
        rpos_ = 0;
        rend_ = static_cast<size_t>(r);
      }
      continue;
    }
    if (r == 0) {
      if (!stop_.load()) log(true, "closed the link");
      return false;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) {
      if (!stop_.load()) log(true, std::string("link lost: ") + std::strerror(errno));
      return false;
    }
    if (stop_.load()) return false;
    if (now - last_io_ms_.load() > options_.timeout_ms) {
      log(true, "timed out: nothing received for repl-timeout");
      return false;
    }
    if (state_.load(std::memory_order_relaxed) == State::kUp && now - last_ack_ms_ >= kAckEveryMs &&
        !send_ack())
      return false;
  }
  return true;
}

bool ReplicaLink::send_ack() {
  char frame[FrameHeader::kSize];
  const uint64_t off = offset_.load();
  encode_header({FrameType::kAck, 0, off, 0}, frame);
  if (!sock_->send_all(frame, sizeof frame)) return false;
  acked_ = off;
  last_ack_ms_ = tiering::now_ms();
  return true;
}

bool ReplicaLink::read_line(std::string* line) {
  line->clear();
  char c;
  while (line->size() < 4096) {
    if (!read_exact(&c, 1)) return false;
    if (c == '\n') {
      if (!line->empty() && line->back() == '\r') line->pop_back();
      return true;
    }
    line->push_back(c);
  }
  return false;
}

bool ReplicaLink::command(const std::vector<std::string>& args, std::string* line) {
  std::string req = "*" + std::to_string(args.size()) + "\r\n";
  for (const auto& a : args) req += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
  return sock_->send_all(req.data(), req.size()) && read_line(line);
}

bool ReplicaLink::handshake(std::string* reply) {
  std::string line;
  if (!options_.masterauth.empty()) {
    std::vector<std::string> auth{"AUTH"};
    if (!options_.masteruser.empty()) auth.push_back(options_.masteruser);
    auth.push_back(options_.masterauth);
    if (!command(auth, &line)) return false;
    if (line != "+OK") {
      log(true, "refused AUTH (masterauth): " + line);
      return false;
    }
  }
  if (!options_.sync_command.empty()) return command(options_.sync_command, reply);
  for (const auto& args : {std::vector<std::string>{"REPLCONF", "listening-port",
                                                    std::to_string(options_.listening_port)},
                           std::vector<std::string>{"REPLCONF", "capa", "stratakv"}}) {
    if (!command(args, &line)) return false;
    if (line != "+OK") {
      log(true, "refused " + args[1] + ": " + line);
      return false;
    }
  }
  std::string id = replid();
  const std::string off = have_offset_ ? std::to_string(offset_.load()) : "-1";
  if (!have_offset_) id = "?";
  if (!command({"PSYNC", id, off}, reply)) return false;
  return true;
}

void ReplicaLink::session() {
  state_.store(State::kConnecting, std::memory_order_release);
  std::string error;
  const int fd = dial(options_.host, options_.port, stop_, &error);
  if (fd < 0) {
    // Said at the first failure, then every 60 attempts (a minute for a replica).
    if (failed_connects_++ % 60 == 0)
      log(true, "cannot connect: " + error +
                    (failed_connects_ > 1 ? " (" + std::to_string(failed_connects_) + " attempts)" : ""));
    return;
  }
  fd_.store(fd);
  if (options_.tls) {
    const std::shared_ptr<ssl_ctx_st> ctx = options_.tls();
    if (ctx) {
      sock_ = ReplSocket::connect_tls(fd, ctx.get(), kConnectTimeoutMs, stop_, &error);
    } else {
      ::close(fd);
      error = "TLS is on but no TLS context could be built (tls-* files)";
    }
    if (!sock_) {
      fd_.store(-1);
      if (failed_connects_++ % 60 == 0)
        log(true, "cannot connect: " + error +
                      (failed_connects_ > 1 ? " (" + std::to_string(failed_connects_) + " attempts)" : ""));
      return;
    }
  } else {
    sock_ = std::make_unique<ReplSocket>(fd);
  }
  failed_connects_ = 0;
  sock_->set_timeouts(1000, options_.timeout_ms);
  rpos_ = rend_ = 0;
  last_io_ms_.store(tiering::now_ms());
  state_.store(State::kHandshake, std::memory_order_release);
  std::string reply;
  bool ok = handshake(&reply);
  if (ok) {
    // "+FULLRESYNC <replid> <offset>" or "+CONTINUE [<replid>]".
    if (reply.rfind("+FULLRESYNC ", 0) == 0) {
      const size_t sp = reply.find(' ', 12);
      uint64_t off = 0;
      const char* b = reply.data() + (sp == std::string::npos ? reply.size() : sp + 1);
      const char* e = reply.data() + reply.size();
      if (sp == std::string::npos || std::from_chars(b, e, off).ec != std::errc()) {
        log(true, "answered PSYNC with a malformed line: " + reply);
        ok = false;
      } else {
        const std::string id = reply.substr(12, sp - 12);
        log(false, "full copy from offset " + std::to_string(off) + " of " + id);
        state_.store(State::kSyncing, std::memory_order_release);
        full_syncs_.fetch_add(1, std::memory_order_relaxed);
        have_offset_ = false;  // until the copy is complete, there is nothing to resume
        if (options_.clear) options_.clear();
        else options_.keyspace->flush(/*async=*/true);
        if (options_.on_full_sync) options_.on_full_sync(id, off);
        // The copy: SET frames until SNAPSHOT_END.
        for (;;) {
          char hb[FrameHeader::kSize];
          if (!read_exact(hb, sizeof hb)) {
            ok = false;
            break;
          }
          const auto h = decode_header(hb);
          if (!h || (h->type != FrameType::kSet && h->type != FrameType::kSnapshotEnd)) {
            log(true, "sent a malformed full copy (is it a stratakv node of this version?)");
            ok = false;
            break;
          }
          if (h->type == FrameType::kSnapshotEnd) {
            log(false, "full copy applied: " + std::to_string(h->value_len) + " keys");
            break;
          }
          if (!apply(*h, /*in_stream=*/false)) {
            ok = false;
            break;
          }
        }
        if (ok) {
          std::lock_guard lock(id_mu_);
          replid_ = id;
          offset_.store(off);
          have_offset_ = true;
        }
      }
    } else if (reply == "+CONTINUE" || reply.rfind("+CONTINUE ", 0) == 0) {
      partial_syncs_.fetch_add(1, std::memory_order_relaxed);
      if (reply.size() > 10) {
        const std::string id = reply.substr(10);
        std::lock_guard lock(id_mu_);
        if (id != replid_) {
          replid_ = id;
          if (options_.on_new_replid) options_.on_new_replid(id);
        }
      }
      log(false, "resumed at offset " + std::to_string(offset_.load()));
    } else {
      log(true, "refused " + (options_.sync_command.empty() ? std::string("PSYNC")
                                                            : options_.sync_command.front()) +
                    ": " + reply);
      ok = false;
    }
  }
  if (ok) {
    state_.store(State::kUp, std::memory_order_release);
    acked_ = UINT64_MAX;  // acknowledge at once: the primary learns where we are
    for (;;) {
      char hb[FrameHeader::kSize];
      if (!read_exact(hb, sizeof hb)) break;
      const auto h = decode_header(hb);
      if (!h || h->type == FrameType::kAck || h->type == FrameType::kSnapshotEnd) {
        log(true, "sent a malformed frame: dropping the link");
        break;
      }
      if (!apply(*h, /*in_stream=*/true)) break;
    }
  }
  fd_.store(-1);
  sock_.reset();  // closes the socket
}

bool ReplicaLink::apply(const FrameHeader& h, bool in_stream) {
  key_.resize(h.key_len);
  if (h.key_len > 0 && !read_exact(key_.data(), h.key_len)) return false;
  tiering::Keyspace& ks = *options_.keyspace;
  const int64_t now = tiering::now_ms();
  tiering::ValueRef value;
  switch (h.type) {
    case FrameType::kSet: {
      value = options_.allocate ? options_.allocate(h.value_len) : tiering::ValueRef();
      if (!value && options_.on_no_room) {
        log(true, "cannot hold a value of " + std::to_string(h.value_len) +
                      " bytes (memory full): ending the link");
        options_.on_no_room(h.value_len);
        return false;
      }
      if (!value) {
        // This node's region cannot hold it: skip the bytes, and drop the key rather than keep
        // an older value (a replica's miss is served by the primary).
        std::vector<char> sink(std::min<uint64_t>(h.value_len, kReadBuffer));
        for (uint64_t left = h.value_len; left > 0;) {
          const size_t n = static_cast<size_t>(std::min<uint64_t>(left, sink.size()));
          if (!read_exact(sink.data(), n)) return false;
          left -= n;
        }
        dropped_.fetch_add(1, std::memory_order_relaxed);
        tiering::KeyLock lock(ks, key_, now);
        if (const auto* item = lock.find_any(key_)) lock.remove(item);
        break;
      }
      if (h.value_len > 0 && !read_exact(value->data(), h.value_len)) return false;
      tiering::KeyLock lock(ks, key_, now);
      lock.set(key_, value, h.expire_ms);
      break;
    }
    case FrameType::kExpire: {
      tiering::KeyLock lock(ks, key_, now);
      if (const auto* item = lock.find_any(key_)) lock.set_expire(item, h.expire_ms);
      break;
    }
    case FrameType::kDelete: {
      tiering::KeyLock lock(ks, key_, now);
      if (const auto* item = lock.find_any(key_)) lock.remove(item);
      break;
    }
    case FrameType::kFlush:
      if (options_.clear) options_.clear();
      else ks.flush(/*async=*/true);
      break;
    case FrameType::kTopology:
      if (options_.on_topology) options_.on_topology(key_);
      break;
    case FrameType::kPing:
      break;
    case FrameType::kSnapshotEnd:
    case FrameType::kAck:
      return false;
  }
  if (in_stream) {
    if (options_.relay) options_.relay(h.type, key_, std::move(value), h.expire_ms, h.frame_size());
    offset_.fetch_add(h.frame_size(), std::memory_order_acq_rel);
  }
  return true;
}

}  // namespace cluster
