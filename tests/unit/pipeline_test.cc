// The request pipeline's handler stage (server/pipeline.cc) through a whole server, in one
// process: commands of the test's own, registered beside the families, throw
// tiering::NeedRoom (an allocation under a shard lock that found no room) or std::bad_alloc,
// and the stage must make room with no lock held and run the handler again (at most 8 times),
// drop the partial replies of the failed attempts, and answer -OOM when no room comes, counting
// it as a rejected call. And the slot stage's cluster mode (-CROSSSLOT), which no config turns on
// yet.
#include <doctest.h>
#include <hiredis/hiredis.h>

#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "cluster/slot.h"
#include "server/slot_owner.h"
#include "server/command.h"
#include "server/config.h"
#include "server/server.h"
#include "tiering/memory_tier.h"
#include "tiering/need_room.h"

namespace {

constexpr size_t MiB = 1 << 20;

std::atomic<int> g_calls{0};        // handler runs since TEST.ARM
std::atomic<int> g_throws_left{0};  // NeedRoom to throw before succeeding (-1: always)

void cmd_arm(server::CommandContext& ctx) {
  g_calls = 0;
  g_throws_left = std::stoi(std::string(ctx.args[1]));
  ctx.out.ok();
}

// Writes half of its reply, [attempt, runs], then needs 1 MiB it cannot get, until it may
// succeed: a partial reply the stage failed to drop would show as nested arrays.
void cmd_needroom(server::CommandContext& ctx) {
  ++g_calls;
  ctx.out.array(2);
  ctx.out.simple("attempt");
  if (g_throws_left != 0) {
    if (g_throws_left > 0) --g_throws_left;
    throw tiering::NeedRoom(MiB);
  }
  ctx.out.integer(g_calls);
}

void cmd_badalloc(server::CommandContext&) { throw std::bad_alloc(); }

void test_commands(server::CommandTable& t) {
  t.add({.name = "test.arm", .arity = 2, .handler = cmd_arm});
  t.add({.name = "test.needroom", .arity = 1, .flags = server::kWrite | server::kDenyOom,
         .handler = cmd_needroom});
  t.add({.name = "test.badalloc", .arity = 1, .flags = server::kWrite, .handler = cmd_badalloc});
}

struct Reply {
  redisReply* r;
  explicit Reply(void* p) : r(static_cast<redisReply*>(p)) { REQUIRE(r != nullptr); }
  ~Reply() { freeReplyObject(r); }
  std::string str() const { return std::string(r->str, r->len); }
};

std::string cmdstat(redisContext* c, const std::string& name) {
  Reply info(redisCommand(c, "INFO commandstats"));
  const std::string text = info.str(), key = "cmdstat_" + name + ":";
  const size_t at = text.find(key);
  if (at == std::string::npos) return "";
  const size_t end = text.find("\r\n", at);
  return text.substr(at + key.size(), end - at - key.size());
}

// "calls=1,...,rejected_calls=0,failed_calls=0" without usec figures.
std::string counts(const std::string& line) {
  auto field = [&](const std::string& name) {
    const size_t at = line.find(name + "=");
    return line.substr(at, line.find(',', at) - at);
  };
  return field("calls") + "," + field("rejected_calls") + "," +
         line.substr(line.find("failed_calls="));
}

}  // namespace

TEST_CASE("the handler stage makes room after tiering::NeedRoom and runs the handler again") {
  std::string err;
  tiering::RegionOptions region;
  region.capacity = 64 * MiB;
  REQUIRE(tiering::MemoryTier::start(region, &err));
  server::Config config;
  REQUIRE_FALSE(config.set("port", "0", false));
  REQUIRE_FALSE(config.set("threads", "1", false));
  auto srv = std::make_unique<server::Server>(config, test_commands);
  REQUIRE_FALSE(srv->listen());
  std::thread thread([&] { srv->run(); });
  redisContext* c = redisConnect("127.0.0.1", srv->tcp_port());
  REQUIRE((c != nullptr && c->err == 0));

  // Values to evict: each make_room(1 MiB) frees one.
  const std::string value(MiB, 'v');
  for (int i = 0; i < 16; ++i)
    Reply(redisCommand(c, "SET k:%d %b", i, value.data(), value.size()));
  Reply(redisCommand(c, "CONFIG RESETSTAT"));

  // Room comes: the third run succeeds, and only its reply is sent.
  Reply(redisCommand(c, "TEST.ARM 2"));
  {
    Reply r(redisCommand(c, "TEST.NEEDROOM"));
    REQUIRE(r.r->type == REDIS_REPLY_ARRAY);
    REQUIRE(r.r->elements == 2);
    CHECK(r.r->element[0]->type == REDIS_REPLY_STATUS);
    CHECK(r.r->element[1]->type == REDIS_REPLY_INTEGER);
    CHECK(r.r->element[1]->integer == 3);
  }
  CHECK(Reply(redisCommand(c, "DBSIZE")).r->integer == 14);  // one value evicted per retry
  CHECK(counts(cmdstat(c, "test.needroom")) == "calls=1,rejected_calls=0,failed_calls=0");

  // Room keeps being made but the handler keeps needing more: 8 runs, then -OOM.
  Reply(redisCommand(c, "TEST.ARM -1"));
  {
    Reply r(redisCommand(c, "TEST.NEEDROOM"));
    CHECK(r.r->type == REDIS_REPLY_ERROR);
    CHECK(r.str() == "OOM command not allowed when used memory > 'maxmemory'.");
  }
  CHECK(g_calls == 8);
  CHECK(Reply(redisCommand(c, "DBSIZE")).r->integer == 14 - 7);

  // Nothing left to evict: -OOM after the first run.
  Reply(redisCommand(c, "FLUSHALL"));
  Reply(redisCommand(c, "TEST.ARM -1"));
  CHECK(Reply(redisCommand(c, "TEST.NEEDROOM")).r->type == REDIS_REPLY_ERROR);
  CHECK(g_calls == 1);
  CHECK(counts(cmdstat(c, "test.needroom")) == "calls=1,rejected_calls=2,failed_calls=0");

  // Any other allocation failure: -OOM from the handler, a failed call.
  {
    Reply r(redisCommand(c, "TEST.BADALLOC"));
    CHECK(r.str() == "OOM command not allowed when used memory > 'maxmemory'.");
  }
  CHECK(counts(cmdstat(c, "test.badalloc")) == "calls=1,rejected_calls=0,failed_calls=1");
  CHECK(Reply(redisCommand(c, "PING")).str() == "PONG");

  // Cluster mode (off until the cluster lands): a command's keys must share one slot.
  CHECK(Reply(redisCommand(c, "MSET a 1 b 2")).str() == "OK");
  srv->slot_owner().set_cluster_enabled(true);
  CHECK(Reply(redisCommand(c, "MSET a 1 b 2")).str() ==
        "CROSSSLOT Keys in request don't hash to the same slot");
  CHECK(Reply(redisCommand(c, "MSET {t}a 1 {t}b 2")).str() == "OK");
  CHECK(Reply(redisCommand(c, "GET a")).str() == "1");
  // CROSSSLOT comes before MOVED, as in Redis's getNodeByQuery.
  srv->slot_owner().assign(0, cluster::kSlots - 1, "10.0.0.9:7001");
  CHECK(Reply(redisCommand(c, "MGET a b")).str() ==
        "CROSSSLOT Keys in request don't hash to the same slot");
  CHECK(Reply(redisCommand(c, "GET a")).str().rfind("MOVED ", 0) == 0);
  srv->slot_owner().assign(0, cluster::kSlots - 1, "");
  srv->slot_owner().set_cluster_enabled(false);
  CHECK(Reply(redisCommand(c, "MGET a b")).r->elements == 2);

  redisFree(c);
  srv->stop();
  thread.join();
}

TEST_CASE("SlotOwner: addresses no slot names are forgotten, so any number of reassignments keeps every slot right") {
  server::SlotOwner owner;
  // More distinct addresses than a 16-bit index holds, one after another on one slot.
  for (int i = 0; i < 70'000; ++i) owner.assign(5, 5, "10.0.0.1:" + std::to_string(i));
  owner.assign(7, 9, "10.0.0.2:7000");
  CHECK(owner.address(5) == "10.0.0.1:69999");
  CHECK(owner.address(8) == "10.0.0.2:7000");
  CHECK_FALSE(owner.owns(5));
  CHECK(owner.owns(6));
  CHECK(owner.address(6).empty());
  owner.assign(5, 9, "");
  CHECK(owner.owns_all());
}

TEST_CASE("SlotOwner: a tls-port client is named the node's tls-port, when it has one") {
  server::SlotOwner owner;
  owner.assign(0, 9, "10.0.0.1:7000", "10.0.0.1:7400");
  owner.assign(10, 19, "10.0.0.2:7000");  // no tls-port
  owner.assign(20, 29, "10.0.0.1:7000");  // the same plain address, its tls-port unknown here
  CHECK(owner.address(3) == "10.0.0.1:7000");
  CHECK(owner.address(3, /*tls=*/true) == "10.0.0.1:7400");
  CHECK(owner.address(15, true) == "10.0.0.2:7000");
  CHECK(owner.address(25, true) == "10.0.0.1:7000");
  CHECK(owner.address(3, true) == "10.0.0.1:7400");  // the other entry did not replace it
  // The sweep of unused addresses keeps both addresses of the entries still named.
  for (int i = 0; i < 20'000; ++i) owner.assign(40, 40, "10.0.0.3:" + std::to_string(i), "10.0.0.3:1");
  CHECK(owner.address(5, true) == "10.0.0.1:7400");
  CHECK(owner.address(40, true) == "10.0.0.3:1");
  CHECK(owner.address(40) == "10.0.0.3:19999");
  CHECK(owner.address(30, true).empty());  // this node's
}
