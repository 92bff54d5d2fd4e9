#include "tiering/eviction.h"

#include <cassert>

#include <algorithm>
#include <array>
#include <chrono>

namespace tiering {

namespace {

// How good a victim a key is: higher is better.
uint64_t score(const Entry& e, const EvictionOptions& o, int64_t now) {
  if (lfu_policy(o.policy))
    return 255 - lfu_decay(e.lfu, e.lfu_minutes, now, o.lfu_decay_minutes);
  return lru_idle_ms(e.access, now);
}

constexpr size_t kPoolSize = 16;  // Redis's EVPOOL_SIZE
constexpr size_t kExactCandidates = 8;  // victims an exact pass tries, best first

}  // namespace

Evictor::Evictor(Keyspace& ks, std::function<uint64_t()> used)
    : ks_(ks), used_(std::move(used)) {}

Evictor::~Evictor() { stop(); }

void Evictor::set_options(const EvictionOptions& o) {
  std::lock_guard lock(options_mu_);
  options_ = o;
  policy_.store(o.policy, std::memory_order_relaxed);
}

EvictionOptions Evictor::options() const {
  std::lock_guard lock(options_mu_);
  return options_;
}

size_t Evictor::evict_to(uint64_t target, int64_t now) {
  const EvictionOptions o = options();
  if (o.policy == EvictionPolicy::kNoEviction || o.maxmemory == 0) return 0;
  std::lock_guard lock(evict_mu_);
  // Measure once, then count what the victims free: allocator figures may lag behind frees.
  // Values queued for demotion are still in memory but already on their way out.
  uint64_t used = used_() + wanted_.load(std::memory_order_relaxed);
  if (demoter_ != nullptr) used -= std::min(used, demoter_->pending_bytes());
  if (used <= target) return 0;
  exact_pass_ = ks_.size() <= o.exact_limit;
  free_now_ = false;
  return evict_bytes(o, used - target, now, /*background=*/true);
}

bool Evictor::make_room(uint64_t bytes, bool allocation_failed, int64_t now,
                        bool drop_unwritten) {
  // Eviction locks shards: run under one, it would deadlock on it (or on a thread waiting for
  // it). Callers make room before they lock (need_room.h); refuse rather than hang.
  assert(ShardMutex::held_by_this_thread() == 0 && "make_room under a shard lock");
  if (ShardMutex::held_by_this_thread() != 0) return false;
  const EvictionOptions o = options();
  if (o.policy == EvictionPolicy::kNoEviction) return false;
  // A selective demoter (Demoter::selective) takes its victims here too, unless the region
  // itself has no room: what it admits is queued and counts as leaving, as in the background
  // pass (so memory may pass maxmemory by at most its queue's bound), and what it refuses goes
  // at once. So the values a write pushes out are chosen by the admission as well.
  const bool queue = demoter_ != nullptr && demoter_->selective() && !allocation_failed &&
                     drop_unwritten;
  uint64_t need = 0;
  if (o.maxmemory != 0) {
    uint64_t used = used_();
    if (queue) used -= std::min(used, demoter_->pending_bytes());
    if (used + bytes > o.maxmemory) need = used + bytes - o.maxmemory;
  }
  if (allocation_failed) need = std::max(need, std::max<uint64_t>(bytes, 1));
  if (need == 0) return true;  // (no lock yet: a write with room never queues behind a pass)
  std::lock_guard lock(evict_mu_);
  exact_pass_ = ks_.size() <= o.exact_limit;
  free_now_ = !queue;
  clean_only_ = demoter_ != nullptr && !drop_unwritten;
  // A failed allocation needs its bytes in one piece: past `need`, the region is asked whether
  // the block fits (fits_) every further sixteenth of `need` freed (small victims free little
  // each, and the look costs microseconds).
  const bool contiguous = allocation_failed && fits_ != nullptr;
  const uint64_t step = std::max<uint64_t>(need / 16, 1);
  uint64_t freed = 0, look_at = need;
  for (;;) {
    if (freed >= need) {
      if (!contiguous) break;
      if (freed >= look_at) {
        if (fits_(bytes)) break;
        look_at = freed + step;
      }
    }
    uint64_t got = evict_one(o, now);
    if (got == 0) break;
    freed += got;
  }
  free_now_ = clean_only_ = false;
  return freed >= need;
}

size_t Evictor::evict_bytes(const EvictionOptions& o, uint64_t need, int64_t now,
                            bool background) {
  size_t evicted = 0;
  uint64_t freed = 0;
  while (freed < need) {
    // The demoter's queue is full: let it write (run() waits for it outside evict_mu_).
    if (background && demoter_ != nullptr && !demoter_->selective() &&
        demoter_->pending_bytes() > demoter_->max_pending_bytes())
      break;
    uint64_t got = evict_one(o, now);
    if (got == 0) break;
    freed += got;
    ++evicted;
  }
  return evicted;
}

uint64_t Evictor::evict_one(const EvictionOptions& o, int64_t now) {
  switch (o.policy) {
    case EvictionPolicy::kNoEviction:
      return 0;
    case EvictionPolicy::kVolatileTtl:
      return evict_ttl(now);
    case EvictionPolicy::kAllkeysRandom:
    case EvictionPolicy::kVolatileRandom:
      return evict_random(o.policy == EvictionPolicy::kVolatileRandom, now);
    default:
      return evict_best(o, now);
  }
}

uint64_t Evictor::evict_ttl(int64_t now) {
  // Exact: the key with the nearest deadline over every shard's expiry index.
  size_t best_shard = 0;
  int64_t best_deadline = INT64_MAX;
  std::string best_key;
  for (size_t i = 0; i < ks_.shard_count(); ++i) {
    Shard& shard = ks_.shard(i);
    if (shard.mu.held_long()) continue;  // a script holds it: never wait for one
    std::lock_guard lock(shard.mu);
    const Shard::Item* item =
        shard.soonest_expiring_if([this](const Shard::Item& i) { return candidate(i); });
    if (item && item->second.expire_ms < best_deadline && !shard.leased(item, now)) {
      best_deadline = item->second.expire_ms;
      best_shard = i;
      best_key = std::string(item->key());
    }
  }
  if (best_deadline == INT64_MAX) return 0;
  return evict_key(best_shard, best_key, true, now);
}

uint64_t Evictor::evict_random(bool volatile_only, int64_t now) {
  const size_t n = ks_.shard_count();
  const size_t start = rng_() % n;
  for (size_t k = 0; k < n; ++k) {
    const size_t i = (start + k) % n;
    Shard& shard = ks_.shard(i);
    if (shard.mu.held_long()) continue;
    std::string key;
    {
      std::lock_guard lock(shard.mu);
      if (shard.size() == 0 || (volatile_only && shard.volatile_size() == 0)) continue;
      const Shard::Item* item = nullptr;
      for (int tries = 0; tries < 16 && item == nullptr; ++tries) {
        const Shard::Item* pick = shard.map().random_node(rng_);
        if ((!volatile_only || pick->second.expire_ms != 0) && candidate(*pick)) item = pick;
      }
      if (item == nullptr && volatile_only)
        item = shard.soonest_expiring_if([this](const Shard::Item& i) { return candidate(i); });
      if (item == nullptr || shard.leased(item, now)) continue;
      key = std::string(item->key());
    }
    if (uint64_t freed = evict_key(i, key, volatile_only, now)) return freed;
  }
  return 0;
}

uint64_t Evictor::evict_best(const EvictionOptions& o, int64_t now) {
  const bool volatile_only = volatile_policy(o.policy);
  if (exact_pass_) {
    // Small keyspace (few large values): the exact best victims over every key, best first (a
    // few, in case the best cannot go: a demoter may refuse a value in use).
    std::vector<Candidate> best;
    for (size_t i = 0; i < ks_.shard_count(); ++i) {
      Shard& shard = ks_.shard(i);
      if (shard.mu.held_long()) continue;
      std::lock_guard lock(shard.mu);
      for (const Shard::Item& item : shard.map()) {
        const auto& [key, e] = item;
        if (volatile_only && e.expire_ms == 0) continue;
        if (!candidate(item) || shard.leased(&item, now)) continue;
        const uint64_t s = score(e, o, now);
        if (best.size() == kExactCandidates && s <= best.back().score) continue;
        auto at = std::find_if(best.begin(), best.end(), [&](auto& c) { return c.score < s; });
        best.insert(at, Candidate{s, i, std::string(key)});
        if (best.size() > kExactCandidates) best.pop_back();
      }
    }
    for (const Candidate& c : best)
      if (uint64_t freed = evict_key(c.shard, c.key, volatile_only, now)) return freed;
    return 0;
  }
  // Large keyspace: Redis's eviction pool, refilled by sampling each round.
  for (int round = 0; round < 8; ++round) {
    fill_pool(o, now);
    while (!pool_.empty()) {
      Candidate c = std::move(pool_.front());
      pool_.erase(pool_.begin());
      if (uint64_t freed = evict_key(c.shard, c.key, volatile_only, now)) return freed;
    }
  }
  return 0;
}

void Evictor::fill_pool(const EvictionOptions& o, int64_t now) {
  const bool volatile_only = volatile_policy(o.policy);
  const size_t n = ks_.shard_count();
  for (size_t s = 0; s < o.samples; ++s) {
    const size_t i = rng_() % n;
    Shard& shard = ks_.shard(i);
    if (shard.mu.held_long()) continue;
    std::lock_guard lock(shard.mu);
    if (shard.size() == 0) continue;
    const Shard::Item* item = shard.map().random_node(rng_);
    if (volatile_only && item->second.expire_ms == 0) continue;
    if (!candidate(*item) || shard.leased(item, now)) continue;
    offer({score(item->second, o, now), i, std::string(item->key())});
  }
}

void Evictor::offer(Candidate c) {
  for (auto& p : pool_) {
    if (p.shard == c.shard && p.key == c.key) {
      p.score = c.score;
      std::sort(pool_.begin(), pool_.end(), [](auto& a, auto& b) { return a.score > b.score; });
      return;
    }
  }
  auto at = std::find_if(pool_.begin(), pool_.end(), [&](auto& p) { return p.score < c.score; });
  pool_.insert(at, std::move(c));
  if (pool_.size() > kPoolSize) pool_.pop_back();
}

uint64_t Evictor::evict_key(size_t i, const std::string& key, bool volatile_only, int64_t now) {
  ValueRef victim;  // released after the shard lock drops
  {
    Shard& shard = ks_.shard(i);
    if (shard.mu.held_long()) return 0;
    std::lock_guard lock(shard.mu);
    Shard::Item* item = shard.find(key, now);
    if (item == nullptr || (volatile_only && item->second.expire_ms == 0)) return 0;
    if (!candidate(item->second) || shard.leased(item, now)) return 0;
    // With an SSD tier the victim is demoted (not an eviction: the key stays). A write that
    // needs the room now takes a value with an SSD copy, else drops the victim as Redis would,
    // but only while the tier works: a failing disk must not cost acknowledged values.
    // A selective demoter refused it (its admission, or a full or failing disk): evicted as
    // without a tier, at once, in either kind of pass.
    bool refused = false;
    if (demoter_ != nullptr) {
      if (uint64_t freed = demoter_->demote(shard, item, now, /*queue=*/!free_now_)) return freed;
      if (item->second.flags & kEntrySsdFlags) return 0;  // its SSD copy is in use: keep both
      refused = demoter_->selective() && !free_now_;
      if (!demoter_->selective() && (!free_now_ || !demoter_->accepting(now))) return 0;
    }
    // A hidden slot's key (a migration's import before its handover, docs/cluster.md) is never
    // evicted: a target without room ends the import instead, and nothing it took is lost.
    if (ks_.any_hidden() && ks_.hidden(shard.slot_of(key))) return 0;
    if (demoter_ != nullptr && !refused) demoter_->unwritten_eviction();
    shard.erase(item, ChangeCause::kEviction, &victim);
  }
  evicted_.fetch_add(1, std::memory_order_relaxed);
  return victim ? std::max<uint64_t>(victim->allocated(), 1) : 1;
}

void Evictor::start(int period_ms) {
  std::lock_guard lock(wake_mu_);
  if (thread_.joinable()) return;
  stop_ = false;
  thread_ = std::thread([this, period_ms] { run(period_ms); });
}

void Evictor::stop() {
  {
    std::lock_guard lock(wake_mu_);
    stop_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void Evictor::notify() {
  if (woken_.exchange(true, std::memory_order_acq_rel)) return;  // already pending
  { std::lock_guard lock(wake_mu_); }  // the waiter is either waiting or will see woken_
  wake_.notify_one();
}

void Evictor::run(int period_ms) {
  std::unique_lock lock(wake_mu_);
  while (!stop_) {
    wake_.wait_for(lock, std::chrono::milliseconds(period_ms),
                   [&] { return stop_ || woken_.load(std::memory_order_acquire); });
    if (stop_) break;
    woken_.store(false, std::memory_order_release);
    bool again = false;
    lock.unlock();
    const EvictionOptions o = options();
    if (o.policy != EvictionPolicy::kNoEviction && o.maxmemory != 0) {
      const auto high = static_cast<uint64_t>(o.maxmemory * o.high_watermark);
      const auto low = static_cast<uint64_t>(o.maxmemory * o.low_watermark);
      if (used_() + wanted_.load(std::memory_order_relaxed) > high) evict_to(low, now_ms());
      // The pass stopped on a full demotion queue: wait for the writer, then go on at once.
      if (demoter_ != nullptr && !demoter_->selective() &&
          demoter_->pending_bytes() > demoter_->max_pending_bytes()) {
        demoter_->wait_pending(demoter_->max_pending_bytes() / 2, period_ms);
        again = true;
      }
    }
    lock.lock();
    if (again) woken_.store(true, std::memory_order_release);
  }
}

}  // namespace tiering
