// bench/kvbench/monitor.cc - timeline sampling and progress display.
#include "monitor.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace kvbench {

Monitor::Monitor(const Options& o, std::vector<const StreamStats*> streams, uint64_t total,
                 Clock::time_point start)
    : opt_(o), streams_(std::move(streams)), total_(total), start_(start) {
  const bool tty = ::isatty(STDERR_FILENO) == 1;
  bar_ = o.progress == Progress::kBar || (o.progress == Progress::kAuto && tty);
  lines_ = o.progress == Progress::kLines || (o.progress == Progress::kAuto && !tty);
  next_line_ = o.progress_secs;
}

Monitor::~Monitor() {
  if (thread_.joinable()) finish();
}

void Monitor::start() {
  timeline_.push_back(Sample{0, {}});
  thread_ = std::thread([this] { loop(); });
}

void Monitor::finish() {
  {
    std::lock_guard lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  const double t = std::chrono::duration<double>(Clock::now() - start_).count();
  sample(t);
  show(t, true);
}

Counts Monitor::counts() const {
  Counts c;
  for (const StreamStats* s : streams_) c += s->live.snapshot();
  return c;
}

void Monitor::sample(double t) { timeline_.push_back(Sample{t, counts()}); }

void Monitor::loop() {
  const double tick = bar_ ? std::min(0.25, opt_.sample_secs) : opt_.sample_secs;
  double next_sample = opt_.sample_secs;
  std::unique_lock lock(mu_);
  for (int i = 1;; ++i) {
    const auto when = start_ + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(tick * i));
    if (cv_.wait_until(lock, when, [this] { return done_; })) return;
    const double t = std::chrono::duration<double>(Clock::now() - start_).count();
    if (t + 1e-9 >= next_sample) {
      sample(t);
      next_sample += opt_.sample_secs;
    }
    show(t, false);
  }
}

void Monitor::show(double t, bool final) {
  if (!bar_ && !lines_) return;
  if (lines_ && !final && t + 1e-9 < next_line_) return;
  const Counts c = counts();
  const double dt = std::max(1e-9, t - last_shown_.t);
  const double load_gbs = static_cast<double>(c.bytes_loaded - last_shown_.counts.bytes_loaded) / dt / 1e9;
  const double store_gbs = static_cast<double>(c.bytes_stored - last_shown_.counts.bytes_stored) / dt / 1e9;
  const double hit = c.chunks ? 100.0 * static_cast<double>(c.hits) / static_cast<double>(c.chunks) : 0;
  char stats[256];
  std::snprintf(stats, sizeof stats,
                "%llu%s%s req  hit %.1f%%  load %.2f GB/s  store %.2f GB/s  errors %llu  mismatches %llu  %.1f s",
                static_cast<unsigned long long>(c.requests), total_ ? "/" : "",
                total_ ? std::to_string(total_).c_str() : "", hit, load_gbs, store_gbs,
                static_cast<unsigned long long>(c.errors), static_cast<unsigned long long>(c.mismatches), t);
  if (bar_) {
    constexpr int kWidth = 24;
    const double frac = total_ ? std::min(1.0, static_cast<double>(c.requests) / static_cast<double>(total_)) : 0;
    char bar[kWidth + 1];
    const int fill = static_cast<int>(std::lround(frac * kWidth));
    for (int i = 0; i < kWidth; ++i) bar[i] = i < fill ? '#' : '.';
    bar[kWidth] = '\0';
    std::fprintf(stderr, "\r\033[K[%s] %3.0f%% %s%s", bar, frac * 100, stats, final ? "\n" : "");
  } else {
    std::fprintf(stderr, "progress: %s%s\n", stats, final ? " (done)" : "");
    next_line_ += opt_.progress_secs;
  }
  std::fflush(stderr);
  last_shown_ = Sample{t, c};
}

}  // namespace kvbench
