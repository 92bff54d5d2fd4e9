// tests/unit/etcd_process.h - a real etcd (/usr/bin/etcd, etcd 3.4) for one test: started on
// free loopback ports (client and peer) with a data directory of its own, waited for until
// /health answers, killed and removed at the end. kill() and start() again restart it with
// the same ports and data (keys, revisions and leases survive). A test executable whose
// machine has no etcd exits with status 77 (ctest's SKIP_RETURN_CODE) at the first start.
//
// Short raft timings (heartbeat 50 ms, election 500 ms) make start-up fast and let leases as
// short as 1 s be granted. The child gets SIGKILL when the test process dies.
#pragma once

#include <arpa/inet.h>
#include <doctest.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace etcd_test {

inline constexpr const char* kEtcdBinary = "/usr/bin/etcd";

/// A loopback TCP port nobody listens on right now (the kernel's pick for port 0).
inline uint16_t free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  socklen_t len = sizeof a;
  REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  ::close(fd);
  return ntohs(a.sin_port);
}

/// A plain HTTP GET of `path` on 127.0.0.1:`port`; the whole response ("" when nothing answers
/// within about a second).
inline std::string http_get(uint16_t port, const std::string& path) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return {};
  timeval tv{1, 0};
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  std::string out;
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0) {
    const std::string req = "GET " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
    if (::send(fd, req.data(), req.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(req.size())) {
      char buf[4096];
      for (ssize_t n; (n = ::recv(fd, buf, sizeof buf, 0)) > 0;) out.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  return out;
}

/// Polls `done` every 20 ms until it returns true or `deadline` passes; returns its last answer.
template <class F>
bool eventually(F&& done, std::chrono::milliseconds deadline = std::chrono::seconds(15)) {
  const auto end = std::chrono::steady_clock::now() + deadline;
  for (;;) {
    if (done()) return true;
    if (std::chrono::steady_clock::now() >= end) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

class EtcdProcess {
 public:
  /// Starts etcd at once, with `extra_args` after the usual ones (e.g. "--auth-token-ttl=1").
  explicit EtcdProcess(std::vector<std::string> extra_args = {}) : extra_(std::move(extra_args)) {
    char tmpl[] = "/tmp/stratakv-etcd-test-XXXXXX";
    REQUIRE(::mkdtemp(tmpl) != nullptr);
    dir_ = tmpl;
    client_port_ = free_port();
    do peer_port_ = free_port();
    while (peer_port_ == client_port_);
    start();
  }
  ~EtcdProcess() {
    kill();
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }
  EtcdProcess(const EtcdProcess&) = delete;
  EtcdProcess& operator=(const EtcdProcess&) = delete;

  /// "http://127.0.0.1:<client port>".
  std::string endpoint() const { return "http://127.0.0.1:" + std::to_string(client_port_); }
  uint16_t client_port() const { return client_port_; }
  const std::string& dir() const { return dir_; }
  bool running() const { return pid_ > 0; }

  /// Starts etcd (again) and waits until /health says true (at most 20 s, else the test fails
  /// with the end of etcd's log).
  void start() {
    if (::access(kEtcdBinary, X_OK) != 0) {
      std::fprintf(stderr, "%s is not installed: skipping the etcd tests\n", kEtcdBinary);
      std::exit(77);
    }
    REQUIRE(pid_ == 0);
    const std::string client = "http://127.0.0.1:" + std::to_string(client_port_);
    const std::string peer = "http://127.0.0.1:" + std::to_string(peer_port_);
    std::vector<std::string> args = {kEtcdBinary, "--name=n0", "--data-dir=" + dir_ + "/data",
        "--listen-client-urls=" + client, "--advertise-client-urls=" + client,
        "--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
        "--initial-cluster=n0=" + peer, "--heartbeat-interval=50", "--election-timeout=500",
        "--logger=zap", "--log-outputs=stderr"};
    args.insert(args.end(), extra_.begin(), extra_.end());
    std::vector<char*> argv;
    for (std::string& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    const std::string log = dir_ + "/etcd.log";
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
      if (fd >= 0) {
        ::dup2(fd, 1);
        ::dup2(fd, 2);
      }
      ::execv(kEtcdBinary, argv.data());
      ::_exit(127);
    }
    pid_ = pid;
    const bool up = eventually([&] {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = 0;
        return true;  // exited: reported below
      }
      return http_get(client_port_, "/health").find("\"health\":\"true\"") != std::string::npos;
    }, std::chrono::seconds(20));
    INFO("etcd log:\n" << log_tail());
    REQUIRE(pid_ > 0);
    REQUIRE(up);
  }

  /// SIGKILL (a crash: no goodbye to clients) and reap. No-op when not running.
  void kill() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);
    int status = 0;
    ::waitpid(pid_, &status, 0);
    pid_ = 0;
  }

  /// The last lines of etcd's log, for failure messages.
  std::string log_tail(size_t bytes = 4000) const {
    std::ifstream in(dir_ + "/etcd.log");
    std::stringstream s;
    s << in.rdbuf();
    const std::string all = s.str();
    return all.size() <= bytes ? all : all.substr(all.size() - bytes);
  }

 private:
  std::vector<std::string> extra_;
  std::string dir_;
  uint16_t client_port_ = 0, peer_port_ = 0;
  pid_t pid_ = 0;
};

}  // namespace etcd_test
