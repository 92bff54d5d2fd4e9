// sdk_url_test: the server addresses libstratakv accepts (clients/cpp/src/url.h).
#include <doctest.h>

#include "stratakv/error.h"
#include "url.h"

using stratakv::detail::parse_url;
using stratakv::detail::Url;

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

TEST_CASE("bad URLs are usage errors") {
  for (const char* bad : {"", "redis:/h", "http://h", "redis://", "redis://h:", "redis://h:0", "redis://h:65536",
                          "redis://h:12x", "redis://[::1", "redis://h/1", "unix://", "unix://rel.sock",
                          "unix:///s?db=3", "unix:///s?x=1", "redis://h%zz"}) {
    CAPTURE(std::string(bad));
    try {
      parse_url(bad);
      FAIL("accepted");
    } catch (const stratakv::Error& e) {
      CHECK(e.kind() == stratakv::Error::Kind::kUsage);
    }
  }
}
