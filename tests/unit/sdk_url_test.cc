// sdk_url_test: the server addresses libstratakv accepts (clients/cpp/src/url.h).
#include <doctest.h>

#include "stratakv/error.h"
#include "url.h"

using stratakv::detail::parse_url;
using stratakv::detail::Url;

namespace {

// parse_url refuses `text` with Error(kUsage).
void check_refused(const char* text) {
  try {
    parse_url(text);
    FAIL("accepted");
  } catch (const stratakv::Error& e) {
    CHECK(e.kind() == stratakv::Error::Kind::kUsage);
  }
}

}  // namespace

TEST_CASE("redis:// URLs") {
  Url u = parse_url("redis://cache.local:6380");
  CHECK(u.scheme == Url::Scheme::kTcp);
  CHECK(u.host == "cache.local");
  CHECK(u.port == 6380);
  CHECK(u.password.empty());
  CHECK(parse_url("redis://h").port == 6379);
  CHECK(parse_url("redis://h/0").host == "h");
  u = parse_url("redis://:s%40cret@h:1");
  CHECK(u.user.empty());
  CHECK(u.password == "s@cret");
  u = parse_url("redis://alice:pw@[::1]:7000");
  CHECK(u.user == "alice");
  CHECK(u.password == "pw");
  CHECK(u.host == "::1");
  CHECK(u.port == 7000);
}

TEST_CASE("unix:// URLs") {
  Url u = parse_url("unix:///run/stratakv.sock");
  CHECK(u.scheme == Url::Scheme::kUnix);
  CHECK(u.path == "/run/stratakv.sock");
  u = parse_url("unix://:pw@/tmp/a%20b.sock");
  CHECK(u.password == "pw");
  CHECK(u.path == "/tmp/a b.sock");
  u = parse_url("unix:///tmp/s.sock?password=x&user=bob&db=0");
  CHECK(u.password == "x");
  CHECK(u.user == "bob");
  CHECK(u.path == "/tmp/s.sock");
}

TEST_CASE("rediss:// URLs: TLS, with redis-py's ssl_* query parameters") {
  Url u = parse_url("rediss://:pw@cache.local:6380");
  CHECK(u.scheme == Url::Scheme::kTcp);
  CHECK(u.tls);
  CHECK(u.host == "cache.local");
  CHECK(u.port == 6380);
  CHECK(u.password == "pw");
  CHECK(u.tls_config.ca_certs.empty());
  CHECK(u.tls_config.verify_peer);          // redis-py's default: ssl_cert_reqs=required
  CHECK_FALSE(u.tls_config.check_hostname);  // and ssl_check_hostname=False
  CHECK_FALSE(parse_url("redis://h").tls);
  CHECK(parse_url("rediss://h").port == 6379);

  u = parse_url("rediss://h:1?ssl_ca_certs=%2Fetc%2Fca.pem&ssl_certfile=/c.pem&ssl_keyfile=/k.pem"
                "&ssl_cert_reqs=required&ssl_check_hostname=true&read_from=primary");
  CHECK(u.tls_config.ca_certs == "/etc/ca.pem");
  CHECK(u.tls_config.certfile == "/c.pem");
  CHECK(u.tls_config.keyfile == "/k.pem");
  CHECK(u.tls_config.verify_peer);
  CHECK(u.tls_config.check_hostname);
  u = parse_url("rediss://[::1]:7000?ssl_cert_reqs=none&ssl_check_hostname=false");
  CHECK(u.host == "::1");
  CHECK_FALSE(u.tls_config.verify_peer);
  CHECK_FALSE(u.tls_config.check_hostname);
}

TEST_CASE("bad rediss:// URLs are usage errors") {
  for (const char* bad : {"rediss://h?ssl_bogus=1", "rediss://h?ssl_cert_reqs=optional",
                          "rediss://h?ssl_check_hostname=maybe", "rediss://h?verify=1",
                          "rediss://h?ssl_cert_reqs=none&ssl_check_hostname=true",
                          "rediss://h?ssl_keyfile=/k.pem", "redis://h?ssl_ca_certs=/ca.pem",
                          "unix:///s?ssl_certfile=/c.pem", "rediss://",
                          "rediss+cluster://h:1"}) {  // a cluster URL: parse_cluster_url's
    CAPTURE(std::string(bad));
    check_refused(bad);
  }
}

TEST_CASE("bad URLs are usage errors") {
  for (const char* bad : {"", "redis:/h", "http://h", "redis://", "redis://h:", "redis://h:0", "redis://h:65536",
                          "redis://h:12x", "redis://[::1", "redis://h/1", "unix://", "unix://rel.sock",
                          "unix:///s?db=3", "unix:///s?x=1", "redis://h%zz"}) {
    CAPTURE(std::string(bad));
    check_refused(bad);
  }
}

TEST_CASE("redis+cluster:// URLs: the seeds") {
  using stratakv::detail::is_cluster_url;
  using stratakv::detail::parse_cluster_url;
  CHECK(is_cluster_url("redis+cluster://h:1"));
  CHECK_FALSE(is_cluster_url("redis://h:1"));
  auto seeds = parse_cluster_url("redis+cluster://alice:p%40w@10.0.0.1:7000,[::1]:7001,node-c");
  REQUIRE(seeds.size() == 3);
  CHECK(seeds[0].host == "10.0.0.1");
  CHECK(seeds[0].port == 7000);
  CHECK(seeds[1].host == "::1");
  CHECK(seeds[1].port == 7001);
  CHECK(seeds[2].host == "node-c");
  CHECK(seeds[2].port == 6379);
  for (const Url& u : seeds) {
    CHECK(u.scheme == Url::Scheme::kTcp);
    CHECK(u.user == "alice");
    CHECK(u.password == "p@w");
  }
  seeds = parse_cluster_url("redis+cluster://h:1?password=x");
  REQUIRE(seeds.size() == 1);
  CHECK(seeds[0].password == "x");
  CHECK_FALSE(seeds[0].read_from.has_value());
  seeds = parse_cluster_url("redis+cluster://h:1,h:2?read_from=replicas&password=x");
  REQUIRE(seeds.size() == 2);
  CHECK(seeds[1].read_from == stratakv::ReadFrom::kReplicas);
  CHECK(seeds[1].password == "x");
  CHECK(parse_cluster_url("redis+cluster://h:1?read_from=nearest")[0].read_from == stratakv::ReadFrom::kNearest);
  CHECK(parse_cluster_url("redis+cluster://h:1?read_from=primary")[0].read_from == stratakv::ReadFrom::kPrimary);
  CHECK_FALSE(parse_cluster_url("redis+cluster://h:1")[0].readonly);
  for (const char* bad : {"redis+cluster://h:1?read_from=replica", "redis+cluster://h:1?read_from="})
    CHECK_THROWS_AS(parse_cluster_url(bad), stratakv::Error);
  for (const char* bad : {"redis+cluster://", "redis+cluster://h:1,", "redis+cluster://,h:1",
                          "redis+cluster://h:0", "redis+cluster://h:1,h:x", "redis://h:1"})
    CHECK_THROWS_AS(parse_cluster_url(bad), stratakv::Error);
}

TEST_CASE("rediss+cluster:// URLs: every seed over TLS, with the query's ssl_* settings") {
  using stratakv::detail::is_cluster_url;
  using stratakv::detail::parse_cluster_url;
  CHECK(is_cluster_url("rediss+cluster://h:1"));
  auto seeds = parse_cluster_url("rediss+cluster://bob:pw@h:1,[::1]:2?ssl_ca_certs=/ca.pem&ssl_cert_reqs=none"
                                 "&ssl_check_hostname=false&read_from=replicas");
  REQUIRE(seeds.size() == 2);
  for (const Url& u : seeds) {
    CHECK(u.scheme == Url::Scheme::kTcp);
    CHECK(u.tls);
    CHECK(u.tls_config.ca_certs == "/ca.pem");
    CHECK_FALSE(u.tls_config.verify_peer);
    CHECK(u.user == "bob");
    CHECK(u.read_from == stratakv::ReadFrom::kReplicas);
  }
  CHECK(seeds[1].host == "::1");
  CHECK_FALSE(parse_cluster_url("redis+cluster://h:1")[0].tls);
  for (const char* bad : {"rediss+cluster://", "rediss+cluster://h:1?ssl_bogus=1",
                          "redis+cluster://h:1?ssl_ca_certs=/ca.pem",
                          "rediss+cluster://h:1?ssl_keyfile=/k.pem"})
    CHECK_THROWS_AS(parse_cluster_url(bad), stratakv::Error);
}
