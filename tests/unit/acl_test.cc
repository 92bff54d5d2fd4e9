// The ACL model alone (server/acl.h): glob matching as Redis's stringmatchlen, the SETUSER rule
// parser and its errors, key/channel checks, the command description, the registry and the
// aclfile parser, over a small hand-made catalog.
#include <doctest.h>

#include "server/acl.h"
#include "tiering/glob.h"

using namespace server::acl;
using tiering::glob_match;

namespace {

uint32_t cats(std::initializer_list<Category> list) {
  uint32_t m = 0;
  for (Category c : list) m |= uint32_t{1} << c;
  return m;
}

// ids: 0 get, 1 set, 2 del, 3 client, 4 client|list, 5 client|kill, 6 select, 7 publish
Catalog test_catalog() {
  Catalog c(8);
  c[0] = {"get", cats({kRead, kString, kFast})};
  c[1] = {"set", cats({kWrite, kString, kSlow})};
  c[2] = {"del", cats({kWrite, kKeyspace, kSlow})};
  c[3] = {"client", cats({kSlow})};
  c[3].subs = {4, 5};
  c[4] = {"client|list", cats({kAdmin, kDangerous, kSlow, kConnection}), 3};
  c[5] = {"client|kill", cats({kAdmin, kDangerous, kSlow, kConnection}), 3};
  c[6] = {"select", cats({kFast, kConnection})};
  c[7] = {"publish", cats({kPubSub, kFast})};
  c[7].channels = Channels::kFirst;
  return c;
}

User apply(std::initializer_list<std::string_view> rules, const Catalog& c) {
  User u = new_user("u", c);
  for (std::string_view r : rules) REQUIRE(apply_rule(u, r, c) == "");
  return u;
}

}  // namespace

TEST_CASE("glob_match (the ACL's patterns) follows stringmatchlen") {
  CHECK(glob_match("*", ""));
  CHECK(glob_match("*", "anything"));
  CHECK(glob_match("foo:*", "foo:bar"));
  CHECK_FALSE(glob_match("foo:*", "fo:bar"));
  CHECK(glob_match("h?llo", "hello"));
  CHECK_FALSE(glob_match("h?llo", "hllo"));
  CHECK(glob_match("h[ae]llo", "hallo"));
  CHECK_FALSE(glob_match("h[ae]llo", "hillo"));
  CHECK(glob_match("h[^e]llo", "hallo"));
  CHECK_FALSE(glob_match("h[^e]llo", "hello"));
  CHECK(glob_match("h[a-c]llo", "hbllo"));
  CHECK(glob_match("h[c-a]llo", "hbllo"));  // a reversed range is swapped
  CHECK(glob_match("a\\*b", "a*b"));
  CHECK_FALSE(glob_match("a\\*b", "axb"));
  CHECK(glob_match("*a*b*c*", "xxaxxbxxcxx"));
  CHECK_FALSE(glob_match("*a*b*c*", "xxaxxcxxbxx"));
  CHECK(glob_match("HELLO", "hello", true));
  CHECK_FALSE(glob_match("HELLO", "hello"));
  // A hostile pattern stays linear-ish (no exponential backtracking).
  CHECK_FALSE(glob_match(std::string(50, '*') + "b", std::string(5000, 'a')));
  // Stars apart (CVE-2022-36021): without Redis's skipLongerMatches this tries about
  // C(200, 20) ways to place the stars and never ends.
  std::string pattern;
  for (int i = 0; i < 20; ++i) pattern += "*a";
  CHECK_FALSE(glob_match(pattern + "*b", std::string(200, 'a')));
  CHECK(glob_match(pattern + "*b", std::string(200, 'a') + "b"));
  CHECK(glob_match("*a*b*a*", "xxbxxaxxbxxa"));
  CHECK_FALSE(glob_match("*a*b*a*b", "xxbxxaxxbxxa"));
}

TEST_CASE("passwords: >, <, #, !, nopass, resetpass") {
  const Catalog c = test_catalog();
  User u = apply({"on", ">secret"}, c);
  CHECK(u.passwords == std::vector<std::string>{sha256_hex("secret")});
  CHECK(sha256_hex("p1") == "f64551fcd6f07823cb87971cfb91446425da18286b3ab1ef935e0cbd7a69f68a");
  CHECK(u.password_ok("secret"));
  CHECK_FALSE(u.password_ok("other"));
  CHECK(apply_rule(u, "<nope", c) ==
        "The password you are trying to remove from the user does not exist");
  CHECK(apply_rule(u, "#abc", c) ==
        "The password hash must be exactly 64 characters and contain only lowercase "
        "hexadecimal characters");
  CHECK(apply_rule(u, "!" + sha256_hex("secret"), c) == "");
  CHECK(u.passwords.empty());
  CHECK_FALSE(u.password_ok("secret"));  // no password and not nopass: nobody gets in
  CHECK(apply_rule(u, "nopass", c) == "");
  CHECK(u.password_ok("anything"));
  CHECK(apply_rule(u, "off", c) == "");
  CHECK_FALSE(u.password_ok("anything"));  // a disabled user never authenticates
}

TEST_CASE("commands: categories, single commands, subcommands, first-args") {
  const Catalog c = test_catalog();
  User u = apply({"+@read", "+set"}, c);
  CHECK(u.can_run(0));
  CHECK(u.can_run(1));
  CHECK_FALSE(u.can_run(2));
  // The best fit (ACLDescribeUserCommandRules): @string holds exactly get and set.
  CHECK(describe_commands(u, c) == "-@all +@string");
  CHECK(apply_rule(u, "-get", c) == "");
  CHECK_FALSE(u.can_run(0));
  CHECK(apply_rule(u, "+client|list", c) == "");
  CHECK(u.can_run(4));
  CHECK_FALSE(u.can_run(5));
  CHECK(apply_rule(u, "+client", c) == "");  // a container takes its subcommands with it
  CHECK(u.can_run(5));
  CHECK(apply_rule(u, "-client", c) == "");
  CHECK_FALSE(u.can_run(4));
  CHECK(apply_rule(u, "+select|0", c) == "");
  CHECK(u.can_run(6, "0"));
  CHECK_FALSE(u.can_run(6, "1"));
  CHECK(apply_rule(u, "+bogus", c) == "Unknown command or category name in ACL");
  CHECK(apply_rule(u, "+@bogus", c) == "Unknown command or category name in ACL");
  CHECK(apply_rule(u, "-select|0", c) == "Unknown command or category name in ACL");
  CHECK(apply_rule(u, "+client|bogus", c) == "Unknown command or category name in ACL");
  CHECK(apply_rule(u, "+client|list|x", c) == "Allowing first-arg of a subcommand is not supported");
  CHECK(apply_rule(u, "bogus", c) == "Syntax error");

  User all = apply({"allcommands", "-set"}, c);
  CHECK(all.all_future);
  CHECK(describe_commands(all, c) == "+@all -set");
  User none = apply({"+@all", "nocommands"}, c);
  CHECK(describe_commands(none, c) == "-@all");
}

TEST_CASE("keys: ~, %R~, %W~, allkeys, resetkeys") {
  const Catalog c = test_catalog();
  User u = apply({"~foo:*", "%R~r:*", "%W~w:*"}, c);
  CHECK(u.key_allowed("foo:1", kKeyRead | kKeyWrite));
  CHECK(u.key_allowed("r:1", kKeyRead));
  CHECK_FALSE(u.key_allowed("r:1", kKeyWrite));
  CHECK(u.key_allowed("w:1", kKeyWrite));
  CHECK_FALSE(u.key_allowed("w:1", kKeyRead));
  CHECK_FALSE(u.key_allowed("w:1", kKeyRead | kKeyWrite));
  CHECK_FALSE(u.key_allowed("other", kKeyRead));
  CHECK(describe_keys(u) == "~foo:* %R~r:* %W~w:*");
  CHECK(apply_rule(u, "%W~r:*", c) == "");  // the same pattern gains the permission
  CHECK(u.key_allowed("r:1", kKeyWrite));
  CHECK(describe_keys(u) == "~foo:* ~r:* %W~w:*");
  CHECK(apply_rule(u, "%X~a", c) == "Syntax error");
  CHECK(apply_rule(u, "allkeys", c) == "");
  CHECK(u.key_allowed("anything", kKeyAll));
  CHECK(apply_rule(u, "~foo", c) ==
        "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not "
        "have any effect. Try 'resetkeys' to start with an empty list of patterns");
  CHECK(apply_rule(u, "resetkeys", c) == "");
  CHECK_FALSE(u.key_allowed("anything", kKeyRead));
  CHECK(apply_rule(u, "%RW~*", c) == "");
  CHECK(u.all_keys);
}

TEST_CASE("channels: &pattern matched, a pattern literally") {
  const Catalog c = test_catalog();
  User u = apply({"&news.*"}, c);
  CHECK(u.channel_allowed("news.tech", false));
  CHECK_FALSE(u.channel_allowed("sport", false));
  CHECK(u.channel_allowed("news.*", true));
  CHECK_FALSE(u.channel_allowed("news.t*", true));  // PSUBSCRIBE: the pattern itself
  CHECK(describe_channels(u) == "&news.*");
  CHECK(apply_rule(u, "allchannels", c) == "");
  CHECK(apply_rule(u, "&x", c) ==
        "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does "
        "not have any effect. Try 'resetchannels' to start with an empty list of channels");
}

TEST_CASE("describe and the registry") {
  Users users(test_catalog());
  auto d = users.default_user();
  REQUIRE(d != nullptr);
  CHECK(d->unrestricted);
  CHECK(describe(*d, users.catalog()) == "on nopass ~* &* +@all");
  CHECK_FALSE(users.default_needs_auth());

  const uint64_t gen = users.generation();
  const std::string_view rules[] = {"on", ">p1", "~foo:*", "&ch*", "+@read", "-get", "+set"};
  CHECK(users.set_user("bob", rules) == "");
  CHECK(users.generation() > gen);
  auto bob = users.find("bob");
  REQUIRE(bob != nullptr);
  CHECK_FALSE(bob->unrestricted);
  CHECK(describe(*bob, users.catalog()) ==
        "on #f64551fcd6f07823cb87971cfb91446425da18286b3ab1ef935e0cbd7a69f68a ~foo:* "
        "resetchannels &ch* -@all +set");
  CHECK(users.authenticate("bob", "p1") == bob);
  CHECK(users.authenticate("bob", "p2") == nullptr);

  // A failing rule changes nothing.
  const std::string_view bad[] = {"off", "+bogus"};
  CHECK(users.set_user("bob", bad) ==
        "Error in ACL SETUSER modifier '+bogus': Unknown command or category name in ACL");
  CHECK(users.find("bob")->enabled);

  User alice = new_user("alice", users.catalog());
  CHECK(describe(alice, users.catalog()) == "off resetchannels -@all");

  users.set_requirepass("s3cret");
  CHECK(users.default_needs_auth());
  CHECK(users.authenticate("default", "s3cret") != nullptr);
  users.set_requirepass("");
  CHECK_FALSE(users.default_needs_auth());

  CHECK_FALSE(users.del_user("default"));
  CHECK(users.del_user("bob"));
  CHECK(users.find("bob") == nullptr);
  CHECK(users.all().size() == 1);
}

TEST_CASE("aclfile parsing") {
  const Catalog c = test_catalog();
  std::vector<User> out;
  CHECK(parse_aclfile("# comment\n\nuser default on nopass ~* &* +@all\nuser a on >x ~k* +get\n",
                      c, &out) == "");
  REQUIRE(out.size() == 2);
  CHECK(out[1].name == "a");
  CHECK(out[1].can_run(0));
  CHECK(parse_aclfile("user a on +bogus\n", c, &out) ==
        "1: Unknown command or category name in ACL. ");
  CHECK(parse_aclfile("hello\n", c, &out) == "1: should start with user keyword");
  CHECK(parse_aclfile("user a\nuser a\n", c, &out) == "2: Duplicate user 'a' found");
}
