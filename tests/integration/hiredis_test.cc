// hiredis_test: drives a real server process with hiredis (sync API).
//
// The server is started once (fork/exec) on a free 127.0.0.1 port, used by every test
// case, and killed at exit. Which binary:
//   --server=PATH  (or --server PATH) on the command line       [doctest ignores it]
//   STRATAKV_SERVER=PATH                                         environment
//   STRATAKV_TARGET=redis                                        run redis-server instead
//                                                                ($REDIS_SERVER or PATH)
//   default: build/release/bin/stratakv-server, then build/bin/stratakv-server
// STRATAKV_SERVER_ARGS adds extra (space-separated) arguments to the server command line.
// STRATAKV_ADDR=host:port skips spawning and tests an already running server.
// The server's stdout/stderr go to $TMPDIR/hiredis_test.<pid>.server.log, which is removed
// when the server exits with status 0 and kept (its path is printed) otherwise.
//
//   g++ -std=c++20 -I/usr/include/doctest tests/integration/hiredis_test.cc
//       tests/unit/doctest_main.cc -lhiredis -o /tmp/hiredis_test
//   STRATAKV_TARGET=redis /tmp/hiredis_test

#include <doctest.h>
#include <hiredis/hiredis.h>

#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace {

using namespace std::chrono_literals;

// ---------------------------------------------------------------------------------------
// Server process

// Arguments after argv[0], read from /proc because doctest's main owns argv.
std::vector<std::string> own_args() {
  std::ifstream f("/proc/self/cmdline", std::ios::binary);
  std::vector<std::string> out;
  std::string a;
  while (std::getline(f, a, '\0')) out.push_back(a);
  if (!out.empty()) out.erase(out.begin());
  return out;
}

bool executable(const std::string& p) { return !p.empty() && ::access(p.c_str(), X_OK) == 0; }

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

bool is_redis_target() { return env("STRATAKV_TARGET") == "redis"; }

std::string find_server_binary() {
  if (is_redis_target()) {
    if (std::string p = env("REDIS_SERVER"); !p.empty()) return p;
    return "redis-server";  // execvp searches PATH
  }
  auto args = own_args();
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i].rfind("--server=", 0) == 0) return args[i].substr(9);
    if (args[i] == "--server" && i + 1 < args.size()) return args[i + 1];
  }
  if (std::string p = env("STRATAKV_SERVER"); !p.empty()) return p;
  for (const char* p : {"build/release/bin/stratakv-server", "build/bin/stratakv-server", "bin/stratakv-server"})
    if (executable(p)) return p;
  return "";
}

int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
    throw std::runtime_error("cannot find a free port");
  ::close(fd);
  return ntohs(a.sin_port);
}

class Server {
 public:
  Server() {
    if (std::string addr = env("STRATAKV_ADDR"); !addr.empty()) {
      auto colon = addr.rfind(':');
      host_ = addr.substr(0, colon);
      port_ = std::atoi(addr.c_str() + colon + 1);
      wait_ready();
      return;
    }
    std::string bin = find_server_binary();
    if (bin.empty())
      throw std::runtime_error(
          "no server binary: pass --server=PATH, set STRATAKV_SERVER, or set STRATAKV_TARGET=redis");
    port_ = free_port();
    std::vector<std::string> argv = {bin, "--port", std::to_string(port_), "--bind", "127.0.0.1"};
    if (is_redis_target() || bin.find("redis-server") != std::string::npos) {
      for (const char* a : {"--save", "", "--appendonly", "no"}) argv.emplace_back(a);
    } else {
      // An explicit small region (the default is 80% of the machine).
      for (const char* a : {"--memory.capacity", "1gb"}) argv.emplace_back(a);
    }
    std::istringstream extra(env("STRATAKV_SERVER_ARGS"));
    for (std::string a; extra >> a;) argv.push_back(a);
    std::string cmdline;
    for (auto& a : argv) cmdline += (a.empty() ? "''" : a) + " ";
    std::string tmp = env("TMPDIR");
    log_ = (tmp.empty() ? "/tmp" : tmp) + "/hiredis_test." + std::to_string(::getpid()) + ".server.log";
    MESSAGE("server: " << cmdline << " (log: " << log_ << ")");

    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the test
      int log = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (log >= 0) {
        ::dup2(log, STDOUT_FILENO);
        ::dup2(log, STDERR_FILENO);
      }
      std::vector<char*> cargv;
      for (auto& a : argv) cargv.push_back(a.data());
      cargv.push_back(nullptr);
      ::execvp(cargv[0], cargv.data());
      std::fprintf(stderr, "exec %s: %s\n", cargv[0], std::strerror(errno));
      ::_exit(127);
    }
    wait_ready();
  }

  ~Server() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    int status = 0;
    bool exited = false;
    for (int i = 0; i < 50 && !exited; ++i) {
      exited = ::waitpid(pid_, &status, WNOHANG) == pid_;
      if (!exited) std::this_thread::sleep_for(100ms);
    }
    if (!exited) {
      std::fprintf(stderr, "hiredis_test: server ignored SIGTERM for 5 s; killing it\n");
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
    }
    if (exited && WIFEXITED(status) && WEXITSTATUS(status) == 0)
      ::unlink(log_.c_str());
    else
      std::fprintf(stderr, "hiredis_test: server exit status %d; its log: %s\n", status, log_.c_str());
  }

  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  const std::string& host() const { return host_; }
  int port() const { return port_; }

 private:
  // Poll until the server answers PING (or died, or 15 s passed).
  void wait_ready() {
    auto deadline = std::chrono::steady_clock::now() + 15s;
    while (std::chrono::steady_clock::now() < deadline) {
      if (pid_ > 0) {
        int status = 0;
        if (::waitpid(pid_, &status, WNOHANG) == pid_) {
          pid_ = -1;
          throw std::runtime_error("server exited during startup (status " + std::to_string(status) +
                                   "); its log: " + log_);
        }
      }
      timeval tv{1, 0};
      redisContext* c = redisConnectWithTimeout(host_.c_str(), port_, tv);
      if (c && !c->err) {
        auto* r = static_cast<redisReply*>(redisCommand(c, "PING"));
        bool ok = r && r->type == REDIS_REPLY_STATUS && std::string(r->str, r->len) == "PONG";
        if (r) freeReplyObject(r);
        redisFree(c);
        if (ok) return;
      } else if (c) {
        redisFree(c);
      }
      std::this_thread::sleep_for(50ms);
    }
    throw std::runtime_error("server did not answer PING on " + host_ + ":" + std::to_string(port_));
  }

  std::string host_ = "127.0.0.1";
  int port_ = 0;
  pid_t pid_ = -1;
  std::string log_;
};

// Started on first use, stopped by the static destructor after doctest's main returns.
Server& server() {
  static Server s;
  return s;
}

// ---------------------------------------------------------------------------------------
// Client helpers

struct ReplyDeleter {
  void operator()(redisReply* r) const {
    if (r) freeReplyObject(r);
  }
};
using Reply = std::unique_ptr<redisReply, ReplyDeleter>;

struct Conn {
  redisContext* c = nullptr;

  Conn() {
    Server& s = server();
    c = redisConnect(s.host().c_str(), s.port());
    REQUIRE(c != nullptr);
    REQUIRE_MESSAGE(c->err == 0, c->errstr);
  }
  ~Conn() {
    if (c) redisFree(c);
  }
  Conn(const Conn&) = delete;
  Conn& operator=(const Conn&) = delete;

  // Binary-safe command from arguments.
  Reply cmd(const std::vector<std::string>& args) {
    std::vector<const char*> argv;
    std::vector<size_t> lens;
    for (auto& a : args) {
      argv.push_back(a.data());
      lens.push_back(a.size());
    }
    auto* r = static_cast<redisReply*>(redisCommandArgv(c, static_cast<int>(args.size()), argv.data(), lens.data()));
    REQUIRE_MESSAGE(r != nullptr, "connection error: " << c->errstr);
    return Reply(r);
  }
};

std::string str(const redisReply* r) { return std::string(r->str, r->len); }

// Unique per run, so a shared server (STRATAKV_ADDR) does not collide between runs.
std::string key(const std::string& name) { return "hiredis_test:" + std::to_string(::getpid()) + ":" + name; }

std::string random_bytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::string s(n, '\0');
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    uint64_t w = rng();
    std::memcpy(s.data() + i, &w, 8);
  }
  for (; i < n; ++i) s[i] = static_cast<char>(rng());
  return s;
}

void check_ok(const Reply& r) {
  REQUIRE(r->type == REDIS_REPLY_STATUS);
  CHECK(str(r.get()) == "OK");
}

}  // namespace

// ---------------------------------------------------------------------------------------

TEST_CASE("SET/GET round-trips values byte-exact") {
  Conn c;
  for (size_t size : {size_t{0}, size_t{1}, size_t{100}, size_t{16} << 10, size_t{1} << 20, size_t{64} << 20}) {
    CAPTURE(size);
    std::string k = key("value:" + std::to_string(size));
    std::string v = random_bytes(size, size * 7919 + 1);
    check_ok(c.cmd({"SET", k, v}));
    Reply r = c.cmd({"GET", k});
    REQUIRE(r->type == REDIS_REPLY_STRING);
    REQUIRE(r->len == size);
    CHECK(std::memcmp(r->str, v.data(), size) == 0);
    // Overwrite with a different value of the same size, then read back again.
    std::string v2 = random_bytes(size, size * 104729 + 3);
    check_ok(c.cmd({"SET", k, v2}));
    r = c.cmd({"GET", k});
    REQUIRE(r->type == REDIS_REPLY_STRING);
    REQUIRE(r->len == size);
    CHECK(std::memcmp(r->str, v2.data(), size) == 0);
    CHECK(c.cmd({"DEL", k})->integer == 1);
  }
  Reply r = c.cmd({"GET", key("never-set")});
  CHECK(r->type == REDIS_REPLY_NIL);
}

TEST_CASE("pipelined INCRs reply in order") {
  Conn c;
  std::string k = key("counter");
  c.cmd({"DEL", k});
  constexpr int kN = 10000;
  for (int i = 0; i < kN; ++i) REQUIRE(redisAppendCommand(c.c, "INCR %b", k.data(), k.size()) == REDIS_OK);
  for (int i = 1; i <= kN; ++i) {
    void* raw = nullptr;
    REQUIRE_MESSAGE(redisGetReply(c.c, &raw) == REDIS_OK, c.c->errstr);
    Reply r(static_cast<redisReply*>(raw));
    REQUIRE(r->type == REDIS_REPLY_INTEGER);
    REQUIRE(r->integer == i);
  }
  Reply r = c.cmd({"GET", k});
  REQUIRE(r->type == REDIS_REPLY_STRING);
  CHECK(str(r.get()) == std::to_string(kN));
}

TEST_CASE("MSET/MGET") {
  Conn c;
  std::string a = key("m:a"), b = key("m:b"), d = key("m:d"), missing = key("m:missing");
  std::string bin = random_bytes(3000, 42);
  check_ok(c.cmd({"MSET", a, "1", b, bin, d, ""}));
  Reply r = c.cmd({"MGET", a, missing, b, d});
  REQUIRE(r->type == REDIS_REPLY_ARRAY);
  REQUIRE(r->elements == 4);
  REQUIRE(r->element[0]->type == REDIS_REPLY_STRING);
  CHECK(str(r->element[0]) == "1");
  CHECK(r->element[1]->type == REDIS_REPLY_NIL);
  REQUIRE(r->element[2]->type == REDIS_REPLY_STRING);
  CHECK(str(r->element[2]) == bin);
  REQUIRE(r->element[3]->type == REDIS_REPLY_STRING);
  CHECK(r->element[3]->len == 0);
  // MSET overwrites, and a key given twice takes its last value.
  check_ok(c.cmd({"MSET", a, "x", a, "y"}));
  r = c.cmd({"GET", a});
  REQUIRE(r->type == REDIS_REPLY_STRING);
  CHECK(str(r.get()) == "y");
  // MSET with an odd number of arguments is an arity error.
  r = c.cmd({"MSET", a, "1", b});
  REQUIRE(r->type == REDIS_REPLY_ERROR);
  CHECK(str(r.get()) == "ERR wrong number of arguments for 'mset' command");
}

TEST_CASE("keys are binary-safe") {
  Conn c;
  const std::string nul_key = key(std::string("bin\0key", 7));
  const std::string crlf_key = key("bin\r\nSET injected 1\r\n");
  const std::string prefix_key = key("bin");  // what a C string would truncate nul_key to
  const std::string value("v\0\r\nw", 5);
  c.cmd({"DEL", nul_key, crlf_key, prefix_key});

  check_ok(c.cmd({"SET", nul_key, value}));
  check_ok(c.cmd({"SET", crlf_key, "crlf"}));
  Reply r = c.cmd({"GET", nul_key});
  REQUIRE(r->type == REDIS_REPLY_STRING);
  CHECK(str(r.get()) == value);
  r = c.cmd({"GET", crlf_key});
  REQUIRE(r->type == REDIS_REPLY_STRING);
  CHECK(str(r.get()) == "crlf");
  CHECK(c.cmd({"GET", prefix_key})->type == REDIS_REPLY_NIL);
  CHECK(c.cmd({"EXISTS", "injected"})->integer == 0);
  CHECK(c.cmd({"EXISTS", nul_key, crlf_key, prefix_key})->integer == 2);
  CHECK(c.cmd({"DEL", nul_key, crlf_key})->integer == 2);
}

TEST_CASE("wrong arity is an error and the connection stays usable") {
  Conn c;
  Reply r = c.cmd({"GET"});
  REQUIRE(r->type == REDIS_REPLY_ERROR);
  CHECK(str(r.get()) == "ERR wrong number of arguments for 'get' command");
  r = c.cmd({"SET", key("arity")});
  REQUIRE(r->type == REDIS_REPLY_ERROR);
  CHECK(str(r.get()) == "ERR wrong number of arguments for 'set' command");
  r = c.cmd({"PING"});
  REQUIRE(r->type == REDIS_REPLY_STATUS);
  CHECK(str(r.get()) == "PONG");
}

TEST_CASE("EXPIRE/TTL") {
  Conn c;
  std::string k = key("ttl"), missing = key("ttl:missing");
  check_ok(c.cmd({"SET", k, "v"}));
  CHECK(c.cmd({"TTL", k})->integer == -1);     // no expiry
  CHECK(c.cmd({"TTL", missing})->integer == -2);  // no key
  CHECK(c.cmd({"EXPIRE", k, "100"})->integer == 1);
  long long ttl = c.cmd({"TTL", k})->integer;
  CHECK(ttl >= 99);
  CHECK(ttl <= 100);
  CHECK(c.cmd({"EXPIRE", missing, "100"})->integer == 0);
  // SET without KEEPTTL clears the expiry.
  check_ok(c.cmd({"SET", k, "v2"}));
  CHECK(c.cmd({"TTL", k})->integer == -1);
  // A key expires: gone for GET, TTL and EXISTS.
  CHECK(c.cmd({"EXPIRE", k, "1"})->integer == 1);
  auto deadline = std::chrono::steady_clock::now() + 3s;
  while (c.cmd({"GET", k})->type != REDIS_REPLY_NIL && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(50ms);
  CHECK(c.cmd({"GET", k})->type == REDIS_REPLY_NIL);
  CHECK(c.cmd({"TTL", k})->integer == -2);
  CHECK(c.cmd({"EXISTS", k})->integer == 0);
  // A non-positive EXPIRE deletes the key at once.
  check_ok(c.cmd({"SET", k, "v3"}));
  CHECK(c.cmd({"EXPIRE", k, "0"})->integer == 1);
  CHECK(c.cmd({"GET", k})->type == REDIS_REPLY_NIL);
  // A non-integer timeout is an error.
  Reply r = c.cmd({"EXPIRE", k, "soon"});
  REQUIRE(r->type == REDIS_REPLY_ERROR);
  CHECK(str(r.get()) == "ERR value is not an integer or out of range");
}
