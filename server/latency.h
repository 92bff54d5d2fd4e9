// server/latency.h - the latency monitor (Redis 7.0's latency.c): per event ("command",
// "fast-command", "expire-cycle", "eviction-cycle"), the last 160 seconds that had a spike over
// `latency-monitor-threshold` ms (one sample per second, the worst of it) and the all-time
// high; LATENCY LATEST|HISTORY|RESET|DOCTOR|GRAPH read them (commands/cmd_introspection.cc).
//
// Callers check the threshold first (LatencyMonitor::threshold_ms, one relaxed load): with the
// default 0 nothing is measured and nothing recorded.
#pragma once

#include <array>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace server {

/// One event's time series: a ring of samples (time 0 = empty) and the worst latency ever.
struct LatencySeries {
  /// Samples kept per event, as Redis's LATENCY_TS_LEN.
  static constexpr size_t kLen = 160;
  struct Sample {
    int64_t time_s = 0;       ///< Unix seconds; 0: unused slot
    uint32_t latency_ms = 0;  ///< the worst latency of that second
  };
  std::array<Sample, kLen> samples{};
  size_t idx = 0;        ///< the slot the next new second goes to
  uint32_t max_ms = 0;   ///< all-time high

  /// The samples in time order, oldest first, empty slots left out.
  std::vector<Sample> in_order() const;
  /// The newest sample.
  const Sample& latest() const { return samples[(idx + kLen - 1) % kLen]; }
};

/// The events and their series. Thread-safe (one mutex: only spikes over the threshold, at most
/// one per event per second in steady state, ever take it).
class LatencyMonitor {
 public:
  /// Records `latency_ms` for `event` at `now_s` (Unix seconds) if it reaches `threshold_ms`
  /// (> 0), as Redis's latencyAddSampleIfNeeded: a second already sampled keeps its worst.
  void add_if_needed(std::string_view event, int64_t latency_ms, int64_t threshold_ms,
                     int64_t now_s);
  /// A command's call of `us` microseconds, as Redis's call() samples it: a "fast-command"
  /// spike for a command flagged fast, else a "command" one.
  void add_command(bool fast, int64_t us, int64_t threshold_ms);
  /// Every event with its series, in the order they first occurred.
  std::vector<std::pair<std::string, LatencySeries>> all() const;
  /// One event's series (exact name, as Redis's dict lookup), or none.
  std::optional<LatencySeries> find(std::string_view event) const;
  /// Drops the series of `event` (ASCII case-insensitive), or of every event when empty;
  /// returns how many went (LATENCY RESET).
  int64_t reset(std::string_view event);
  /// Whether any event was ever recorded since the last reset.
  bool empty() const;

 private:
  mutable std::mutex mu_;
  std::vector<std::pair<std::string, LatencySeries>> events_;
};

/// LATENCY DOCTOR's report, as Redis 7.0's createLatencyReport for the events stratakv has.
/// `threshold_ms`, `slowlog_us` (slowlog-log-slower-than) and `hz` pick its advice. Redis's
/// advice to disable transparent huge pages (they hurt its fork) is left out: stratakv never
/// forks, and may back its memory region with huge pages on purpose (memory.hugepages).
std::string latency_doctor(const LatencyMonitor& monitor, int64_t threshold_ms,
                           int64_t slowlog_us, int64_t hz, int64_t now_s);

/// LATENCY GRAPH's ASCII chart of one series (latencyCommandGenSparkeline): a header line, a
/// rule of 80 dashes, then a 4-row sparkline with labels of how long ago each sample was.
std::string latency_graph(std::string_view event, const LatencySeries& series, int64_t now_s);

}  // namespace server
