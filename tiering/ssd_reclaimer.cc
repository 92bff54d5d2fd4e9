// tiering/ssd_reclaimer.cc - the SSD tier's reclaim thread (ssd_reclaimer.h).
#include "tiering/ssd_reclaimer.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <string>

namespace tiering {

SsdReclaimer::SsdReclaimer(SsdStore& store, SsdReclaimOptions options,
                           std::function<void(bool, std::string_view)> log, int interval_ms)
    : store_(store),
      space_amp_(std::max<uint32_t>(options.space_amp_percent, 100)),
      slack_(options.slack),
      copies_(store.value_copies()),
      log_(std::move(log)),
      interval_ms_(std::max(interval_ms, 1)) {}

SsdReclaimer::~SsdReclaimer() { stop(); }

void SsdReclaimer::start() {
  std::lock_guard lock(mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  canceled_.store(false);
  thread_ = std::thread([this] {
    // Background work: the compaction itself runs on RocksDB's low-priority pool (nice 19).
    ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), 19);
    run();
  });
}

void SsdReclaimer::stop() {
  {
    std::lock_guard lock(mu_);
    if (!thread_.joinable()) return;
    stop_ = true;
  }
  canceled_.store(true);
  cv_.notify_all();
  thread_.join();
}

void SsdReclaimer::set_space_amp(uint32_t percent) {
  space_amp_.store(std::max<uint32_t>(percent, 100), std::memory_order_relaxed);
}

uint64_t SsdReclaimer::target() const {
  return store_.reclaim_target({space_amp_.load(std::memory_order_relaxed), slack_});
}

uint64_t SsdReclaimer::bound() const {
  const uint64_t capacity = store_.options().capacity;
  if (capacity == 0) return 0;
  const uint64_t slack = slack_ != 0 ? slack_ : store_.reclaim_slack();
  return capacity > UINT64_MAX - slack ? UINT64_MAX : capacity + slack;
}

uint64_t SsdReclaimer::measure() {
  // What was written before the look leaves the count only once the look is published: this
  // thread runs at nice 19 and may stop anywhere in between, where the old figure and a count
  // already zeroed let the gate pass the bound. A write during the look counts twice (the gate
  // errs towards closing).
  const uint64_t before = written_.load(std::memory_order_relaxed);
  const uint64_t disk = store_.disk_bytes(), b = bound();
  disk_.store(disk + store_.unflushed_bytes(), std::memory_order_relaxed);
  bound_.store(b, std::memory_order_relaxed);
  written_.fetch_sub(before, std::memory_order_relaxed);
  return disk;
}

void SsdReclaimer::run() {
  using Clock = std::chrono::steady_clock;
  // A pass that freed nothing (the excess is what no pass removes) or failed: the next waits
  // 0.5 s, doubling up to 5 s.
  Clock::time_point next{};
  auto backoff = std::chrono::milliseconds(0);
  bool failing = false;
  for (;;) {
    {
      std::unique_lock lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(interval_ms_), [&] { return stop_; });
      if (stop_) return;
    }
    const uint64_t disk = measure();
    if (!enabled() || Clock::now() < next) continue;
    const SsdReclaimOptions o{space_amp_.load(std::memory_order_relaxed), slack_};
    if (disk <= store_.reclaim_target(o)) continue;
    const auto start = Clock::now();
    SsdReclaimResult r;
    // What the pass moves counts as written until the next look (the disk gate).
    SsdStatus st = store_.reclaim(o, &r, &canceled_, &written_);
    if (canceled_.load()) return;
    stats_.last_ms.store(static_cast<uint64_t>(
                             std::chrono::duration_cast<std::chrono::milliseconds>(
                                 Clock::now() - start).count()),
                         std::memory_order_relaxed);
    if (r.ran) stats_.runs.fetch_add(1, std::memory_order_relaxed);
    stats_.freed_bytes.fetch_add(r.freed_bytes, std::memory_order_relaxed);
    if (r.rewritten_files != 0) {
      stats_.rewrites.fetch_add(1, std::memory_order_relaxed);
      stats_.rewritten_bytes.fetch_add(r.rewritten_bytes, std::memory_order_relaxed);
    }
    if (!st.ok()) {
      stats_.errors.fetch_add(1, std::memory_order_relaxed);
      if (!failing && log_) log_(true, "ssd tier: reclaim failed (retried later): " + st.message);
      failing = true;
    } else if (failing) {
      failing = false;
      if (log_) log_(false, "ssd tier: reclaim succeeds again");
    }
    if (!st.ok() || r.freed_bytes == 0) {
      backoff = std::clamp(backoff * 2, std::chrono::milliseconds(500),
                           std::chrono::milliseconds(5'000));
      next = Clock::now() + backoff;
    } else {
      backoff = std::chrono::milliseconds(0);
      next = Clock::time_point{};
    }
  }
}

}  // namespace tiering
