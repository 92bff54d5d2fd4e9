// Unit tests of server::CommandTable's lookup (server/command.h): every registered command is
// found by its name in any case, and nothing else is.
#include <doctest.h>

#include <string>

#include "server/command.h"
#include "server/server.h"

using server::CommandTable;

namespace {

const CommandTable& all_commands() {
  static const CommandTable table = [] {
    CommandTable t;
    server::register_all_commands(t);
    return t;
  }();
  return table;
}

std::string upper(std::string s) {
  for (char& c : s)
    if (c >= 'a' && c <= 'z') c = static_cast<char>(c - 32);
  return s;
}

}  // namespace

TEST_CASE("find: every command by its name, in lower, upper and mixed case") {
  const CommandTable& t = all_commands();
  REQUIRE(t.all().size() > 50);
  for (const server::CommandSpec* spec : t.all()) {
    CHECK(t.find(spec->name) == spec);
    CHECK(t.find(upper(spec->name)) == spec);
    std::string mixed = spec->name;
    for (size_t i = 0; i < mixed.size(); i += 2) mixed[i] = upper(std::string(1, mixed[i]))[0];
    CHECK(t.find(mixed) == spec);
  }
}

TEST_CASE("find: unknown names, prefixes, extensions and near misses are not found") {
  const CommandTable& t = all_commands();
  CHECK(t.find("") == nullptr);
  CHECK(t.find("ge") == nullptr);
  CHECK(t.find("gett") == nullptr);
  CHECK(t.find("get ") == nullptr);
  CHECK(t.find(std::string("get\0", 4)) == nullptr);
  CHECK(t.find("g\xc5t") == nullptr);       // a byte that is not ASCII
  CHECK(t.find("GET") != nullptr);
  CHECK(t.find("kv.put") != nullptr);
  CHECK(t.find("KV.PUT") != nullptr);
  CHECK(t.find("kv_put") == nullptr);
  CHECK(t.find(std::string(100000, 'a')) == nullptr);
  // Only ASCII letters fold: '@' (0x40) and '`' (0x60) differ by the case bit, yet are not
  // the same character.
  CHECK(t.find("g`t") == nullptr);
  CHECK(t.find("G@T") == nullptr);
}

TEST_CASE("find_sub: subcommands in any case") {
  const CommandTable& t = all_commands();
  const server::CommandSpec* config = t.find("config");
  REQUIRE(config != nullptr);
  CHECK(CommandTable::find_sub(*config, "GET") != nullptr);
  CHECK(CommandTable::find_sub(*config, "gEt") == CommandTable::find_sub(*config, "get"));
  CHECK(CommandTable::find_sub(*config, "nope") == nullptr);
}
