// sdk_test_util.h - shared pieces of the libstratakv end-to-end tests: one server process per
// test binary, the URL under test, byte patterns, and a raw hiredis connection for mixing
// plain RESP commands with the SDK's.
//
//   STRATAKV_SDK_URL=unix (default) | tcp | tls   which of the server's listeners the SDK uses
//                                                  (tls: rediss:// to its TLS port)
#pragma once

#include <doctest.h>
#include <hiredis/hiredis.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "server_process.h"
#include "stratakv/client.h"

namespace sdktest {

inline ServerProcess& server() {
  static ServerProcess s;
  return s;
}

inline bool unix_mode() {
  const char* m = std::getenv("STRATAKV_SDK_URL");
  return !m || (std::string(m) != "tcp" && std::string(m) != "tls");
}

/// The URL of `s` in this binary's mode; `userinfo` is "[user]:password@" or "". tls mode: the
/// TLS port when `s` has one (not redis-server), else TCP.
inline std::string url_of(const ServerProcess& s, const std::string& userinfo = "") {
  if (unix_mode()) return "unix://" + userinfo + s.socket_path();
  if (s.tls_port() != 0) return s.tls_url(userinfo);
  return "redis://" + userinfo + "127.0.0.1:" + std::to_string(s.port());
}

inline std::string url() { return url_of(server()); }

/// One hiredis connection over TCP (binary-safe commands).
struct Redis {
  redisContext* c;
  explicit Redis(int port = server().port()) : c(redisConnect("127.0.0.1", port)) {
    REQUIRE(c != nullptr);
    REQUIRE_MESSAGE(c->err == 0, c->errstr);
  }
  ~Redis() { redisFree(c); }
  Redis(const Redis&) = delete;
  Redis& operator=(const Redis&) = delete;

  std::unique_ptr<redisReply, void (*)(void*)> cmd(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (auto& a : args) argv.push_back(a.data()), lens.push_back(a.size());
    void* r = redisCommandArgv(c, static_cast<int>(args.size()), argv.data(), lens.data());
    REQUIRE_MESSAGE(r != nullptr, c->errstr);
    return {static_cast<redisReply*>(r), freeReplyObject};
  }
  std::string str(const std::vector<std::string>& args) {
    auto r = cmd(args);
    return r->str ? std::string(r->str, r->len) : std::string();
  }
  /// A field of INFO (empty when absent).
  std::string info_field(const std::string& section, const std::string& field) {
    std::string text = str({"INFO", section});
    const size_t at = text.find(field + ":");
    if (at == std::string::npos) return "";
    const size_t end = text.find("\r\n", at);
    return text.substr(at + field.size() + 1, end - at - field.size() - 1);
  }
};

/// True when the server has the fast path (KV.PUT): the unix:// URL then must pick shm.
inline bool server_has_fast_path() {
  static const bool has = [] {
    Redis r;
    auto reply = r.cmd({"COMMAND", "INFO", "KV.PUT"});
    return reply->type == REDIS_REPLY_ARRAY && reply->elements == 1 &&
           reply->element[0]->type == REDIS_REPLY_ARRAY;
  }();
  return has;
}

inline bool expect_shm() { return unix_mode() && server_has_fast_path(); }

/// The shared client of the binary.
inline stratakv::Client& client() {
  static stratakv::Client c(url());
  return c;
}

inline std::string key(const std::string& name) {
  return "sdk:" + std::string(unix_mode() ? "unix:" : tls_mode() ? "tls:" : "tcp:") + name;
}

/// Deterministic bytes for (seed, position), fast enough for 64 MiB.
inline void fill(std::span<std::byte> out, uint64_t seed) {
  uint64_t x = seed * 0x9E3779B97F4A7C15ull + 1;
  size_t i = 0;
  for (; i + 8 <= out.size(); i += 8) {
    x += 0x9E3779B97F4A7C15ull;
    uint64_t z = x;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    std::memcpy(out.data() + i, &z, 8);
  }
  for (; i < out.size(); ++i) out[i] = static_cast<std::byte>((seed + i) * 131);
}

inline std::string pattern(size_t n, uint64_t seed) {
  std::string s(n, '\0');
  fill({reinterpret_cast<std::byte*>(s.data()), n}, seed);
  return s;
}

inline std::span<std::byte> bytes_of(std::string& s) {
  return {reinterpret_cast<std::byte*>(s.data()), s.size()};
}

inline bool same(std::span<const std::byte> a, std::span<const std::byte> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace sdktest
