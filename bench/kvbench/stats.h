// bench/kvbench/stats.h - what a run counts and times: counters the progress thread reads while
// the streams run, and latency histograms merged at the end.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

namespace kvbench {

/// A latency histogram, log-linear (128 sub-buckets per power of two: under 1% error), of
/// nanoseconds. Not thread-safe: one per stream, merged afterwards.
class Histogram {
 public:
  Histogram();
  void record_ns(uint64_t ns);
  void merge(const Histogram& o);
  uint64_t count() const { return count_; }
  double mean_ms() const { return count_ ? static_cast<double>(sum_ns_) / static_cast<double>(count_) / 1e6 : 0; }
  double max_ms() const { return static_cast<double>(max_ns_) / 1e6; }
  /// The q-quantile (0 <= q <= 1) in milliseconds; 0 when empty.
  double percentile_ms(double q) const;

 private:
  static constexpr int kSubBits = 7;
  std::vector<uint64_t> buckets_;
  uint64_t count_ = 0, sum_ns_ = 0, max_ns_ = 0;
};

/// The counts of a run (or of one stream), as plain numbers.
struct Counts {
  uint64_t requests = 0;
  uint64_t chunks = 0;            ///< chunks asked for, over all requests
  uint64_t lookup_hits = 0;       ///< chunks the lookup reported present (the prefix)
  uint64_t hits = 0;              ///< chunks loaded with the right length
  uint64_t stale = 0;             ///< reported present, then missing when loaded
  uint64_t stored = 0;            ///< chunks stored
  uint64_t bytes_loaded = 0;
  uint64_t bytes_stored = 0;
  uint64_t verified_sampled = 0;  ///< loaded chunks that passed the sampled check
  uint64_t verified_full = 0;     ///< loaded chunks that passed the byte-by-byte check
  uint64_t mismatches = 0;        ///< loaded chunks with a wrong byte or a wrong length
  uint64_t errors = 0;            ///< error replies, and streams that lost their connection
  uint64_t prompt_tokens = 0;     ///< prompt tokens of the requests (ttft.h)
  uint64_t prefill_tokens = 0;    ///< of them, the tokens after each request's loaded prefix
  Counts& operator+=(const Counts& o);
};

/// Counts that one stream updates and the progress thread reads (relaxed atomics).
class LiveCounts {
 public:
  void add(uint64_t Counts::*field, uint64_t n) { (cells_[index(field)]).fetch_add(n, std::memory_order_relaxed); }
  Counts snapshot() const;

 private:
  static size_t index(uint64_t Counts::*field);
  static constexpr size_t kFields = 14;
  std::atomic<uint64_t> cells_[kFields] = {};
};

/// A stretch of time, in nanoseconds since the run started.
struct Span {
  uint64_t begin_ns = 0, end_ns = 0;
};

/// Seconds covered by at least one of `spans` (their union).
double union_secs(std::vector<Span> spans);

/// Everything one stream records.
struct StreamStats {
  LiveCounts live;
  Histogram lookup;       ///< one lookup round trip (pipelined EXISTS, or KV.PREFIX)
  Histogram load;         ///< one load batch (pipelined GET, or KV.MGET)
  Histogram store;        ///< one store batch (pipelined SET, or KV.MPUT)
  Histogram prefix_load;  ///< per request: lookup + loading every hit chunk (checks excluded)
  Histogram request;      ///< per request: lookup + loads + stores (checks excluded)
  Histogram ttft;         ///< per request: modeled time to first token (ttft.h)
  std::vector<Span> load_spans;   ///< each load batch
  std::vector<Span> store_spans;  ///< each store batch
  std::string first_error;
  std::string first_mismatch;
  std::string fatal;  ///< why the stream stopped early
};

/// One point of the timeline: the run's counts `t` seconds after it started.
struct Sample {
  double t = 0;
  Counts counts;
};

}  // namespace kvbench
