// Unit tests of the KV.MPUT / KV.MGET batch layout (server/commands/kv_layout.h): one reader for
// the handlers, the key finder and the write-bytes count, counts checked against the arguments.
#include <doctest.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "server/commands/kv_layout.h"

namespace {

using server::BatchEntry;
using server::BatchLayout;

std::vector<std::string_view> args_of(const std::vector<std::string>& s) {
  return {s.begin(), s.end()};
}

}  // namespace

TEST_CASE("a KV.MPUT batch: entries, their descriptors, the options after it") {
  const std::vector<std::string> s = {"KV.MPUT", "2", "a", "3", "1", "7", "0", "3",
                                      "b", "4", "2", "7", "0", "2", "7", "2", "2", "NX"};
  const auto args = args_of(s);
  BatchLayout layout(args, BatchLayout::Kind::kPut);
  CHECK(layout.count() == 2);
  BatchEntry e;
  REQUIRE(layout.next(e));
  CHECK(e.key == 2);
  CHECK(e.total == 3);
  CHECK(e.segs == 5);
  CHECK(e.nsegs == 1);
  REQUIRE(layout.next(e));
  CHECK(e.key == 8);
  CHECK(e.total == 4);
  CHECK(e.nsegs == 2);
  CHECK_FALSE(layout.next(e));
  CHECK(layout.error().empty());
  CHECK(layout.end() == 17);  // NX
  std::vector<size_t> keys;
  CHECK(server::mput_keys(args, keys));
  CHECK(keys == std::vector<size_t>{2, 8});
  CHECK(server::mput_bytes(args) == 7);
}

TEST_CASE("a KV.MGET batch: keys, entries without descriptors, nothing after it") {
  const std::vector<std::string> s = {"KV.MGET", "2", "a", "1", "1", "0", "3", "b", "0"};
  std::vector<size_t> keys;
  CHECK(server::mget_keys(args_of(s), keys));
  CHECK(keys == std::vector<size_t>{2, 7});
  std::vector<std::string> extra = s;
  extra.push_back("x");
  keys.clear();
  CHECK_FALSE(server::mget_keys(args_of(extra), keys));
}

TEST_CASE("counts from the client never reach past the arguments") {
  auto error_of = [](std::vector<std::string> s, BatchLayout::Kind kind) {
    const auto args = args_of(s);
    BatchLayout layout(args, kind);
    for (BatchEntry e; layout.next(e);) {
    }
    return std::string(layout.error());
  };
  using K = BatchLayout::Kind;
  const std::string syntax = "ERR syntax error", nan = "ERR value is not an integer or out of range";
  CHECK(error_of({"KV.MGET", "1000000000000000", "k", "1", "1", "0", "1"}, K::kGet) == syntax);
  CHECK(error_of({"KV.MGET", "1", "k", "1000000000000000", "1", "0", "1"}, K::kGet) == syntax);
  CHECK(error_of({"KV.MGET", "1", "k", "9223372036854775807", "1", "0", "1"}, K::kGet) ==
        syntax);
  CHECK(error_of({"KV.MPUT", "1", "k", "1", "1000000000000000", "1", "0", "1"}, K::kPut) ==
        syntax);
  CHECK(error_of({"KV.MPUT", "18446744073709551616", "k", "1", "1", "1", "0", "1"}, K::kPut) ==
        nan);
  CHECK(error_of({"KV.MPUT", "0", "k", "1", "1", "1", "0", "1"}, K::kPut) ==
        "ERR count must be positive");
  CHECK(error_of({"KV.MPUT", "1", "k", "-1", "1", "1", "0", "1"}, K::kPut) == nan);
  CHECK(error_of({"KV.MPUT", "1", "k", "1", "1", "1", "-5", "1"}, K::kPut) == nan);
  // The first error wins: a bad number before the arguments run out.
  CHECK(error_of({"KV.MGET", "1", "k", "5", "x", "0", "1"}, K::kGet) == nan);
}

TEST_CASE("KV.MPUT's bytes saturate instead of wrapping; a malformed batch writes none") {
  const std::string max = "9223372036854775807";
  const std::vector<std::string> s = {"KV.MPUT", "3", "a", max, "0", "b", max, "0", "c", max, "0"};
  CHECK(server::mput_bytes(args_of(s)) == UINT64_MAX);
  CHECK(server::mput_bytes(args_of({"KV.MPUT", "2", "a", "5", "0"})) == 0);
}
