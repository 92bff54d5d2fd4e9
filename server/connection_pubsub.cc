// server/connection_pubsub.cc - a connection's side of Pub/Sub and MONITOR: its mailbox (the
// messages publishers queue for it and the wake-up of its read loop), the MONITOR feed, the
// client-output-buffer-limit check (Redis's checkClientOutputBufferLimits) and the channel
// permissions rechecked after an ACL change. The rest of Connection is in connection.cc.
#include "server/connection.h"

#include "server/log.h"
#include "server/server.h"

namespace server {

std::shared_ptr<Subscriber> Connection::make_mailbox() {
  Subscriber::Hooks hooks;
  // The hooks run on publishers' threads, under the mailbox's mutex, and never after the
  // mailbox closed (~Connection, and the loop's end): `this` is alive while they run.
  hooks.wake = [this] {
    asio::post(worker_.io, [weak = weak_from_this()] {
      if (auto self = weak.lock()) self->wake_reader();
    });
  };
  hooks.over_limit = [this](size_t queued) {
    return over_output_limit(queued + out_bytes_.load(std::memory_order_relaxed));
  };
  hooks.overflow = [this] { close_for_output_limit(); };
  return std::make_shared<Subscriber>(std::move(hooks));
}

void Connection::ensure_mailbox() {
  if (!pubsub_.has_mailbox()) pubsub_.set_mailbox(make_mailbox());
}

void Connection::wake_reader() {
  // Only the read is pending while reading_: cancelling it loses no byte (the reactor reads
  // only when the socket is ready), and the loop goes round to write the messages.
  if (!reading_) return;  // the loop writes them before it reads again
  asio::error_code ec;
  socket_.cancel(ec);
}

void Connection::drain_mailbox() {
  Subscriber* box = pubsub_.mailbox();
  if (box == nullptr || !box->pending()) return;
  box->take(&inbox_);
  // One encoded message for every subscriber: its first byte says RESP2 array or RESP3 push
  // (a MONITOR line's is '+' in both).
  const int proto = protocol();
  for (const MessageRef& m : inbox_) {
    const char type = m->type(proto);
    writer_.raw(std::string_view(&type, 1));
    writer_.raw_ref(m->body(), m.keepalive());
  }
  inbox_.clear();
}

bool Connection::start_monitor() {
  if (monitoring()) return false;
  ensure_mailbox();
  server_.monitors().add(pubsub_.mailbox_owner());
  monitoring_.store(true, std::memory_order_relaxed);
  return true;
}

void Connection::stop_monitor() {
  if (!monitoring()) return;
  server_.monitors().remove(pubsub_.mailbox());
  monitoring_.store(false, std::memory_order_relaxed);
}

void Connection::feed_monitors(std::span<const std::string_view> args) {
  // replicationFeedMonitors: "unix:<unixsocket>" for a Unix socket client, else its ip:port.
  if (is_unix_) {
    server_.monitors().feed("unix:" + server_.config().str(Key::kUnixSocket), args);
    return;
  }
  server_.monitors().feed(peer_, args);
}

bool Connection::over_output_limit(size_t bytes) {
  const ClientClass cls = pubsub_.active() ? ClientClass::kPubSub : ClientClass::kNormal;
  const OutputLimit limit = server_.config().output_limit(cls);
  if (limit.hard == 0 && limit.soft == 0) return false;
  return out_limiter_.over(limit, bytes, tiering::now_ms() / 1000);
}

void Connection::close_for_output_limit() {
  // networking.c closeClientOnOutputBufferLimitReached (the asynchronous close).
  log::warning("Client " + describe(tiering::now_ms()) +
               " scheduled to be closed ASAP for overcoming of output buffer limits.");
  close();
}

bool Connection::subscriptions_allowed() {
  const acl::User* user = acl_user();
  if (user == nullptr || user->all_channels || !pubsub_.active()) return true;
  for (ChannelKind kind : {ChannelKind::kGlobal, ChannelKind::kShard})
    for (const std::string& channel : pubsub_.channels(kind))
      if (!user->channel_allowed(channel, false)) return false;
  for (const std::string& pattern : pubsub_.patterns())
    if (!user->channel_allowed(pattern, true)) return false;
  return true;
}

void Connection::recheck_subscriptions() {
  asio::post(worker_.io, [self = shared_from_this()] {
    if (!self->closed_.load() && !self->subscriptions_allowed()) self->close();
  });
}

}  // namespace server
