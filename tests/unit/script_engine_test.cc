// Unit tests of server::ScriptEngine (the Lua interpreter and Redis's conversions) with a fake
// host standing for the server, and of sha1_hex against FIPS 180's test vectors.
#include <doctest.h>

#include <map>
#include <string>
#include <vector>

#include "server/script_engine.h"
#include "server/sha1.h"

using server::ScriptEngine;
using server::ScriptHost;

namespace {

// Answers redis.call with canned RESP replies by command name; records what it was asked.
class FakeHost : public ScriptHost {
 public:
  std::map<std::string, std::string> replies;
  std::vector<std::vector<std::string>> calls;
  bool kill = false;
  Status call(std::span<const std::string_view> args, int protocol, std::string* reply,
              std::string* error) override {
    calls.emplace_back(args.begin(), args.end());
    const std::string name(args[0]);
    if (name == "refused") {
      *error = "Unknown Redis command called from script";
      return Status::kRefused;
    }
    if (name == "abort") {
      *error = "-OOM no room";
      return Status::kAbort;
    }
    if (name == "proto") {
      *reply = ":" + std::to_string(protocol) + "\r\n";
      return Status::kRan;
    }
    auto it = replies.find(name);
    *reply = it == replies.end() ? "$-1\r\n" : it->second;
    return Status::kRan;
  }
  bool killed() override { return kill; }
  void log(int, std::string_view) override {}
};

// Runs `body` (no keys) and returns its reply: RESP bytes, or "-" + the error text.
std::string run(ScriptEngine& e, FakeHost& host, const std::string& body, int protocol = 2,
                std::vector<std::string> keys = {}, std::vector<std::string> argv = {}) {
  const std::string sha = server::sha1_hex(body);
  const std::string err = e.load(sha, body);
  if (!err.empty()) return "-" + err;
  ScriptEngine::Result r = e.run(sha, keys, argv, protocol, host);
  return r.error ? "-" + r.reply : r.reply;
}

}  // namespace

TEST_CASE("sha1_hex matches FIPS 180's vectors and Redis's sha1hex") {
  CHECK(server::sha1_hex("") == "da39a3ee5e6b4b0d3255bfef95601890afd80709");
  CHECK(server::sha1_hex("abc") == "a9993e364706816aba3e25717850c26c9cd0d89d");
  CHECK(server::sha1_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "84983e441c3bd26ebaae4aa1f95129e5e54670f1");
  CHECK(server::sha1_hex(std::string(1000000, 'a')) == "34aa973cd4c4daa4f61eeb2bdbad27316534016f");
  CHECK(server::sha1_hex("return 1") == "e0e1f9fabfc9d4800c877a703b823ac0578ff8db");
}

TEST_CASE("Lua values become RESP replies as Redis converts them") {
  ScriptEngine e;
  FakeHost h;
  CHECK(run(e, h, "return 1") == ":1\r\n");
  CHECK(run(e, h, "return 3.99") == ":3\r\n");
  CHECK(run(e, h, "return -3.99") == ":-3\r\n");
  CHECK(run(e, h, "return 'ab'") == "$2\r\nab\r\n");
  CHECK(run(e, h, "return true") == ":1\r\n");
  CHECK(run(e, h, "return false") == "$-1\r\n");
  CHECK(run(e, h, "return nil") == "$-1\r\n");
  CHECK(run(e, h, "return {1, 'a', {2}}") == "*3\r\n:1\r\n$1\r\na\r\n*1\r\n:2\r\n");
  CHECK(run(e, h, "return {1, nil, 3}") == "*1\r\n:1\r\n");
  CHECK(run(e, h, "return {ok='fine'}") == "+fine\r\n");
  CHECK(run(e, h, "return {err='ERR bad'}") == "-ERR bad");
  CHECK(run(e, h, "return {1, {err='X inner'}}") == "*2\r\n:1\r\n-X inner\r\n");
  CHECK(run(e, h, "return redis.error_reply('My Error')") == "-My Error");
  CHECK(run(e, h, "return redis.error_reply('x')") == "-ERR x");
  CHECK(run(e, h, "return redis.status_reply('S')") == "+S\r\n");
  CHECK(run(e, h, "return {double=1.5}") == "$3\r\n1.5\r\n");
  // RESP3 clients: booleans follow the script's protocol (redis.setresp), doubles the client's.
  CHECK(run(e, h, "return true", 3) == ":1\r\n");
  CHECK(run(e, h, "return false", 3) == "_\r\n");
  CHECK(run(e, h, "redis.setresp(3) return true", 3) == "#t\r\n");
  CHECK(run(e, h, "redis.setresp(3) return false", 3) == "#f\r\n");
  CHECK(run(e, h, "return nil", 3) == "_\r\n");
  CHECK(run(e, h, "return {double=1.5}", 3) == ",1.5\r\n");
  CHECK(run(e, h, "return {map={a=1}}", 3) == "%1\r\n$1\r\na\r\n:1\r\n");
  CHECK(run(e, h, "return {set={a=true}}", 3) == "~1\r\n$1\r\na\r\n");
  CHECK(run(e, h, "return {KEYS[1], ARGV[2], #ARGV}", 2, {"k"}, {"a", "b"}) ==
        "*3\r\n$1\r\nk\r\n$1\r\nb\r\n:2\r\n");
}

TEST_CASE("RESP replies become Lua values as Redis converts them") {
  ScriptEngine e;
  FakeHost h;
  h.replies["int"] = ":42\r\n";
  h.replies["bulk"] = "$3\r\nabc\r\n";
  h.replies["status"] = "+OK\r\n";
  h.replies["error"] = "-WRONGTYPE bad type\r\n";
  h.replies["array"] = "*3\r\n:1\r\n$-1\r\n*1\r\n$1\r\nx\r\n";
  h.replies["null"] = "_\r\n";
  h.replies["bool"] = "#t\r\n";
  h.replies["double"] = ",2.5\r\n";
  h.replies["map"] = "%1\r\n$1\r\nk\r\n:7\r\n";
  CHECK(run(e, h, "return type(redis.call('int'))") == "$6\r\nnumber\r\n");
  CHECK(run(e, h, "return redis.call('int') + 1") == ":43\r\n");
  CHECK(run(e, h, "return redis.call('bulk')") == "$3\r\nabc\r\n");
  CHECK(run(e, h, "return redis.call('nil') == false") == ":1\r\n");
  CHECK(run(e, h, "return redis.call('status').ok") == "$2\r\nOK\r\n");
  CHECK(run(e, h, "return redis.pcall('error').err") == "$18\r\nWRONGTYPE bad type\r\n");
  CHECK(run(e, h, "local a = redis.call('array') return {a[1], tostring(a[2]), a[3][1]}") ==
        "*3\r\n:1\r\n$5\r\nfalse\r\n$1\r\nx\r\n");
  CHECK(run(e, h, "return type(redis.call('null'))") == "$3\r\nnil\r\n");
  CHECK(run(e, h, "return redis.call('bool') == true") == ":1\r\n");
  CHECK(run(e, h, "return redis.call('double').double * 2") == ":5\r\n");
  CHECK(run(e, h, "return redis.call('map').k") == ":7\r\n");
  // Numbers as arguments: %.17g.
  run(e, h, "redis.call('set', 'k', 3.5, 10/3, 7)");
  REQUIRE(!h.calls.empty());
  CHECK(h.calls.back() == std::vector<std::string>{"set", "k", "3.5", "3.3333333333333335", "7"});
  // redis.setresp chooses the protocol of redis.call's replies, 2 by default at every run.
  CHECK(run(e, h, "return redis.call('proto')") == ":2\r\n");
  CHECK(run(e, h, "redis.setresp(3) return redis.call('proto')") == ":3\r\n");
  CHECK(run(e, h, "return redis.call('proto')") == ":2\r\n");
}

TEST_CASE("errors carry Redis's texts and the script's line") {
  ScriptEngine e;
  FakeHost h;
  h.replies["error"] = "-WRONGTYPE bad type\r\n";
  const std::string body = "\nreturn redis.call('error')";
  const std::string sha = server::sha1_hex(body);
  CHECK(run(e, h, body) == "-WRONGTYPE bad type script: " + sha + ", on @user_script:2.");
  const std::string refused = "return redis.call('refused')";
  CHECK(run(e, h, refused) == "-ERR Unknown Redis command called from script script: " +
                                   server::sha1_hex(refused) + ", on @user_script:1.");
  const std::string boom = "error('boom')";
  CHECK(run(e, h, boom) ==
        "-ERR user_script:1: boom script: " + server::sha1_hex(boom) + ", on @user_script:1.");
  CHECK(run(e, h, "return +").starts_with("-ERR Error compiling script (new function): user_script:"));
  const std::string global = "x = 1";
  CHECK(run(e, h, global) == "-ERR user_script:1: Attempt to modify a readonly table script: " +
                                  server::sha1_hex(global) + ", on @user_script:1.");
  const std::string lib = "string.x = 1";
  CHECK(run(e, h, lib).starts_with("-ERR user_script:1: Attempt to modify a readonly table"));
  const std::string raw = "rawset(_G, 'y', 1)";
  CHECK(run(e, h, raw) == "-ERR Attempt to modify a readonly table script: " +
                              server::sha1_hex(raw) + ", on @user_script:1.");
  CHECK(run(e, h, "return {type(print), type(getfenv), type(os)}").starts_with(
      "-ERR user_script:1: Script attempted to access nonexistent global variable 'print'"));
  CHECK(run(e, h, "return os").starts_with(
      "-ERR user_script:1: Script attempted to access nonexistent global variable 'os'"));
  // An abort cannot be caught by pcall: it is raised again on the next line.
  CHECK(run(e, h, "pcall(redis.call, 'abort')\nreturn 1").starts_with("-OOM no room"));
  // The interpreter is usable after an abort.
  CHECK(run(e, h, "return 2") == ":2\r\n");
}

TEST_CASE("a killed script stops, even when it catches errors") {
  ScriptEngine e;
  FakeHost h;
  h.kill = true;
  CHECK(run(e, h, "while true do end").starts_with("-ERR Script killed by user with SCRIPT KILL..."));
  CHECK(run(e, h, "while true do pcall(function() while true do end end) end")
            .starts_with("-ERR Script killed by user with SCRIPT KILL..."));
  h.kill = false;
  CHECK(run(e, h, "return 3") == ":3\r\n");
}

TEST_CASE("shebang flags") {
  server::ScriptFlags f;
  CHECK(server::parse_script_flags("return 1", &f).empty());
  CHECK_FALSE(f.shebang);
  CHECK(server::parse_script_flags("#!lua flags=no-writes,allow-oom\nreturn 1", &f).empty());
  CHECK((f.shebang && f.no_writes && f.allow_oom && !f.no_cluster));
  CHECK(server::parse_script_flags("#!lua flags=bad\n", &f) ==
        "ERR Unexpected flag in script shebang: bad");
  CHECK(server::parse_script_flags("#!lua", &f) == "ERR Invalid script shebang");
}
