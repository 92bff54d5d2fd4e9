// Unit tests of server/arg_parser: Redis's strict number rules and the expiry options.
#include <doctest.h>

#include <vector>

#include "server/arg_parser.h"

using namespace server;

TEST_CASE("parse_int is strict like string2ll") {
  CHECK(parse_int("0") == 0);
  CHECK(parse_int("-1") == -1);
  CHECK(parse_int("9223372036854775807") == INT64_MAX);
  CHECK(parse_int("-9223372036854775808") == INT64_MIN);
  CHECK_FALSE(parse_int("9223372036854775808").has_value());
  CHECK_FALSE(parse_int("-9223372036854775809").has_value());
  CHECK_FALSE(parse_int("").has_value());
  CHECK_FALSE(parse_int("-").has_value());
  CHECK_FALSE(parse_int("-0").has_value());
  CHECK_FALSE(parse_int("01").has_value());
  CHECK_FALSE(parse_int("+1").has_value());
  CHECK_FALSE(parse_int(" 1").has_value());
  CHECK_FALSE(parse_int("1 ").has_value());
  CHECK_FALSE(parse_int("1.0").has_value());
}

TEST_CASE("long doubles parse and print like Redis") {
  CHECK(parse_long_double("10.5") == 10.5L);
  CHECK(parse_long_double("5.0e3") == 5000.0L);
  CHECK_FALSE(parse_long_double("abc").has_value());
  CHECK_FALSE(parse_long_double(" 1").has_value());
  CHECK_FALSE(parse_long_double("nan").has_value());
  CHECK(format_long_double(10.5L) == "10.5");
  CHECK(format_long_double(5000.0L) == "5000");
  CHECK(format_long_double(10.5L + 0.1L) == "10.6");
  CHECK(format_long_double(-3.0L) == "-3");
  CHECK(format_long_double(0.0L) == "0");
}

TEST_CASE("deadline_ms converts and rejects like Redis") {
  const int64_t now = 1'000'000;
  CHECK(deadline_ms(10, true, false, now) == now + 10'000);
  CHECK(deadline_ms(10, false, false, now) == now + 10);
  CHECK(deadline_ms(2'000, true, true, now) == 2'000'000);
  CHECK(deadline_ms(5, false, true, now) == 5);
  CHECK_FALSE(deadline_ms(0, true, false, now).has_value());
  CHECK_FALSE(deadline_ms(-5, false, false, now).has_value());
  CHECK_FALSE(deadline_ms(INT64_MAX / 10, true, false, now).has_value());
  CHECK_FALSE(deadline_ms(INT64_MAX - 10, false, false, now).has_value());
}

TEST_CASE("ArgParser reads expiry options' syntax; resolve_expire checks the time") {
  const int64_t now = 1'000'000;
  std::vector<std::string_view> ok = {"set", "k", "v", "px", "100"};
  ArgParser p(ok, 3);
  ExpireOption e;
  CHECK(parse_expire_option(p, true, false, &e));
  CHECK(p.ok());
  CHECK(p.done());
  CHECK(e.kind == ExpireOption::kAt);
  CHECK_FALSE(resolve_expire(&e, "set", now).has_value());
  CHECK(e.at_ms == now + 100);

  // Two different options: a syntax error. The same one twice: the last wins (Redis 7.0).
  std::vector<std::string_view> twice = {"set", "k", "v", "EX", "1", "PX", "1"};
  ArgParser p2(twice, 3);
  ExpireOption e2;
  while (!p2.done() && p2.ok()) parse_expire_option(p2, true, false, &e2);
  CHECK(p2.error() == "ERR syntax error");
  std::vector<std::string_view> again = {"set", "k", "v", "EX", "1", "ex", "2"};
  ArgParser p2b(again, 3);
  ExpireOption e2b;
  while (!p2b.done() && p2b.ok()) parse_expire_option(p2b, true, false, &e2b);
  CHECK(p2b.ok());
  CHECK_FALSE(resolve_expire(&e2b, "set", now).has_value());
  CHECK(e2b.at_ms == now + 2000);

  // A bad time is the syntax's business only when it is missing.
  std::vector<std::string_view> bad = {"set", "k", "v", "EX", "x"};
  ArgParser p3(bad, 3);
  ExpireOption e3;
  parse_expire_option(p3, true, false, &e3);
  CHECK(p3.ok());
  CHECK(resolve_expire(&e3, "set", now) == "ERR value is not an integer or out of range");
  std::vector<std::string_view> missing = {"set", "k", "v", "EX"};
  ArgParser p3b(missing, 3);
  ExpireOption e3b;
  CHECK(parse_expire_option(p3b, true, false, &e3b));
  CHECK(p3b.error() == "ERR syntax error");

  std::vector<std::string_view> zero = {"getex", "k", "EX", "0"};
  ArgParser p4(zero, 2);
  ExpireOption e4;
  parse_expire_option(p4, false, true, &e4);
  CHECK(p4.ok());
  CHECK(resolve_expire(&e4, "getex", now) == "ERR invalid expire time in 'getex' command");

  std::vector<std::string_view> keep = {"set", "k", "v", "keepttl", "KEEPTTL"};
  ArgParser p5(keep, 3);
  ExpireOption e5;
  while (!p5.done() && p5.ok()) CHECK(parse_expire_option(p5, true, false, &e5));
  CHECK(p5.ok());
  CHECK(e5.kind == ExpireOption::kKeep);
  CHECK_FALSE(resolve_expire(&e5, "set", now).has_value());

  std::vector<std::string_view> persist_on_set = {"set", "k", "v", "PERSIST"};
  ArgParser p6(persist_on_set, 3);
  ExpireOption e6;
  CHECK_FALSE(parse_expire_option(p6, true, false, &e6));

  std::vector<std::string_view> persist_ex = {"getex", "k", "PERSIST", "EX", "1"};
  ArgParser p7(persist_ex, 2);
  ExpireOption e7;
  while (!p7.done() && p7.ok()) parse_expire_option(p7, false, true, &e7);
  CHECK(p7.error() == "ERR syntax error");
}
