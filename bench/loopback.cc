// stratakv-loopback: loopback TCP bandwidth of this machine.
//
// One sender thread writes large buffers (default 4 MiB) into a 127.0.0.1 TCP connection;
// one receiver thread reads them into a buffer of the same size and throws them away. The
// figure is bytes received / time from the first received byte to EOF. No RESP server can
// move values over loopback faster than this, so bench/compare-redis.sh reports every
// large-value figure as a fraction of it.
//
//   stratakv-loopback                    # 3 seconds, 4 MiB writes
//   stratakv-loopback --bytes 8g --json  # a fixed amount, one JSON line
//
// GB/s means 10^9 bytes per second.

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

[[noreturn]] void usage(const char* msg = nullptr) {
  if (msg) std::fprintf(stderr, "stratakv-loopback: %s\n\n", msg);
  std::fprintf(stderr,
               "usage: stratakv-loopback [--seconds S | --bytes N] [--buffer N] [--recv-span N] [--json]\n"
               "  --seconds S   send for S seconds (default 3)\n"
               "  --bytes N     send exactly N bytes instead (suffixes k/m/g, binary)\n"
               "  --buffer N    size of each write and read (default 4m)\n"
               "  --recv-span N the receiver writes through N bytes of memory in turn instead of\n"
               "                reusing one cache-warm buffer, as a server storing values does\n"
               "                (pages pre-faulted; default: the buffer size)\n"
               "  --json        print one JSON line\n");
  std::exit(2);
}

[[noreturn]] void die(const char* what) {
  std::fprintf(stderr, "stratakv-loopback: %s: %s\n", what, std::strerror(errno));
  std::exit(1);
}

bool parse_size(std::string_view s, uint64_t& out) {
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p == s.data()) return false;
  std::string_view suf(p, static_cast<size_t>(s.data() + s.size() - p));
  uint64_t mul = 1;
  if (suf.empty() || suf == "b") mul = 1;
  else if (suf == "k" || suf == "kb" || suf == "K" || suf == "KB") mul = uint64_t{1} << 10;
  else if (suf == "m" || suf == "mb" || suf == "M" || suf == "MB") mul = uint64_t{1} << 20;
  else if (suf == "g" || suf == "gb" || suf == "G" || suf == "GB") mul = uint64_t{1} << 30;
  else return false;
  out = v * mul;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  ::signal(SIGPIPE, SIG_IGN);
  double seconds = 3.0;
  uint64_t bytes = 0;  // 0 = time-bound
  uint64_t bufsize = uint64_t{4} << 20, span = 0;
  bool json = false;
  for (int i = 1; i < argc; ++i) {
    std::string_view a = argv[i];
    auto next = [&]() -> std::string_view {
      if (i + 1 >= argc) usage("missing option value");
      return argv[++i];
    };
    if (a == "--seconds") {
      seconds = std::atof(std::string(next()).c_str());
      if (!(seconds > 0)) usage("bad --seconds");
    } else if (a == "--bytes") {
      if (!parse_size(next(), bytes) || bytes == 0) usage("bad --bytes");
    } else if (a == "--buffer") {
      if (!parse_size(next(), bufsize) || bufsize == 0) usage("bad --buffer");
    } else if (a == "--recv-span") {
      if (!parse_size(next(), span) || span == 0) usage("bad --recv-span");
    } else if (a == "--json") {
      json = true;
    } else {
      usage(("unknown option " + std::string(a)).c_str());
    }
  }

  int lfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (lfd < 0) die("socket");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(lfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) < 0) die("bind");
  if (::listen(lfd, 1) < 0) die("listen");
  socklen_t alen = sizeof addr;
  if (::getsockname(lfd, reinterpret_cast<sockaddr*>(&addr), &alen) < 0) die("getsockname");

  std::vector<char> sbuf(bufsize, 'x');
  if (span < bufsize) span = bufsize;
  std::vector<char> rbuf(span, 0);  // zero-filled: every page is resident before timing

  uint64_t received = 0, rpos = 0;
  double recv_secs = 0;
  std::thread receiver([&] {
    int fd = ::accept(lfd, nullptr, nullptr);
    if (fd < 0) die("accept");
    Clock::time_point first{}, last{};
    bool started = false;
    for (;;) {
      if (rpos + bufsize > span) rpos = 0;
      ssize_t r = ::recv(fd, rbuf.data() + rpos, bufsize, 0);
      if (r < 0) {
        if (errno == EINTR) continue;
        die("recv");
      }
      if (r == 0) break;
      rpos += static_cast<uint64_t>(r);
      last = Clock::now();
      if (!started) {
        // Time from the first byte; the first read's bytes don't count toward the rate.
        started = true;
        first = last;
        continue;
      }
      received += static_cast<uint64_t>(r);
    }
    recv_secs = std::chrono::duration<double>(last - first).count();
    ::close(fd);
  });

  int cfd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (cfd < 0) die("socket");
  if (::connect(cfd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) < 0) die("connect");
  int one = 1;
  ::setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);

  uint64_t sent = 0;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds));
  for (;;) {
    if (bytes ? sent >= bytes : Clock::now() >= deadline) break;
    size_t n = sbuf.size();
    if (bytes && bytes - sent < n) n = static_cast<size_t>(bytes - sent);
    ssize_t w = ::send(cfd, sbuf.data(), n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      die("send");
    }
    sent += static_cast<uint64_t>(w);
  }
  ::shutdown(cfd, SHUT_WR);
  receiver.join();
  ::close(cfd);
  ::close(lfd);

  const double bps = recv_secs > 0 ? static_cast<double>(received) / recv_secs : 0;
  if (json) {
    std::printf("{\"bytes\":%" PRIu64 ",\"secs\":%.6f,\"buffer\":%" PRIu64 ",\"gb_per_sec\":%.3f,\"mb_per_sec\":%.1f}\n",
                sent, recv_secs, bufsize, bps / 1e9, bps / 1e6);
  } else {
    std::printf("loopback TCP 127.0.0.1: %.3f GB/s (%.1f MB/s), %.2f GiB in %.3f s, %" PRIu64 " KiB writes\n",
                bps / 1e9, bps / 1e6, static_cast<double>(sent) / (1u << 30), recv_secs, bufsize >> 10);
  }
  return 0;
}
