// server/latency.cc - the latency monitor's series, LATENCY DOCTOR's report and LATENCY GRAPH's
// chart (latency.h). Texts are Redis 7.0's (latency.c, sparkline.c).
#include "server/latency.h"

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "server/command.h"

namespace server {

// ---- the series ----

std::vector<LatencySeries::Sample> LatencySeries::in_order() const {
  std::vector<Sample> out;
  for (size_t j = 0; j < kLen; ++j) {
    const Sample& s = samples[(idx + j) % kLen];
    if (s.time_s != 0) out.push_back(s);
  }
  return out;
}

void LatencyMonitor::add_if_needed(std::string_view event, int64_t latency_ms,
                                   int64_t threshold_ms, int64_t now_s) {
  if (threshold_ms <= 0 || latency_ms < threshold_ms) return;
  const uint32_t ms = static_cast<uint32_t>(std::min<int64_t>(latency_ms, UINT32_MAX));
  std::lock_guard lock(mu_);
  LatencySeries* ts = nullptr;
  for (auto& [name, series] : events_)
    if (name == event) ts = &series;
  if (ts == nullptr) ts = &events_.emplace_back(std::string(event), LatencySeries{}).second;
  if (ms > ts->max_ms) ts->max_ms = ms;
  // A second already sampled keeps its worst latency (latencyAddSample).
  constexpr size_t kLen = LatencySeries::kLen;
  LatencySeries::Sample& prev = ts->samples[(ts->idx + kLen - 1) % kLen];
  if (prev.time_s == now_s) {
    if (ms > prev.latency_ms) prev.latency_ms = ms;
    return;
  }
  ts->samples[ts->idx] = {now_s, ms};
  ts->idx = (ts->idx + 1) % kLen;
}

void LatencyMonitor::add_command(bool fast, int64_t us, int64_t threshold_ms) {
  const int64_t ms = us / 1000;
  if (threshold_ms <= 0 || ms < threshold_ms) return;
  const int64_t now_s = std::chrono::duration_cast<std::chrono::seconds>(
                            std::chrono::system_clock::now().time_since_epoch())
                            .count();
  add_if_needed(fast ? "fast-command" : "command", ms, threshold_ms, now_s);
}

std::vector<std::pair<std::string, LatencySeries>> LatencyMonitor::all() const {
  std::lock_guard lock(mu_);
  return events_;
}

std::optional<LatencySeries> LatencyMonitor::find(std::string_view event) const {
  std::lock_guard lock(mu_);
  for (const auto& [name, series] : events_)
    if (name == event) return series;
  return std::nullopt;
}

int64_t LatencyMonitor::reset(std::string_view event) {
  std::lock_guard lock(mu_);
  const size_t before = events_.size();
  std::erase_if(events_, [&](const auto& e) { return event.empty() || iequals(e.first, event); });
  return static_cast<int64_t>(before - events_.size());
}

bool LatencyMonitor::empty() const {
  std::lock_guard lock(mu_);
  return events_.empty();
}

// ---- DOCTOR ----

namespace {

// Redis's analyzeLatencyForEvent: samples, average, mean absolute deviation, and the period
// (seconds from the oldest sample to now, at least 1).
struct Stats {
  uint32_t samples = 0;
  uint64_t avg = 0, mad = 0;
  int64_t period = 0;
};

Stats analyze(const LatencySeries& ts, int64_t now_s) {
  Stats st;
  uint64_t sum = 0;
  for (const auto& s : ts.samples) {
    if (s.time_s == 0) continue;
    ++st.samples;
    sum += s.latency_ms;
    if (st.period == 0 || s.time_s < st.period) st.period = s.time_s;
  }
  if (st.samples == 0) return st;
  st.avg = sum / st.samples;
  st.period = now_s - st.period;
  if (st.period == 0) st.period = 1;
  sum = 0;
  for (const auto& s : ts.samples) {
    if (s.time_s == 0) continue;
    const int64_t delta = static_cast<int64_t>(st.avg) - s.latency_ms;
    sum += static_cast<uint64_t>(delta < 0 ? -delta : delta);
  }
  st.mad = sum / st.samples;
  return st;
}

}  // namespace

std::string latency_doctor(const LatencyMonitor& monitor, int64_t threshold_ms,
                           int64_t slowlog_us, int64_t hz, int64_t now_s) {
  const auto events = monitor.all();
  if (events.empty() && threshold_ms == 0)
    return "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Redis "
           "instance. You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in "
           "order to enable it. If we weren't in a deep space mission I'd suggest to take a look "
           "at https://redis.io/topics/latency-monitor.\n";
  std::string report;
  bool slowlog_enabled = false, slowlog_tuning = false, slowlog_inspect = false,
       scheduler = false, use_hz = false, large_objects = false, mass_eviction = false;
  int advices = 0, n = 0;
  for (const auto& [event, ts] : events) {
    if (++n == 1)
      report += "Dave, I have observed latency spikes in this Redis instance. You don't mind "
                "talking about it, do you Dave?\n\n";
    const Stats st = analyze(ts, now_s);
    char line[512];
    std::snprintf(line, sizeof line,
                  "%d. %s: %u latency spikes (average %lums, mean deviation %lums, period %.2f "
                  "sec). Worst all time event %lums.",
                  n, event.c_str(), st.samples, static_cast<unsigned long>(st.avg),
                  static_cast<unsigned long>(st.mad),
                  static_cast<double>(st.period) / st.samples,
                  static_cast<unsigned long>(ts.max_ms));
    report += line;
    if (iequals(event, "command")) {
      if (slowlog_us < 0) {
        slowlog_enabled = true;
        ++advices;
      } else if (slowlog_us / 1000 > threshold_ms) {
        slowlog_tuning = true;
        ++advices;
      }
      slowlog_inspect = large_objects = true;
      advices += 2;
    }
    if (iequals(event, "fast-command")) {
      scheduler = true;
      ++advices;
    }
    if (iequals(event, "expire-cycle")) {
      use_hz = large_objects = true;
      advices += 2;
    }
    if (iequals(event, "eviction-cycle")) {
      mass_eviction = true;
      ++advices;
    }
    report += "\n";
  }
  if (n == 0 && advices == 0) {
    report += "Dave, no latency spike was observed during the lifetime of this Redis instance, "
              "not in the slightest bit. I honestly think you ought to sit down calmly, take a "
              "stress pill, and think things over.\n";
    return report;
  }
  if (n > 0 && advices == 0) {
    report += "\nWhile there are latency events logged, I'm not able to suggest any easy fix. "
              "Please use the Redis community to get some help, providing this report in your "
              "help request.\n";
    return report;
  }
  report += "\nI have a few advices for you:\n\n";
  const std::string threshold_us = std::to_string(threshold_ms * 1000);
  if (slowlog_enabled)
    report += "- There are latency issues with potentially slow commands you are using. Try to "
              "enable the Slow Log Redis feature using the command 'CONFIG SET "
              "slowlog-log-slower-than " + threshold_us + "'. If the Slow log is disabled Redis "
              "is not able to log slow commands execution for you.\n";
  if (slowlog_tuning)
    report += "- Your current Slow Log configuration only logs events that are slower than your "
              "configured latency monitor threshold. Please use 'CONFIG SET "
              "slowlog-log-slower-than " + threshold_us + "'.\n";
  if (slowlog_inspect)
    report += "- Check your Slow Log to understand what are the commands you are running which "
              "are too slow to execute. Please check https://redis.io/commands/slowlog for more "
              "information.\n";
  if (scheduler)
    report += "- The system is slow to execute Redis code paths not containing system calls. "
              "This usually means the system does not provide Redis CPU time to run for long "
              "periods. You should try to:\n"
              "  1) Lower the system load.\n"
              "  2) Use a computer / VM just for Redis if you are running other software in the "
              "same system.\n"
              "  3) Check if you have a \"noisy neighbour\" problem.\n"
              "  4) Check with 'redis-cli --intrinsic-latency 100' what is the intrinsic latency "
              "in your system.\n"
              "  5) Check if the problem is allocator-related by recompiling Redis with "
              "MALLOC=libc, if you are using Jemalloc. However this may create fragmentation "
              "problems.\n";
  if (use_hz && hz < 100)
    report += "- In order to make the Redis keys expiring process more incremental, try to set "
              "the 'hz' configuration parameter to 100 using 'CONFIG SET hz 100'.\n";
  if (large_objects)
    report += "- Deleting, expiring or evicting (because of maxmemory policy) large objects is a "
              "blocking operation. If you have very large objects that are often deleted, "
              "expired, or evicted, try to fragment those objects into multiple smaller "
              "objects.\n";
  if (mass_eviction)
    report += "- Sudden changes to the 'maxmemory' setting via 'CONFIG SET', or allocation of "
              "large objects via sets or sorted sets intersections, STORE option of SORT, Redis "
              "Cluster large keys migrations (RESTORE command), may create sudden memory "
              "pressure forcing the server to block trying to evict keys. \n";
  return report;
}

// ---- GRAPH ----

namespace {

// sparkline.c's rendering, filled style, of `values` (with `labels`) in rows of `columns`.
void sparkline(std::string& out, const std::vector<double>& values,
               const std::vector<std::string>& labels, size_t columns, int rows) {
  static constexpr char kFill[] = "_o#";
  constexpr int kCharset = 3, kLabelMarginTop = 1;
  if (values.empty()) return;
  double min = values[0], max = values[0];
  for (double v : values) {
    if (v < min) min = v;
    else if (v > max) max = v;
  }
  double relmax = max - min;
  if (relmax == 0) relmax = 1;
  const int steps = kCharset * rows;
  bool any_label = false;
  for (const auto& l : labels) any_label = any_label || !l.empty();
  for (size_t offset = 0; offset < values.size(); offset += columns) {
    const size_t len = std::min(columns, values.size() - offset);
    if (offset != 0) out += '\n';
    std::string chars;
    for (int row = 0;; ++row) {
      bool loop = false;
      chars.assign(len, ' ');
      for (size_t j = 0; j < len; ++j) {
        int step = static_cast<int>(((values[offset + j] - min) * steps) / relmax);
        if (step < 0) step = 0;
        if (step >= steps) step = steps - 1;
        if (row < rows) {
          const int idx = step - (rows - row - 1) * kCharset;
          loop = true;
          if (idx >= 0 && idx < kCharset) chars[j] = kFill[idx];
          else if (idx >= kCharset) chars[j] = '|';
        } else {
          if (any_label && row - rows < kLabelMarginTop) {
            loop = true;
            break;
          }
          const std::string& label = labels[offset + j];
          const int at = row - rows - kLabelMarginTop;
          if (static_cast<int>(label.size()) > at) {
            loop = true;
            chars[j] = label[static_cast<size_t>(at)];
          }
        }
      }
      if (!loop) break;
      out += chars;
      out += '\n';
    }
  }
}

}  // namespace

std::string latency_graph(std::string_view event, const LatencySeries& series, int64_t now_s) {
  std::vector<double> values;
  std::vector<std::string> labels;
  uint32_t min = 0, max = 0;
  for (const auto& s : series.in_order()) {
    if (values.empty()) min = max = s.latency_ms;
    else {
      if (s.latency_ms > max) max = s.latency_ms;
      if (s.latency_ms < min) min = s.latency_ms;
    }
    // The label: how long ago, in seconds, minutes, hours or days.
    const int64_t elapsed = now_s - s.time_s;
    labels.push_back(elapsed < 60      ? std::to_string(elapsed) + "s"
                     : elapsed < 3600  ? std::to_string(elapsed / 60) + "m"
                     : elapsed < 86400 ? std::to_string(elapsed / 3600) + "h"
                                       : std::to_string(elapsed / 86400) + "d");
    values.push_back(s.latency_ms);
  }
  std::string out(event);
  out += " - high " + std::to_string(max) + " ms, low " + std::to_string(min) +
         " ms (all time high " + std::to_string(series.max_ms) + " ms)\n";
  out += std::string(80, '-') + "\n";
  sparkline(out, values, labels, 80, 4);
  return out;
}

}  // namespace server
