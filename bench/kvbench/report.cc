// bench/kvbench/report.cc - text and JSON reports.
#include "report.h"

#include <cinttypes>
#include <cmath>
#include <fstream>

namespace kvbench {
namespace {

std::string human_bytes(double b) {
  char buf[32];
  if (b >= 1e9) std::snprintf(buf, sizeof buf, "%.2f GB", b / 1e9);
  else if (b >= 1e6) std::snprintf(buf, sizeof buf, "%.2f MB", b / 1e6);
  else std::snprintf(buf, sizeof buf, "%.0f B", b);
  return buf;
}

std::string human_size(uint64_t n) {
  char b[32];
  if (n >= (1u << 20) && n % (1u << 20) == 0) std::snprintf(b, sizeof b, "%" PRIu64 " MiB", n >> 20);
  else if (n >= 1024 && n % 1024 == 0) std::snprintf(b, sizeof b, "%" PRIu64 " KiB", n >> 10);
  else std::snprintf(b, sizeof b, "%" PRIu64 " B", n);
  return b;
}

double pct(uint64_t a, uint64_t b) { return b ? 100.0 * static_cast<double>(a) / static_cast<double>(b) : 0; }

// A minimal JSON writer: objects and arrays of numbers, strings and booleans.
class Json {
 public:
  Json& open(const char* key, char bracket) { sep(key); s_ += bracket; first_ = true; return *this; }
  Json& close(char bracket) { s_ += bracket; first_ = false; return *this; }
  Json& num(const char* key, double v) {
    sep(key);
    char b[40];
    std::snprintf(b, sizeof b, "%.6g", std::isfinite(v) ? v : 0.0);
    s_ += b;
    return *this;
  }
  Json& u64(const char* key, uint64_t v) { sep(key); s_ += std::to_string(v); return *this; }
  Json& boolean(const char* key, bool v) { sep(key); s_ += v ? "true" : "false"; return *this; }
  Json& str(const char* key, const std::string& v) {
    sep(key);
    quote(v);
    return *this;
  }
  const std::string& text() const { return s_; }

 private:
  void sep(const char* key) {
    if (!first_) s_ += ',';
    first_ = false;
    if (key) {
      quote(key);
      s_ += ':';
    }
  }
  void quote(const std::string& v) {
    s_ += '"';
    for (char c : v) {
      if (c == '"' || c == '\\') {
        s_ += '\\';
        s_ += c;
      } else if (static_cast<unsigned char>(c) < 0x20) {
        char b[8];
        std::snprintf(b, sizeof b, "\\u%04x", c);
        s_ += b;
      } else {
        s_ += c;
      }
    }
    s_ += '"';
  }
  std::string s_;
  bool first_ = true;
};

void json_hist(Json& j, const char* key, const Histogram& h) {
  j.open(key, '{')
      .u64("count", h.count())
      .num("p50_ms", h.percentile_ms(0.50))
      .num("p99_ms", h.percentile_ms(0.99))
      .num("p999_ms", h.percentile_ms(0.999))
      .num("max_ms", h.max_ms())
      .num("mean_ms", h.mean_ms())
      .close('}');
}

void json_counts(Json& j, const Counts& c) {
  j.u64("requests", c.requests).u64("chunks", c.chunks).u64("lookup_hits", c.lookup_hits).u64("hits", c.hits)
      .u64("stale", c.stale).u64("stored", c.stored).u64("bytes_loaded", c.bytes_loaded)
      .u64("bytes_stored", c.bytes_stored).u64("verified_sampled", c.verified_sampled)
      .u64("verified_full", c.verified_full).u64("mismatches", c.mismatches).u64("errors", c.errors)
      .u64("prompt_tokens", c.prompt_tokens).u64("prefill_tokens", c.prefill_tokens);
}

void json_server(Json& j, const char* key, const ServerInfo& info) {
  j.open(key, '{');
  if (!info.error.empty()) j.str("error", info.error);
  for (const auto& [k, v] : info.fields) j.str(k.c_str(), v);
  j.close('}');
}

}  // namespace

Summary summarize(const std::vector<std::unique_ptr<StreamStats>>& streams, double elapsed_secs,
                  uint64_t value_bytes, uint64_t batch) {
  Summary s;
  s.elapsed_secs = elapsed_secs;
  s.value_bytes = value_bytes;
  s.batch = batch;
  std::vector<Span> load_spans, store_spans;
  for (const auto& st : streams) {
    s.counts += st->live.snapshot();
    s.lookup.merge(st->lookup);
    s.load.merge(st->load);
    s.store.merge(st->store);
    s.prefix_load.merge(st->prefix_load);
    s.request.merge(st->request);
    s.ttft.merge(st->ttft);
    load_spans.insert(load_spans.end(), st->load_spans.begin(), st->load_spans.end());
    store_spans.insert(store_spans.end(), st->store_spans.begin(), st->store_spans.end());
    if (s.first_error.empty()) s.first_error = st->first_error;
    if (s.first_mismatch.empty()) s.first_mismatch = st->first_mismatch;
    if (s.fatal.empty()) s.fatal = st->fatal;
  }
  s.load_secs = union_secs(std::move(load_spans));
  s.store_secs = union_secs(std::move(store_spans));
  return s;
}

void print_report(std::FILE* out, const Options& o, const Summary& s) {
  const Counts& c = s.counts;
  std::string where = !o.url.empty()         ? o.url
                      : o.unix_path.empty() ? o.host + ":" + std::to_string(o.port)
                                            : "unix:" + o.unix_path;
  std::fprintf(out, "stratakv-bench %s%s protocol=%s %s mode=%s value=%s streams=%d batch=%" PRIu64 " verify=%s\n",
               o.label.c_str(), o.label.empty() ? "" : ":", to_string(o.protocol), where.c_str(), to_string(o.mode),
               human_size(s.value_bytes).c_str(), o.streams, s.batch, to_string(o.verify));
  const ServerInfo& srv = s.server_after;
  if (srv.error.empty()) {
    std::fprintf(out, "server        redis_version %s, used_memory %s, maxmemory %s, evicted_keys %s\n",
                 srv.get("redis_version").c_str(), srv.get("used_memory").c_str(), srv.get("maxmemory").c_str(),
                 srv.get("evicted_keys").c_str());
  }
  std::fprintf(out, "requests      %" PRIu64 " in %.2f s (%.1f req/s)\n", c.requests, s.elapsed_secs,
               s.elapsed_secs > 0 ? static_cast<double>(c.requests) / s.elapsed_secs : 0);
  std::fprintf(out, "chunks        %" PRIu64 " asked, %" PRIu64 " hit (%.1f%%), %" PRIu64 " stored; lookups found %" PRIu64
               ", %" PRIu64 " of them gone when loaded\n",
               c.chunks, c.hits, pct(c.hits, c.chunks), c.stored, c.lookup_hits, c.stale);
  std::fprintf(out, "bytes         %s asked, %s loaded (hit ratio %.1f%%), %s stored\n",
               human_bytes(static_cast<double>(c.chunks * s.value_bytes)).c_str(),
               human_bytes(static_cast<double>(c.bytes_loaded)).c_str(), pct(c.bytes_loaded, c.chunks * s.value_bytes),
               human_bytes(static_cast<double>(c.bytes_stored)).c_str());
  std::fprintf(out, "throughput    load %.2f GB/s (over the run %.2f)  store %.2f GB/s (over the run %.2f)\n",
               s.load_gbps(), s.elapsed_secs > 0 ? static_cast<double>(c.bytes_loaded) / s.elapsed_secs / 1e9 : 0,
               s.store_gbps(), s.elapsed_secs > 0 ? static_cast<double>(c.bytes_stored) / s.elapsed_secs / 1e9 : 0);
  std::fprintf(out, "latency ms    %-22s %8s %9s %9s %9s %9s %9s\n", "", "count", "p50", "p99", "p999", "max", "mean");
  auto row = [&](const char* name, const Histogram& h) {
    std::fprintf(out, "              %-22s %8" PRIu64 " %9.3f %9.3f %9.3f %9.3f %9.3f\n", name, h.count(),
                 h.percentile_ms(0.5), h.percentile_ms(0.99), h.percentile_ms(0.999), h.max_ms(), h.mean_ms());
  };
  row(o.fast_path() ? "lookup (KV.PREFIX)" : "lookup (EXISTS x n)", s.lookup);
  row(o.fast_path() ? "load batch (KV.MGET)" : "load batch (GET x n)", s.load);
  row(o.fast_path() ? "store batch (KV.MPUT)" : "store batch (SET x n)", s.store);
  row("prefix load / request", s.prefix_load);
  row("request", s.request);
  row("modeled TTFT", s.ttft);
  std::fprintf(out, "ttft model    prefill %.0f tokens/s: %" PRIu64 " of %" PRIu64 " prompt tokens prefilled (%.1f%%), "
               "the rest loaded\n",
               o.prefill_tokens_per_s, c.prefill_tokens, c.prompt_tokens, pct(c.prefill_tokens, c.prompt_tokens));
  std::fprintf(out, "checks        %s: %" PRIu64 " of %" PRIu64 " loaded chunks checked byte by byte, %" PRIu64
               " by samples; %" PRIu64 " mismatches\n",
               to_string(o.verify), c.verified_full, c.hits, c.verified_sampled, c.mismatches);
  std::fprintf(out, "errors        %" PRIu64 "\n", c.errors);
  if (!s.first_mismatch.empty()) std::fprintf(out, "first mismatch: %s\n", s.first_mismatch.c_str());
  if (!s.first_error.empty()) std::fprintf(out, "first error: %s\n", s.first_error.c_str());
  if (!s.fatal.empty() && s.fatal != s.first_error) std::fprintf(out, "stream lost: %s\n", s.fatal.c_str());
  std::fprintf(out, "result        %s\n", s.ok() ? "OK" : "FAILED");
}

bool write_json(const std::string& path, const Options& o, const Summary& s, const std::vector<Sample>& timeline) {
  const Counts& c = s.counts;
  Json j;
  j.open(nullptr, '{').str("tool", "stratakv-bench").u64("format", 1).str("label", o.label);
  j.open("config", '{')
      .str("protocol", to_string(o.protocol)).str("host", o.host).u64("port", static_cast<uint64_t>(o.port))
      .str("unix", o.unix_path).str("mode", to_string(o.mode)).str("trace", o.trace_path).num("speedup", o.speedup)
      .u64("value_bytes", s.value_bytes).u64("chunk_tokens", o.mode == Mode::kTrace ? o.block_tokens : o.chunk_tokens)
      .u64("bytes_per_token", o.bytes_per_token).u64("users", o.users).u64("rounds", o.rounds)
      .u64("system_prompts", o.system_prompts).u64("system_tokens", o.system_tokens)
      .u64("user_tokens", o.user_tokens).u64("output_tokens", o.output_tokens).u64("repeat", o.repeat)
      .u64("max_requests", o.max_requests).num("duration", o.duration).u64("seed", o.seed)
      .u64("streams", static_cast<uint64_t>(o.streams)).u64("batch", s.batch).boolean("pin", o.pin).boolean("unpin", o.pin && o.unpin)
      .u64("pin_ms", o.pin_ms).str("verify", to_string(o.verify)).str("key_prefix", o.key_prefix)
      .num("prefill_tokens_per_s", o.prefill_tokens_per_s)
      .close('}');
  json_server(j, "server_before", s.server_before);
  json_server(j, "server", s.server_after);
  j.num("elapsed_s", s.elapsed_secs);
  j.open("counts", '{');
  json_counts(j, c);
  j.close('}');
  j.open("hit_ratio", '{')
      .num("chunks", c.chunks ? static_cast<double>(c.hits) / static_cast<double>(c.chunks) : 0)
      .num("bytes", c.chunks ? static_cast<double>(c.bytes_loaded) / static_cast<double>(c.chunks * s.value_bytes) : 0)
      .num("lookup", c.chunks ? static_cast<double>(c.lookup_hits) / static_cast<double>(c.chunks) : 0)
      .close('}');
  const double el = s.elapsed_secs > 0 ? s.elapsed_secs : 1;
  j.open("throughput", '{')
      .num("load_gbps", s.load_gbps()).num("store_gbps", s.store_gbps())
      .num("load_gbps_run", static_cast<double>(c.bytes_loaded) / el / 1e9)
      .num("store_gbps_run", static_cast<double>(c.bytes_stored) / el / 1e9)
      .num("requests_per_s", static_cast<double>(c.requests) / el)
      .num("load_secs", s.load_secs).num("store_secs", s.store_secs)
      .close('}');
  j.open("latency", '{');
  json_hist(j, "lookup", s.lookup);
  json_hist(j, "load", s.load);
  json_hist(j, "store", s.store);
  json_hist(j, "prefix_load", s.prefix_load);
  json_hist(j, "request", s.request);
  json_hist(j, "ttft", s.ttft);
  j.close('}');
  j.str("first_error", s.first_error).str("first_mismatch", s.first_mismatch).str("fatal", s.fatal);
  j.open("timeline", '[');
  for (const Sample& p : timeline) {
    j.open(nullptr, '{').num("t", p.t);
    json_counts(j, p.counts);
    j.close('}');
  }
  j.close(']');
  j.boolean("ok", s.ok()).close('}');
  std::ofstream f(path);
  f << j.text() << '\n';
  if (!f.flush()) {
    std::fprintf(stderr, "stratakv-bench: cannot write %s\n", path.c_str());
    return false;
  }
  return true;
}

}  // namespace kvbench
