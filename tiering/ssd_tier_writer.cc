// tiering/ssd_tier_writer.cc - the SSD tier's writer thread: takes queued ops in ticket order,
// writes them in WriteBatches, then applies the outcome to the keyspace under each key's shard
// lock (drops demoted values from memory), enforces tiering.ssd.capacity, sweeps expired
// records when idle, fails safe on errors, measures the disk's write speed for the admission
// budget, and logs the tier's state changes (falling behind, a full or failing disk, recovery).
#include <chrono>
#include <filesystem>
#include <fstream>
#include <utility>

#include "tiering/ssd_tier.h"

namespace tiering {
namespace {

constexpr size_t kMaxOpsPerBatch = 4096;
constexpr int64_t kSweepEveryMs = 10'000;
constexpr int64_t kSweepMarginMs = 10'000;  // records this far past their deadline are swept
constexpr int64_t kMaxBackoffMs = 30'000;

}  // namespace

void SsdTier::run_writer() {
  std::vector<Op> ops;
  int64_t last_sweep = now_ms();
  for (;;) {
    ops.clear();
    uint64_t bytes = 0;
    {
      std::unique_lock lock(queue_mu_);
      queue_cv_.wait_for(lock, std::chrono::seconds(1), [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty() && stop_) break;
      // A batch: ops in ticket order up to batch_bytes of values (at least one op); a clear
      // goes alone.
      while (!queue_.empty() && ops.size() < kMaxOpsPerBatch) {
        Op& op = queue_.front();
        if (op.kind == Op::kClear && !ops.empty()) break;
        const uint64_t n = op.value ? op.value->size() : 0;
        if (!ops.empty() && bytes + n > options_.batch_bytes) break;
        bytes += n;
        const bool clear = op.kind == Op::kClear;
        ops.push_back(std::move(op));
        queue_.pop_front();
        if (clear) break;
      }
    }
    const int64_t now = now_ms();
    log_admission(now);
    if (ops.empty()) {
      // Idle: retry a failed store, sweep expired records now and then. The episode's end is
      // logged when a write succeeds (a full disk resumes, then fails again).
      if (!healthy() && now >= retry_at_ms_.load(std::memory_order_relaxed)) {
        if (store_->resume().ok()) {
          healthy_.store(true);
        } else {
          retry_at_ms_.store(now + std::max<int64_t>(backoff_ms_, 1000));
          note_halt();
        }
      }
      if (now - last_sweep >= kSweepEveryMs) {
        last_sweep = now;
        size_t removed = 0;
        store_->sweep_expired(now - kSweepMarginMs, 10'000, &removed);
      }
      continue;
    }

    SsdStatus st;
    bool removals = false;
    if (ops[0].kind == Op::kClear) {
      st = store_->clear();
      removals = true;
    } else {
      SsdBatch batch;
      // Past demote_all()'s time limit, puts are skipped (committed as not written).
      const bool skip_puts = skip_puts_.load(std::memory_order_relaxed);
      for (Op& op : ops) {
        switch (op.kind) {
          case Op::kPut:
            if (skip_puts) {
              op.skipped = true;
              break;
            }
            batch.put(op.key, op.expire_ms,
                      {reinterpret_cast<const std::byte*>(op.value->data()), op.value->size()});
            break;
          case Op::kRemove:
            batch.remove(op.key);
            removals = true;
            break;
          case Op::kExpire:
            batch.set_expire(op.key, op.expire_ms);
            removals = true;
            break;
          case Op::kClear:
            break;
        }
      }
      writing_bytes_.store(bytes, std::memory_order_relaxed);
      const auto start = std::chrono::steady_clock::now();
      st = store_->write(batch);
      // What the disk gained since the reclaim thread's last look (its bound's gate).
      if (st.ok() && bytes != 0) reclaimer_->wrote_values(bytes);
      // The disk's write speed, from the writer's own batches (the admission budget's rate).
      if (st.ok() && bytes != 0)
        admission_.record_write(bytes, static_cast<uint64_t>(
                                           std::chrono::duration_cast<std::chrono::microseconds>(
                                               std::chrono::steady_clock::now() - start)
                                               .count()));
      writing_bytes_.store(0, std::memory_order_relaxed);
    }
    if (st.ok()) {
      stats_.batches.fetch_add(1, std::memory_order_relaxed);
      healthy_.store(true);
      if (failing_) {
        failing_ = false;
        log(false, disk_full_.exchange(false)
                       ? "ssd tier: the disk has room again: writes succeed, demotion restarts"
                       : "ssd tier: writes succeed again: demotion restarts");
      }
      backoff_ms_ = 0;
    } else {
      fail(st, removals);
    }
    commit(ops, st);
    const uint64_t last = ops.back().ticket;
    ops.clear();  // the values written go now, outside any lock
    // Wake whoever waits for these tickets (acknowledgements, flush_on_shutdown, the evictor).
    std::multimap<uint64_t, std::function<void()>> ready;
    {
      std::lock_guard lock(waiters_mu_);
      processed_.store(last, std::memory_order_release);
      auto end = waiters_.upper_bound(last);
      ready.insert(std::make_move_iterator(waiters_.begin()), std::make_move_iterator(end));
      waiters_.erase(waiters_.begin(), end);
    }
    processed_cv_.notify_all();
    for (auto& [ticket, fn] : ready) fn();
    if (st.ok()) drop_to_capacity();
  }
}

void SsdTier::commit(std::vector<Op>& ops, const SsdStatus& st) {
  const int64_t now = now_ms();
  std::vector<ValueRef> released;  // memory values dropped: freed after the shard locks
  for (Op& op : ops) {
    if (op.kind == Op::kClear) continue;
    Shard& shard = ks_.shard(op.shard);
    ShardState& ss = shard_state_[op.shard];
    std::lock_guard lock(shard.mu);
    if (auto it = ss.pending.find(op.key); it != ss.pending.end() && it->second == op.ticket) {
      ss.pending.erase(it);
      --shard.ssd_pending;
    }
    if (op.kind != Op::kPut) continue;
    pending_bytes_.fetch_sub(op.bytes, std::memory_order_relaxed);
    const bool written = st.ok() && !op.skipped;
    if (written && op.shutdown) {
      shutdown_kept_keys_.fetch_add(1, std::memory_order_relaxed);
      shutdown_kept_bytes_.fetch_add(op.value->size(), std::memory_order_relaxed);
    }
    Shard::Item* item = shard.find(op.key, now);
    // Changed meanwhile (overwritten, deleted, flushed): its change queued what undoes the put.
    if (item == nullptr || item->second.value != op.value ||
        !(item->second.flags & kEntryDemoting))
      continue;
    Entry& e = item->second;
    e.flags &= ~kEntryDemoting;
    if (!written) {
      e.flags &= ~kEntrySsd;  // fail safe (or skipped): the value stays in memory only
      continue;
    }
    // The record holds this value. Drop it from memory unless a command has it pinned (a
    // reference besides the entry's and this op's), a read is loading it, or a lease holds it:
    // then it stays in both tiers, and a later eviction drops it without writing.
    if (e.value.use_count() == 2 && ss.loading.count(op.key) == 0 && !shard.leased(item, now)) {
      shard.drop_value(item, &released.emplace_back());
      e.flags |= kEntryCold;
      cold_keys_.fetch_add(1, std::memory_order_relaxed);
      stats_.demotions.fetch_add(1, std::memory_order_relaxed);
      stats_.demoted_bytes.fetch_add(op.value->size(), std::memory_order_relaxed);
    }
  }
}

void SsdTier::fail(const SsdStatus& st, bool records_may_be_stale) {
  stats_.write_errors.fetch_add(1, std::memory_order_relaxed);
  healthy_.store(false);
  const bool first = !std::exchange(failing_, true);
  const bool full = st.code == SsdStatus::Code::kNoSpace;
  disk_full_.store(full, std::memory_order_relaxed);
  backoff_ms_ = std::min(kMaxBackoffMs, std::max<int64_t>(1000, backoff_ms_ * 2));
  retry_at_ms_.store(now_ms() + backoff_ms_, std::memory_order_relaxed);
  {
    std::lock_guard lock(error_mu_);
    last_error_ = st.message;
  }
  if (first) {
    // One line per episode (the writer retries with a backoff); its end is logged in run_writer.
    const std::string what = full ? "ssd tier: disk full" : "ssd tier: write failed";
    log(true, what + (selective() ? ", nothing is admitted (memory evicts as without the tier): "
                                  : ", demotion paused (values stay in memory): ") +
                  st.message);
  }
  note_halt();
  if (records_may_be_stale) {
    // A removal did not reach the disk: the store may now hold a value a write superseded.
    // It must not come back at the next start: mark the store for wiping.
    std::ofstream(dirty_marker(options_.store.path));
    log(true, "ssd tier: a record removal failed; the store will be wiped at the next start");
  }
}

void SsdTier::note_halt() {
  if (halt_logged_ || !store_->halted()) return;
  halt_logged_ = true;
  log(true, "ssd tier: the store stopped all writes: no demotion until the server restarts "
            "(values on SSD are still read; INFO ssd_read_only:1): " +
                store_->halt_status("write").message);
}

void SsdTier::drop_to_capacity() {
  const uint64_t capacity = options_.store.capacity;
  if (capacity == 0 || store_->live_bytes() <= capacity) return;
  // Down to 95%, so a store at its capacity does not drop on every batch.
  const uint64_t target = capacity - capacity / 20;
  const int64_t now = now_ms();
  auto may_drop = [&](std::string_view key) {
    Shard& shard = ks_.shard_of(key);
    ShardState& ss = shard_state_[shard.index()];
    std::lock_guard lock(shard.mu);
    if (ss.pending.count(key) || ss.loading.count(key)) return false;
    Shard::Item* item = shard.find(key, now);
    if (item == nullptr || !(item->second.flags & kEntrySsd)) return true;  // a stale record
    Entry& e = item->second;
    if (e.flags & kEntryDemoting) return false;
    if (e.flags & kEntryCold) {
      // On SSD only: the key goes (an eviction, counted in evicted_keys).
      e.flags &= ~kEntrySsdFlags;
      cold_keys_.fetch_sub(1, std::memory_order_relaxed);
      shard.erase(item, ChangeCause::kEviction);
      stats_.dropped_keys.fetch_add(1, std::memory_order_relaxed);
      return true;
    }
    e.flags &= ~(kEntrySsd | kEntryTransient);  // in memory too: only the SSD copy goes
    return true;
  };
  SsdStatus st = store_->drop_oldest(target, 100'000, may_drop);
  if (!st.ok()) fail(st, true);
}

void SsdTier::log_admission(int64_t now) {
  auto mb = [](uint64_t b) { return std::to_string(b >> 20) + "MB"; };
  if (const bool over = over_capacity(now); over != over_logged_) {
    over_logged_ = over;
    const std::string figures = "(the disk holds " + mb(reclaimer_->measured_disk_bytes()) +
                                ", its capacity plus slack is " + mb(reclaimer_->bound()) + ")";
    log(over, over ? "ssd tier: the disk is at its capacity plus slack " + figures +
                         ": nothing is admitted until reclaim frees space"
                   : "ssd tier: reclaim freed space " + figures + ": admitting again");
  }
  const int64_t last = last_reject_ms_.load(std::memory_order_relaxed);
  if (behind_since_ms_ == 0) {
    if (last == 0 || now - last >= kBehindMs) return;
    behind_since_ms_ = last;
    behind_rejected_ = stats_.rejected.load(std::memory_order_relaxed);
    behind_rejected_bytes_ = stats_.rejected_bytes.load(std::memory_order_relaxed);
    behind_admitted_ = stats_.admitted.load(std::memory_order_relaxed);
    log(true, "ssd tier: demotion falls behind the disk: admission rejects values (write rate " +
                  mb(admission_.rate()) + "/s, budget " + mb(admission_.depth()) +
                  "); rejected values are evicted");
    return;
  }
  if (now - last < kLogQuietMs) return;
  log(false, "ssd tier: demotion keeps up again after " +
                 std::to_string((last - behind_since_ms_) / 1000) + "s: rejected=" +
                 std::to_string(stats_.rejected.load() - behind_rejected_) + " rejected_bytes=" +
                 std::to_string(stats_.rejected_bytes.load() - behind_rejected_bytes_) +
                 " admitted=" + std::to_string(stats_.admitted.load() - behind_admitted_));
  behind_since_ms_ = 0;
}

std::string SsdTier::dirty_marker(const std::string& path) { return path + "/STRATAKV-DIRTY"; }

}  // namespace tiering
