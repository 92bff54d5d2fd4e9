// Unit tests of server::Config: units, bounds, enums, TOML files, CONFIG GET globbing.
#include <doctest.h>

#include <cstdio>
#include <fstream>

#include "server/config.h"
#include "server/os_tuning.h"

using server::Config;
using server::Key;

TEST_CASE("sizes take Redis's units") {
  CHECK(Config::parse_size("100") == 100);
  CHECK(Config::parse_size("1k") == 1000);
  CHECK(Config::parse_size("1kb") == 1024);
  CHECK(Config::parse_size("64mb") == 64ll << 20);
  CHECK(Config::parse_size("64MB") == 64ll << 20);
  CHECK(Config::parse_size("2m") == 2000000);
  CHECK(Config::parse_size("4gb") == 4ll << 30);
  CHECK(Config::parse_size("1g") == 1000000000);
  CHECK_FALSE(Config::parse_size("").has_value());
  CHECK_FALSE(Config::parse_size("mb").has_value());
  CHECK_FALSE(Config::parse_size("-1").has_value());
  CHECK_FALSE(Config::parse_size("12xb").has_value());
  CHECK_FALSE(Config::parse_size("99999999999999gb").has_value());
}

TEST_CASE("defaults are Redis's") {
  Config c;
  CHECK(c.num(Key::kPort) == 6379);
  CHECK(c.num(Key::kMaxClients) == 10000);
  CHECK(c.num(Key::kProtoMaxBulkLen) == 512ll << 20);
  CHECK(c.num(Key::kClientQueryBufferLimit) == 1ll << 30);
  CHECK(c.num(Key::kTimeout) == 0);
  CHECK(c.str(Key::kBind) == "127.0.0.1");
  CHECK(c.num(Key::kThreads) >= 1);
  CHECK(c.num(Key::kRequirePass) == 0);
  // 0, resolved: 80% of the machine's memory.
  CHECK(c.num(Key::kMemoryCapacity) ==
        static_cast<int64_t>(server::auto_memory_capacity(server::kAutoCapacityShare)));
  CHECK(c.num(Key::kMemoryHugepages) == 0);
}

TEST_CASE("set validates types, bounds and mutability") {
  Config c;
  CHECK_FALSE(c.set("maxclients", "50", true).has_value());
  CHECK(c.num(Key::kMaxClients) == 50);
  CHECK(c.set("maxclients", "abc", true).has_value());
  CHECK(c.set("maxclients", "0", true).has_value());
  CHECK(c.num(Key::kMaxClients) == 50);
  CHECK(c.set("port", "7000", true).has_value());  // immutable at run time
  CHECK_FALSE(c.set("port", "7000", false).has_value());
  CHECK(c.num(Key::kPort) == 7000);
  CHECK(c.set("nope", "1", false).has_value());
  CHECK_FALSE(c.set("MAXMEMORY", "1gb", true).has_value());
  CHECK(c.num(Key::kMaxMemory) == 1ll << 30);
  CHECK_FALSE(c.set("maxmemory-policy", "ALLKEYS-LRU", true).has_value());
  CHECK(c.get("maxmemory-policy")[0].second == "allkeys-lru");
  CHECK(c.set("maxmemory-policy", "lru", true).has_value());
  CHECK(c.choice(Key::kMaxMemoryPolicy) == "allkeys-lru");
  CHECK(c.choice(Key::kMaxClients).empty());  // not an enum
  CHECK_FALSE(c.set("protected-mode", "no", true).has_value());
  CHECK(c.num(Key::kProtectedMode) == 0);
  CHECK(c.set("protected-mode", "maybe", true).has_value());
  CHECK_FALSE(c.set("requirepass", "pw", true).has_value());
  CHECK(c.num(Key::kRequirePass) == 1);
  CHECK(c.str(Key::kRequirePass) == "pw");
}

TEST_CASE("maxmemory-policy: every Redis name reads back, by name") {
  Config c;
  for (const char* name : {"volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl",
                           "allkeys-lru", "allkeys-lfu", "allkeys-random", "noeviction"}) {
    CAPTURE(name);
    CHECK_FALSE(c.set("maxmemory-policy", name, true).has_value());
    CHECK(c.get("maxmemory-policy")[0].second == name);
    CHECK(c.choice(Key::kMaxMemoryPolicy) == name);
  }
  // Redis's CONFIG SET error lists the names in its config table's order.
  auto e = c.set("maxmemory-policy", "lru", true);
  REQUIRE(e.has_value());
  CHECK(*e ==
        "argument(s) must be one of the following: volatile-lru, volatile-lfu, volatile-random, "
        "volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, noeviction");
  CHECK(c.choice(Key::kMaxMemoryPolicy) == "noeviction");  // unchanged by the failed set
}

TEST_CASE("fractions: eviction watermarks") {
  Config c;
  CHECK(c.fraction(Key::kEvictionHighWatermark) == doctest::Approx(0.95));
  CHECK(c.fraction(Key::kEvictionLowWatermark) == doctest::Approx(0.90));
  CHECK_FALSE(c.set("eviction.low_watermark", "0.5", true).has_value());
  CHECK(c.fraction(Key::kEvictionLowWatermark) == doctest::Approx(0.5));
  CHECK(c.get("eviction.low_watermark")[0].second == "0.5");
  CHECK(c.set("eviction.low_watermark", "0", true).has_value());
  CHECK(c.set("eviction.low_watermark", "1.5", true).has_value());
  CHECK(c.set("eviction.low_watermark", "abc", true).has_value());
  CHECK(c.set("eviction.low_watermark", "", true).has_value());
  CHECK(c.fraction(Key::kEvictionLowWatermark) == doctest::Approx(0.5));
}

TEST_CASE("get matches glob patterns, case-insensitively") {
  Config c;
  auto all = c.get("*");
  CHECK(all.size() > 15);
  auto mm = c.get("maxmemory*");
  REQUIRE(mm.size() == 2);
  CHECK(mm[0].first == "maxmemory");
  CHECK(mm[0].second == "0");
  CHECK(c.get("PORT").size() == 1);
  CHECK(c.get("proto-max-bulk-len")[0].second == std::to_string(512ll << 20));
  CHECK(c.get("nothing-like-this").empty());
  // A name without glob characters reads by the rule CONFIG SET sets by ('-' and '_' alike),
  // under the key's own name (the config fuzz target found the two disagreeing).
  REQUIRE(c.get("TLS_CA_CERT_FILE").size() == 1);
  CHECK(c.get("TLS_CA_CERT_FILE")[0].first == "tls-ca-cert-file");
  CHECK(c.get("tiering.ssd.flush-on-shutdown")[0].first == "tiering.ssd.flush_on_shutdown");
  CHECK(c.get("tls_ca_cert_*").empty());  // a glob compares names as they are written
}

TEST_CASE("TOML files load, nested tables flatten, errors are reported") {
  const std::string path = "/tmp/stratakv_config_test.toml";
  {
    std::ofstream f(path);
    f << "port = 7001\nmaxmemory = \"64mb\"\nprotected-mode = false\nrequirepass = \"s\"\n";
  }
  Config c;
  CHECK_FALSE(c.load_file(path).has_value());
  CHECK(c.num(Key::kPort) == 7001);
  CHECK(c.num(Key::kMaxMemory) == 64ll << 20);
  CHECK(c.num(Key::kProtectedMode) == 0);
  CHECK(c.str(Key::kRequirePass) == "s");
  {
    std::ofstream f(path);
    f << "[nope]\nkey = 1\n";
  }
  auto err = c.load_file(path);
  REQUIRE(err.has_value());
  CHECK(err->find("nope.key") != std::string::npos);
  {
    std::ofstream f(path);
    f << "port = = 1\n";
  }
  CHECK(c.load_file(path).has_value());
  CHECK(c.load_file("/nonexistent/stratakv.toml").has_value());
  // A TOML file must be UTF-8: invalid bytes are refused before parsing (toml11 3.7.1 reads
  // past its buffer on some of them inside a string: tests/fuzz/corpus/config/toml_bad_utf8).
  for (const std::string& bad : {std::string("maxmemory = '\xff\xb3'\n"),
                                std::string("requirepass = \"\xc0\xaf\"\n"),      // overlong
                                std::string("requirepass = \"\xed\xa0\x80\"\n"),  // surrogate
                                std::string("requirepass = \"\xf4\x90\x80\x80\"\n"),
                                std::string("requirepass = \"\xe2\x82")}) {       // cut short
    auto e = c.load_text(bad, "t.toml");
    REQUIRE(e.has_value());
    CHECK(e->find("not valid UTF-8") != std::string::npos);
  }
  CHECK_FALSE(c.load_text("requirepass = \"p\xc3\xa4\xe2\x82\xac\xf0\x9f\x94\x91\"\n", "t.toml"));
  CHECK(c.str(Key::kRequirePass) == "p\xc3\xa4\xe2\x82\xac\xf0\x9f\x94\x91");
  // Arrays or tables nested deeper than 32 are refused before parsing: toml11 parses them by
  // recursion and overflows the stack on a few thousand (tests/fuzz/corpus/config/toml_deep).
  {
    auto e = c.load_text("x = " + std::string(100000, '[') + "\n", "t.toml");
    REQUIRE(e.has_value());
    CHECK(e->find("nested more than 32 deep at byte 36") != std::string::npos);
  }
  // Brackets inside strings and comments are not nesting.
  CHECK_FALSE(c.load_text("# [[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[\ntls-ca-cert-file = '" +
                              std::string(100, '[') + "' # {{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{{\n",
                          "t.toml"));
  CHECK(c.str(Key::kTlsCaCertFile) == std::string(100, '['));
  // So are keys of more than 32 dotted parts (each a nested table: a few hundred took toml11
  // a second, tests/fuzz/corpus/config/toml_long_dotted_key), in a header or an inline table
  // too; dots in values, strings and comments are not parts.
  std::string parts32 = "a", parts33;
  for (int i = 1; i < 32; ++i) parts32 += ".a";
  parts33 = parts32 + ".a";
  for (const std::string& bad : {parts33 + " = 1\n", "[" + parts33 + "]\n", "x = {y = 1, " + parts33 + " = 2}\n",
                                 "x = 1\n" + parts33 + " = 1\n"}) {
    CAPTURE(bad);
    auto e = c.load_text(bad, "t.toml");
    REQUIRE(e.has_value());
    CHECK(e->find("keys nested more than 32 deep") != std::string::npos);
  }
  for (const std::string& fine : {parts32 + " = 1\n", "[" + parts32 + "]\n",
                                  std::string("x = [\n  1.2.3.4.5.6.7.8.9.0.1.2.3.4.5.6.7.8.9.0.1.2.3.4.5.6.7.8.9.0.1.2.3,\n]\n")}) {
    CAPTURE(fine);
    auto e = c.load_text(fine, "t.toml");
    if (e) CHECK(e->find("nested more than") == std::string::npos);  // toml11's own verdict
  }
  CHECK_FALSE(c.load_text("tls-ca-cert-file = '" + parts33 + "' # " + parts33 + "\n", "t.toml"));
  // Binary integers of more than 62 digits are refused before parsing: toml11 doubles a signed
  // 64-bit place value per digit, leading zeros too, and overflows at the 63rd
  // (tests/fuzz/corpus/config/toml_long_binary). In strings, comments and keys they are text.
  {
    const std::string bits63 = "0b" + std::string(62, '0') + "1";
    for (const std::string& bad : {"timeout = " + bits63 + "\n", "x = [1, " + bits63 + "]\n",
                                   "timeout = 0b" + std::string(100, '1') + "\n"}) {
      CAPTURE(bad);
      auto e = c.load_text(bad, "t.toml");
      REQUIRE(e.has_value());
      CHECK(e->find("a binary integer of more than 62 digits at byte") != std::string::npos);
    }
    CHECK_FALSE(c.load_text("timeout = 0b" + std::string(53, '0') + "1_0000_0000\n", "t.toml"));
    CHECK(c.num(Key::kTimeout) == 256);
    CHECK_FALSE(c.load_text("requirepass = '" + bits63 + "' # " + bits63 + "\n", "t.toml"));
    CHECK(c.str(Key::kRequirePass) == bits63);
  }

  // Dotted keys and [memory] tables both name memory.*; threads = 0 means one per core.
  {
    std::ofstream f(path);
    f << "threads = 0\nmemory.capacity = \"64mb\"\n";
  }
  CHECK_FALSE(c.load_file(path).has_value());
  CHECK(c.num(Key::kThreads) >= 1);
  CHECK(c.num(Key::kMemoryCapacity) == 64ll << 20);
  {
    std::ofstream f(path);
    f << "[memory]\ncapacity = \"32mb\"\nhugepages = true\n";
  }
  CHECK_FALSE(c.load_file(path).has_value());
  CHECK(c.num(Key::kMemoryCapacity) == 32ll << 20);
  CHECK(c.num(Key::kMemoryHugepages) == 1);
  CHECK(c.set("memory.capacity", "1mb", false).has_value());  // below the 2 MiB minimum
  CHECK(c.set("memory.capacity", "2gb", true).has_value());   // not settable at run time
  std::remove(path.c_str());

  // The shipped config loads as is.
  Config shipped;
  const auto err2 = shipped.load_file(STRATAKV_SOURCE_DIR "/conf/stratakv.toml");
  CHECK_MESSAGE(!err2.has_value(), err2.value_or(""));
  CHECK(shipped.num(Key::kThreads) >= 1);
  CHECK(shipped.num(Key::kMemoryCapacity) ==
        static_cast<int64_t>(server::auto_memory_capacity(server::kAutoCapacityShare)));
  CHECK(shipped.num(Key::kSsdEnabled) == 1);
  CHECK(shipped.str(Key::kSsdPath) == "./data/ssd");
  CHECK(shipped.num(Key::kSsdMinBlobSize) == 4096);
  CHECK(shipped.num(Key::kPromoteAfter) == 1);
}

TEST_CASE("SSD tier keys: built-in defaults, units, enums, '-' for '_'") {
  Config c;
  CHECK(c.num(Key::kSsdEnabled) == 0);  // off unless the config file or a flag turns it on
  CHECK(c.num(Key::kSsdRecover) == 1);
  CHECK(c.num(Key::kSsdCapacity) == 0);
  CHECK_FALSE(c.set("tiering.ssd.capacity", "10gb", false).has_value());
  CHECK(c.num(Key::kSsdCapacity) == 10ll << 30);
  CHECK_FALSE(c.set("tiering.ssd.flush-on-shutdown", "yes", true).has_value());  // runtime
  CHECK(c.num(Key::kSsdFlushOnShutdown) == 1);
  CHECK(c.set("tiering.ssd.path", "/x", true).has_value());  // not at run time
  CHECK(c.set("tiering.ssd.compression", "brotli", false).has_value());
  CHECK_FALSE(c.set("tiering.ssd.compression", "zstd", false).has_value());
  CHECK(c.get("tiering.ssd.compression").at(0).second == "zstd");
  CHECK(c.set("tiering.promote_after", "0", true).has_value());
  CHECK_FALSE(c.set("TIERING.PROMOTE-AFTER", "3", true).has_value());
  CHECK(c.num(Key::kPromoteAfter) == 3);
}

TEST_CASE("TLS keys: Redis's names and defaults") {
  Config c;
  CHECK(c.num(Key::kTlsPort) == 0);  // no TLS
  CHECK(c.get("tls-auth-clients").at(0).second == "yes");
  CHECK(c.get("tls-prefer-server-ciphers").at(0).second == "no");
  CHECK(c.get("tls-session-caching").at(0).second == "yes");
  CHECK(c.num(Key::kTlsSessionCacheSize) == 20480);
  CHECK(c.num(Key::kTlsSessionCacheTimeout) == 300);
  CHECK(c.str(Key::kTlsProtocols).empty());
  CHECK(c.set("tls-port", "6380", true).has_value());  // not at run time
  CHECK_FALSE(c.set("tls-port", "6380", false).has_value());
  CHECK_FALSE(c.set("tls-cert-file", "/etc/stratakv/server.crt", true).has_value());
  CHECK_FALSE(c.set("TLS-AUTH-CLIENTS", "optional", true).has_value());
  CHECK(c.choice(Key::kTlsAuthClients) == "optional");
  CHECK(*c.set("tls-auth-clients", "maybe", true) ==
        "argument(s) must be one of the following: no, yes, optional");
  // tls-replication and tls-cluster: Redis's names, default no; the client certificate keys.
  CHECK(c.get("tls-replication").at(0).second == "no");
  CHECK(c.get("tls-cluster").at(0).second == "no");
  CHECK(c.str(Key::kTlsClientCertFile).empty());
  CHECK_FALSE(c.set("tls-replication", "yes", true).has_value());
  CHECK(c.num(Key::kTlsReplication) == 1);
  CHECK(c.get("tls-*").size() == 19);
}

TEST_CASE("human_bytes formats like INFO") {
  CHECK(Config::human_bytes(100) == "100B");
  CHECK(Config::human_bytes(1536) == "1.50K");
  CHECK(Config::human_bytes(1ull << 20) == "1.00M");
  CHECK(Config::human_bytes(3ull << 30) == "3.00G");
}
