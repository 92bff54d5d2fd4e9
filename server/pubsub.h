// server/pubsub.h - Pub/Sub: who subscribes to what, and delivery to subscribers on any I/O
// thread (Redis 7.0's pubsub.c; docs/pubsub.md).
//
// The registry (PubSub) has no global lock on the publish path:
//   - channels (PUBLISH/SUBSCRIBE) and shard channels (SPUBLISH/SSUBSCRIBE, a namespace of
//     their own as Redis's pubsubshard_channels) live in 64 shards by the channel's hash, each
//     a map channel -> subscribers under its own mutex: a publish locks the one shard of its
//     channel, and delivers under it (delivery only enqueues);
//   - patterns (PSUBSCRIBE) are an immutable list published by pointer (RCU-like): a publish
//     loads the current list (one atomic load of a shared_ptr) and matches the channel against
//     it with no lock; PSUBSCRIBE/PUNSUBSCRIBE, which are rare, copy the list under a writers'
//     mutex and publish the new one. While nobody subscribes to a pattern, a publish does not
//     look at the list at all.
// A subscriber is a Subscriber, a mailbox owned by shared pointer: the registry and a
// publisher's list snapshot keep it alive, so a client that closes while a message is on its
// way is never touched after it is gone. Delivery appends an encoded message to the mailbox and,
// when the mailbox was empty, wakes its connection on the connection's own thread, which writes
// it (server/connection.cc). So a publish never writes to another client's socket, never waits,
// and runs on the publisher's thread whatever thread the subscribers live on.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "resp/keepalive.h"

namespace server {

/// One message as a subscriber receives it, encoded once and shared by every subscriber it
/// goes to: the RESP frame of ["message", channel, payload], ["smessage", channel, payload] or
/// ["pmessage", pattern, channel, payload] without its type byte, the only byte RESP2 ('*',
/// an array) and RESP3 ('>', a push) differ in. Immutable; reference-counted (thread-safe).
class Message {
 public:
  /// A reference to a message (null when empty). Copying counts a reference.
  class Ref {
   public:
    Ref() = default;
    Ref(const Ref& o) : m_(o.m_) { if (m_) m_->refs_.fetch_add(1, std::memory_order_relaxed); }
    Ref(Ref&& o) noexcept : m_(std::exchange(o.m_, nullptr)) {}
    Ref& operator=(Ref o) noexcept {
      std::swap(m_, o.m_);
      return *this;
    }
    ~Ref() { release(m_); }
    const Message* operator->() const { return m_; }
    explicit operator bool() const { return m_ != nullptr; }
    /// One more reference, as a keepalive for resp::Writer::raw_ref.
    resp::Keepalive keepalive() const;

   private:
    friend class Message;
    explicit Ref(Message* m) : m_(m) {}
    static void release(Message* m) noexcept;
    Message* m_ = nullptr;
  };

  /// ["message"|"smessage", channel, payload] (`kind` is the first element).
  static Ref make(std::string_view kind, std::string_view channel, std::string_view payload);
  /// ["pmessage", pattern, channel, payload].
  static Ref make_pattern(std::string_view pattern, std::string_view channel,
                          std::string_view payload);
  /// A frame whose type byte is `type` in every protocol, `body` after it (a MONITOR line:
  /// '+' and "<time> [0 <origin>] ...\r\n").
  static Ref make_line(char type, std::string body);

  /// The frame's type byte for a client of RESP `protocol`: '*' or '>' for a Pub/Sub message,
  /// the fixed one of a make_line frame.
  char type(int protocol) const { return type_ != 0 ? type_ : protocol >= 3 ? '>' : '*'; }

  /// The frame after its type byte ("3\r\n$7\r\nmessage\r\n...").
  std::string_view body() const { return body_; }
  /// Bytes the frame takes on the wire (type byte included): what output limits count.
  size_t wire_size() const { return body_.size() + 1; }

 private:
  Message() = default;
  std::atomic<uint32_t> refs_{1};
  char type_ = 0;  // 0: by protocol
  std::string body_;
};
using MessageRef = Message::Ref;

/// A client's mailbox: publishers on any thread deliver() into it; its connection's thread
/// take()s what arrived and writes it. Thread-safe; the mutex is a leaf (nothing is called
/// under it).
class Subscriber {
 public:
  struct Hooks {
    /// Called (on the publisher's thread) when a delivery finds the mailbox empty: must only
    /// post work to the client's own thread (it may run under a registry shard lock).
    std::function<void()> wake;
    /// Called after each delivery with the bytes queued in this mailbox: true when the
    /// client's output (these bytes and what its connection holds) is past its output buffer
    /// limit; the mailbox then closes (later deliveries are dropped) and `overflow` is called
    /// once.
    std::function<bool(size_t queued_bytes)> over_limit;
    std::function<void()> overflow;
  };
  /// The hooks are called under the mailbox's mutex, so once close() returns none runs or will
  /// run: the client may go away then, whatever publishers still hold the mailbox.
  explicit Subscriber(Hooks hooks) : hooks_(std::move(hooks)) {}

  /// Queues `msg` for the client. Dropped once closed.
  void deliver(const MessageRef& msg);
  /// Moves every queued message into `out` (appended, oldest first). The client's thread.
  void take(std::vector<MessageRef>* out);
  /// Whether messages are queued (a hint: relaxed).
  bool pending() const { return count_.load(std::memory_order_relaxed) != 0; }
  /// Messages and bytes (wire size) queued now.
  size_t queued() const { return count_.load(std::memory_order_relaxed); }
  size_t queued_bytes() const { return bytes_.load(std::memory_order_relaxed); }
  /// No more deliveries (the client closes or passed its limit); drops what is queued.
  void close();

 private:
  const Hooks hooks_;
  std::mutex mu_;
  std::vector<MessageRef> queue_;
  bool closed_ = false;
  std::atomic<size_t> count_{0}, bytes_{0};
};

/// The two channel namespaces: PUBLISH/SUBSCRIBE's and SPUBLISH/SSUBSCRIBE's (sharded
/// channels: in cluster mode a shard channel is a key and lives on its slot's node).
enum class ChannelKind : uint8_t { kGlobal = 0, kShard = 1 };

/// The server's Pub/Sub registry. Thread-safe; see the file comment for its locks.
class PubSub {
 public:
  PubSub();
  ~PubSub();
  PubSub(const PubSub&) = delete;
  PubSub& operator=(const PubSub&) = delete;

  /// Adds `sub` to `channel`'s subscribers. False when it was one already.
  bool subscribe(ChannelKind kind, std::string_view channel,
                 const std::shared_ptr<Subscriber>& sub);
  /// Removes `sub` from `channel`'s subscribers. False when it was none.
  bool unsubscribe(ChannelKind kind, std::string_view channel, const Subscriber* sub);
  /// Adds `sub` to the subscribers of glob `pattern` (Redis's stringmatch rules).
  bool psubscribe(std::string_view pattern, const std::shared_ptr<Subscriber>& sub);
  bool punsubscribe(std::string_view pattern, const Subscriber* sub);

  /// Delivers `payload` on `channel` to its subscribers, and (kGlobal) to the subscribers of
  /// every pattern it matches. Returns the deliveries made, as PUBLISH replies (a client
  /// subscribed to the channel and to a matching pattern counts twice).
  int64_t publish(ChannelKind kind, std::string_view channel, std::string_view payload);

  /// Channels with at least one subscriber whose name matches glob `pattern` (every one when
  /// `pattern` is empty), in no particular order (PUBSUB CHANNELS|SHARDCHANNELS).
  std::vector<std::string> channels(ChannelKind kind, std::string_view pattern) const;
  /// Subscribers of `channel`, patterns not counted (PUBSUB NUMSUB|SHARDNUMSUB).
  int64_t numsub(ChannelKind kind, std::string_view channel) const;
  /// Patterns with at least one subscriber (PUBSUB NUMPAT: unique patterns).
  int64_t numpat() const;
  /// Channels of `kind` with at least one subscriber (INFO pubsub_channels,
  /// pubsubshard_channels). Cheap: a counter.
  int64_t channel_count(ChannelKind kind) const {
    return channel_count_[static_cast<int>(kind)].load(std::memory_order_relaxed);
  }
  /// True while nobody subscribes to anything: keyspace notifications then build nothing.
  bool idle() const { return subscriptions_.load(std::memory_order_relaxed) == 0; }

 private:
  struct Hash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  using Subscribers = std::vector<std::shared_ptr<Subscriber>>;
  using ChannelMap = std::unordered_map<std::string, Subscribers, Hash, std::equal_to<>>;
  struct alignas(64) Shard {
    mutable std::mutex mu;
    ChannelMap channels[2];  // by ChannelKind
  };
  struct Pattern {
    std::string pattern;
    Subscribers subs;
  };
  using Patterns = std::vector<Pattern>;
  static constexpr size_t kShards = 64;

  Shard& shard_of(std::string_view channel) const;

  std::unique_ptr<Shard[]> shards_;
  std::mutex patterns_mu_;  // writers of patterns_ only
  std::atomic<std::shared_ptr<const Patterns>> patterns_;
  std::atomic<size_t> pattern_count_{0};  // patterns with subscribers: publish's fast path
  std::atomic<int64_t> subscriptions_{0};
  std::atomic<int64_t> channel_count_[2] = {0, 0};
};

/// One connection's side of Pub/Sub: its subscriptions, used on the connection's thread only,
/// with counts any thread may read (CLIENT LIST), and the mailbox it subscribes with.
class PubSubClient {
 public:
  explicit PubSubClient(PubSub& registry) : registry_(registry) {}
  ~PubSubClient() { unsubscribe_all(); }
  PubSubClient(const PubSubClient&) = delete;
  PubSubClient& operator=(const PubSubClient&) = delete;

  /// The mailbox to subscribe with (set once, on the connection's thread, before the first
  /// subscription). mailbox() may be read from any thread (CLIENT LIST): null until set.
  void set_mailbox(std::shared_ptr<Subscriber> mailbox) {
    mailbox_ = std::move(mailbox);
    mailbox_raw_.store(mailbox_.get(), std::memory_order_release);
  }
  bool has_mailbox() const { return mailbox() != nullptr; }
  /// The mailbox's owning pointer (the connection's thread only), to hand to MONITOR.
  const std::shared_ptr<Subscriber>& mailbox_owner() const { return mailbox_; }
  Subscriber* mailbox() const { return mailbox_raw_.load(std::memory_order_acquire); }

  /// Each returns whether the subscription was added / removed (false: already / not there).
  bool subscribe(ChannelKind kind, std::string_view channel);
  bool unsubscribe(ChannelKind kind, std::string_view channel);
  bool psubscribe(std::string_view pattern);
  bool punsubscribe(std::string_view pattern);
  /// The channels (of `kind`) or patterns subscribed now, in no particular order.
  std::vector<std::string> channels(ChannelKind kind) const;
  std::vector<std::string> patterns() const;
  /// Drops every subscription, with no reply (RESET, the connection closing).
  void unsubscribe_all();

  /// Counts (any thread): channels, patterns, shard channels.
  int64_t channel_count() const { return n_[0].load(std::memory_order_relaxed); }
  int64_t shard_count() const { return n_[1].load(std::memory_order_relaxed); }
  int64_t pattern_count() const { return n_pat_.load(std::memory_order_relaxed); }
  /// What SUBSCRIBE/UNSUBSCRIBE/(P)... reply as the count: channels + patterns (Redis's
  /// clientSubscriptionsCount); SSUBSCRIBE's is shard_count().
  int64_t subscription_count() const { return channel_count() + pattern_count(); }
  /// Subscribed to anything (Redis's CLIENT_PUBSUB flag). Any thread.
  bool active() const { return subscription_count() + shard_count() != 0; }
  /// Heap bytes of the subscriptions' names (CLIENT LIST tot-mem).
  size_t memory() const { return names_bytes_.load(std::memory_order_relaxed); }

 private:
  using Set = std::unordered_set<std::string>;
  void count(const std::string& name, int delta);
  PubSub& registry_;
  std::shared_ptr<Subscriber> mailbox_;
  std::atomic<Subscriber*> mailbox_raw_{nullptr};
  Set channels_[2], patterns_;
  std::atomic<int64_t> n_[2] = {0, 0};
  std::atomic<int64_t> n_pat_{0};
  std::atomic<size_t> names_bytes_{0};
};

}  // namespace server
