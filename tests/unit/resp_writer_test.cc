// Unit tests of resp::Writer.
#include <doctest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "resp/writer.h"
#include "test_keepalive.h"

using resp::Writer;

namespace {

// The pending output of `w` as one string, built from buffers().
std::string stream(const Writer& w) {
  std::vector<resp::OutBuffer> bufs;
  w.buffers(&bufs);
  std::string s;
  for (const auto& b : bufs) s.append(b.data, b.size);
  CHECK(s.size() == w.pending_bytes());
  return s;
}

// Output of `fn` under RESP2 and RESP3.
std::pair<std::string, std::string> both(const std::function<void(Writer&)>& fn) {
  Writer w2(2), w3(3);
  fn(w2);
  fn(w3);
  return {stream(w2), stream(w3)};
}

using Pair = std::pair<std::string, std::string>;

}  // namespace

TEST_CASE("writer: simple, error, integer, bulk, array are the same in RESP2 and RESP3") {
  CHECK(both([](Writer& w) { w.simple("PONG"); }) == Pair{"+PONG\r\n", "+PONG\r\n"});
  CHECK(both([](Writer& w) { w.ok(); }) == Pair{"+OK\r\n", "+OK\r\n"});
  CHECK(both([](Writer& w) { w.simple("a\r\nb"); }) == Pair{"+a  b\r\n", "+a  b\r\n"});
  CHECK(both([](Writer& w) { w.error("ERR bad\r\nthing\n"); }) ==
        Pair{"-ERR bad  thing \r\n", "-ERR bad  thing \r\n"});
  CHECK(both([](Writer& w) { w.integer(0); }) == Pair{":0\r\n", ":0\r\n"});
  CHECK(both([](Writer& w) { w.integer(-42); }) == Pair{":-42\r\n", ":-42\r\n"});
  CHECK(both([](Writer& w) { w.integer(INT64_MIN); }) ==
        Pair{":-9223372036854775808\r\n", ":-9223372036854775808\r\n"});
  CHECK(both([](Writer& w) { w.integer(INT64_MAX); }) ==
        Pair{":9223372036854775807\r\n", ":9223372036854775807\r\n"});
  CHECK(both([](Writer& w) { w.bulk("hello"); }) == Pair{"$5\r\nhello\r\n", "$5\r\nhello\r\n"});
  CHECK(both([](Writer& w) { w.bulk(""); }) == Pair{"$0\r\n\r\n", "$0\r\n\r\n"});
  CHECK(both([](Writer& w) { w.bulk(std::string_view("a\r\n\0b", 5)); }) ==
        Pair{std::string("$5\r\na\r\n\0b\r\n", 11), std::string("$5\r\na\r\n\0b\r\n", 11)});
  CHECK(both([](Writer& w) { w.array(3); }) == Pair{"*3\r\n", "*3\r\n"});
  CHECK(both([](Writer& w) { w.array(0); }) == Pair{"*0\r\n", "*0\r\n"});
  CHECK(both([](Writer& w) { w.raw("+RAW\r\n"); }) == Pair{"+RAW\r\n", "+RAW\r\n"});
}

TEST_CASE("writer: RESP2 downgrades of RESP3 types") {
  CHECK(both([](Writer& w) { w.null(); }) == Pair{"$-1\r\n", "_\r\n"});
  CHECK(both([](Writer& w) { w.null_array(); }) == Pair{"*-1\r\n", "_\r\n"});
  CHECK(both([](Writer& w) { w.map(2); }) == Pair{"*4\r\n", "%2\r\n"});
  CHECK(both([](Writer& w) { w.map(0); }) == Pair{"*0\r\n", "%0\r\n"});
  CHECK(both([](Writer& w) { w.set(3); }) == Pair{"*3\r\n", "~3\r\n"});
  CHECK(both([](Writer& w) { w.push(2); }) == Pair{"*2\r\n", ">2\r\n"});
  CHECK(both([](Writer& w) { w.boolean(true); }) == Pair{":1\r\n", "#t\r\n"});
  CHECK(both([](Writer& w) { w.boolean(false); }) == Pair{":0\r\n", "#f\r\n"});
  CHECK(both([](Writer& w) { w.verbatim("txt", "Some string"); }) ==
        Pair{"$11\r\nSome string\r\n", "=15\r\ntxt:Some string\r\n"});
  CHECK(both([](Writer& w) { w.verbatim("markdown", "x"); }) ==
        Pair{"$1\r\nx\r\n", "=5\r\ntxt:x\r\n"});
}

TEST_CASE("writer: doubles as Redis 7.0 formats them") {
  CHECK(both([](Writer& w) { w.dbl(1.5); }) == Pair{"$3\r\n1.5\r\n", ",1.5\r\n"});
  CHECK(both([](Writer& w) { w.dbl(3.0); }) == Pair{"$1\r\n3\r\n", ",3\r\n"});
  CHECK(both([](Writer& w) { w.dbl(0.1); }) ==
        Pair{"$19\r\n0.10000000000000001\r\n", ",0.10000000000000001\r\n"});
  CHECK(both([](Writer& w) { w.dbl(-2.5e-300); }) ==
        Pair{"$9\r\n-2.5e-300\r\n", ",-2.5e-300\r\n"});
  CHECK(both([](Writer& w) { w.dbl(1e21); }) == Pair{"$5\r\n1e+21\r\n", ",1e+21\r\n"});
  CHECK(both([](Writer& w) { w.dbl(std::numeric_limits<double>::infinity()); }) ==
        Pair{"$3\r\ninf\r\n", ",inf\r\n"});
  CHECK(both([](Writer& w) { w.dbl(-std::numeric_limits<double>::infinity()); }) ==
        Pair{"$4\r\n-inf\r\n", ",-inf\r\n"});
  CHECK(both([](Writer& w) { w.dbl(std::nan("")); }) == Pair{"$3\r\nnan\r\n", ",nan\r\n"});
  CHECK(both([](Writer& w) { w.dbl(-std::nan("")); }) == Pair{"$3\r\nnan\r\n", ",nan\r\n"});
  // Same digits as printf("%.17g") for a spread of values.
  for (double v : {123456789.125, 1.0 / 3, -0.0, 5e-324, 1.7976931348623157e308, 100.0}) {
    char want[64];
    std::snprintf(want, sizeof(want), ",%.17g\r\n", v);
    Writer w(3);
    w.dbl(v);
    CHECK(stream(w) == want);
  }
}

TEST_CASE("writer: protocol switch and a composed reply") {
  Writer w;
  CHECK(w.protocol() == 2);
  CHECK(w.empty());
  w.map(1);
  w.bulk("k");
  w.null();
  w.set_protocol(3);
  CHECK(w.protocol() == 3);
  w.map(1);
  w.bulk("k");
  w.null();
  CHECK(stream(w) == "*2\r\n$1\r\nk\r\n$-1\r\n%1\r\n$1\r\nk\r\n_\r\n");
  w.clear();
  CHECK(w.empty());
  CHECK(w.pending_bytes() == 0);
  CHECK(stream(w).empty());
}

TEST_CASE("writer: bulk_ref copies small values and drops their keepalive at once") {
  auto value = std::make_shared<std::string>("small value");
  Writer w;
  w.bulk_ref(*value, keep(value));
  CHECK(value.use_count() == 1);
  std::vector<resp::OutBuffer> bufs;
  w.buffers(&bufs);
  CHECK(bufs.size() == 1);
  CHECK(stream(w) == "$11\r\nsmall value\r\n");
}

TEST_CASE("writer: bulk_ref references large values until clear()") {
  auto a = std::make_shared<std::string>(Writer::kRefThreshold, 'a');
  auto b = std::make_shared<std::string>(Writer::kRefThreshold + 7, 'b');
  auto c = std::make_shared<std::string>(100000, 'c');
  const std::string a_len = std::to_string(a->size());
  const std::string b_len = std::to_string(b->size());

  Writer w(3);
  w.array(4);
  w.bulk_ref(*a, keep(a));
  w.integer(7);
  w.bulk_ref(*b, keep(b));
  w.bulk_ref(*c, keep(c));  // two references back to back
  CHECK(a.use_count() == 2);
  CHECK(b.use_count() == 2);
  CHECK(c.use_count() == 2);

  const std::string expected = "*4\r\n$" + a_len + "\r\n" + *a + "\r\n:7\r\n$" + b_len + "\r\n" +
                               *b + "\r\n$100000\r\n" + *c + "\r\n";
  CHECK(w.pending_bytes() == expected.size());
  CHECK(stream(w) == expected);

  std::vector<resp::OutBuffer> bufs;
  w.buffers(&bufs);
  REQUIRE(bufs.size() == 7);  // head, a, mid, b, mid, c, tail
  CHECK(bufs[1].data == a->data());
  CHECK(bufs[3].data == b->data());
  CHECK(bufs[5].data == c->data());
  CHECK(std::string(bufs[6].data, bufs[6].size) == "\r\n");

  w.clear();
  CHECK(a.use_count() == 1);
  CHECK(b.use_count() == 1);
  CHECK(c.use_count() == 1);
  CHECK(w.empty());
  w.buffers(&bufs);
  CHECK(bufs.empty());

  // A reference as the very first output: no empty inline buffer before it.
  w.bulk_ref(*a, keep(a));
  w.buffers(&bufs);
  REQUIRE(bufs.size() == 3);
  CHECK(std::string(bufs[0].data, bufs[0].size) == "$" + a_len + "\r\n");
  CHECK(bufs[1].data == a->data());
  CHECK(a.use_count() == 2);
  w.clear();
  CHECK(a.use_count() == 1);
}

TEST_CASE("keepalive: releases exactly once, moves without releasing") {
  static int released = 0;
  released = 0;
  int object = 0;
  auto release = [](void* p) noexcept {
    CHECK(p != nullptr);
    ++released;
  };
  {
    resp::Keepalive a(&object, release);
    CHECK(a.get() == &object);
    const bool same_release = a.releaser() == static_cast<resp::Keepalive::Release>(release);
    CHECK(same_release);
    resp::Keepalive b(std::move(a));
    CHECK(!a);
    CHECK(b.get() == &object);
    resp::Keepalive c;
    c = std::move(b);
    CHECK(released == 0);
    c = resp::Keepalive(&object, release);  // the old reference goes
    CHECK(released == 1);
    c.reset();
    CHECK(released == 2);
    c.reset();
    CHECK(released == 2);
    resp::Keepalive d(&object, release);
  }
  CHECK(released == 3);
  resp::Keepalive empty(nullptr, release);  // holds nothing: never calls release
  empty.reset();
  CHECK(released == 3);
  CHECK(sizeof(resp::Keepalive) == 2 * sizeof(void*));
}

TEST_CASE("writer: errors are counted and observed; rewind drops a partial reply") {
  Writer w;
  std::vector<std::string> seen;
  w.set_error_observer(
      [](void* arg, std::string_view text) {
        static_cast<std::vector<std::string>*>(arg)->emplace_back(text);
      },
      &seen);
  w.simple("OK");
  w.error("ERR one");
  CHECK(w.errors() == 1);
  CHECK(seen == std::vector<std::string>{"ERR one"});

  auto big = std::make_shared<std::string>(Writer::kRefThreshold, 'x');
  const Writer::Mark m = w.mark();
  w.array(2);
  w.bulk_ref(*big, keep(big));
  w.error("WRONGTYPE two");
  CHECK(w.errors() == 2);
  CHECK(big.use_count() == 2);
  w.rewind(m);
  CHECK(big.use_count() == 1);  // the reference went with the dropped part
  CHECK(w.errors() == 1);
  CHECK(stream(w) == "+OK\r\n-ERR one\r\n");
  w.clear();
  CHECK(w.errors() == 1);  // clear() keeps the count
}

TEST_CASE("writer: shrink gives back the buffers only when nothing is pending") {
  resp::Writer w;
  for (int i = 0; i < 10000; ++i) w.bulk("0123456789");
  const size_t grown = w.allocated_bytes();
  CHECK(grown >= w.pending_bytes());
  w.shrink();  // pending output stays
  CHECK(w.allocated_bytes() == grown);
  CHECK(!w.empty());
  w.clear();
  w.shrink();
  CHECK(w.allocated_bytes() == 0);
  w.ok();
  std::vector<resp::OutBuffer> out;
  w.buffers(&out);
  REQUIRE(out.size() == 1);
  CHECK(std::string_view(out[0].data, out[0].size) == "+OK\r\n");
}
