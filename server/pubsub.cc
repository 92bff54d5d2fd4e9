// server/pubsub.cc - the Pub/Sub registry, mailboxes and encoded messages (pubsub.h).
#include "server/pubsub.h"

#include <algorithm>
#include <charconv>

#include "tiering/glob.h"

namespace server {

namespace {

void append_bulk(std::string& out, std::string_view s) {
  char buf[24];
  buf[0] = '$';
  char* p = std::to_chars(buf + 1, buf + sizeof buf, s.size()).ptr;
  out.append(buf, static_cast<size_t>(p - buf));
  out.append("\r\n");
  out.append(s);
  out.append("\r\n");
}

}  // namespace

// ---- Message ----

void Message::Ref::release(Message* m) noexcept {
  if (m != nullptr && m->refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete m;
}

resp::Keepalive Message::Ref::keepalive() const {
  if (m_ == nullptr) return {};
  m_->refs_.fetch_add(1, std::memory_order_relaxed);
  return resp::Keepalive(m_, [](void* p) noexcept { release(static_cast<Message*>(p)); });
}

Message::Ref Message::make(std::string_view kind, std::string_view channel,
                           std::string_view payload) {
  auto* m = new Message();
  m->body_.reserve(kind.size() + channel.size() + payload.size() + 48);
  m->body_.append("3\r\n");
  append_bulk(m->body_, kind);
  append_bulk(m->body_, channel);
  append_bulk(m->body_, payload);
  return Ref(m);
}

Message::Ref Message::make_pattern(std::string_view pattern, std::string_view channel,
                                   std::string_view payload) {
  auto* m = new Message();
  m->body_.reserve(pattern.size() + channel.size() + payload.size() + 64);
  m->body_.append("4\r\n");
  append_bulk(m->body_, "pmessage");
  append_bulk(m->body_, pattern);
  append_bulk(m->body_, channel);
  append_bulk(m->body_, payload);
  return Ref(m);
}

Message::Ref Message::make_line(char type, std::string body) {
  auto* m = new Message();
  m->type_ = type;
  m->body_ = std::move(body);
  return Ref(m);
}

// ---- Subscriber ----

void Subscriber::deliver(const MessageRef& msg) {
  std::lock_guard lock(mu_);
  if (closed_) return;
  const bool was_empty = queue_.empty();
  queue_.push_back(msg);
  count_.store(queue_.size(), std::memory_order_relaxed);
  const size_t bytes = bytes_.load(std::memory_order_relaxed) + msg->wire_size();
  bytes_.store(bytes, std::memory_order_relaxed);
  // client-output-buffer-limit: past it, the client is closed (closeClientOnOutputBufferLimit-
  // Reached) and gets nothing more.
  if (hooks_.over_limit && hooks_.over_limit(bytes)) {
    closed_ = true;
    if (hooks_.overflow) hooks_.overflow();
    return;
  }
  if (was_empty && hooks_.wake) hooks_.wake();
}

void Subscriber::take(std::vector<MessageRef>* out) {
  std::lock_guard lock(mu_);
  for (MessageRef& m : queue_) out->push_back(std::move(m));
  queue_.clear();
  count_.store(0, std::memory_order_relaxed);
  bytes_.store(0, std::memory_order_relaxed);
}

void Subscriber::close() {
  std::vector<MessageRef> dropped;  // released after the lock
  std::lock_guard lock(mu_);
  closed_ = true;
  dropped.swap(queue_);
  count_.store(0, std::memory_order_relaxed);
  bytes_.store(0, std::memory_order_relaxed);
}

// ---- PubSub ----

PubSub::PubSub() : shards_(new Shard[kShards]) {
  patterns_.store(std::make_shared<const Patterns>());
}

PubSub::~PubSub() = default;

PubSub::Shard& PubSub::shard_of(std::string_view channel) const {
  return shards_[std::hash<std::string_view>{}(channel) % kShards];
}

bool PubSub::subscribe(ChannelKind kind, std::string_view channel,
                       const std::shared_ptr<Subscriber>& sub) {
  Shard& s = shard_of(channel);
  std::lock_guard lock(s.mu);
  ChannelMap& map = s.channels[static_cast<int>(kind)];
  auto it = map.find(channel);
  if (it == map.end()) {
    it = map.emplace(std::string(channel), Subscribers()).first;
    channel_count_[static_cast<int>(kind)].fetch_add(1, std::memory_order_relaxed);
  }
  Subscribers& subs = it->second;
  if (std::find(subs.begin(), subs.end(), sub) != subs.end()) return false;
  subs.push_back(sub);
  subscriptions_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool PubSub::unsubscribe(ChannelKind kind, std::string_view channel, const Subscriber* sub) {
  std::shared_ptr<Subscriber> gone;  // released after the lock
  Shard& s = shard_of(channel);
  std::lock_guard lock(s.mu);
  ChannelMap& map = s.channels[static_cast<int>(kind)];
  auto it = map.find(channel);
  if (it == map.end()) return false;
  Subscribers& subs = it->second;
  auto at = std::find_if(subs.begin(), subs.end(), [&](auto& p) { return p.get() == sub; });
  if (at == subs.end()) return false;
  gone = std::move(*at);
  subs.erase(at);
  if (subs.empty()) {
    map.erase(it);
    channel_count_[static_cast<int>(kind)].fetch_sub(1, std::memory_order_relaxed);
  }
  subscriptions_.fetch_sub(1, std::memory_order_relaxed);
  return true;
}

bool PubSub::psubscribe(std::string_view pattern, const std::shared_ptr<Subscriber>& sub) {
  std::lock_guard lock(patterns_mu_);
  std::shared_ptr<const Patterns> cur = patterns_.load();
  auto next = std::make_shared<Patterns>(*cur);
  auto it = std::find_if(next->begin(), next->end(), [&](auto& p) { return p.pattern == pattern; });
  if (it == next->end()) {
    next->push_back(Pattern{std::string(pattern), {}});
    it = next->end() - 1;
  } else if (std::find(it->subs.begin(), it->subs.end(), sub) != it->subs.end()) {
    return false;
  }
  it->subs.push_back(sub);
  pattern_count_.store(next->size(), std::memory_order_relaxed);
  patterns_.store(std::move(next));
  subscriptions_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool PubSub::punsubscribe(std::string_view pattern, const Subscriber* sub) {
  std::shared_ptr<const Patterns> old;  // released after the lock
  std::lock_guard lock(patterns_mu_);
  old = patterns_.load();
  auto it = std::find_if(old->begin(), old->end(), [&](auto& p) { return p.pattern == pattern; });
  if (it == old->end()) return false;
  auto at = std::find_if(it->subs.begin(), it->subs.end(), [&](auto& p) { return p.get() == sub; });
  if (at == it->subs.end()) return false;
  auto next = std::make_shared<Patterns>(*old);
  Pattern& p = (*next)[static_cast<size_t>(it - old->begin())];
  p.subs.erase(p.subs.begin() + (at - it->subs.begin()));
  if (p.subs.empty()) next->erase(next->begin() + (it - old->begin()));
  pattern_count_.store(next->size(), std::memory_order_relaxed);
  patterns_.store(std::move(next));
  subscriptions_.fetch_sub(1, std::memory_order_relaxed);
  return true;
}

int64_t PubSub::publish(ChannelKind kind, std::string_view channel, std::string_view payload) {
  int64_t receivers = 0;
  {
    Shard& s = shard_of(channel);
    std::lock_guard lock(s.mu);
    const ChannelMap& map = s.channels[static_cast<int>(kind)];
    if (auto it = map.find(channel); it != map.end()) {
      const MessageRef msg =
          Message::make(kind == ChannelKind::kShard ? "smessage" : "message", channel, payload);
      for (const auto& sub : it->second) sub->deliver(msg);
      receivers += static_cast<int64_t>(it->second.size());
    }
  }
  if (kind != ChannelKind::kGlobal || pattern_count_.load(std::memory_order_relaxed) == 0)
    return receivers;
  const std::shared_ptr<const Patterns> patterns = patterns_.load();
  for (const Pattern& p : *patterns) {
    if (!tiering::glob_match(p.pattern, channel)) continue;
    const MessageRef msg = Message::make_pattern(p.pattern, channel, payload);
    for (const auto& sub : p.subs) sub->deliver(msg);
    receivers += static_cast<int64_t>(p.subs.size());
  }
  return receivers;
}

std::vector<std::string> PubSub::channels(ChannelKind kind, std::string_view pattern) const {
  std::vector<std::string> out;
  for (size_t i = 0; i < kShards; ++i) {
    const Shard& s = shards_[i];
    std::lock_guard lock(s.mu);
    for (const auto& [name, subs] : s.channels[static_cast<int>(kind)])
      if (pattern.empty() || tiering::glob_match(pattern, name)) out.push_back(name);
  }
  return out;
}

int64_t PubSub::numsub(ChannelKind kind, std::string_view channel) const {
  const Shard& s = shard_of(channel);
  std::lock_guard lock(s.mu);
  const ChannelMap& map = s.channels[static_cast<int>(kind)];
  auto it = map.find(channel);
  return it == map.end() ? 0 : static_cast<int64_t>(it->second.size());
}

int64_t PubSub::numpat() const { return static_cast<int64_t>(patterns_.load()->size()); }

// ---- PubSubClient ----

void PubSubClient::count(const std::string& name, int delta) {
  const size_t bytes = name.size() + sizeof(std::string);
  if (delta > 0) names_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  else names_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
}

bool PubSubClient::subscribe(ChannelKind kind, std::string_view channel) {
  const int k = static_cast<int>(kind);
  auto [it, inserted] = channels_[k].emplace(channel);
  if (!inserted) return false;
  registry_.subscribe(kind, channel, mailbox_);
  count(*it, 1);
  n_[k].fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool PubSubClient::unsubscribe(ChannelKind kind, std::string_view channel) {
  const int k = static_cast<int>(kind);
  auto it = channels_[k].find(std::string(channel));
  if (it == channels_[k].end()) return false;
  registry_.unsubscribe(kind, channel, mailbox_.get());
  count(*it, -1);
  channels_[k].erase(it);
  n_[k].fetch_sub(1, std::memory_order_relaxed);
  return true;
}

bool PubSubClient::psubscribe(std::string_view pattern) {
  auto [it, inserted] = patterns_.emplace(pattern);
  if (!inserted) return false;
  registry_.psubscribe(pattern, mailbox_);
  count(*it, 1);
  n_pat_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

bool PubSubClient::punsubscribe(std::string_view pattern) {
  auto it = patterns_.find(std::string(pattern));
  if (it == patterns_.end()) return false;
  registry_.punsubscribe(pattern, mailbox_.get());
  count(*it, -1);
  patterns_.erase(it);
  n_pat_.fetch_sub(1, std::memory_order_relaxed);
  return true;
}

std::vector<std::string> PubSubClient::channels(ChannelKind kind) const {
  const Set& s = channels_[static_cast<int>(kind)];
  return {s.begin(), s.end()};
}

std::vector<std::string> PubSubClient::patterns() const {
  return {patterns_.begin(), patterns_.end()};
}

void PubSubClient::unsubscribe_all() {
  for (ChannelKind kind : {ChannelKind::kGlobal, ChannelKind::kShard})
    for (const std::string& c : channels(kind)) unsubscribe(kind, c);
  for (const std::string& p : patterns()) punsubscribe(p);
}

}  // namespace server
