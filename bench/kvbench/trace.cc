// bench/kvbench/trace.cc - Mooncake trace reader, replay source and synthetic generator.
#include "trace.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <stdexcept>

#include "hash.h"

namespace kvbench {
namespace {

// Finds `"name"` followed by ':' in line; returns the position after the colon, or npos.
size_t find_field(const std::string& line, const char* name) {
  const std::string quoted = std::string("\"") + name + "\"";
  for (size_t at = line.find(quoted); at != std::string::npos; at = line.find(quoted, at + 1)) {
    size_t p = at + quoted.size();
    while (p < line.size() && (line[p] == ' ' || line[p] == '\t')) ++p;
    if (p < line.size() && line[p] == ':') return p + 1;
  }
  return std::string::npos;
}

double number_at(const std::string& line, size_t p, bool& ok) {
  const char* s = line.c_str() + p;
  char* end = nullptr;
  double v = std::strtod(s, &end);
  ok = end != s && std::isfinite(v);
  return v;
}

class TraceSource : public RequestSource {
 public:
  TraceSource(const Options& o, std::vector<TraceRecord> records) : o_(o), seed_(chain_seed(o)) {
    double t0 = records.empty() ? 0 : records.front().timestamp_ms;
    for (const auto& r : records) {
      Request q;
      q.at_secs = o.speedup > 0 ? (r.timestamp_ms - t0) / 1000.0 / o.speedup : -1;
      uint64_t h = seed_;
      for (uint64_t id : r.hash_ids) q.chunks.push_back(h = mix_in(h, id));
      // input_length, or whole blocks when the trace has no length.
      q.prompt_tokens = r.input_length ? r.input_length : r.hash_ids.size() * o.block_tokens;
      span_secs_ = std::max(span_secs_, q.at_secs);
      requests_.push_back(std::move(q));
    }
    if (!requests_.empty() && o.speedup > 0)
      span_secs_ += span_secs_ / static_cast<double>(requests_.size());  // one mean gap
  }

  bool next(int, Request& out) override {
    const uint64_t i = cursor_.fetch_add(1, std::memory_order_relaxed);
    if (requests_.empty() || i >= total()) return false;
    const uint64_t pass = i / requests_.size();
    const Request& r = requests_[i % requests_.size()];
    out.seq = i;
    out.at_secs = r.at_secs < 0 ? -1 : r.at_secs + static_cast<double>(pass) * span_secs_;
    out.chunks = r.chunks;
    out.prompt_tokens = r.prompt_tokens;
    return true;
  }

  uint64_t total() const override { return requests_.size() * o_.repeat; }

 private:
  const Options& o_;
  const uint64_t seed_;
  std::vector<Request> requests_;
  double span_secs_ = 0;
  std::atomic<uint64_t> cursor_{0};
};

}  // namespace

std::vector<TraceRecord> read_trace(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot open trace " + path + ": " + std::strerror(errno));
  std::vector<TraceRecord> out;
  std::string line;
  for (size_t lineno = 1; std::getline(in, line); ++lineno) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    auto fail = [&](const char* what) {
      throw std::runtime_error(path + ":" + std::to_string(lineno) + ": " + what);
    };
    TraceRecord r;
    bool ok = false;
    size_t p = find_field(line, "timestamp");
    if (p == std::string::npos || (r.timestamp_ms = number_at(line, p, ok), !ok)) fail("no numeric \"timestamp\"");
    if ((p = find_field(line, "input_length")) != std::string::npos)
      r.input_length = static_cast<uint64_t>(number_at(line, p, ok));
    if ((p = find_field(line, "output_length")) != std::string::npos)
      r.output_length = static_cast<uint64_t>(number_at(line, p, ok));
    p = find_field(line, "hash_ids");
    if (p == std::string::npos) fail("no \"hash_ids\"");
    p = line.find('[', p);
    const size_t close = p == std::string::npos ? p : line.find(']', p);
    if (close == std::string::npos) fail("\"hash_ids\" is not an array");
    const char* s = line.c_str() + p + 1;
    const char* end = line.c_str() + close;
    while (s < end) {
      while (s < end && (*s == ' ' || *s == ',' || *s == '\t')) ++s;
      if (s == end) break;
      char* e = nullptr;
      const unsigned long long v = std::strtoull(s, &e, 10);
      if (e == s) fail("\"hash_ids\" holds a non-integer");
      r.hash_ids.push_back(v);
      s = e;
    }
    out.push_back(std::move(r));
  }
  return out;
}

std::unique_ptr<RequestSource> make_trace_source(const Options& o, std::vector<TraceRecord> records) {
  return std::make_unique<TraceSource>(o, std::move(records));
}

uint64_t write_synthetic_trace(const GenOptions& g, uint64_t seed, uint64_t block_tokens) {
  std::ofstream out(g.path);
  if (!out) throw std::runtime_error("cannot write " + g.path + ": " + std::strerror(errno));
  Rng rng(mix_in(seed, 0x7ACE));
  constexpr size_t kMaxBlocks = 400;  // the Mooncake traces' longest prompts are about this
  uint64_t next_id = 0;
  std::vector<std::vector<uint64_t>> prefixes(g.prefixes);
  std::vector<std::vector<uint64_t>> sessions;
  size_t oldest = 0;
  // Zipf(1) over the prefixes: cumulative weights 1/1, 1/2, ...
  std::vector<double> cdf(g.prefixes);
  double sum = 0;
  for (uint64_t k = 0; k < g.prefixes; ++k) cdf[k] = (sum += 1.0 / static_cast<double>(k + 1));
  double t_ms = 0;
  for (uint64_t i = 0; i < g.requests; ++i) {
    std::vector<uint64_t> ids;
    const uint64_t fresh = 1 + rng.below(2 * g.new_blocks - 1);  // mean new_blocks
    size_t session = SIZE_MAX;
    if (!sessions.empty() && rng.uniform() < g.session_prob) {
      session = rng.below(sessions.size());
      if (sessions[session].size() + fresh > kMaxBlocks) session = SIZE_MAX;  // too long: new one
    }
    if (session != SIZE_MAX) {
      ids = sessions[session];
    } else {
      const double x = rng.uniform() * sum;
      size_t k = 0;
      while (k + 1 < cdf.size() && cdf[k] < x) ++k;
      if (prefixes[k].empty())
        for (uint64_t b = 0; b < g.prefix_blocks; ++b) prefixes[k].push_back(next_id++);
      ids = prefixes[k];
    }
    for (uint64_t b = 0; b < fresh; ++b) ids.push_back(next_id++);
    if (session != SIZE_MAX) {
      sessions[session] = ids;
    } else if (sessions.size() < g.sessions) {
      sessions.push_back(ids);
    } else {
      sessions[oldest] = ids;
      oldest = (oldest + 1) % sessions.size();
    }
    const uint64_t input = ids.size() * block_tokens - rng.below(block_tokens);
    out << "{\"timestamp\": " << static_cast<uint64_t>(t_ms) << ", \"input_length\": " << input
        << ", \"output_length\": " << 1 + rng.below(256) << ", \"hash_ids\": [";
    for (size_t j = 0; j < ids.size(); ++j) out << (j ? ", " : "") << ids[j];
    out << "]}\n";
    t_ms += -std::log(1.0 - rng.uniform()) / g.rate * 1000.0;  // exponential gap
  }
  if (!out.flush()) throw std::runtime_error("cannot write " + g.path);
  return next_id;
}

}  // namespace kvbench
