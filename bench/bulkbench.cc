// stratakv-bulkbench: large-value SET/GET throughput over RESP.
//
// Built so that the client is not the bottleneck: raw POSIX blocking sockets, no RESP
// library in the data path. A SET is one writev of (header, payload, "\r\n") per command
// from one preallocated payload buffer; a GET reply's `$len\r\n` header goes through a
// small staging buffer and the payload is then received straight into a preallocated
// buffer of the expected size (at most a few hundred staged bytes are copied per value).
//
// Each connection is one thread. With --pipeline P a connection sends P commands and then
// reads P replies (redis-benchmark's -P semantics). Keys are <prefix><i> for
// i in [0, keys); op j overall uses key j % keys, so a GET phase reads what the SET phase
// wrote. With --verify, SET writes a per-key deterministic pattern and GET checks every
// byte of every reply against it (this costs client CPU: use it for correctness, not for
// the headline figure).
//
//   stratakv-bulkbench --port 6379 --size 32m --count 64 --keys 16 --connections 4 --op both
//   stratakv-bulkbench --port 6379 --size 1m --count 2000 --pipeline 4 --verify --json
//   stratakv-bulkbench --port 6380 --tls --cacert ca.crt --cert client.crt --key client.key
//
// MB/s counts the payload bytes of successful ops only (OK replies, hits of the right
// length); MB/s means 10^6 bytes per second; ops/s counts every reply. Exit status: 0 on
// success, 1 if any reply was an error, a mismatch, or (with --verify) a miss; 2 on bad
// usage or connection failure.

#include <signal.h>
#include <sys/uio.h>

#include <algorithm>
#include <atomic>
#include <barrier>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cinttypes>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "kvbench/net.h"
#include "kvbench/resp.h"

namespace {

using Clock = std::chrono::steady_clock;

// ---------------------------------------------------------------------------------------
// Options

struct Options {
  std::string host = "127.0.0.1";
  int port = 6379;
  size_t size = size_t{1} << 20;
  uint64_t count = 100;
  uint64_t keys = 0;  // 0 = same as count
  int connections = 1;
  int pipeline = 1;
  bool do_set = true;
  bool do_get = true;
  bool verify = false;
  bool json = false;
  std::string prefix = "bulkbench:";
  bool tls = false;  // --tls: connect with TLS (the files below)
  kvbench::Conn::TlsFiles tls_files;
};

[[noreturn]] void usage(const char* msg = nullptr) {
  if (msg) std::fprintf(stderr, "stratakv-bulkbench: %s\n\n", msg);
  std::fprintf(stderr,
               "usage: stratakv-bulkbench [options]\n"
               "  --host H           server address (default 127.0.0.1)\n"
               "  --port P           server port (default 6379)\n"
               "  --size BYTES       value size; suffixes k/m/g (KiB/MiB/GiB), default 1m\n"
               "  --count N          operations per phase, over all connections (default 100)\n"
               "  --keys K           distinct keys (default = count); bounds server memory\n"
               "  --connections C    connections, one thread each (default 1)\n"
               "  --pipeline P       commands in flight per connection (default 1)\n"
               "  --op set|get|both  phases to run (default both: SET then GET)\n"
               "  --verify           SET per-key patterns, GET checks every byte\n"
               "  --prefix S         key prefix (default bulkbench:)\n"
               "  --tls              connect with TLS (tls-port); --cacert FILE verifies the\n"
               "                     server, --cert FILE --key FILE are the client's certificate\n"
               "  --json             print one JSON line instead of the text report\n");
  std::exit(2);
}

// "32m" -> 32 MiB. Suffixes k, m, g (optionally followed by b / ib) are binary.
bool parse_size(std::string_view s, uint64_t& out) {
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p == s.data()) return false;
  std::string suf(p, s.data() + s.size());
  for (auto& c : suf) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  uint64_t mul = 1;
  if (suf.empty() || suf == "b") mul = 1;
  else if (suf == "k" || suf == "kb" || suf == "kib") mul = uint64_t{1} << 10;
  else if (suf == "m" || suf == "mb" || suf == "mib") mul = uint64_t{1} << 20;
  else if (suf == "g" || suf == "gb" || suf == "gib") mul = uint64_t{1} << 30;
  else return false;
  if (v > UINT64_MAX / mul) return false;
  out = v * mul;
  return true;
}

Options parse_args(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    std::string val;
    bool has_inline = false;
    if (auto eq = a.find('='); a.rfind("--", 0) == 0 && eq != std::string::npos) {
      val = a.substr(eq + 1);
      a = a.substr(0, eq);
      has_inline = true;
    }
    auto next = [&]() -> std::string {
      if (has_inline) return val;
      if (i + 1 >= argc) usage(("missing value for " + a).c_str());
      return argv[++i];
    };
    auto num = [&](const std::string& v, uint64_t lo, uint64_t hi) {
      uint64_t x = 0;
      if (!parse_size(v, x) || x < lo || x > hi) usage(("bad value for " + a + ": " + v).c_str());
      return x;
    };
    if (a == "--host") o.host = next();
    else if (a == "--port") o.port = static_cast<int>(num(next(), 1, 65535));
    else if (a == "--size") o.size = num(next(), 0, uint64_t{1} << 40);
    else if (a == "--count" || a == "-n") o.count = num(next(), 1, uint64_t{1} << 40);
    else if (a == "--keys") o.keys = num(next(), 1, uint64_t{1} << 40);
    else if (a == "--connections" || a == "-c") o.connections = static_cast<int>(num(next(), 1, 4096));
    else if (a == "--pipeline" || a == "-P") o.pipeline = static_cast<int>(num(next(), 1, 65536));
    else if (a == "--prefix") o.prefix = next();
    else if (a == "--tls") o.tls = true;
    else if (a == "--cacert") o.tls_files.ca = next();
    else if (a == "--cert") o.tls_files.cert = next();
    else if (a == "--key") o.tls_files.key = next();
    else if (a == "--op") {
      std::string v = next();
      if (v == "set") { o.do_set = true; o.do_get = false; }
      else if (v == "get") { o.do_set = false; o.do_get = true; }
      else if (v == "both") { o.do_set = true; o.do_get = true; }
      else usage(("bad --op: " + v).c_str());
    } else if (a == "--verify") o.verify = true;
    else if (a == "--json") o.json = true;
    else if (a == "--help" || a == "-h") usage();
    else usage(("unknown option " + a).c_str());
  }
  if (o.keys == 0) o.keys = o.count;
  return o;
}

// ---------------------------------------------------------------------------------------
// Deterministic per-key payload pattern: word i of key k is mix(seed(k) + i * golden).
// Cheap enough to generate/check at memory speed, distinct per key and per position, so
// a torn, shifted or cross-key reply is detected.

inline uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

inline uint64_t pattern_word(uint64_t seed, uint64_t i) {
  uint64_t x = seed + i * 0x9E3779B97F4A7C15ull;
  return x ^ (x >> 29);
}

inline uint64_t key_seed(uint64_t key, size_t size) { return splitmix64(key * 0x100000001B3ull ^ size); }

void fill_pattern(char* buf, size_t size, uint64_t key) {
  const uint64_t seed = key_seed(key, size);
  const size_t words = size / 8;
  for (size_t i = 0; i < words; ++i) {
    uint64_t w = pattern_word(seed, i);
    std::memcpy(buf + i * 8, &w, 8);
  }
  if (size % 8) {
    uint64_t w = pattern_word(seed, words);
    std::memcpy(buf + words * 8, &w, size % 8);
  }
}

// Returns the offset of the first wrong byte, or SIZE_MAX when the buffer matches.
size_t check_pattern(const char* buf, size_t size, uint64_t key) {
  const uint64_t seed = key_seed(key, size);
  const size_t words = size / 8;
  for (size_t i = 0; i < words; ++i) {
    uint64_t w = pattern_word(seed, i), got;
    std::memcpy(&got, buf + i * 8, 8);
    if (w != got) {
      for (size_t b = 0; b < 8; ++b)
        if (buf[i * 8 + b] != reinterpret_cast<const char*>(&w)[b]) return i * 8 + b;
    }
  }
  if (size % 8) {
    uint64_t w = pattern_word(seed, words);
    for (size_t b = 0; b < size % 8; ++b)
      if (buf[words * 8 + b] != reinterpret_cast<const char*>(&w)[b]) return words * 8 + b;
  }
  return SIZE_MAX;
}

// ---------------------------------------------------------------------------------------
// Per-connection worker

struct PhaseStats {
  uint64_t ops = 0;
  uint64_t bytes = 0;  // payload bytes of successful ops (OK replies, hits of the right length)
  uint64_t errors = 0;
  uint64_t misses = 0;
  uint64_t mismatches = 0;
  std::string first_error;
  std::vector<double> batch_ms;  // round trip of each pipeline batch
};

struct Worker {
  const Options* opt = nullptr;
  std::optional<kvbench::Conn> conn;
  uint64_t first_op = 0;  // global index of this connection's first op
  uint64_t ops = 0;       // ops per phase on this connection
  std::vector<char*> payloads;                    // SET sources: 1, or P with --verify
  std::vector<std::unique_ptr<char[]>> owned;     // the buffers this worker allocated
  std::unique_ptr<char[]> getbuf;                 // GET destination
  PhaseStats set_stats, get_stats;
  bool dead = false;
  std::string fatal;

  std::string key_of(uint64_t op) const { return opt->prefix + std::to_string(op % opt->keys); }

  void note_error(PhaseStats& st, std::string_view line) {
    ++st.errors;
    if (st.first_error.empty()) st.first_error = std::string(line.substr(1));
  }

  // A line that is neither the expected reply nor an error means we lost sync.
  [[noreturn]] void unexpected(std::string_view line) {
    throw kvbench::IoError("unexpected reply: " + std::string(line.substr(0, 80)));
  }

  void run_set() {
    const size_t P = static_cast<size_t>(opt->pipeline);
    std::vector<std::string> headers(P);
    std::vector<iovec> iov(3 * P);
    static const char crlf[] = "\r\n";
    for (uint64_t done = 0; done < ops;) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(P, ops - done));
      auto t0 = Clock::now();
      for (size_t j = 0; j < n; ++j) {
        uint64_t op = first_op + done + j;
        std::string key = key_of(op);
        char* payload = payloads[0];
        if (opt->verify) {
          payload = payloads[j];
          fill_pattern(payload, opt->size, op % opt->keys);
        }
        std::string& h = headers[j];
        h.clear();
        h += "*3\r\n$3\r\nSET\r\n$";
        h += std::to_string(key.size());
        h += "\r\n";
        h += key;
        h += "\r\n$";
        h += std::to_string(opt->size);
        h += "\r\n";
        iov[3 * j] = {h.data(), h.size()};
        iov[3 * j + 1] = {payload, opt->size};
        iov[3 * j + 2] = {const_cast<char*>(crlf), 2};
      }
      conn->writev_all(iov.data(), 3 * n);
      for (size_t j = 0; j < n; ++j) {
        std::string_view l = conn->line();
        if (l == "+OK") {
          set_stats.bytes += opt->size;
          continue;
        }
        if (!l.empty() && l[0] == '-') note_error(set_stats, l);
        else unexpected(l);
      }
      set_stats.batch_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      set_stats.ops += n;
      done += n;
    }
  }

  void run_get() {
    const size_t P = static_cast<size_t>(opt->pipeline);
    std::string req;
    for (uint64_t done = 0; done < ops;) {
      size_t n = static_cast<size_t>(std::min<uint64_t>(P, ops - done));
      auto t0 = Clock::now();
      req.clear();
      for (size_t j = 0; j < n; ++j) {
        std::string key = key_of(first_op + done + j);
        req += "*2\r\n$3\r\nGET\r\n$";
        req += std::to_string(key.size());
        req += "\r\n";
        req += key;
        req += "\r\n";
      }
      conn->send_all(req);
      for (size_t j = 0; j < n; ++j) read_get_reply(first_op + done + j);
      get_stats.batch_ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t0).count());
      get_stats.ops += n;
      done += n;
    }
  }

  void read_get_reply(uint64_t op) {
    std::string_view l = conn->line();
    if (l.empty()) unexpected(l);
    if (l[0] == '-') return note_error(get_stats, l);
    if (l[0] != '$') unexpected(l);
    int64_t len = 0;
    auto [p, ec] = std::from_chars(l.data() + 1, l.data() + l.size(), len);
    if (ec != std::errc() || p != l.data() + l.size()) unexpected(l);
    if (len < 0) {
      ++get_stats.misses;
      return;
    }
    if (static_cast<uint64_t>(len) != opt->size) {
      // Wrong length: drain it through the buffer in chunks and count a mismatch.
      ++get_stats.mismatches;
      if (get_stats.first_error.empty())
        get_stats.first_error = "length " + std::to_string(len) + " != " + std::to_string(opt->size);
      uint64_t left = static_cast<uint64_t>(len);
      const size_t chunk = std::max<size_t>(opt->size, 1);
      std::unique_ptr<char[]> tmp;
      char* dst = getbuf.get();
      if (opt->size == 0) {
        tmp.reset(new char[1]);
        dst = tmp.get();
      }
      while (left > 0) {
        size_t n = static_cast<size_t>(std::min<uint64_t>(left, chunk));
        conn->read_exact(dst, n);
        left -= n;
      }
      kvbench::expect_crlf(*conn);
      return;
    }
    conn->read_exact(getbuf.get(), opt->size);
    kvbench::expect_crlf(*conn);
    get_stats.bytes += opt->size;
    if (opt->verify) {
      size_t bad = check_pattern(getbuf.get(), opt->size, op % opt->keys);
      if (bad != SIZE_MAX) {
        ++get_stats.mismatches;
        if (get_stats.first_error.empty())
          get_stats.first_error = "key " + key_of(op) + ": first wrong byte at offset " + std::to_string(bad);
      }
    }
  }
};

// ---------------------------------------------------------------------------------------
// Reporting

struct PhaseResult {
  const char* name;
  double secs = 0;
  uint64_t ops = 0, bytes = 0, errors = 0, misses = 0, mismatches = 0;
  double p50 = 0, p99 = 0, max = 0;
  std::string first_error;
  double ops_per_sec() const { return secs > 0 ? static_cast<double>(ops) / secs : 0; }
  double mb_per_sec() const { return secs > 0 ? static_cast<double>(bytes) / secs / 1e6 : 0; }
};

double percentile(std::vector<double>& v, double q) {
  if (v.empty()) return 0;
  size_t idx = static_cast<size_t>(q * static_cast<double>(v.size() - 1) + 0.5);
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(idx), v.end());
  return v[idx];
}

PhaseResult collect(const char* name, double secs, std::vector<Worker>& ws, PhaseStats Worker::*which) {
  PhaseResult r;
  r.name = name;
  r.secs = secs;
  std::vector<double> lat;
  for (auto& w : ws) {
    PhaseStats& s = w.*which;
    r.ops += s.ops;
    r.bytes += s.bytes;
    r.errors += s.errors;
    r.misses += s.misses;
    r.mismatches += s.mismatches;
    if (r.first_error.empty()) r.first_error = s.first_error;
    lat.insert(lat.end(), s.batch_ms.begin(), s.batch_ms.end());
  }
  if (!lat.empty()) {
    r.max = *std::max_element(lat.begin(), lat.end());
    r.p99 = percentile(lat, 0.99);
    r.p50 = percentile(lat, 0.50);
  }
  return r;
}

std::string json_escape(std::string_view s) {
  std::string o;
  for (char c : s) {
    if (c == '"' || c == '\\') { o += '\\'; o += c; }
    else if (static_cast<unsigned char>(c) < 0x20) {
      char b[8];
      std::snprintf(b, sizeof b, "\\u%04x", c);
      o += b;
    } else o += c;
  }
  return o;
}

std::string human_size(uint64_t n) {
  char b[64];
  if (n >= (1u << 20) && n % (1u << 20) == 0) std::snprintf(b, sizeof b, "%" PRIu64 " MiB", n >> 20);
  else if (n >= 1024 && n % 1024 == 0) std::snprintf(b, sizeof b, "%" PRIu64 " KiB", n >> 10);
  else std::snprintf(b, sizeof b, "%" PRIu64 " B", n);
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  ::signal(SIGPIPE, SIG_IGN);
  Options opt = parse_args(argc, argv);
  const int C = opt.connections;

  // Split the ops over the connections; connect them all before any timing starts.
  std::vector<Worker> ws(static_cast<size_t>(C));
  uint64_t next = 0;
  const size_t header_chunk = opt.size >= 16 * 1024 ? 512 : 64 * 1024;
  try {
    for (int i = 0; i < C; ++i) {
      Worker& w = ws[static_cast<size_t>(i)];
      w.opt = &opt;
      w.first_op = next;
      w.ops = opt.count / static_cast<uint64_t>(C) + (static_cast<uint64_t>(i) < opt.count % static_cast<uint64_t>(C) ? 1 : 0);
      next += w.ops;
      w.conn.emplace(opt.tls ? kvbench::Conn::tls(opt.host, opt.port, opt.tls_files, header_chunk)
                             : kvbench::Conn::tcp(opt.host, opt.port, header_chunk));
      const size_t alloc = std::max<size_t>(opt.size, 1);
      // SET sources: with --verify one per pipeline slot (each holds its key's pattern);
      // otherwise one buffer shared read-only by every connection.
      if (opt.do_set) {
        if (opt.verify || i == 0) {
          size_t nbufs = opt.verify ? static_cast<size_t>(opt.pipeline) : 1;
          for (size_t b = 0; b < nbufs; ++b) {
            w.owned.emplace_back(new char[alloc]);
            fill_pattern(w.owned.back().get(), opt.size, 0);  // also faults the pages in
            w.payloads.push_back(w.owned.back().get());
          }
        } else {
          w.payloads.push_back(ws[0].payloads[0]);
        }
      }
      if (opt.do_get) {
        w.getbuf.reset(new char[alloc]);
        std::memset(w.getbuf.get(), 0, alloc);  // fault the pages in before timing
      }
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stratakv-bulkbench: %s\n", e.what());
    return 2;
  }
  // Phases run in lockstep: every thread waits at `sync` before and after each phase, and
  // main timestamps both barriers.
  const int phases = (opt.do_set ? 1 : 0) + (opt.do_get ? 1 : 0);
  std::barrier sync(C + 1);
  std::vector<std::thread> threads;
  for (auto& w : ws) {
    threads.emplace_back([&w, &sync, &opt] {
      auto phase = [&](void (Worker::*fn)()) {
        sync.arrive_and_wait();
        if (!w.dead) {
          try {
            (w.*fn)();
          } catch (const std::exception& e) {
            w.dead = true;
            w.fatal = e.what();
          }
        }
        sync.arrive_and_wait();
      };
      if (opt.do_set) phase(&Worker::run_set);
      if (opt.do_get) phase(&Worker::run_get);
    });
  }
  std::vector<double> secs;
  for (int p = 0; p < phases; ++p) {
    sync.arrive_and_wait();
    auto t0 = Clock::now();
    sync.arrive_and_wait();
    secs.push_back(std::chrono::duration<double>(Clock::now() - t0).count());
  }
  for (auto& t : threads) t.join();
  for (auto& w : ws) w.conn.reset();

  std::vector<PhaseResult> results;
  size_t si = 0;
  if (opt.do_set) results.push_back(collect("set", secs[si++], ws, &Worker::set_stats));
  if (opt.do_get) results.push_back(collect("get", secs[si++], ws, &Worker::get_stats));

  std::string fatal;
  for (auto& w : ws)
    if (w.dead && fatal.empty()) fatal = w.fatal;

  bool failed = !fatal.empty();
  for (auto& r : results)
    if (r.errors || r.mismatches || (opt.verify && r.misses) || r.ops != opt.count) failed = true;

  if (opt.json) {
    std::string j;
    char b[512];
    std::snprintf(b, sizeof b,
                  "{\"host\":\"%s\",\"port\":%d,\"size\":%zu,\"count\":%" PRIu64 ",\"keys\":%" PRIu64
                  ",\"connections\":%d,\"pipeline\":%d,\"verify\":%s",
                  json_escape(opt.host).c_str(), opt.port, opt.size, opt.count, opt.keys, opt.connections,
                  opt.pipeline, opt.verify ? "true" : "false");
    j += b;
    for (auto& r : results) {
      const double mbps = r.mb_per_sec();
      std::snprintf(b, sizeof b,
                    ",\"%s\":{\"ops\":%" PRIu64 ",\"bytes\":%" PRIu64 ",\"secs\":%.6f,\"ops_per_sec\":%.2f,\"mb_per_sec\":%.2f,"
                    "\"errors\":%" PRIu64 ",\"misses\":%" PRIu64 ",\"mismatches\":%" PRIu64
                    ",\"p50_ms\":%.3f,\"p99_ms\":%.3f,\"max_ms\":%.3f",
                    r.name, r.ops, r.bytes, r.secs, r.ops_per_sec(), mbps, r.errors, r.misses, r.mismatches, r.p50, r.p99,
                    r.max);
      j += b;
      if (!r.first_error.empty()) j += ",\"first_error\":\"" + json_escape(r.first_error) + "\"";
      j += "}";
    }
    if (!fatal.empty()) j += ",\"fatal\":\"" + json_escape(fatal) + "\"";
    j += ",\"ok\":";
    j += failed ? "false" : "true";
    j += "}";
    std::printf("%s\n", j.c_str());
  } else {
    std::printf("stratakv-bulkbench %s:%d  size=%s count=%" PRIu64 " keys=%" PRIu64
                " connections=%d pipeline=%d verify=%s\n",
                opt.host.c_str(), opt.port, human_size(opt.size).c_str(), opt.count, opt.keys, opt.connections,
                opt.pipeline, opt.verify ? "yes" : "no");
    for (auto& r : results) {
      const double mbps = r.mb_per_sec();
      std::printf("%s: %" PRIu64 " ops in %.3f s  %.1f ops/s  %.1f MB/s  batch latency p50 %.3f ms p99 %.3f ms "
                  "max %.3f ms  errors=%" PRIu64,
                  r.name[0] == 's' ? "SET" : "GET", r.ops, r.secs, r.ops_per_sec(), mbps, r.p50, r.p99, r.max,
                  r.errors);
      if (r.name[0] == 'g') std::printf(" misses=%" PRIu64 " mismatches=%" PRIu64, r.misses, r.mismatches);
      std::printf("\n");
      if (!r.first_error.empty()) std::printf("  first error: %s\n", r.first_error.c_str());
    }
    if (!fatal.empty()) std::printf("fatal: %s\n", fatal.c_str());
  }
  if (!fatal.empty()) std::fprintf(stderr, "stratakv-bulkbench: %s\n", fatal.c_str());
  return failed ? 1 : 0;
}
