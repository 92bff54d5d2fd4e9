// EtcdClient (cluster/etcd_client.h) against a real etcd 3.4 (tests/unit/etcd_process.h): kv
// calls, CAS races, leases, watches, endpoint failover, an etcd restart, authentication.
#include <doctest.h>

#include <atomic>
#include <barrier>
#include <chrono>
#include <filesystem>
#include <future>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "cluster/etcd_client.h"
#include "etcd_process.h"

using namespace cluster;
using etcd_test::EtcdProcess;
using etcd_test::eventually;
using std::chrono::milliseconds;
using Clock = std::chrono::steady_clock;

namespace {

EtcdOptions options_for(const EtcdProcess& etcd) {
  EtcdOptions o;
  o.endpoints = {etcd.endpoint()};
  return o;
}

// Collects a watch's events from its own thread.
struct Watcher {
  std::mutex mu;
  std::vector<WatchEvent> events;
  std::stop_source stop;
  std::future<void> done;

  Watcher(EtcdClient& client, const std::string& key, int64_t start_revision, bool prefix = false) {
    done = std::async(std::launch::async, [&client, key, start_revision, prefix, this] {
      auto on_event = [this](const WatchEvent& e) {
        std::lock_guard lock(mu);
        events.push_back(e);
      };
      if (prefix) client.watch_prefix(key, start_revision, on_event, stop.get_token());
      else client.watch(key, start_revision, on_event, stop.get_token());
    });
  }
  ~Watcher() {
    stop.request_stop();
    if (done.valid()) done.wait();
  }
  size_t count() {
    std::lock_guard lock(mu);
    return events.size();
  }
  std::vector<WatchEvent> snapshot() {
    std::lock_guard lock(mu);
    return events;
  }
};

}  // namespace

TEST_CASE("etcd client: get, put, prefix, erase, binary keys and values") {
  EtcdProcess etcd;
  EtcdClient c(options_for(etcd));
  CHECK_FALSE(c.get("/t/a").has_value());
  const int64_t r1 = c.put("/t/a", "one");
  CHECK(r1 > 1);
  const std::string binary("\0\xff\n{\"x", 6);
  const int64_t r2 = c.put("/t/b", binary);
  CHECK(r2 == r1 + 1);
  c.put("/t/c", "");
  c.put("/u/a", "other prefix");

  int64_t revision = 0;
  const auto a = c.get("/t/a", &revision);
  REQUIRE(a.has_value());
  CHECK(a->key == "/t/a");
  CHECK(a->value == "one");
  CHECK(a->create_revision == r1);
  CHECK(a->mod_revision == r1);
  CHECK(a->version == 1);
  CHECK(a->lease == 0);
  CHECK(revision == r2 + 2);
  CHECK(c.get("/t/b")->value == binary);
  CHECK(c.get("/t/c")->value.empty());

  const std::vector<KeyValue> t = c.get_prefix("/t/");
  REQUIRE(t.size() == 3);
  CHECK(t[0].key == "/t/a");
  CHECK(t[1].key == "/t/b");
  CHECK(t[2].key == "/t/c");
  CHECK(c.get_prefix("").size() == 4);
  CHECK(c.get_prefix("/none/").empty());

  CHECK(c.erase("/t/a"));
  CHECK_FALSE(c.erase("/t/a"));
  CHECK_FALSE(c.get("/t/a").has_value());
  CHECK(c.endpoint() == etcd.endpoint());
}

TEST_CASE("etcd client: compare_and_swap on mod_revision; of two racing threads exactly one wins") {
  EtcdProcess etcd;
  EtcdClient c(options_for(etcd));
  CHECK(c.create_if_absent("/cas", "v1"));
  CHECK_FALSE(c.create_if_absent("/cas", "again"));
  const KeyValue kv = *c.get("/cas");
  CHECK_FALSE(c.compare_and_swap("/cas", kv.mod_revision + 1, "wrong"));
  CHECK(c.compare_and_swap("/cas", kv.mod_revision, "v2"));
  CHECK_FALSE(c.compare_and_swap("/cas", kv.mod_revision, "stale"));
  CHECK(c.get("/cas")->value == "v2");

  constexpr int kRounds = 20;
  std::barrier sync(2);
  std::atomic<int> wins[2] = {0, 0};
  auto racer = [&](int who) {
    for (int round = 0; round < kRounds; ++round) {
      const std::string key = "/race/" + std::to_string(round);
      sync.arrive_and_wait();
      if (c.create_if_absent(key, "created by " + std::to_string(who))) ++wins[who];
      sync.arrive_and_wait();
      const int64_t rev = c.get(key)->mod_revision;  // both read the same revision
      sync.arrive_and_wait();
      if (c.compare_and_swap(key, rev, "swapped by " + std::to_string(who))) ++wins[who];
    }
  };
  std::thread t0(racer, 0), t1(racer, 1);
  t0.join();
  t1.join();
  CHECK(wins[0] + wins[1] == 2 * kRounds);  // one creation and one swap per round
  for (int round = 0; round < kRounds; ++round) CHECK(c.get("/race/" + std::to_string(round))->version == 2);
}

TEST_CASE("etcd client: leases: keepalive, expiry after the TTL, revoke") {
  EtcdProcess etcd;
  EtcdClient c(options_for(etcd));
  const int64_t kept = c.lease_grant(1);
  c.put("/lease/kept", "x", kept);
  CHECK(c.get("/lease/kept")->lease == kept);
  const int64_t expiring = c.lease_grant(1);
  c.put("/lease/expiring", "x", expiring);

  // The kept lease outlives its TTL by renewals while the other one expires.
  const auto start = Clock::now();
  CHECK(eventually([&] {
    CHECK(c.lease_keepalive(kept) >= 1);
    return !c.get("/lease/expiring").has_value();
  }));
  CHECK(Clock::now() - start >= milliseconds(900));
  CHECK(c.lease_keepalive(expiring) == 0);  // gone: the reply has no TTL
  CHECK(c.get("/lease/kept").has_value());
  CHECK_THROWS_AS(c.put("/lease/x", "x", expiring), EtcdError);

  CHECK(c.lease_revoke(kept));
  CHECK_FALSE(c.get("/lease/kept").has_value());  // keys go with the lease at once
  CHECK_FALSE(c.lease_revoke(kept));
  CHECK(c.lease_keepalive(kept) == 0);
}

TEST_CASE("etcd client: watch delivers events in order, resumes from a revision, stops promptly") {
  EtcdProcess etcd;
  EtcdClient c(options_for(etcd));
  const int64_t r1 = c.put("/w/k", "a");
  c.put("/w/other", "not watched");
  const int64_t r3 = c.put("/w/k", "b");
  const int64_t r4 = c.erase("/w/k") ? r3 + 1 : 0;

  {
    Watcher w(c, "/w/k", r1);  // history first, then live events
    REQUIRE(eventually([&] { return w.count() == 3; }));
    const int64_t r5 = c.put("/w/k", "c");
    REQUIRE(eventually([&] { return w.count() == 4; }));
    const std::vector<WatchEvent> e = w.snapshot();
    CHECK(e[0].type == WatchEvent::Type::kPut);
    CHECK(e[0].kv.value == "a");
    CHECK(e[0].kv.mod_revision == r1);
    CHECK(e[1].kv.value == "b");
    CHECK(e[1].kv.mod_revision == r3);
    CHECK(e[2].type == WatchEvent::Type::kDelete);
    CHECK(e[2].kv.key == "/w/k");
    CHECK(e[2].kv.mod_revision == r4);
    CHECK(e[3].kv.value == "c");
    CHECK(e[3].kv.mod_revision == r5);
    CHECK(e[3].kv.version == 1);  // created again after the delete

    const auto asked = Clock::now();
    w.stop.request_stop();
    REQUIRE(w.done.wait_for(std::chrono::seconds(5)) == std::future_status::ready);
    CHECK_NOTHROW(w.done.get());
    CHECK(Clock::now() - asked < milliseconds(500));
  }
  {
    Watcher w(c, "/w/k", r3 + 1);  // resume after the second event
    REQUIRE(eventually([&] { return w.count() == 2; }));
    CHECK(w.snapshot()[0].type == WatchEvent::Type::kDelete);
    CHECK(w.snapshot()[1].kv.value == "c");
  }
  {
    Watcher w(c, "/w/", r1, /*prefix=*/true);
    REQUIRE(eventually([&] { return w.count() == 5; }));
    CHECK(w.snapshot()[1].kv.key == "/w/other");
  }
}

TEST_CASE("etcd client: a watch from a compacted revision throws EtcdCompacted") {
  EtcdProcess etcd;
  EtcdClient c(options_for(etcd));
  const int64_t r1 = c.put("/k", "1");
  c.put("/k", "2");
  const int64_t r3 = c.put("/k", "3");
  c.post("/v3/kv/compaction", R"({"revision":")" + std::to_string(r3) + R"("})");
  std::stop_source stop;
  try {
    c.watch("/k", r1, [](const WatchEvent&) {}, stop.get_token());
    FAIL("the watch returned");
  } catch (const EtcdCompacted& e) {
    CHECK(e.compact_revision() == r3);
  }
}

TEST_CASE("etcd client: failover past a dead endpoint; none answering is EtcdUnavailable") {
  EtcdProcess etcd;
  EtcdOptions o;
  const std::string dead = "http://127.0.0.1:" + std::to_string(etcd_test::free_port());
  o.endpoints = {dead, etcd.endpoint()};
  EtcdClient c(o);
  CHECK(c.endpoint() == dead);
  c.put("/f", "v");
  CHECK(c.endpoint() == etcd.endpoint());  // remembered
  CHECK(c.get("/f")->value == "v");
  {
    EtcdClient w(o);  // a watch fails over too
    Watcher watcher(w, "/f", 1);
    REQUIRE(eventually([&] { return watcher.count() == 1; }));
  }

  EtcdOptions none;
  none.endpoints = {dead, "http://127.0.0.1:" + std::to_string(etcd_test::free_port())};
  EtcdClient d(none);
  const auto start = Clock::now();
  try {
    d.get("/f");
    FAIL("get succeeded");
  } catch (const EtcdUnavailable& e) {
    CHECK(std::string(e.what()).find(dead) != std::string::npos);
  }
  CHECK(Clock::now() - start < milliseconds(1000));  // refused at once, no timeout waited
  std::stop_source stop;
  CHECK_THROWS_AS(d.watch("/f", 0, [](const WatchEvent&) {}, stop.get_token()), EtcdUnavailable);
  CHECK_THROWS_AS(EtcdClient(EtcdOptions{}), std::invalid_argument);
}

TEST_CASE("etcd client: recovers after an etcd restart; a broken watch throws EtcdUnavailable") {
  EtcdProcess etcd;
  EtcdClient c(options_for(etcd));
  const int64_t r1 = c.put("/r", "before");
  Watcher w(c, "/r", r1);
  REQUIRE(eventually([&] { return w.count() == 1; }));

  etcd.kill();
  REQUIRE(w.done.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
  CHECK_THROWS_AS(w.done.get(), EtcdUnavailable);
  CHECK_THROWS_AS(c.get("/r"), EtcdUnavailable);
  CHECK_THROWS_AS(c.compare_and_swap("/r", r1, "x"), EtcdUnavailable);

  etcd.start();
  REQUIRE(eventually([&] {
    try {
      return c.get("/r")->value == "before";  // the data survived, the client reconnected
    } catch (const EtcdUnavailable&) {
      return false;
    }
  }));
  CHECK(c.compare_and_swap("/r", r1, "after"));
  Watcher again(c, "/r", r1 + 1);  // resumed after the last event seen
  REQUIRE(eventually([&] { return again.count() == 1; }));
  CHECK(again.snapshot()[0].kv.value == "after");
}

TEST_CASE("etcd client: authentication, and again after the token is invalidated") {
  EtcdProcess etcd;
  {
    EtcdClient admin(options_for(etcd));
    admin.post("/v3/auth/user/add", R"({"name":"root","password":"rootpw"})");
    admin.post("/v3/auth/user/grant", R"({"user":"root","role":"root"})");
    admin.post("/v3/auth/enable", "{}");
  }
  EtcdClient anonymous(options_for(etcd));
  CHECK_THROWS_AS(anonymous.get("/a"), EtcdError);

  EtcdOptions o = options_for(etcd);
  o.user = "root";
  o.password = "wrong";
  EtcdClient bad(o);
  CHECK_THROWS_WITH_AS(bad.put("/a", "x"), doctest::Contains("authentication as 'root' failed"), EtcdError);

  o.password = "rootpw";
  EtcdClient c(o);
  c.put("/a", "1");
  CHECK(c.get("/a")->value == "1");
  Watcher w(c, "/a", 1);
  REQUIRE(eventually([&] { return w.count() == 1; }));

  // Disabling auth drops every simple token: the enable below is sent with an invalid token
  // (the client authenticates again, hears "authentication is not enabled" and sends none),
  // then the CAS without a token hears "user name is empty" and authenticates again.
  c.post("/v3/auth/disable", "{}");
  c.post("/v3/auth/enable", "{}");
  CHECK(c.compare_and_swap("/a", c.get("/a")->mod_revision, "2"));
  CHECK(c.get("/a")->value == "2");
}

TEST_CASE("etcd client: https with a CA file and a client certificate") {
  char tmpl[] = "/tmp/stratakv-etcd-tls-XXXXXX";
  REQUIRE(::mkdtemp(tmpl) != nullptr);
  const std::string dir = tmpl;
  const std::optional<etcd_test::EtcdTls> tls = etcd_test::make_tls_files(dir);
  if (!tls) {
    MESSAGE("no openssl: TLS not tested");
    return;
  }
  {
    EtcdProcess etcd(tls);
    EtcdOptions o = options_for(etcd);
    CHECK(o.endpoints[0].rfind("https://", 0) == 0);
    o.ca_file = tls->ca_file;
    o.cert_file = tls->client_cert_file;
    o.key_file = tls->client_key_file;
    EtcdClient c(o);
    const int64_t r = c.put("/tls", "secret");
    CHECK(c.get("/tls")->value == "secret");
    Watcher w(c, "/tls", r);
    REQUIRE(eventually([&] { return w.count() == 1; }));

    EtcdOptions no_cert = o;  // etcd asks for a client certificate
    no_cert.cert_file.clear();
    no_cert.key_file.clear();
    CHECK_THROWS_AS(EtcdClient(no_cert).get("/tls"), EtcdUnavailable);
    EtcdOptions no_ca = o;  // the server's certificate cannot be verified
    no_ca.ca_file.clear();
    CHECK_THROWS_AS(EtcdClient(no_ca).get("/tls"), EtcdUnavailable);
  }
  std::filesystem::remove_all(dir);
}
