// server_process.h - a real stratakv-server (or redis-server) process for the SDK tests,
// listening on a free 127.0.0.1 port and on a Unix socket in a fresh temporary directory.
//
//   STRATAKV_SERVER=PATH   the binary (default build/release/bin/stratakv-server)
// Extra arguments (Redis config names, e.g. {"--maxmemory", "8mb"}) go to the constructor;
// so may another binary (redis-server, found on PATH).
// The log goes to <tmpdir>/server.log, which is printed to stderr when the server does not
// exit cleanly on SIGTERM.
//
//   STRATAKV_SDK_URL=tls   a stratakv server also listens on a TLS port (tls-auth-clients no),
//                          with the certificates of tls_util.py (made once per process)
#pragma once

#include <hiredis/hiredis.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#ifndef STRATAKV_TLS_UTIL_DIR  // tests/integration, where tls_util.py is (set by CMake)
#define STRATAKV_TLS_UTIL_DIR "tests/integration"
#endif

namespace sdktest {

inline bool tls_mode() {
  const char* m = std::getenv("STRATAKV_SDK_URL");
  return m && std::string(m) == "tls";
}

/// The directory of tls_util.py's files (ca.crt, server.crt, ...), made on first use by
/// tls_util.make_tls_files (the openssl command), removed at exit. Throws when they cannot
/// be made.
inline const std::string& tls_files_dir() {
  struct Dir {
    std::string path;
    Dir() {
      char tmpl[] = "/tmp/stratakv-sdk-tls-XXXXXX";
      if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
      path = tmpl;
      const std::string cmd =
          "/usr/bin/python3 -c 'import sys; sys.path.insert(0, sys.argv[1]); import tls_util; "
          "sys.exit(tls_util.make_tls_files(sys.argv[2]) is None)' " STRATAKV_TLS_UTIL_DIR " " + path;
      if (std::system(cmd.c_str()) != 0) throw std::runtime_error("cannot make TLS files: " + cmd);
    }
    ~Dir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  };
  static const Dir dir;
  return dir.path;
}

class ServerProcess {
 public:
  /// `binary` overrides STRATAKV_SERVER (e.g. "redis-server"); `port` 0 picks a free one.
  explicit ServerProcess(std::vector<std::string> extra = {}, std::string binary = "", int port = 0) {
    const char* env = std::getenv("STRATAKV_SERVER");
    std::string bin = !binary.empty() ? binary : env && *env ? env : "build/release/bin/stratakv-server";
    char tmpl[] = "/tmp/stratakv-sdk-XXXXXX";
    if (!::mkdtemp(tmpl)) throw std::runtime_error("mkdtemp failed");
    dir_ = tmpl;
    socket_ = dir_ + "/server.sock";
    log_ = dir_ + "/server.log";
    port_ = port != 0 ? port : free_port();
    std::vector<std::string> argv = {bin, "--port", std::to_string(port_), "--bind", "127.0.0.1",
                                     "--unixsocket", socket_};
    if (bin.find("redis-server") != std::string::npos) {
      for (const char* a : {"--save", "", "--appendonly", "no"}) argv.emplace_back(a);
    } else {
      // An explicit small region (the default is 80% of the machine); `extra` may override it.
      for (const char* a : {"--memory.capacity", "1gb"}) argv.emplace_back(a);
      if (tls_mode()) {
        const std::string& d = tls_files_dir();
        tls_port_ = free_port();
        for (const std::string& a : {std::string("--tls-port"), std::to_string(tls_port_),
                                     std::string("--tls-cert-file"), d + "/server.crt",
                                     std::string("--tls-key-file"), d + "/server.key",
                                     std::string("--tls-ca-cert-file"), d + "/ca.crt",
                                     std::string("--tls-auth-clients"), std::string("no")})
          argv.push_back(a);
      }
    }
    argv.insert(argv.end(), extra.begin(), extra.end());
    pid_ = ::fork();
    if (pid_ < 0) throw std::runtime_error("fork failed");
    if (pid_ == 0) {
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      int fd = ::open(log_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (fd >= 0) ::dup2(fd, 1), ::dup2(fd, 2);
      std::vector<char*> cargv;
      for (auto& a : argv) cargv.push_back(a.data());
      cargv.push_back(nullptr);
      ::execvp(cargv[0], cargv.data());
      std::fprintf(stderr, "exec %s: %s\n", cargv[0], std::strerror(errno));
      ::_exit(127);
    }
    wait_ready();
  }

  ~ServerProcess() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    int status = 0;
    bool exited = false;
    for (int i = 0; i < 100 && !exited; ++i) {
      exited = ::waitpid(pid_, &status, WNOHANG) == pid_;
      if (!exited) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    if (!exited) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
    }
    if (!exited || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::cerr << "server did not exit cleanly (status " << status << "); log " << log_ << ":\n"
                << std::ifstream(log_).rdbuf() << "\n";
      clean_exit_ = false;
    }
    ::unlink(socket_.c_str());
    ::unlink(log_.c_str());
    ::rmdir(dir_.c_str());
  }
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  int port() const { return port_; }
  const std::string& socket_path() const { return socket_; }
  std::string tcp_url() const { return "redis://127.0.0.1:" + std::to_string(port_); }
  std::string unix_url() const { return "unix://" + socket_; }
  /// The TLS port (STRATAKV_SDK_URL=tls and a stratakv server), else 0.
  int tls_port() const { return tls_port_; }
  /// rediss:// to the TLS port, trusting the test CA; `userinfo` is "[user]:password@" or "".
  std::string tls_url(const std::string& userinfo = "") const {
    return "rediss://" + userinfo + "127.0.0.1:" + std::to_string(tls_port_) +
           "?ssl_ca_certs=" + tls_files_dir() + "/ca.crt";
  }
  /// False when a previous instance of this class saw an unclean exit (checked by tests).
  static bool clean_exits() { return clean_exit_; }

  /// A TCP port of 127.0.0.1 free now.
  static int free_port() {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      throw std::runtime_error("no free port");
    ::close(fd);
    return ntohs(a.sin_port);
  }

 private:
  void wait_ready() {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (std::chrono::steady_clock::now() < deadline) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        throw std::runtime_error("server exited at start-up; log " + log_);
      }
      redisContext* c = redisConnectUnix(socket_.c_str());
      if (c && !c->err) {
        auto* r = static_cast<redisReply*>(redisCommand(c, "PING"));
        const bool ok = r && (r->type == REDIS_REPLY_STATUS || r->type == REDIS_REPLY_ERROR);
        if (r) freeReplyObject(r);
        redisFree(c);
        if (ok) return;
      } else if (c) {
        redisFree(c);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    throw std::runtime_error("server did not answer on " + socket_ + "; log " + log_);
  }

  std::string dir_, socket_, log_;
  int port_ = 0;
  int tls_port_ = 0;
  pid_t pid_ = -1;
  static inline bool clean_exit_ = true;
};

}  // namespace sdktest
