// tiering/ssd_tier.cc - the SSD tier's queue: what enqueues ops (demotion, the keyspace's hooks),
// tickets and waiting for them, start and stop. The writer is in ssd_tier_writer.cc, reads
// and recovery in ssd_tier_read.cc.
#include "tiering/ssd_tier.h"

#include <sys/resource.h>
#include <unistd.h>

#include "tiering/allocator.h"

#include <algorithm>
#include <chrono>
#include <filesystem>

namespace tiering {
namespace {

constexpr int kWriterNice = 10;

// The highest ticket this thread queued for a superseded record (see take_barrier()).
thread_local uint64_t t_barrier = 0;

void raise_barrier(uint64_t ticket) { t_barrier = std::max(t_barrier, ticket); }

}  // namespace

std::unique_ptr<SsdTier> SsdTier::open(Keyspace& ks, SsdTierOptions options, SsdStatus* status) {
  // Records carry the keyspace's slot of their key: one function for both, so a slot's cold keys
  // are the SSD range of that same slot.
  if (!options.store.slot_of) options.store.slot_of = ks.slot_function();
  auto say = [&](const std::string& m) {
    if (options.log) options.log(true, m);
  };
  const std::string marker = dirty_marker(options.store.path);
  std::error_code ec;
  if (options.store.recover && std::filesystem::exists(marker, ec)) {
    say("ssd tier: " + options.store.path +
        " was marked for wiping (a record removal failed): starting empty");
    options.store.recover = false;
  }
  SsdStatus st;
  std::unique_ptr<SsdStore> store = SsdStore::open(options.store, &st);
  if (store == nullptr && options.store.recover && st.code == SsdStatus::Code::kCorruption) {
    say("ssd tier: cannot recover " + options.store.path + " (" + st.message +
        "): starting empty");
    options.store.recover = false;
    store = SsdStore::open(options.store, &st);
  }
  if (status != nullptr) *status = st;
  if (store == nullptr) return nullptr;
  std::filesystem::remove(marker, ec);
  return std::unique_ptr<SsdTier>(new SsdTier(ks, std::move(options), std::move(store)));
}

SsdTier::SsdTier(Keyspace& ks, SsdTierOptions options, std::unique_ptr<SsdStore> store)
    : ks_(ks),
      options_(std::move(options)),
      store_(std::move(store)),
      reclaimer_(std::make_unique<SsdReclaimer>(*store_, options_.reclaim_options, options_.log)),
      shard_state_(ks.shard_count()),
      promote_after_(options_.promote_after ? options_.promote_after : 1),
      arena_(allocator_create_arena()),
      selective_(options_.admission == Admission::kReuse),
      admission_(options_.max_pending_bytes, options_.max_write_rate) {}

SsdTier::~SsdTier() { stop(); }

void SsdTier::log(bool warning, const std::string& m) const {
  if (options_.log) options_.log(warning, m);
}

void SsdTier::start() {
  std::lock_guard lock(queue_mu_);
  if (writer_.joinable()) return;
  stop_ = false;
  ks_.add_observer(this);
  writer_ = std::thread([this] {
    use_arena();
    // Demotion is background work: below the connection threads (and the reads, which serve
    // requests), so that writing to SSD does not show in the latency of memory hits.
    ::setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), kWriterNice);
    run_writer();
  });
  reclaimer_->set_enabled(options_.reclaim);
  reclaimer_->start();
}

void SsdTier::stop() {
  reclaimer_->stop();
  {
    std::lock_guard lock(queue_mu_);
    if (!writer_.joinable()) return;
    stop_ = true;
  }
  queue_cv_.notify_all();
  writer_.join();
  ks_.remove_observer(this);
  // Waiters of ops that never ran (none once the writer drained the queue) still get called.
  std::multimap<uint64_t, std::function<void()>> left;
  {
    std::lock_guard lock(waiters_mu_);
    left.swap(waiters_);
  }
  for (auto& [ticket, fn] : left) fn();
}

uint64_t SsdTier::enqueue(Shard& shard, Op op) {
  op.shard = static_cast<uint32_t>(shard.index());
  ShardState& st = shard_state_[op.shard];
  uint64_t ticket;
  {
    std::lock_guard lock(queue_mu_);
    ticket = next_ticket_++;
    op.ticket = ticket;
    if (op.kind != Op::kClear) {
      auto [it, inserted] = st.pending.try_emplace(op.key, ticket);
      if (inserted) ++shard.ssd_pending;
      else it->second = ticket;
    }
    queue_.push_back(std::move(op));
  }
  queue_cv_.notify_one();
  return ticket;
}

uint64_t SsdTier::take_barrier() { return std::exchange(t_barrier, 0); }

void SsdTier::when_processed(uint64_t ticket, std::function<void()> fn) {
  {
    std::lock_guard lock(waiters_mu_);
    if (processed_.load(std::memory_order_acquire) < ticket) {
      waiters_.emplace(ticket, std::move(fn));
      return;
    }
  }
  fn();
}

void SsdTier::wait_processed(uint64_t ticket) {
  std::unique_lock lock(waiters_mu_);
  processed_cv_.wait(lock, [&] { return processed_.load(std::memory_order_acquire) >= ticket; });
}

void SsdTier::wait_pending(uint64_t bytes, int timeout_ms) {
  std::unique_lock lock(waiters_mu_);
  processed_cv_.wait_for(lock, std::chrono::milliseconds(timeout_ms),
                         [&] { return pending_bytes() <= bytes; });
}

// ---- KeyspaceObserver ----

void SsdTier::on_change(Shard& shard, const Change& c) {
  switch (c.kind) {
    case ChangeKind::kSet:
    case ChangeKind::kDelete:
      // The tier's own removals (capacity drops, lost records) settle their records themselves.
      // Keys the tier never saw cost nothing: no SSD flags and nothing queued in the shard.
      if (c.cause == ChangeCause::kTiering) return;
      if ((c.prev_flags & kEntrySsdFlags) == 0 && shard.ssd_pending == 0) return;
      superseded(shard, c.key, c.prev_flags, c.cause == ChangeCause::kExpiry);
      return;
    case ChangeKind::kExpire:
      // The record's deadline follows the key's.
      if (c.prev_flags & kEntrySsd)
        raise_barrier(enqueue(shard, Op{Op::kExpire, 0, 0, c.expire_ms, std::string(c.key)}));
      return;
    case ChangeKind::kDemoted:
    case ChangeKind::kPromoted:
    case ChangeKind::kRecovered:
      return;  // the tier's own moves
  }
}

void SsdTier::superseded(Shard& shard, std::string_view key, uint8_t prev_flags, bool expired) {
  if (prev_flags & kEntryCold) cold_keys_.fetch_sub(1, std::memory_order_relaxed);
  ShardState& st = shard_state_[shard.index()];
  if (prev_flags & (kEntrySsd | kEntryDemoting)) {
    // The record (written, or queued behind this op) no longer holds the key's value.
    const uint64_t ticket = enqueue(shard, Op{Op::kRemove, 0, 0, 0, std::string(key)});
    // An expired record never comes back (recovery skips it): nobody waits for its removal.
    if (!expired) raise_barrier(ticket);
  } else if (!expired) {
    // No record now, but one may still be queued for removal (another writer's change): this
    // change is acknowledged only after it.
    if (auto it = st.pending.find(key); it != st.pending.end()) raise_barrier(it->second);
  }
}

void SsdTier::on_flush() {
  // Every shard is locked: forget what was queued per key (their commits find no entry) and
  // queue one op that empties the store, after every put queued so far.
  for (size_t i = 0; i < shard_state_.size(); ++i) {
    shard_state_[i].pending.clear();
    ks_.shard(i).ssd_pending = 0;
  }
  cold_keys_.store(0, std::memory_order_relaxed);
  {
    std::lock_guard lock(hits_mu_);
    hits_.clear();
  }
  raise_barrier(enqueue(ks_.shard(0), Op{Op::kClear, 0, 0, 0, {}}));
}

// ---- Demoter ----

uint64_t SsdTier::demote(Shard& shard, Shard::Item* item, int64_t now, bool queue) {
  Entry& e = item->second;
  if (!e.value || (e.flags & kEntryDemoting)) return 0;
  if (e.flags & kEntrySsd) {
    // An SSD copy exists: drop the memory value now, unless a command has it pinned.
    if (e.value.use_count() != 1 || shard_state_[shard.index()].loading.count(item->key()))
      return 0;
    const uint64_t bytes = std::max<uint64_t>(e.value->allocated(), 1);
    ValueRef dropped;  // the last reference: freed here (the region's lock, not the disk)
    shard.drop_value(item, &dropped);
    e.flags = static_cast<uint8_t>((e.flags & ~kEntryTransient) | kEntryCold);
    cold_keys_.fetch_add(1, std::memory_order_relaxed);
    stats_.free_drops.fetch_add(1, std::memory_order_relaxed);
    return bytes;
  }
  // After a failed write, no new demotion until the retry time: values stay in memory (wait),
  // or are evicted (reuse: refused). A value RocksDB cannot hold (4 GiB or more) likewise.
  if (!queue) return 0;
  const uint64_t bytes = std::max<uint64_t>(e.value->allocated(), 1);
  const bool sel = selective();
  // A disk past its capacity plus slack (reclaim behind the churn) takes nothing more until
  // reclaim frees space: the victim is evicted as without a tier (reuse), or stays (wait).
  const bool over = reclaimer_->over_bound(pending_bytes() + bytes);
  if (over) last_over_ms_.store(now, std::memory_order_relaxed);
  if (over || !accepting(now) || e.value->size() > SsdStore::kMaxValueSize) {
    if (sel) rejected(bytes, now, /*budget=*/false);
    return 0;
  }
  if (sel) {
    if (admission_.decide(bytes, (e.flags & kEntryRead) != 0, pending_bytes(), now) ==
        AdmissionDecision::kReject) {
      rejected(bytes, now, /*budget=*/true);
      return 0;
    }
  }
  stats_.admitted.fetch_add(1, std::memory_order_relaxed);
  stats_.admitted_bytes.fetch_add(bytes, std::memory_order_relaxed);
  e.flags |= kEntrySsd | kEntryDemoting;
  pending_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  enqueue(shard, Op{Op::kPut, 0, 0, e.expire_ms, std::string(item->key()), e.value, bytes});
  return bytes;
}

void SsdTier::rejected(uint64_t bytes, int64_t now, bool budget) {
  stats_.rejected.fetch_add(1, std::memory_order_relaxed);
  stats_.rejected_bytes.fetch_add(bytes, std::memory_order_relaxed);
  if (budget) last_reject_ms_.store(now, std::memory_order_relaxed);
}

std::string_view SsdTier::admission_state(int64_t now) const {
  // A full disk stays "disk_full" until a write succeeds (the writer's retries in between
  // make the store healthy for a moment).
  if (disk_full_.load(std::memory_order_relaxed)) return "disk_full";
  if (!healthy()) return "error";
  if (over_capacity(now)) return "over_capacity";
  const int64_t last = last_reject_ms_.load(std::memory_order_relaxed);
  return last != 0 && now - last < kBehindMs ? "rejecting" : "keeping_up";
}

// ---- figures ----

void SsdTier::use_arena() const {
  thread_local unsigned t_arena = 0;
  if (arena_ != 0 && t_arena != arena_) {
    allocator_use_arena(arena_);
    t_arena = arena_;
  }
}

void SsdTier::refresh_memory() {
  const uint64_t heap = arena_ != 0 ? allocator_arena_allocated(arena_)
                                    : store_->memory().total() +
                                          writing_bytes_.load(std::memory_order_relaxed);
  heap_bytes_.store(heap, std::memory_order_relaxed);
}

std::string SsdTier::last_error() const {
  std::lock_guard lock(error_mu_);
  return last_error_;
}

}  // namespace tiering
