// Unit tests of Pub/Sub's parts (server/pubsub.h, output_limit.h, keyspace_events.h): the
// registry's counts and delivery from many threads, encoded messages, the output limit's
// check, notify-keyspace-events' letters and the mapping of keyspace changes to events.
#include <doctest.h>

#include <atomic>
#include <thread>
#include <vector>

#include "server/keyspace_events.h"
#include "server/output_limit.h"
#include "server/pubsub.h"
#include "tiering/keyspace.h"

using namespace server;

namespace {

// A subscriber that records what it got (its hooks run under the mailbox's mutex).
struct Box {
  std::atomic<int> wakes{0};
  std::shared_ptr<Subscriber> sub;
  explicit Box(size_t limit = 0, std::atomic<int>* overflows = nullptr) {
    Subscriber::Hooks h;
    h.wake = [this] { wakes.fetch_add(1); };
    if (limit != 0) {
      h.over_limit = [limit](size_t bytes) { return bytes >= limit; };
      h.overflow = [overflows] { overflows->fetch_add(1); };
    }
    sub = std::make_shared<Subscriber>(std::move(h));
  }
  std::vector<std::string> take() {
    std::vector<MessageRef> got;
    sub->take(&got);
    std::vector<std::string> out;
    for (const MessageRef& m : got) out.emplace_back(m->body());
    return out;
  }
};

}  // namespace

TEST_CASE("messages are encoded once, without their type byte") {
  MessageRef m = Message::make("message", "ch", "hi");
  CHECK(m->body() == "3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$2\r\nhi\r\n");
  CHECK(m->wire_size() == m->body().size() + 1);
  MessageRef p = Message::make_pattern("c*", "ch", "");
  CHECK(p->body() == "4\r\n$8\r\npmessage\r\n$2\r\nc*\r\n$2\r\nch\r\n$0\r\n\r\n");
  MessageRef copy = p;
  resp::Keepalive k = copy.keepalive();
  CHECK(k);
}

TEST_CASE("subscriptions, counts and delivery") {
  PubSub ps;
  CHECK(ps.idle());
  Box a, b;
  CHECK(ps.subscribe(ChannelKind::kGlobal, "news", a.sub));
  CHECK_FALSE(ps.subscribe(ChannelKind::kGlobal, "news", a.sub));
  CHECK(ps.subscribe(ChannelKind::kGlobal, "news", b.sub));
  CHECK(ps.subscribe(ChannelKind::kShard, "news", b.sub));  // another namespace
  CHECK(ps.psubscribe("n*", a.sub));
  CHECK_FALSE(ps.psubscribe("n*", a.sub));
  CHECK(ps.psubscribe("n*", b.sub));
  CHECK(ps.numsub(ChannelKind::kGlobal, "news") == 2);
  CHECK(ps.numsub(ChannelKind::kShard, "news") == 1);
  CHECK(ps.numpat() == 1);
  CHECK(ps.channels(ChannelKind::kGlobal, "") == std::vector<std::string>{"news"});
  CHECK(ps.channels(ChannelKind::kGlobal, "x*").empty());

  CHECK(ps.publish(ChannelKind::kGlobal, "news", "m") == 4);  // 2 channel + 2 pattern
  CHECK(a.wakes == 1);  // one wake while the mailbox is not taken
  CHECK(a.take().size() == 2);
  CHECK(ps.publish(ChannelKind::kShard, "news", "s") == 1);   // shard: no patterns
  CHECK(b.take().size() == 3);
  CHECK(ps.publish(ChannelKind::kGlobal, "nothing", "m") == 2);
  CHECK(ps.publish(ChannelKind::kGlobal, "zzz", "m") == 0);

  CHECK(ps.unsubscribe(ChannelKind::kGlobal, "news", a.sub.get()));
  CHECK_FALSE(ps.unsubscribe(ChannelKind::kGlobal, "news", a.sub.get()));
  CHECK(ps.punsubscribe("n*", a.sub.get()));
  CHECK(ps.punsubscribe("n*", b.sub.get()));
  CHECK(ps.numpat() == 0);
  CHECK(ps.unsubscribe(ChannelKind::kGlobal, "news", b.sub.get()));
  CHECK(ps.unsubscribe(ChannelKind::kShard, "news", b.sub.get()));
  CHECK(ps.channels(ChannelKind::kGlobal, "").empty());
  CHECK(ps.idle());
}

TEST_CASE("a closed mailbox takes nothing; a mailbox past its limit closes once") {
  PubSub ps;
  std::atomic<int> overflows{0};
  Box small(100, &overflows);
  ps.subscribe(ChannelKind::kGlobal, "c", small.sub);
  ps.publish(ChannelKind::kGlobal, "c", std::string(40, 'x'));
  CHECK(overflows == 0);
  ps.publish(ChannelKind::kGlobal, "c", std::string(80, 'x'));  // past 100 bytes queued
  ps.publish(ChannelKind::kGlobal, "c", "more");
  CHECK(overflows == 1);
  Box c;
  ps.subscribe(ChannelKind::kGlobal, "d", c.sub);
  c.sub->close();
  ps.publish(ChannelKind::kGlobal, "d", "x");
  CHECK(c.take().empty());
}

TEST_CASE("publishers on many threads while patterns change") {
  PubSub ps;
  Box sub;
  ps.subscribe(ChannelKind::kGlobal, "ch", sub.sub);
  std::atomic<bool> stop{false};
  std::thread churn([&] {
    Box other;
    while (!stop) {
      ps.psubscribe("c*", other.sub);
      ps.punsubscribe("c*", other.sub.get());
    }
  });
  std::vector<std::thread> pubs;
  std::atomic<int> missed{0};  // doctest's checks are not thread-safe: count, check after
  for (int t = 0; t < 4; ++t)
    pubs.emplace_back([&] {
      for (int i = 0; i < 2000; ++i)
        if (ps.publish(ChannelKind::kGlobal, "ch", "m") < 1) missed.fetch_add(1);
    });
  for (auto& t : pubs) t.join();
  stop = true;
  churn.join();
  CHECK(missed == 0);
  CHECK(sub.take().size() == 8000);
}

TEST_CASE("PubSubClient keeps its counts and drops everything at the end") {
  PubSub ps;
  {
    PubSubClient c(ps);
    Box box;
    c.set_mailbox(box.sub);
    CHECK(c.subscribe(ChannelKind::kGlobal, "a"));
    CHECK_FALSE(c.subscribe(ChannelKind::kGlobal, "a"));
    CHECK(c.subscribe(ChannelKind::kShard, "s"));
    CHECK(c.psubscribe("p*"));
    CHECK(c.subscription_count() == 2);
    CHECK(c.shard_count() == 1);
    CHECK(c.active());
    CHECK(c.memory() > 0);
    CHECK(ps.numsub(ChannelKind::kGlobal, "a") == 1);
  }
  CHECK(ps.idle());
}

TEST_CASE("client-output-buffer-limit: Redis's syntax, errors and default") {
  OutputLimits l{};
  REQUIRE_FALSE(parse_output_limits(kDefaultOutputLimits, &l));
  CHECK(format_output_limits(l) == kDefaultOutputLimits);
  REQUIRE_FALSE(parse_output_limits("pubsub 1mb 512kb 10 replica 1k 2 3", &l));
  CHECK(format_output_limits(l) ==
        "normal 0 0 0 slave 1000 2 3 pubsub 1048576 524288 10");
  CHECK(*parse_output_limits("pubsub 1", &l) ==
        "Wrong number of arguments in buffer limit configuration.");
  CHECK(*parse_output_limits("master 1 1 1", &l) ==
        "Invalid client class specified in buffer limit configuration.");
  CHECK(*parse_output_limits("normal 1 1 1 pubsub x 1 1", &l) ==
        "Error in hard, soft or soft_seconds setting in buffer limit configuration.");
  CHECK(format_output_limits(l) == "normal 0 0 0 slave 1000 2 3 pubsub 1048576 524288 10");
}

TEST_CASE("the output limit: hard at once, soft after its seconds") {
  OutputLimiter lim;
  const OutputLimit hard{100, 0, 0}, soft{0, 50, 2};
  CHECK_FALSE(lim.over(hard, 99, 1000));
  CHECK(lim.over(hard, 100, 1000));
  OutputLimiter s;
  CHECK_FALSE(s.over(soft, 60, 1000));  // the clock starts
  CHECK_FALSE(s.over(soft, 60, 1002));  // 2 s: not more than 2
  CHECK(s.over(soft, 60, 1003));
  CHECK_FALSE(s.over(soft, 10, 1004));  // under it: the clock stops
  CHECK_FALSE(s.over(soft, 60, 1010));
}

TEST_CASE("notify-keyspace-events letters as Redis prints them, and T") {
  CHECK(format_notify_flags(*parse_notify_flags("KEA")) == "AKE");
  CHECK(format_notify_flags(*parse_notify_flags("gK$")) == "g$K");
  CHECK(format_notify_flags(*parse_notify_flags("")) == "");
  CHECK(format_notify_flags(*parse_notify_flags("KET")) == "TKE");
  CHECK(format_notify_flags(*parse_notify_flags("ExT")) == "xTE");
  CHECK_FALSE(parse_notify_flags("KEQ"));
  CHECK_FALSE(parse_notify_flags("a"));
}

TEST_CASE("keyspace changes name their events") {
  using tiering::Change;
  using tiering::ChangeCause;
  using tiering::ChangeKind;
  std::pair<std::string_view, uint32_t> ev[3];
  auto change = [](ChangeKind k, ChangeCause c, int64_t expire = 0, bool created = false,
                   uint8_t prev = 0) {
    return Change{k, c, prev, 0, 1, "key", nullptr, expire, created};
  };
  KeyEvents setrange{.set = "setrange"};
  REQUIRE(events_of(change(ChangeKind::kSet, ChangeCause::kCommand, 0, true), &setrange, false,
                    ev) == 2);
  CHECK(ev[0].first == "new");
  CHECK(ev[1].first == "setrange");
  CHECK(ev[1].second == kNotifyString);
  REQUIRE(events_of(change(ChangeKind::kSet, ChangeCause::kCommand, 5), nullptr, true, ev) == 2);
  CHECK(ev[0].first == "set");
  CHECK(ev[1].first == "expire");
  CHECK(events_of(change(ChangeKind::kSet, ChangeCause::kCommand, 5), nullptr, false, ev) == 1);
  KeyEvents rename{.set = "rename_to", .set_generic = true, .del = "rename_from"};
  REQUIRE(events_of(change(ChangeKind::kDelete, ChangeCause::kCommand), &rename, false, ev) == 1);
  CHECK(ev[0].first == "rename_from");
  REQUIRE(events_of(change(ChangeKind::kExpire, ChangeCause::kCommand), nullptr, false, ev) == 1);
  CHECK(ev[0].first == "persist");
  REQUIRE(events_of(change(ChangeKind::kDelete, ChangeCause::kExpiry), &rename, false, ev) == 1);
  CHECK(ev[0].first == "expired");
  CHECK(ev[0].second == (kNotifyExpired | kNotifyTier));
  REQUIRE(events_of(change(ChangeKind::kDelete, ChangeCause::kEviction), nullptr, false, ev) == 1);
  CHECK(ev[0].first == "evicted");
  REQUIRE(events_of(change(ChangeKind::kDemoted, ChangeCause::kTiering), nullptr, false, ev) == 1);
  CHECK(ev[0].first == "demoted");
  CHECK(events_of(change(ChangeKind::kPromoted, ChangeCause::kTiering, 0, false,
                         tiering::kEntryTransient),
                  nullptr, false, ev) == 0);  // loaded for one command only
  CHECK(events_of(change(ChangeKind::kRecovered, ChangeCause::kTiering), nullptr, false, ev) == 0);
}
