// Unit tests of the replication stream's pieces (cluster/repl_frame.h, repl_backlog.h): frames
// encode and decode, malformed headers are refused, the backlog turns every kind of keyspace
// change into a frame in change order with the right offsets, reads resume only at frame
// boundaries, and trimming keeps what readers still need within the slack. The feed and the
// link (sockets, threads) are tested end to end in tests/integration/test_replication.py.
#include <doctest.h>

#include <cstring>
#include <string>
#include <vector>

#include "cluster/repl_backlog.h"
#include "cluster/repl_frame.h"
#include "tiering/key_lock.h"
#include "tiering/keyspace.h"

using namespace cluster;

namespace {

struct Decoded {
  FrameType type;
  std::string key, value;
  int64_t expire_ms;
  uint64_t offset;
};

std::vector<Decoded> decode_all(const std::vector<ReplBacklog::FramePtr>& frames) {
  std::vector<Decoded> out;
  for (const auto& f : frames) {
    const auto h = decode_header(f->head.data());
    REQUIRE(h);
    REQUIRE(f->head.size() == FrameHeader::kSize + h->key_len);
    Decoded d{h->type, f->head.substr(FrameHeader::kSize), "", h->expire_ms, f->offset};
    if (h->type == FrameType::kSet) {
      REQUIRE(f->value);
      REQUIRE(f->value->size() == h->value_len);
      d.value = std::string(f->value->view());
    }
    out.push_back(std::move(d));
  }
  return out;
}

}  // namespace

TEST_CASE("repl frame: header round trip, limits and unknown types refused") {
  char buf[FrameHeader::kSize];
  encode_header({FrameType::kSet, 5, 1234567, -7}, buf);
  const auto h = decode_header(buf);
  REQUIRE(h);
  CHECK(h->type == FrameType::kSet);
  CHECK(h->key_len == 5);
  CHECK(h->value_len == 1234567);
  CHECK(h->expire_ms == -7);
  CHECK(h->frame_size() == FrameHeader::kSize + 5 + 1234567);

  std::string s;
  append_frame_head(s, FrameType::kAck, {}, 99, 0);
  REQUIRE(s.size() == FrameHeader::kSize);
  CHECK(decode_header(s.data())->value_len == 99);

  buf[0] = 0;  // no such type
  CHECK_FALSE(decode_header(buf));
  buf[0] = 42;
  CHECK_FALSE(decode_header(buf));
  encode_header({FrameType::kSet, kMaxFrameKey + 1, 1, 0}, buf);
  CHECK_FALSE(decode_header(buf));
  encode_header({FrameType::kSet, 1, kMaxFrameValue + 1, 0}, buf);
  CHECK_FALSE(decode_header(buf));
  // A PING's value_len is not a length: it is never refused for size.
  encode_header({FrameType::kAck, 0, ~uint64_t{0}, 0}, buf);
  CHECK(decode_header(buf));
}

TEST_CASE("repl backlog: every change of the keyspace is one frame, in order, with offsets") {
  tiering::Keyspace ks(4);
  auto backlog = std::make_shared<ReplBacklog>(1000);
  ks.add_observer(backlog.get());
  const int64_t now = tiering::now_ms();
  {
    tiering::KeyLock lock(ks, "a", now);
    lock.set("a", tiering::ValueRef::copy_of("hello"), now + 60000);
  }
  {
    tiering::KeyLock lock(ks, "a", now);
    lock.set_expire(lock.find("a"), 0);
  }
  {
    tiering::KeyLock lock(ks, "a", now);
    lock.remove(lock.find("a"));
  }
  ks.flush(false);
  ks.remove_observer(backlog.get());

  std::vector<ReplBacklog::FramePtr> frames;
  REQUIRE(backlog->read(1000, &frames, UINT64_MAX));
  const auto seen = decode_all(frames);
  REQUIRE(seen.size() == 4);
  CHECK(seen[0].type == FrameType::kSet);
  CHECK(seen[0].key == "a");
  CHECK(seen[0].value == "hello");
  CHECK(seen[0].expire_ms == now + 60000);  // absolute, as the keyspace holds it
  CHECK(seen[1].type == FrameType::kExpire);
  CHECK(seen[1].expire_ms == 0);
  CHECK(seen[2].type == FrameType::kDelete);
  CHECK(seen[3].type == FrameType::kFlush);
  // Offsets: each frame starts where the previous one ended.
  CHECK(seen[0].offset == 1000);
  CHECK(seen[1].offset == 1000 + FrameHeader::kSize + 1 + 5);
  CHECK(seen[2].offset == seen[1].offset + FrameHeader::kSize + 1);
  CHECK(backlog->offset() == seen[3].offset + FrameHeader::kSize);

  // Resuming: at a boundary or the end, never inside a frame or before the start.
  CHECK(backlog->can_resume_from(seen[2].offset));
  CHECK(backlog->can_resume_from(backlog->offset()));
  CHECK_FALSE(backlog->can_resume_from(seen[0].offset + 3));
  CHECK_FALSE(backlog->can_resume_from(999));
  frames.clear();
  CHECK_FALSE(backlog->read(seen[0].offset + 1, &frames, UINT64_MAX));
  REQUIRE(backlog->read(seen[2].offset, &frames, 1));  // at least one whole frame
  CHECK(frames.size() == 1);
}

TEST_CASE("repl backlog: a frame references the value; the value then changes by copy") {
  tiering::Keyspace ks(1);
  auto backlog = std::make_shared<ReplBacklog>(0);
  ks.add_observer(backlog.get());
  const int64_t now = tiering::now_ms();
  {
    tiering::KeyLock lock(ks, "k", now);
    lock.set("k", tiering::ValueRef::copy_of("12345678"), 0);
    // The backlog holds a reference: no change in place is possible.
    CHECK(lock.writable_in_place(lock.find("k"), 8) == nullptr);
  }
  std::vector<ReplBacklog::FramePtr> frames;
  REQUIRE(backlog->read(0, &frames, UINT64_MAX));
  REQUIRE(frames.size() == 1);
  CHECK(frames[0]->value->view() == "12345678");
  ks.remove_observer(backlog.get());
}

TEST_CASE("repl backlog: trimming keeps repl-backlog-size, and what a reader needs within slack") {
  auto backlog = std::make_shared<ReplBacklog>(0);
  const uint64_t frame = FrameHeader::kSize + 3;  // a PING with a 3-byte key
  backlog->set_limits(/*keep_bytes=*/frame * 4, /*reader_slack=*/frame * 4);
  for (int i = 0; i < 10; ++i) backlog->append(FrameType::kPing, "abc", {}, i);
  backlog->trim();
  CHECK(backlog->held_bytes() == frame * 4);
  CHECK(backlog->first_offset() == frame * 6);

  // A reader at frame 7 holds trimming back (within the slack) ...
  const uint64_t reader = backlog->add_reader(frame * 7);
  for (int i = 0; i < 4; ++i) backlog->append(FrameType::kPing, "abc", {}, i);
  backlog->trim();
  CHECK(backlog->first_offset() == frame * 7);
  // ... until the backlog passes keep + slack: then the reader loses its place.
  for (int i = 0; i < 10; ++i) backlog->append(FrameType::kPing, "abc", {}, i);
  backlog->trim();
  CHECK(backlog->held_bytes() <= frame * 8);
  CHECK_FALSE(backlog->can_resume_from(frame * 7));
  backlog->remove_reader(reader);
  backlog->trim();
  CHECK(backlog->held_bytes() == frame * 4);
}
