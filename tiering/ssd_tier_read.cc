// tiering/ssd_tier_read.cc - the SSD tier's read side: pins and loads before a command,
// promotion by tiering.promote_after, recovery at start-up, and flush_on_shutdown.
#include <chrono>
#include <filesystem>

#include "tiering/ssd_tier.h"

namespace tiering {
namespace {

constexpr size_t kMaxHitCounters = 1 << 20;  // forgotten all at once past this (rare)
constexpr size_t kRecoverLogEvery = 1'000'000;

}  // namespace

bool SsdTier::prepare(std::string_view key, int64_t now, std::vector<ValueRef>& pins) {
  Shard& shard = ks_.shard_of(key);
  std::lock_guard lock(shard.mu);
  Shard::Item* item = shard.find(key, now);
  if (item == nullptr) return false;
  Entry& e = item->second;
  if (e.value) {
    // Someone else's transient value is wanted here too: it stays in memory after all.
    e.flags &= ~kEntryTransient;
    pins.push_back(e.value);
    return false;
  }
  return (e.flags & kEntryCold) != 0;
}

bool SsdTier::cold(std::string_view key, int64_t now) {
  Shard& shard = ks_.shard_of(key);
  std::lock_guard lock(shard.mu);
  const Shard::Item* item = shard.find(key, now);
  return item != nullptr && !item->second.value && (item->second.flags & kEntryCold) != 0;
}

bool SsdTier::hit_enough(std::string_view key) {
  const uint32_t n = promote_after_.load(std::memory_order_relaxed);
  if (n <= 1) return true;
  std::lock_guard lock(hits_mu_);
  if (hits_.size() >= kMaxHitCounters) hits_.clear();
  auto [it, inserted] = hits_.try_emplace(std::string(key), 0);
  if (++it->second < n) return false;
  hits_.erase(it);
  return true;
}

SsdTier::Loaded SsdTier::load(std::string_view key, int64_t now,
                              const std::function<ValueRef(size_t)>& alloc) {
  Loaded out;
  use_arena();  // RocksDB's read buffers count as the tier's heap
  Shard& shard = ks_.shard_of(key);
  ShardState& ss = shard_state_[shard.index()];
  const std::string k(key);
  {
    std::lock_guard lock(shard.mu);
    Shard::Item* item = shard.find(key, now);
    if (item == nullptr) return out;
    if (item->second.value) {
      out.pin = item->second.value;
      return out;
    }
    if (!(item->second.flags & kEntryCold)) return out;
    ++ss.loading[k];  // no demotion of this key commits until the read is done
  }
  const auto start = std::chrono::steady_clock::now();
  ValueRef value;
  size_t size = 0;
  SsdStatus st;
  try {
    st = store_->read(key, [&](size_t n) -> std::span<std::byte> {
      value = alloc(n);
      if (!value) return {};
      return {reinterpret_cast<std::byte*>(value->data()), n};
    }, &size);
  } catch (const std::bad_alloc&) {
    st = {SsdStatus::Code::kNoMemory, "read: out of memory"};
  }
  const bool keep = st.ok() && hit_enough(key);
  {
    std::lock_guard lock(shard.mu);
    if (auto it = ss.loading.find(k); it != ss.loading.end() && --it->second == 0)
      ss.loading.erase(it);
    Shard::Item* item = shard.find(key, now);
    if (item != nullptr && item->second.value) {
      out.pin = item->second.value;  // loaded or written by someone else meanwhile
      return out;
    }
    if (item == nullptr || !(item->second.flags & kEntryCold)) return out;  // gone meanwhile
    Entry& e = item->second;
    if (!st.ok()) {
      if (st.code != SsdStatus::Code::kNoMemory)
        stats_.read_errors.fetch_add(1, std::memory_order_relaxed);
      if (st.code == SsdStatus::Code::kNotFound) {
        // The entry says cold but the store has no record (it cannot happen unless the files
        // were changed under us): the key is lost, and reads as missing.
        log(true, "ssd tier: record of a cold key is missing; key dropped");
        e.flags &= ~kEntrySsdFlags;
        cold_keys_.fetch_sub(1, std::memory_order_relaxed);
        shard.erase(item, ChangeCause::kTiering);
        return out;
      }
      out.status = st;
      return out;
    }
    // A value loaded for this command only is marked transient before it is announced, so
    // observers see the kPromoted of a value that goes back to SSD after one use as such.
    if (!keep) e.flags |= kEntryTransient;
    shard.install_value(item, value);
    e.flags = static_cast<uint8_t>(e.flags & ~kEntryCold);
    cold_keys_.fetch_sub(1, std::memory_order_relaxed);
    out.pin = std::move(value);
    out.transient = !keep;
  }
  if (keep) stats_.promotions.fetch_add(1, std::memory_order_relaxed);
  stats_.reads.fetch_add(1, std::memory_order_relaxed);
  stats_.read_bytes.fetch_add(size, std::memory_order_relaxed);
  stats_.read_latency.record(static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() -
                                                            start).count()));
  return out;
}

void SsdTier::release(std::string_view key, const ValueRef& pin) {
  Shard& shard = ks_.shard_of(key);
  ValueRef dropped;  // the caller's pin keeps the bytes; dropped after the lock either way
  std::lock_guard lock(shard.mu);
  Shard::Item* item = shard.find(key, now_ms());
  if (item == nullptr || item->second.value != pin || !(item->second.flags & kEntryTransient))
    return;
  Entry& e = item->second;
  shard.drop_value(item, &dropped);
  e.flags = static_cast<uint8_t>((e.flags & ~kEntryTransient) | kEntryCold);
  cold_keys_.fetch_add(1, std::memory_order_relaxed);
}

size_t SsdTier::recover(int64_t now) {
  size_t added = 0, present = 0;
  uint64_t expired = 0;
  const auto start = std::chrono::steady_clock::now();
  SsdStatus st = store_->scan(now, [&](const SsdRecordInfo& r) {
    Shard& shard = ks_.shard_of(r.key);
    std::lock_guard lock(shard.mu);
    if (shard.find(r.key, now) != nullptr) {
      ++present;
      return true;
    }
    shard.recover(r.key, r.expire_ms, kEntrySsd | kEntryCold, now);
    if (++added % kRecoverLogEvery == 0)
      log(false, "ssd tier: recovering keys=" + std::to_string(added));
    return true;
  }, &expired);
  cold_keys_.fetch_add(added, std::memory_order_relaxed);
  stats_.recovered_keys.store(added, std::memory_order_relaxed);
  if (!st.ok()) log(true, "ssd tier: recovery stopped early: " + st.message);
  if (expired != 0) store_->sweep_expired(now, SIZE_MAX);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - start).count();
  log(false, "ssd tier: recovered keys=" + std::to_string(added) +
                 " bytes=" + std::to_string(store_->live_bytes()) +
                 " expired=" + std::to_string(expired) + " ms=" + std::to_string(ms));
  return added;
}

SsdTier::ShutdownFlush SsdTier::memory_only(int64_t now) {
  ShutdownFlush r;
  for (size_t i = 0; i < ks_.shard_count(); ++i) {
    Shard& shard = ks_.shard(i);
    std::lock_guard lock(shard.mu);
    shard.for_each_entry([&](Shard::Item& item) {
      const Entry& e = item.second;
      if (!e.value || (e.flags & kEntrySsd)) return;
      if (e.expire_ms != 0 && e.expire_ms <= now) return;
      ++r.dropped_keys;
      r.dropped_bytes += e.value->size();
    });
  }
  return r;
}

SsdTier::ShutdownFlush SsdTier::demote_all(int64_t limit_ms) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(limit_ms);
  ShutdownFlush r;
  uint64_t queued_keys = 0, queued_bytes = 0, last = 0;
  const int64_t now = now_ms();
  for (size_t i = 0; i < ks_.shard_count(); ++i) {
    Shard& shard = ks_.shard(i);
    std::lock_guard lock(shard.mu);
    shard.for_each_entry([&](Shard::Item& item) {
      Entry& e = item.second;
      if (!e.value || (e.flags & (kEntrySsd | kEntryDemoting))) return;
      if (e.expire_ms != 0 && e.expire_ms <= now) return;
      if (e.value->size() > SsdStore::kMaxValueSize) {  // RocksDB cannot hold it
        ++r.dropped_keys;
        r.dropped_bytes += e.value->size();
        return;
      }
      const uint64_t bytes = std::max<uint64_t>(e.value->allocated(), 1);
      e.flags |= kEntrySsd | kEntryDemoting;
      pending_bytes_.fetch_add(bytes, std::memory_order_relaxed);
      ++queued_keys;
      queued_bytes += e.value->size();
      enqueue(shard, Op{Op::kPut, 0, 0, e.expire_ms, std::string(item.key()), e.value, bytes,
                        /*shutdown=*/true});
    });
  }
  {
    std::lock_guard lock(queue_mu_);
    last = next_ticket_ - 1;  // everything queued so far, removals included
  }
  if (last != 0) {
    std::unique_lock lock(waiters_mu_);
    r.timed_out = !processed_cv_.wait_until(lock, deadline, [&] {
      return processed_.load(std::memory_order_acquire) >= last;
    });
  }
  if (r.timed_out) {
    // The writer skips the puts still queued (its batch in progress finishes: at most
    // batch_bytes) and still writes the removals; wait for it to get through the queue.
    skip_puts_.store(true);
    queue_cv_.notify_all();
    wait_processed(last);
  }
  r.kept_keys = shutdown_kept_keys_.load();
  r.kept_bytes = shutdown_kept_bytes_.load();
  r.dropped_keys += queued_keys - std::min(queued_keys, r.kept_keys);
  r.dropped_bytes += queued_bytes - std::min(queued_bytes, r.kept_bytes);
  r.status = healthy() ? store_->flush() : SsdStatus{SsdStatus::Code::kIoError, last_error()};
  return r;
}

}  // namespace tiering
