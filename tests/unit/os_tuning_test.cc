// Unit tests of server/os_tuning.h: the open-files limit for maxclients (with a fake
// getrlimit/setrlimit) and TCP keepalive read back from real sockets.
#include <doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <vector>

#include "server/os_tuning.h"

using server::adjust_open_files_limit;
using server::FileLimitOps;
using server::OpenFilesLimit;

namespace {

// A process whose RLIMIT_NOFILE is `soft`/`hard`, unprivileged: the hard limit may be lowered
// but not raised. Records every setrlimit tried.
struct FakeLimit {
  rlimit now;
  std::vector<rlimit> tried;
  int get_error = 0;
  FileLimitOps ops() {
    return {[this](rlimit* l) {
              *l = now;
              return get_error;
            },
            [this](const rlimit& l) {
              tried.push_back(l);
              if (l.rlim_max > now.rlim_max || l.rlim_cur > l.rlim_max) return EPERM;
              now = l;
              return 0;
            }};
  }
};

std::vector<std::string> lines(const OpenFilesLimit& r) {
  std::vector<std::string> out;
  for (const auto& [level, text] : r.log) out.push_back(text);
  return out;
}

int get_int(int fd, int level, int name) {
  int v = -1;
  socklen_t len = sizeof v;
  REQUIRE(::getsockopt(fd, level, name, &v, &len) == 0);
  return v;
}

}  // namespace

TEST_CASE("open files: a limit already high enough is left alone") {
  FakeLimit f{{20000, 20000}};
  const OpenFilesLimit r = adjust_open_files_limit(10000, f.ops());
  CHECK(f.tried.empty());
  CHECK(r.maxclients == 10000);
  CHECK(r.limit == 20000);
  CHECK_FALSE(r.fatal);
  CHECK(lines(r) == std::vector<std::string>{"open files limit=20000 maxclients=10000 reserved=32"});
}

TEST_CASE("open files: the soft limit is raised to maxclients + 32, the hard one kept") {
  FakeLimit f{{1024, 1048576}};
  const OpenFilesLimit r = adjust_open_files_limit(10000, f.ops());
  CHECK(f.now.rlim_cur == 10032);
  CHECK(f.now.rlim_max == 1048576);
  CHECK(r.maxclients == 10000);
  CHECK(r.limit == 10032);
  CHECK(lines(r) == std::vector<std::string>{
                        "Increased maximum number of open files to 10032 (it was originally set "
                        "to 1024).",
                        "open files limit=10032 maxclients=10000 reserved=32"});
  CHECK(r.log[0].first == server::log::Level::kNotice);
}

TEST_CASE("open files: below the hard limit, 16 less at each try; maxclients lowered") {
  FakeLimit f{{100, 500}};
  const OpenFilesLimit r = adjust_open_files_limit(1000, f.ops());
  // 1032, 1016, ..., 504 fail (over the hard limit of 500); 488 is the first that fits.
  CHECK(f.tried.front().rlim_cur == 1032);
  CHECK(f.tried.back().rlim_cur == 488);
  CHECK(f.tried.size() == (1032 - 488) / 16 + 1);
  CHECK(f.now.rlim_cur == 488);
  CHECK(f.now.rlim_max == 500);
  CHECK(r.maxclients == 488 - 32);
  CHECK(r.limit == 488);
  CHECK(lines(r)[0] == "You requested maxclients of 1000 requiring at least 1032 max file "
                       "descriptors.");
}

TEST_CASE("open files: the hard limit is the current one: Redis's three warnings") {
  FakeLimit f{{100, 100}};
  const OpenFilesLimit r = adjust_open_files_limit(1000, f.ops());
  CHECK(f.now.rlim_cur == 100);
  CHECK(r.maxclients == 68);
  CHECK_FALSE(r.fatal);
  // The texts of Redis 7.0 (compared with redis-server in tests/integration/test_limits.py).
  CHECK(lines(r) == std::vector<std::string>{
                        "You requested maxclients of 1000 requiring at least 1032 max file "
                        "descriptors.",
                        "Server can't set maximum open files to 1032 because of OS error: "
                        "Operation not permitted.",
                        "Current maximum open files is 100. maxclients has been reduced to 68 to "
                        "compensate for low ulimit. If you need higher maxclients increase "
                        "'ulimit -n'.",
                        "open files limit=100 maxclients=68 reserved=32"});
  for (size_t i = 0; i < 3; ++i) CHECK(r.log[i].first == server::log::Level::kWarning);
}

TEST_CASE("open files: no room left for clients is fatal") {
  FakeLimit f{{32, 32}};
  const OpenFilesLimit r = adjust_open_files_limit(50, f.ops());
  CHECK(r.fatal);
  CHECK(lines(r) == std::vector<std::string>{
                        "Your current 'ulimit -n' of 32 is not enough for the server to start. "
                        "Please increase your open file limit to at least 82. Exiting."});
  FakeLimit g{{40, 40}};
  const OpenFilesLimit r2 = adjust_open_files_limit(50, g.ops());
  CHECK_FALSE(r2.fatal);
  CHECK(r2.maxclients == 8);
}

TEST_CASE("open files: the limit unreadable: 1024 assumed") {
  FakeLimit f{{100, 100}};
  f.get_error = EINVAL;
  const OpenFilesLimit r = adjust_open_files_limit(10000, f.ops());
  CHECK(r.maxclients == 1024 - 32);
  CHECK(lines(r) == std::vector<std::string>{
                        "Unable to obtain the current NOFILE limit (Invalid argument), assuming "
                        "1024 and setting the max clients configuration accordingly."});
}

TEST_CASE("open files: the process's own limit can be read and kept") {
  rlimit before{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &before) == 0);
  const OpenFilesLimit r = adjust_open_files_limit(1);  // 33 descriptors: always there
  CHECK(r.maxclients == 1);
  rlimit after{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &after) == 0);
  CHECK(after.rlim_cur == before.rlim_cur);
  CHECK(after.rlim_max == before.rlim_max);
}

TEST_CASE("tcp-keepalive: idle = interval, probes every interval/3, 3 of them (anetKeepAlive)") {
  // A connected TCP pair on loopback: the accepted side is what the server sets.
  const int lst = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(lst >= 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(lst, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  REQUIRE(::listen(lst, 1) == 0);
  socklen_t len = sizeof addr;
  REQUIRE(::getsockname(lst, reinterpret_cast<sockaddr*>(&addr), &len) == 0);
  const int cli = ::socket(AF_INET, SOCK_STREAM, 0);
  REQUIRE(::connect(cli, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  const int fd = ::accept(lst, nullptr, nullptr);
  REQUIRE(fd >= 0);

  CHECK(get_int(fd, SOL_SOCKET, SO_KEEPALIVE) == 0);  // off on an accepted socket
  CHECK_FALSE(server::set_tcp_keepalive(fd, 300).has_value());  // the default
  CHECK(get_int(fd, SOL_SOCKET, SO_KEEPALIVE) == 1);
  CHECK(get_int(fd, IPPROTO_TCP, TCP_KEEPIDLE) == 300);
  CHECK(get_int(fd, IPPROTO_TCP, TCP_KEEPINTVL) == 100);
  CHECK(get_int(fd, IPPROTO_TCP, TCP_KEEPCNT) == 3);

  CHECK_FALSE(server::set_tcp_keepalive(fd, 2).has_value());  // interval/3 is at least 1
  CHECK(get_int(fd, IPPROTO_TCP, TCP_KEEPIDLE) == 2);
  CHECK(get_int(fd, IPPROTO_TCP, TCP_KEEPINTVL) == 1);

  CHECK_FALSE(server::set_tcp_keepalive(fd, 0).has_value());  // 0: off
  CHECK(get_int(fd, SOL_SOCKET, SO_KEEPALIVE) == 0);

  // Over Linux's TCP_KEEPIDLE maximum (32767 s): an error, as Redis's setsockopt gets.
  auto err = server::set_tcp_keepalive(fd, 100000);
  REQUIRE(err.has_value());
  CHECK(err->rfind("setsockopt TCP_KEEPIDLE: ", 0) == 0);

  // Not a socket at all.
  CHECK(server::set_tcp_keepalive(-1, 300).has_value());
  ::close(fd);
  ::close(cli);
  ::close(lst);
}

TEST_CASE("memory.capacity's automatic default: a share of the machine, in 2 MiB units") {
  constexpr uint64_t MiB = uint64_t{1} << 20, GiB = uint64_t{1} << 30;
  CHECK(server::auto_memory_capacity(0.8, 24 * GiB) == (uint64_t{24} * GiB * 8 / 10) / (2 * MiB) * (2 * MiB));
  CHECK(server::auto_memory_capacity(0.8, 10 * GiB) % (2 * MiB) == 0);
  CHECK(server::auto_memory_capacity(0.8, 10 * GiB) <= 8 * GiB);
  CHECK(server::auto_memory_capacity(0.8, 1 * MiB) == 2 * MiB);  // never below the unit
  CHECK(server::auto_memory_capacity(0.8, 0) == GiB);            // unknown machine: 1 GiB
  CHECK(server::auto_memory_capacity(2.0, 4 * GiB) == 4 * GiB);  // the share is clamped to 1
  // The machine's own figure is read and is plausible (at least one page).
  CHECK(server::machine_memory_bytes() >= 4096);
}
