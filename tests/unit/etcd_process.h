// tests/unit/etcd_process.h - a real etcd (/usr/bin/etcd, etcd 3.4) for one test: started on
// free loopback ports (client and peer) with a data directory of its own, waited for until
// /health answers, killed and removed at the end; http, or https with client certificates. kill() and start() again restart it with
// the same ports and data (keys, revisions and leases survive). A test executable whose
// machine has no etcd exits with status 77 (ctest's SKIP_RETURN_CODE) at the first start.
//
// Short raft timings (heartbeat 50 ms, election 500 ms) make start-up fast and let leases as
// short as 1 s be granted. The child gets SIGKILL when the test process dies.
#pragma once

#include <arpa/inet.h>
#include <curl/curl.h>
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
#include <optional>
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

/// TLS for an EtcdProcess: its server certificate and key, and the CA its clients' certificates
/// must be signed by (--client-cert-auth). All PEM files.
struct EtcdTls {
  std::string cert_file, key_file, ca_file;
  /// A client certificate and key signed by ca_file, for the health check.
  std::string client_cert_file, client_key_file;
};

/// Makes a throw-away CA and, signed by it, a server certificate for 127.0.0.1 and a client
/// certificate (EC P-256, valid 2 days) in `dir`, with the openssl command. nullopt when there
/// is no openssl.
inline std::optional<EtcdTls> make_tls_files(const std::string& dir) {
  if (::access("/usr/bin/openssl", X_OK) != 0) return std::nullopt;
  const std::string key = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
  const std::string script =
      "set -e; exec 2>/dev/null; cd '" + dir + "'; "
      "openssl req -x509 " + key + " -keyout ca.key -out ca.crt -days 2 -subj /CN=stratakv-test-ca; "
      "printf 'subjectAltName=IP:127.0.0.1\\nextendedKeyUsage=serverAuth,clientAuth\\n' > ext.cnf; "
      "for n in server client; do "
      "openssl req " + key + " -keyout $n.key -out $n.csr -subj /CN=$n; "
      "openssl x509 -req -in $n.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out $n.crt -days 2 "
      "-extfile ext.cnf; done";
  REQUIRE(std::system(script.c_str()) == 0);
  return EtcdTls{dir + "/server.crt", dir + "/server.key", dir + "/ca.crt", dir + "/client.crt",
                 dir + "/client.key"};
}

/// Whether GET `url` + "/health" says {"health":"true"} within a second (TLS files when given).
inline bool etcd_healthy(const std::string& url, const EtcdTls* tls) {
  CURL* h = curl_easy_init();
  if (!h) return false;
  std::string body;
  const std::string target = url + "/health";
  curl_easy_setopt(h, CURLOPT_URL, target.c_str());
  curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, 1000L);
  curl_easy_setopt(h, CURLOPT_WRITEDATA, &body);
  curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, +[](char* p, size_t size, size_t n, void* out) {
    static_cast<std::string*>(out)->append(p, size * n);
    return size * n;
  });
  if (tls) {
    curl_easy_setopt(h, CURLOPT_CAINFO, tls->ca_file.c_str());
    curl_easy_setopt(h, CURLOPT_SSLCERT, tls->client_cert_file.c_str());
    curl_easy_setopt(h, CURLOPT_SSLKEY, tls->client_key_file.c_str());
  }
  const bool ok = curl_easy_perform(h) == CURLE_OK && body.find("\"health\":\"true\"") != std::string::npos;
  curl_easy_cleanup(h);
  return ok;
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
  /// Starts etcd at once, serving https with `tls` when given (else http), with `extra_args`
  /// after the usual ones (e.g. "--auth-token-ttl=1").
  explicit EtcdProcess(std::optional<EtcdTls> tls = std::nullopt, std::vector<std::string> extra_args = {})
      : tls_(std::move(tls)), extra_(std::move(extra_args)) {
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

  /// "http://127.0.0.1:<client port>" (https with TLS).
  std::string endpoint() const {
    return std::string(tls_ ? "https" : "http") + "://127.0.0.1:" + std::to_string(client_port_);
  }
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
    const std::string client = endpoint();
    const std::string peer = "http://127.0.0.1:" + std::to_string(peer_port_);
    std::vector<std::string> args = {kEtcdBinary, "--name=n0", "--data-dir=" + dir_ + "/data",
        "--listen-client-urls=" + client, "--advertise-client-urls=" + client,
        "--listen-peer-urls=" + peer, "--initial-advertise-peer-urls=" + peer,
        "--initial-cluster=n0=" + peer, "--heartbeat-interval=50", "--election-timeout=500",
        "--logger=zap", "--log-outputs=stderr"};
    if (tls_)
      args.insert(args.end(), {"--cert-file=" + tls_->cert_file, "--key-file=" + tls_->key_file,
                               "--trusted-ca-file=" + tls_->ca_file, "--client-cert-auth"});
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
      return etcd_healthy(client, tls_ ? &*tls_ : nullptr);
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
  std::optional<EtcdTls> tls_;
  std::vector<std::string> extra_;
  std::string dir_;
  uint16_t client_port_ = 0, peer_port_ = 0;
  pid_t pid_ = 0;
};

}  // namespace etcd_test
