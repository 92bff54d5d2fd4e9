// server/connection_client.cc - who a connection's client is and what it holds: its ACL user
// (and the ACL LOG entries of its refusals), CLIENT SETNAME/SETINFO, the CLIENT LIST line, and
// the read buffers given back while it idles (as Redis's clientsCron). The rest of Connection
// is in connection.cc.
#include "server/connection.h"

#include "server/server.h"

namespace server {

uint64_t Connection::server_acl_generation() const { return server_.acl().generation(); }

void Connection::refresh_user() {
  // A user with no permission at all: what a deleted user's connection checks as until it is
  // closed (ACL DELUSER closes it).
  static const std::shared_ptr<const acl::User> nobody = std::make_shared<const acl::User>();
  user_generation_ = server_.acl().generation();
  std::shared_ptr<const acl::User> u = server_.acl().find(user_->name);
  if (u == nullptr) {
    user_ = nobody;
    close();
    return;
  }
  user_ = std::move(u);
}

void Connection::set_user(std::shared_ptr<const acl::User> user) {
  {
    std::lock_guard lock(info_mu_);
    user_name_ = user->name;
  }
  user_generation_ = server_.acl().generation();
  user_ = std::move(user);
  authenticated = true;
}

void Connection::log_acl_denial(std::string_view reason, std::string_view object,
                                std::string_view username, int64_t now_ms,
                                std::string_view context) {
  if (context.empty()) context = txn.active() ? "multi" : "toplevel";
  AclLog::Entry e;
  e.reason = reason;
  e.context = context;
  e.object = object;
  e.username = username;
  e.client_info = describe(now_ms);
  server_.acl_log().add(std::move(e), now_ms,
                        static_cast<size_t>(server_.config().num(Key::kAclLogMaxLen)));
}

void Connection::log_acl_refusal(const PreparedCommand& cmd,
                                 std::span<const std::string_view> args, int64_t now_ms,
                                 std::string_view context) {
  using Verdict = PreparedCommand::Verdict;
  const std::string_view reason = cmd.verdict == Verdict::kNoPermCommand ? "command"
                                  : cmd.verdict == Verdict::kNoPermKey   ? "key"
                                                                         : "channel";
  const std::string_view object = cmd.verdict == Verdict::kNoPermCommand
                                      ? std::string_view(cmd.spec->full_name)
                                      : args[cmd.denied_arg];
  log_acl_denial(reason, object, user_->name, now_ms, context);
}

std::string Connection::user_name() const {
  std::lock_guard lock(info_mu_);
  return user_name_;
}

void Connection::set_name(std::string name) {
  std::lock_guard lock(info_mu_);
  name_ = std::move(name);
}

std::string Connection::name() const {
  std::lock_guard lock(info_mu_);
  return name_;
}

void Connection::set_lib(std::string_view attr, std::string value) {
  std::lock_guard lock(info_mu_);
  (attr == "lib-name" ? lib_name_ : lib_ver_) = std::move(value);
}

int64_t Connection::idle_ms(int64_t now_ms) const {
  return now_ms - last_ms_.load(std::memory_order_relaxed);
}

void Connection::release_idle_buffers(int64_t now_ms) {
  if (!holds_buffers_.load(std::memory_order_relaxed) || tls_ != nullptr ||
      idle_ms(now_ms) < kIdleBufferMs)
    return;
  asio::post(worker_.io, [weak = weak_from_this()] {
    auto self = weak.lock();
    // Only a read waiting for the socket is cancelled (it loses no byte, as wake_reader's);
    // a client busy otherwise is tried again by the next sweep.
    if (self == nullptr || !self->reading_ || self->closed_.load(std::memory_order_relaxed))
      return;
    self->shrink_requested_ = true;
    asio::error_code ec;
    self->socket_.cancel(ec);
  });
}

void Connection::take_read_buffer() {
  rbuf_.reset(new char[kReadBufferSize]);  // not zeroed: only what a read writes is touched
  holds_buffers_.store(true, std::memory_order_relaxed);
}

void Connection::shrink_buffers() {
  shrink_requested_ = false;
  rbuf_.reset();
  holds_buffers_.store(false, std::memory_order_relaxed);
  parser_.shrink();
  writer_.shrink();
  std::vector<resp::OutBuffer>().swap(out_scratch_);
  std::vector<MessageRef>().swap(inbox_);
  note_query_buffer(0);
}

void Connection::note_query_buffer(size_t unread) {
  qbuf_.store(unread, std::memory_order_relaxed);
  const size_t rbuf = rbuf_ != nullptr ? kReadBufferSize - unread : 0;
  qbuf_free_.store(rbuf + parser_.allocated_bytes(), std::memory_order_relaxed);
}

std::string Connection::describe(int64_t now_ms) const {
  std::lock_guard lock(info_mu_);
  std::string s;
  s.reserve(320);
  s += "id=" + std::to_string(id_);
  s += " addr=" + (is_unix_ ? std::string("/unixsocket:0") : peer_);
  s += " laddr=" + local_;
  s += " fd=" + std::to_string(const_cast<Socket&>(socket_).native_handle());
  s += " name=" + name_;
  s += " age=" + std::to_string((now_ms - created_ms_) / 1000);
  s += " idle=" + std::to_string(idle_ms(now_ms) / 1000);
  // Redis's flag letters, in its order (catClientInfoString): O monitor, P pubsub, x MULTI,
  // e no-evict.
  const int64_t multi = txn.queued_count();
  std::string flags;
  if (monitoring()) flags += 'O';
  if (pubsub_.active()) flags += 'P';
  if (multi >= 0) flags += 'x';
  if (no_evict) flags += 'e';
  if (flags.empty()) flags = "N";
  s += " flags=" + flags;
  s += " db=0 sub=" + std::to_string(pubsub_.channel_count()) +
       " psub=" + std::to_string(pubsub_.pattern_count()) +
       " ssub=" + std::to_string(pubsub_.shard_count()) + " multi=" + std::to_string(multi);
  // qbuf: bytes read and not yet run, and the partial request the parser holds (a large bulk
  // counts its whole allocated size).
  const size_t qbuf = qbuf_.load(std::memory_order_relaxed) +
                      reserved_counted_.load(std::memory_order_relaxed) +
                      heap_counted_.load(std::memory_order_relaxed);
  const CommandSpec* cmd = last_cmd_.load(std::memory_order_relaxed);
  s += " qbuf=" + std::to_string(qbuf) +
       " qbuf-free=" + std::to_string(qbuf_free_.load(std::memory_order_relaxed)) +
       " argv-mem=0 multi-mem=0";
  // omem: replies being written and messages waiting for this subscriber (Redis: the reply
  // list's bytes); oll: those messages.
  const Subscriber* box = pubsub_.mailbox();
  const size_t omem = out_bytes_.load(std::memory_order_relaxed) + (box ? box->queued_bytes() : 0);
  const size_t rbs = holds_buffers_.load(std::memory_order_relaxed) ? kReadBufferSize : 0;
  s += " rbs=" + std::to_string(rbs) + " rbp=0 obl=0 oll=" +
       std::to_string(box ? box->queued() : 0) + " omem=" + std::to_string(omem);
  s += " tot-mem=" + std::to_string(qbuf + qbuf_free_.load(std::memory_order_relaxed) + omem +
                                    pubsub_.memory());
  s += " events=r cmd=" + (cmd ? cmd->full_name : std::string("NULL")) + " user=" + user_name_ + " redir=-1";
  s += " resp=" + std::to_string(resp_.load(std::memory_order_relaxed));
  s += " lib-name=" + lib_name_ + " lib-ver=" + lib_ver_;
  return s;
}

}  // namespace server
