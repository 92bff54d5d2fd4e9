// Unit tests of slot migration's pieces below the server (cluster/repl_feed.h with a slot set,
// tiering/keyspace.h's hidden slots and per-slot removal): the feed copies only the migrated
// slots' keys and streams only their changes (plus the frames without a key), over a real
// socket; hidden slots vanish from DBSIZE, KEYS, SCAN and RANDOMKEY but not from a replica's
// copy; remove_slot_keys goes through the write path. The whole migration (etcd, nodes,
// clients) is tested in tests/integration/test_migration.py.
#include <doctest.h>

#include <sys/socket.h>
#include <unistd.h>

#include <map>
#include <string>
#include <vector>

#include "cluster/repl_backlog.h"
#include "cluster/repl_feed.h"
#include "cluster/repl_frame.h"
#include "tiering/key_lock.h"
#include "tiering/keyspace.h"

using namespace cluster;

namespace {

// The slot of a test key is its first byte: keys "a..." are slot 97, "b..." slot 98.
uint16_t first_byte_slot(std::string_view key) {
  return key.empty() ? 0 : static_cast<uint8_t>(key[0]);
}

void set(tiering::Keyspace& ks, const std::string& key, const std::string& value) {
  const int64_t now = tiering::now_ms();
  tiering::KeyLock lock(ks, key, now);
  lock.set(key, tiering::ValueRef::copy_of(value), 0);
}

bool read_exact(int fd, char* p, size_t n) {
  while (n > 0) {
    const ssize_t r = ::recv(fd, p, n, 0);
    if (r <= 0) return false;
    p += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

struct Got {
  FrameType type;
  std::string key, value;
};

Got read_frame(int fd) {
  char hb[FrameHeader::kSize];
  REQUIRE(read_exact(fd, hb, sizeof hb));
  const auto h = decode_header(hb);
  REQUIRE(h);
  Got g{h->type, std::string(h->key_len, '\0'), ""};
  REQUIRE(read_exact(fd, g.key.data(), g.key.size()));
  if (h->type == FrameType::kSet) {
    g.value.resize(h->value_len);
    REQUIRE(read_exact(fd, g.value.data(), g.value.size()));
  }
  return g;
}

}  // namespace

TEST_CASE("migration feed: only the slot set's keys are copied, only their changes streamed") {
  tiering::Keyspace ks(4, &first_byte_slot);
  set(ks, "a1", "one");
  set(ks, "a2", "two");
  set(ks, "b1", "other slot");
  auto backlog = std::make_shared<ReplBacklog>(0);
  ks.add_observer(backlog.get());

  int sv[2];
  REQUIRE(::socketpair(AF_UNIX, SOCK_STREAM, 0, sv) == 0);
  auto slots = std::make_shared<SlotSet>();
  slots->set('a');
  FeedOptions o;
  o.socket = std::make_unique<ReplSocket>(sv[0]);
  o.full = true;
  o.start_offset = backlog->offset();
  o.keyspace = &ks;
  o.backlog = backlog;
  o.slots = slots;
  ReplicaFeed feed(std::move(o));
  feed.start();

  std::map<std::string, std::string> copy;
  for (;;) {
    const Got g = read_frame(sv[1]);
    if (g.type == FrameType::kSnapshotEnd) break;
    REQUIRE(g.type == FrameType::kSet);
    copy[g.key] = g.value;
  }
  CHECK(copy == std::map<std::string, std::string>{{"a1", "one"}, {"a2", "two"}});
  CHECK(feed.copied_keys() == 2);

  // Changes after the copy began: those of slot 'a' and the keyless frames come through.
  set(ks, "b2", "not sent");
  set(ks, "a3", "three");
  backlog->append(FrameType::kPing, {}, {}, 123);
  {
    const int64_t now = tiering::now_ms();
    tiering::KeyLock lock(ks, "a1", now);
    lock.remove(lock.find("a1"));
  }
  backlog->append(FrameType::kTopology, R"({"version":9})", {}, 0);
  Got g = read_frame(sv[1]);
  CHECK((g.type == FrameType::kSet && g.key == "a3" && g.value == "three"));
  g = read_frame(sv[1]);
  CHECK(g.type == FrameType::kPing);
  g = read_frame(sv[1]);
  CHECK((g.type == FrameType::kDelete && g.key == "a1"));
  g = read_frame(sv[1]);
  CHECK((g.type == FrameType::kTopology && g.key == R"({"version":9})"));
  // Everything up to the backlog's end was read; what went out is what the target counts.
  for (int i = 0; i < 200 && feed.sent_offset() < backlog->offset(); ++i) usleep(5000);
  CHECK(feed.sent_offset() == backlog->offset());
  const uint64_t expected = (FrameHeader::kSize + 2 + 5) + FrameHeader::kSize +
                            (FrameHeader::kSize + 2) + (FrameHeader::kSize + 13);
  CHECK(feed.stream_sent() == expected);
  // The target's ACK is read by the feed.
  char ack[FrameHeader::kSize];
  encode_header({FrameType::kAck, 0, expected, 0}, ack);
  REQUIRE(::send(sv[1], ack, sizeof ack, 0) == static_cast<ssize_t>(sizeof ack));
  for (int i = 0; i < 200 && feed.ack_offset() != expected; ++i) usleep(5000);
  CHECK(feed.ack_offset() == expected);
  feed.stop();
  ::close(sv[1]);
  ks.remove_observer(backlog.get());
}

TEST_CASE("keyspace: hidden slots are passed over by the listings, not by a replica's copy") {
  tiering::Keyspace ks(4, &first_byte_slot);
  set(ks, "a1", "1");
  set(ks, "a2", "2");
  set(ks, "b1", "3");
  const int64_t now = tiering::now_ms();
  CHECK_FALSE(ks.any_hidden());
  ks.set_hidden('a', true);
  ks.set_hidden('a', true);  // twice: counted once
  CHECK(ks.any_hidden());
  CHECK(ks.hidden('a'));
  CHECK_FALSE(ks.hidden('b'));
  CHECK(ks.size() == 1);
  std::vector<std::string> listed;
  ks.for_each_live(now, [&](std::string_view k, const tiering::Entry&) { listed.emplace_back(k); });
  CHECK(listed == std::vector<std::string>{"b1"});
  std::vector<std::string> scanned, all;
  uint64_t cursor = 0;
  do {
    cursor = ks.scan(cursor, 10, now, [&](const std::string& k, const tiering::Entry&) { scanned.push_back(k); });
  } while (cursor != 0);
  CHECK(scanned == std::vector<std::string>{"b1"});
  do {
    cursor = ks.scan(cursor, 10, now, [&](const std::string& k, const tiering::Entry&) { all.push_back(k); },
                     /*include_hidden=*/true);
  } while (cursor != 0);
  CHECK(all.size() == 3);
  for (int i = 0; i < 20; ++i) CHECK(ks.random_key(now) == std::optional<std::string>("b1"));
  CHECK(ks.keys_in_slot('a', 10, now).empty());
  CHECK(ks.count_in_slot('a') == 2);  // the count is the keyspace's own (COUNTKEYSINSLOT hides)

  ks.set_hidden('a', false);
  CHECK_FALSE(ks.any_hidden());
  CHECK(ks.size() == 3);
}

TEST_CASE("keyspace: remove_slot_keys removes a slot's keys through the write path") {
  tiering::Keyspace ks(4, &first_byte_slot);
  auto backlog = std::make_shared<ReplBacklog>(0);
  ks.add_observer(backlog.get());
  for (int i = 0; i < 10; ++i) set(ks, "a" + std::to_string(i), "v");
  set(ks, "b", "stays");
  const uint64_t before = backlog->offset();
  CHECK(ks.remove_slot_keys('a', 4) == 4);
  CHECK(ks.count_in_slot('a') == 6);
  CHECK(ks.remove_slot_keys('a', 100) == 6);
  CHECK(ks.remove_slot_keys('a', 100) == 0);
  CHECK(ks.size() == 1);
  // Ten DELETE frames: replicas and the SSD tier follow.
  std::vector<ReplBacklog::FramePtr> frames;
  REQUIRE(backlog->read(before, &frames, UINT64_MAX));
  CHECK(frames.size() == 10);
  for (const auto& f : frames) CHECK(static_cast<FrameType>(f->head[0]) == FrameType::kDelete);
  ks.remove_observer(backlog.get());
}
