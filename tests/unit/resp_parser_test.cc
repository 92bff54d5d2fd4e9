// Unit tests of resp::Parser and resp::split_inline_args.
#include <doctest.h>

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "resp/parser.h"
#include "test_keepalive.h"

using resp::Parser;
using Status = resp::Parser::Status;
using Args = std::vector<std::string>;
using resp::split_inline_args;

namespace {

// Feeds the chunks in order, re-feeding unconsumed bytes after each request. Returns one entry
// per request (inline ones prefixed with "inline:"), or "error:<text>" and stops.
std::vector<Args> parse_chunks(Parser& parser, const std::vector<std::string>& chunks) {
  std::vector<Args> out;
  for (const std::string& chunk : chunks) {
    size_t off = 0;
    while (off < chunk.size()) {
      Status st;
      const size_t n = parser.feed(chunk.data() + off, chunk.size() - off, &st);
      REQUIRE(n <= chunk.size() - off);
      off += n;
      if (st == Status::kError) {
        out.push_back({"error:" + parser.error()});
        return out;
      }
      if (st == Status::kNeedMore) {
        REQUIRE(off == chunk.size());
        continue;
      }
      const resp::Request& req = parser.request();
      Args a{req.inline_command() ? "inline:" : "multibulk:"};
      for (size_t i = 0; i < req.size(); ++i) a.emplace_back(req[i]);
      out.push_back(std::move(a));
    }
  }
  return out;
}

std::vector<Args> parse_all(Parser& parser, const std::string& in) {
  return parse_chunks(parser, {in});
}

// The error text after feeding `in` in one piece ("" when no error).
std::string error_of(const std::string& in, resp::ParserLimits limits = {}, bool unauth = false) {
  Parser parser(limits);
  parser.set_unauthenticated(unauth);
  auto reqs = parse_all(parser, in);
  if (reqs.empty() || reqs.back()[0].rfind("error:", 0) != 0) return "";
  return reqs.back()[0].substr(6);
}

// A BulkAllocator over shared char arrays that remembers what it handed out.
struct TestAllocator {
  std::vector<std::shared_ptr<char[]>> given;
  bool fail = false;
  resp::BulkAllocator fn() {
    return [this](size_t len) {
      if (fail) return resp::LargeBulk{};
      std::shared_ptr<char[]> buf(new char[len + 1]);
      given.push_back(buf);
      return resp::LargeBulk{buf.get(), keep(buf)};
    };
  }
};

const std::string kCorpus =
    "*3\r\n$3\r\nSET\r\n$3\r\nkey\r\n$12\r\nhello\r\nworld\r\n"  // CRLF inside a bulk
    "\r\n"                                                       // empty inline line
    "*0\r\n*-1\r\n"                                              // skipped counts
    "PING\r\n"
    "  set k \"a b\\x41\" 'it\\'s'\n"                             // inline with quotes, LF only
    "*2\r\n$4\r\nECHO\r\n$0\r\n\r\n"                             // empty bulk
    "*1\r\n$20\r\n01234567890123456789\r\n"                      // large with a threshold of 16
    "GET k\r\n";

const std::vector<Args> kCorpusRequests = {
    {"multibulk:", "SET", "key", "hello\r\nworld"},
    {"inline:", "PING"},
    {"inline:", "set", "k", "a bA", "it's"},
    {"multibulk:", "ECHO", ""},
    {"multibulk:", "01234567890123456789"},
    {"inline:", "GET", "k"},
};

}  // namespace

TEST_CASE("parser: pipelined batch, one request per feed") {
  Parser parser;
  const std::string in =
      "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n*2\r\n$3\r\nGET\r\n$1\r\nk\r\nPING\r\n";
  const std::vector<std::string_view> want[] = {{"SET", "k", "hello"}, {"GET", "k"}, {"PING"}};
  const size_t sizes[] = {31, 20, 6};
  Status st;
  size_t off = 0;
  for (size_t i = 0; i < 3; ++i) {
    const size_t n = parser.feed(in.data() + off, in.size() - off, &st);
    CHECK(st == Status::kRequest);
    CHECK(n == sizes[i]);
    CHECK(parser.request().args() == want[i]);
    CHECK(parser.request().inline_command() == (i == 2));
    CHECK(!parser.request().owner(0));
    off += n;
  }
  CHECK(parser.feed(in.data() + off, 0, &st) == 0);
  CHECK(st == Status::kNeedMore);
}

TEST_CASE("parser: whole corpus in one feed loop") {
  TestAllocator alloc;
  Parser parser({}, alloc.fn(), 16);
  CHECK(parse_all(parser, kCorpus) == kCorpusRequests);
  CHECK(alloc.given.size() == 1);
}

TEST_CASE("parser: split at every byte boundary gives identical requests") {
  for (bool with_alloc : {false, true}) {
    CAPTURE(with_alloc);
    for (size_t i = 0; i <= kCorpus.size(); ++i) {
      CAPTURE(i);
      TestAllocator alloc;
      Parser parser({}, with_alloc ? alloc.fn() : resp::BulkAllocator{}, 16);
      REQUIRE(parse_chunks(parser, {kCorpus.substr(0, i), kCorpus.substr(i)}) ==
              kCorpusRequests);
      CHECK(alloc.given.size() == (with_alloc ? 1u : 0u));
    }
    // And one byte per feed: every boundary at once.
    TestAllocator alloc;
    Parser parser({}, with_alloc ? alloc.fn() : resp::BulkAllocator{}, 16);
    std::vector<std::string> bytes;
    for (char c : kCorpus) bytes.emplace_back(1, c);
    CHECK(parse_chunks(parser, bytes) == kCorpusRequests);
  }
}

TEST_CASE("parser: errors are the same at every split") {
  resp::ParserLimits lim;
  lim.max_inline_len = 8;
  for (const std::string in : {"*2\r\n$1\r\nx\r\nfooz\r\n", "*1\r\n$123456789\r\n",
                               "*123456789\r\n", "AAAAAAAA\r\n", "PING\r\nSET \"a\r\n",
                               "*1\r\n$-1\r\n", "*1\r\n\r\n"}) {
    CAPTURE(in);
    Parser one(lim);
    const std::vector<Args> want = parse_all(one, in);
    REQUIRE(want.back()[0].rfind("error:", 0) == 0);
    for (size_t i = 0; i <= in.size(); ++i) {
      Parser parser(lim);
      CHECK(parse_chunks(parser, {in.substr(0, i), in.substr(i)}) == want);
    }
  }
}

TEST_CASE("parser: skipped empty lines and counts <= 0 are consumed in the same feed") {
  Parser parser;
  const std::string in = "\r\n\n   \t \r\n*0\r\n*-5\r\nPING\r\n";
  Status st;
  CHECK(parser.feed(in.data(), in.size(), &st) == in.size());
  CHECK(st == Status::kRequest);
  CHECK(parser.request().args() == std::vector<std::string_view>{"PING"});
}

TEST_CASE("parser: Redis 7.0 skips the bytes after a bulk and after a length line's CR") {
  Parser parser;
  auto reqs = parse_all(parser, "*1\rX$4\rYPINGxx*1\r\n$4\r\nECHO\r\n");
  CHECK(reqs == std::vector<Args>{{"multibulk:", "PING"}, {"multibulk:", "ECHO"}});
}

TEST_CASE("parser: a NUL before a line's end hides the end, as Redis 7.0's strchr does") {
  using namespace std::string_literals;
  resp::ParserLimits lim;
  lim.max_inline_len = 16;
  const std::string pad(16, 'a');
  struct Case {
    std::string in;
    std::vector<Args> want;
  };
  const std::vector<Case> cases = {
      // Nothing runs; the line waits for more than max_inline_len bytes, then is too big.
      {"SET a b\0c\r\n"s, {}},
      {"PING\0\r\nPING\r\n"s, {}},
      {"PING\0\r\n"s + pad, {{"error:ERR Protocol error: too big inline request"}}},
      {"\0"s + std::string(15, 'x'), {}},  // exactly max_inline_len bytes: still waiting
      {"\0"s + std::string(16, 'x'), {{"error:ERR Protocol error: too big inline request"}}},
      // A request before it runs; the NUL's line never does.
      {"PING\r\n\0PING\r\n"s, {{"inline:", "PING"}}},
      {"PING\r\0\nPING\r\n"s, {}},  // inline lines end at '\n'
      {"*1\0\r\n$4\r\nPING\r\n"s + pad,
       {{"error:ERR Protocol error: too big mbulk count string"}}},
      {"*1\r\n$4\0\r\nPING\r\n"s + pad,
       {{"error:ERR Protocol error: too big bulk count string"}}},
      // After a length line's '\r' or inside a bulk, a NUL is just a byte.
      {"*1\r\0$4\r\nPING\r\n"s, {{"multibulk:", "PING"}}},
      {"*1\r\n$3\r\na\0b\r\n"s, {{"multibulk:", "a\0b"s}}},
  };
  for (const Case& c : cases) {
    CAPTURE(c.in);
    for (size_t i = 0; i <= c.in.size(); ++i) {  // the same at every split
      Parser parser(lim);
      CHECK(parse_chunks(parser, {c.in.substr(0, i), c.in.substr(i)}) == c.want);
    }
  }
  // reset() forgets the blocked line.
  Parser parser(lim);
  CHECK(parse_all(parser, "PING\0\r\n"s).empty());
  parser.reset();
  CHECK(parse_all(parser, "PING\r\n") == std::vector<Args>{{"inline:", "PING"}});
}

TEST_CASE("split_inline_args: sdssplitargs quoting") {
  const std::pair<std::string_view, Args> ok[] = {
      {"set \"a b\" 'c d'", {"set", "a b", "c d"}},
      {"\"\\x41\\x4a\\x4B\" \"\\xZZ\" \"\\x4\"", {"AJK", "xZZ", "x4"}},
      {"\"\\n\\r\\t\\b\\a\\\\\\\"\\q\"", {"\n\r\t\b\a\\\"q"}},
      {"'it\\'s' 'a\\nb' '\"'", {"it's", "a\\nb", "\""}},  // single quotes: only \' escapes
      {"  a\t\tb  c\r\n", {"a", "b", "c"}},
      {"ab\"c d\"", {"abc d"}},  // a quote may start mid-token
      {"\"\" ''", {"", ""}},
      {"a\vb", {"a\vb"}},  // \v separates only between tokens
      {std::string_view("a b\0c d", 7), {"a", "b"}},  // ends at NUL, like C
      {"   ", {}},
  };
  Args out;
  for (const auto& [in, want] : ok) {
    CAPTURE(in);
    CHECK(split_inline_args(in, &out));
    CHECK(out == want);
  }
  // Unterminated quotes, or a closing quote not followed by a space.
  for (std::string_view in : {"\"abc", "'abc", "\"abc\\\"", "\"a\"b", "'a'b"}) {
    CAPTURE(in);
    CHECK_FALSE(split_inline_args(in, &out));
  }
}

TEST_CASE("parser: inline command with quotes") {
  Parser parser;
  CHECK(parse_all(parser, "SET k \"hello world\\x21\"\r\n") ==
        std::vector<Args>{{"inline:", "SET", "k", "hello world!"}});
}

TEST_CASE("parser: limits and Redis's error texts") {
  const std::string too_big_inline = "ERR Protocol error: too big inline request";
  const std::string too_big_mbulk = "ERR Protocol error: too big mbulk count string";
  const std::string bad_mbulk = "ERR Protocol error: invalid multibulk length";
  const std::string unauth_mbulk = "ERR Protocol error: unauthenticated multibulk length";
  const std::string too_big_bulk = "ERR Protocol error: too big bulk count string";
  const std::string bad_bulk = "ERR Protocol error: invalid bulk length";
  const std::string unauth_bulk = "ERR Protocol error: unauthenticated bulk length";
  resp::ParserLimits dflt, small;  // small: 8-byte lines, 5 args, 100-byte bulks, 2 x 4 unauth
  small.max_inline_len = 8;
  small.max_multibulk_len = 5;
  small.max_bulk_len = 100;
  small.unauth_max_multibulk_len = 2;
  small.unauth_max_bulk_len = 4;
  struct Case {
    std::string in;
    std::string want;  // "" = no error (more input needed)
    const resp::ParserLimits& lim;
    bool unauth = false;
  };
  const Case cases[] = {
      {std::string(64 * 1024 + 1, 'A'), too_big_inline, dflt},
      {std::string(64 * 1024, 'A'), "", dflt},
      {"AAAAAAAAA", too_big_inline, small},
      {"AAAAAAAAA\n", too_big_inline, small},  // too long even though its end arrived
      {"AAAAAAAA\r\n", too_big_inline, small},  // the CR counts, as in Redis
      {"AAAAAAAA", "", small},
      {"*abc\r\n", bad_mbulk, dflt}, {"*1x\r\n", bad_mbulk, dflt}, {"*01\r\n", bad_mbulk, dflt},
      {"*+1\r\n", bad_mbulk, dflt}, {"*\r\n", bad_mbulk, dflt}, {"*-0\r\n", bad_mbulk, dflt},
      {"*1 \r\n", bad_mbulk, dflt}, {"*99999999999999999999\r\n", bad_mbulk, dflt},
      {"*2147483648\r\n", bad_mbulk, dflt}, {"*2147483647\r\n", "", dflt},
      {"*6\r\n", bad_mbulk, small}, {"*5\r\n", "", small},
      {"*12345678", too_big_mbulk, small}, {"*12345678\r\n", too_big_mbulk, small},
      {"*1234567\r", "", small},
      {"*11\r\n", unauth_mbulk, dflt, true}, {"*10\r\n", "", dflt, true},
      {"*11\r\n", "", dflt, false}, {"*3\r\n", unauth_mbulk, small, true},
      {"*1\r\n$-1\r\n", bad_bulk, dflt}, {"*1\r\n$abc\r\n", bad_bulk, dflt},
      {"*1\r\n$\r\n", bad_bulk, dflt}, {"*1\r\n$01\r\n", bad_bulk, dflt},
      {"*1\r\n$99999999999999999999\r\n", bad_bulk, dflt},
      {"*1\r\n$536870913\r\n", bad_bulk + " 536870913 (proto-max-bulk-len is 536870912)", dflt},
      {"*1\r\n$536870912\r\n", "", dflt},
      {"*1\r\n$101\r\n", bad_bulk + " 101 (proto-max-bulk-len is 100)", small},
      {"*1\r\n$100\r\n", "", small},
      {"*1\r\n:3\r\n", "ERR Protocol error: expected '$', got ':'", dflt},
      {"*2\r\n$1\r\nx\r\nfooz\r\n", "ERR Protocol error: expected '$', got 'f'", dflt},
      {"*1\r\n\r\n", "ERR Protocol error: expected '$', got ' '", dflt},  // CR/LF as space
      {"*1\r\n\n$1\r\n", "ERR Protocol error: expected '$', got ' '", dflt},
      {"*1\r\n$12345678", too_big_bulk, small}, {"*1\r\n$1234567", "", small},
      {"*1\r\n$16385\r\n", unauth_bulk, dflt, true}, {"*1\r\n$16384\r\n", "", dflt, true},
      {"*1\r\n$5\r\n", unauth_bulk, small, true}, {"*1\r\n$4\r\n", "", small, true},
      {"SET k \"hello\r\n", "ERR Protocol error: unbalanced quotes in request", dflt},
      {"SET k 'a'b\n", "ERR Protocol error: unbalanced quotes in request", dflt},
  };
  for (const Case& c : cases) {
    CAPTURE(c.in.substr(0, 40));
    CHECK(error_of(c.in, c.lim, c.unauth) == c.want);
  }
}

TEST_CASE("parser: a line of exactly max_inline_len bytes is accepted") {
  resp::ParserLimits lim;
  lim.max_inline_len = 8;
  Parser parser(lim);
  CHECK(parse_chunks(parser, {"AAAAAAAA", "\n*1\r\n$1\r\nx\r\n"}) ==
        std::vector<Args>{{"inline:", "AAAAAAAA"}, {"multibulk:", "x"}});
}

TEST_CASE("parser: the error state sticks until reset()") {
  Parser parser;
  Status st;
  const std::string bad = "*1\r\n$x\r\n";
  parser.feed(bad.data(), bad.size(), &st);
  REQUIRE(st == Status::kError);
  const std::string good = "PING\r\n";
  CHECK(parser.feed(good.data(), good.size(), &st) == 0);
  CHECK(st == Status::kError);
  CHECK(parser.error() == "ERR Protocol error: invalid bulk length");
  parser.reset();
  CHECK(parser.error().empty());
  CHECK(parser.feed(good.data(), good.size(), &st) == good.size());
  CHECK(st == Status::kRequest);
  CHECK(parser.request()[0] == "PING");
}

TEST_CASE("parser: large bulk through allocator, window and commit") {
  TestAllocator alloc;
  Parser parser({}, alloc.fn(), 8);
  Status st;
  const std::string head = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$20\r\n0123";
  CHECK(parser.feed(head.data(), head.size(), &st) == head.size());
  CHECK(st == Status::kNeedMore);
  REQUIRE(alloc.given.size() == 1);
  char* home = alloc.given[0].get();
  CHECK(std::memcmp(home, "0123", 4) == 0);  // bytes that came through feed() went home
  CHECK(parser.reserved_bytes() == 4 + 20);   // "SET" "k" + the full large buffer

  std::span<char> w = parser.large_bulk_window();
  REQUIRE(w.size() == 16);
  CHECK(w.data() == home + 4);
  std::memcpy(w.data(), "456789", 6);  // as if read() from the socket
  parser.commit_large_bulk(6);
  w = parser.large_bulk_window();
  REQUIRE(w.size() == 10);
  CHECK(w.data() == home + 10);
  std::memcpy(w.data(), "abcdefghij", 10);
  parser.commit_large_bulk(10);
  CHECK(parser.large_bulk_window().empty());

  const std::string tail = "\r\nPING\r\n";
  CHECK(parser.feed(tail.data(), tail.size(), &st) == 2);
  REQUIRE(st == Status::kRequest);
  const resp::Request& req = parser.request();
  REQUIRE(req.size() == 3);
  CHECK(req[0] == "SET");
  CHECK(req[2] == "0123456789abcdefghij");
  CHECK(req[2].data() == home);  // no copy
  CHECK(!req.owner(0));
  CHECK(!req.owner(1));
  REQUIRE(req.owner(2));
  CHECK(kept<char[]>(req.owner(2)).get() == home);
  // The command layer takes its own reference to keep the value.
  std::shared_ptr<char[]> adopted = kept<char[]>(req.owner(2));
  CHECK(alloc.given[0].use_count() == 3);

  CHECK(parser.feed(tail.data() + 2, tail.size() - 2, &st) == 6);
  CHECK(st == Status::kRequest);
  CHECK(alloc.given[0].use_count() == 2);  // the parser let go of it
  CHECK(parser.large_bulk_window().empty());
}

TEST_CASE("parser: large bulk fed whole, small bulks copied, allocator failure falls back") {
  TestAllocator alloc;
  Parser parser({}, alloc.fn(), 8);
  const std::string in = "*3\r\n$7\r\nsmall_7\r\n$8\r\nlarge_08\r\n$0\r\n\r\n";
  Status st;
  CHECK(parser.feed(in.data(), in.size(), &st) == in.size());
  REQUIRE(st == Status::kRequest);
  REQUIRE(alloc.given.size() == 1);
  CHECK(parser.request()[0] == "small_7");
  CHECK(!parser.request().owner(0));
  CHECK(parser.request()[1] == "large_08");
  CHECK(parser.request()[1].data() == alloc.given[0].get());
  CHECK(parser.request().owner(1));
  CHECK(parser.request()[2].empty());

  alloc.fail = true;
  const std::string in2 = "*1\r\n$8\r\nlarge_08\r\n";
  CHECK(parser.feed(in2.data(), in2.size(), &st) == in2.size());
  REQUIRE(st == Status::kRequest);
  CHECK(parser.request()[0] == "large_08");
  CHECK(!parser.request().owner(0));
  CHECK(alloc.given.size() == 1);
}

TEST_CASE("parser: reserved_bytes accounting") {
  TestAllocator alloc;
  Parser parser({}, alloc.fn(), 100);
  Status st;
  auto feed = [&](const std::string& s) {
    CHECK(parser.feed(s.data(), s.size(), &st) == s.size());
  };
  CHECK(parser.reserved_bytes() == 0);
  feed("*3\r");
  CHECK(parser.reserved_bytes() == 2);  // partial count line "*3"
  feed("\n$3\r\nfo");
  CHECK(parser.reserved_bytes() == 2);  // "fo"
  feed("o\r\n$10");
  CHECK(parser.reserved_bytes() == 3 + 3);  // "foo" + partial "$10"
  feed("0\r\nabc");
  CHECK(parser.reserved_bytes() == 3 + 100);  // the whole large buffer counts
  CHECK(st == Status::kNeedMore);
  feed(std::string(97, 'x') + "\r\n$2\r\nab\r\n");
  CHECK(st == Status::kRequest);
  CHECK(parser.reserved_bytes() == 0);  // a complete request is the caller's, not partial
  feed("GET");
  CHECK(parser.reserved_bytes() == 3);
  parser.reset();
  CHECK(parser.reserved_bytes() == 0);
  feed("*1\r\n$200\r\n");
  CHECK(parser.reserved_bytes() == 200);
  CHECK(parser.large_bulk_window().size() == 200);
  parser.reset();
  CHECK(parser.reserved_bytes() == 0);
  CHECK(parser.large_bulk_window().empty());
  CHECK(alloc.given.back().use_count() == 1);  // reset() released the partial buffer
}

TEST_CASE("parser: the allocator sees the arguments before the bulk, and may discard it") {
  Parser* self = nullptr;
  std::vector<std::string> seen;  // copied: the views live only as long as the call
  size_t argc = 0;
  Parser parser({},
                [&](size_t) {
                  std::vector<std::string_view> views;
                  argc = self->partial_request(&views);
                  seen.assign(views.begin(), views.end());
                  return resp::LargeBulk{nullptr, {}, /*discard=*/true};
                },
                16);
  self = &parser;
  const std::string in = "*4\r\n$3\r\nSET\r\n$3\r\nkey\r\n$20\r\n01234567890123456789\r\n"
                         "$2\r\nNX\r\n*1\r\n$4\r\nPING\r\n";
  for (size_t split : {in.size(), size_t{30}, size_t{5}}) {  // whole, and inside the bulk
    CAPTURE(split);
    const std::vector<Args> got =
        parse_chunks(parser, {in.substr(0, split), in.substr(split)});
    CHECK(got == std::vector<Args>{{"multibulk:", "SET", "key", "", "NX"},
                                   {"multibulk:", "PING"}});
    CHECK(argc == 4);
    CHECK(seen == std::vector<std::string>{"SET", "key"});
    CHECK(parser.reserved_bytes() == 0);
  }
  std::vector<std::string_view> none;
  CHECK(parser.partial_request(&none) == 0);  // between requests
}

TEST_CASE("parser: shrink gives back what a large request grew, keeping a partial request") {
  Parser parser;
  std::string big = "*20001\r\n$4\r\nMSET\r\n";
  for (int i = 0; i < 10000; ++i) big += "$6\r\nk" + std::to_string(100000 + i).substr(1) + "\r\n$2\r\nvv\r\n";
  const size_t empty = parser.allocated_bytes();
  auto out = parse_chunks(parser, {big});
  REQUIRE(out.size() == 1);
  CHECK(out[0].size() == 20002);
  const size_t grown = parser.allocated_bytes();
  CHECK(grown > empty + 20000 * sizeof(std::string_view));
  parser.shrink();  // a returned request is held: nothing moves
  CHECK(parser.allocated_bytes() == grown);
  parser.release_request();
  // A partial request survives: its two complete arguments and the rest arriving later.
  out = parse_chunks(parser, {"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhel"});
  CHECK(out.empty());
  parser.shrink();
  CHECK(parser.allocated_bytes() < grown / 10);
  out = parse_chunks(parser, {"lo\r\n"});
  REQUIRE(out.size() == 1);
  CHECK(out[0] == Args{"multibulk:", "SET", "k", "hello"});
  parser.release_request();
  parser.shrink();
  CHECK(parser.allocated_bytes() <= 64);
}

TEST_CASE("parser: a whole request in one feed (the one-pass path) parses as byte by byte") {
  // Parser::feed takes a whole multibulk request of small bulks in one pass and leaves
  // everything unusual to the state machine: each input here must give the same requests or
  // the same error fed whole as fed one byte at a time (which never takes the one-pass path).
  resp::ParserLimits small;
  small.max_inline_len = 6;  // "$12345" is the longest length line allowed
  small.max_bulk_len = 20;
  small.max_multibulk_len = 3;
  small.unauth_max_multibulk_len = 2;
  small.unauth_max_bulk_len = 4;
  const std::vector<std::string> inputs = {
      "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n",
      "*1\r\n$0\r\n\r\n",
      "*1\r\n$03\r\nabc\r\n",                      // leading zero: invalid bulk length
      "*01\r\n$1\r\na\r\n",                        // leading zero in the count
      "*+1\r\n$1\r\na\r\n",
      "*1\r\n$+1\r\na\r\n",
      "*1\r\n$-0\r\n\r\n",
      "*1\r\n$1 \r\na\r\n",
      "*1\r\n$1\0\r\na\r\n",                       // NUL in a length line
      "*1\r\n$999999999999999999\r\n",             // 18 digits
      "*1\r\n$9999999999999999999\r\n",            // 19 digits, past INT64_MAX
      "*1\r\n$12345\r\n",                          // exactly max_inline_len, past max_bulk_len
      "*1\r\n$123456\r\n",                         // past max_inline_len
      "*1\r\n$20\r\n01234567890123456789\r\n",     // exactly max_bulk_len
      "*1\r\n$21\r\n012345678901234567890\r\n",
      "*3\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n",   // exactly max_multibulk_len
      "*4\r\n$1\r\na\r\n$1\r\nb\r\n$1\r\nc\r\n$1\r\nd\r\n",
      "*2\r\n$1\r\na\r\n:1\r\n",                   // not a '$'
      "*2\r\n$1\r\na\r\n",                         // cut short
      "*1\r\n$1\r\na",                             // the bytes after the body not yet in
      "*1\rX$1\rYaZZ*1\r\n$1\r\nb\r\n",            // unchecked bytes after CR and after a body
      "*0\r\n*1\r\n$1\r\na\r\n",
  };
  for (const std::string& in : inputs) {
    for (bool unauth : {false, true}) {
      for (bool with_alloc : {false, true}) {
        CAPTURE(in);
        CAPTURE(unauth);
        CAPTURE(with_alloc);
        TestAllocator a1, a2;
        Parser whole(small, with_alloc ? a1.fn() : resp::BulkAllocator{}, 2);
        Parser bytes(small, with_alloc ? a2.fn() : resp::BulkAllocator{}, 2);
        whole.set_unauthenticated(unauth);
        bytes.set_unauthenticated(unauth);
        std::vector<std::string> one_by_one;
        for (char c : in) one_by_one.emplace_back(1, c);
        CHECK(parse_all(whole, in) == parse_chunks(bytes, one_by_one));
        CHECK(a1.given.size() == a2.given.size());
      }
    }
  }
}
