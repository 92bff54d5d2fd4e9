// Unit tests of the fast-path commands' argument arithmetic (server/commands/cmd_kv.cc): the
// bytes KV.PUT / KV.MPUT say they write, read from client numbers, never wrap around.
#include <doctest.h>

#include <string>
#include <vector>

#include "server/command.h"
#include "server/commands/family.h"
#include "tiering/value.h"

using namespace server;

namespace {

uint64_t write_bytes(const CommandTable& t, std::vector<std::string> words) {
  std::vector<std::string_view> args(words.begin(), words.end());
  const CommandSpec* spec = t.find(args[0]);
  const bool known = spec != nullptr;
  REQUIRE(known);
  const bool has_hook = spec->write_bytes != nullptr;
  REQUIRE(has_hook);
  return spec->write_bytes(args);
}

const std::string kMax = "9223372036854775807";  // INT64_MAX

}  // namespace

TEST_CASE("KV.PUT / KV.MPUT write bytes: the clients' totals, capped, never wrapped") {
  CommandTable t;
  register_kv_family(t);
  const uint64_t cap = tiering::ValueRef::kMaxSize;
  CHECK(write_bytes(t, {"kv.put", "k", "100", "1", "0", "100"}) == 100);
  CHECK(write_bytes(t, {"kv.put", "k", "-1", "1", "0", "100"}) == 0);  // malformed
  CHECK(write_bytes(t, {"kv.put", "k", kMax, "1", "0", "100"}) == cap);
  CHECK(write_bytes(t, {"kv.mput", "2", "a", "10", "1", "1", "0", "10", "b", "20", "0"}) == 30);
  // INT64_MAX + INT64_MAX + 2 = 2^64: a 64-bit sum wraps to 0, as if nothing were written.
  CHECK(write_bytes(t, {"kv.mput", "3", "a", kMax, "0", "b", kMax, "0", "c", "2", "0"}) == cap);
  CHECK(write_bytes(t, {"kv.mput", "2", "a", std::to_string(cap - 1), "0", "b", "5", "0"}) ==
        cap);
}
