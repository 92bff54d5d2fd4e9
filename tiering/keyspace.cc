#include "tiering/keyspace.h"

#include <algorithm>
#include <bit>
#include <climits>
#include <cstdint>
#include <chrono>
#include <random>
#include <thread>

namespace tiering {

int64_t now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

// Records an access: the LRU clock, and Redis's LFU update (updateLFU: decay, then a
// logarithmic increment). A thread-local xorshift draws the increment's random number.
static void touch(Entry& e, int64_t now) {
  thread_local uint64_t state = 0x9E3779B97F4A7C15ull ^ reinterpret_cast<uintptr_t>(&state);
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  const double r = static_cast<double>(state >> 11) * 0x1.0p-53;
  e.access = lru_clock(now);
  const int decay = lfu_params.decay_minutes.load(std::memory_order_relaxed);
  const int factor = lfu_params.log_factor.load(std::memory_order_relaxed);
  e.lfu = lfu_increment(lfu_decay(e.lfu, e.lfu_minutes, now, decay), factor, r);
  e.lfu_minutes = lfu_minutes(now);
}

// ---- Shard ----

Shard::Item* Shard::find(std::string_view key, int64_t now) {
  Item* item = map_.find(key);
  if (item == nullptr) return nullptr;
  if (item->second.expire_ms != 0 && item->second.expire_ms <= now) {
    notify(item, true);
    unlink(item);
    ++expired;
    return nullptr;
  }
  return item;
}

Shard::Item* Shard::lookup(std::string_view key, int64_t now) {
  Item* item = find(key, now);
  if (item == nullptr) {
    ++misses;
    return nullptr;
  }
  ++hits;
  touch(item->second, now);
  return item;
}

Shard::Item* Shard::peek(std::string_view key, int64_t now) {
  Item* item = find(key, now);
  if (item == nullptr) ++misses;
  else ++hits;
  return item;
}

Shard::Item* Shard::upsert(std::string_view key, ValueRef value, int64_t expire_ms, int64_t now,
                           ValueRef* replaced) {
  auto [item, inserted] = map_.try_emplace(key);
  // A new key too: the record of a previous one of that name may still be queued for removal.
  notify(item, false);
  item->second.flags &= ~kEntrySsdFlags;
  ValueRef& slot = item->second.value;
  if (replaced != nullptr) *replaced = std::move(slot);  // else released by the assignment
  slot = std::move(value);
  if (inserted) item->second.lfu_minutes = lfu_minutes(now);
  touch(item->second, now);
  set_expire(item, expire_ms);
  return item;
}

void Shard::set_value(Item* item, ValueRef value, ValueRef* replaced) {
  notify(item, false);
  item->second.flags &= ~kEntrySsdFlags;
  ValueRef& slot = item->second.value;
  if (replaced != nullptr) *replaced = std::move(slot);
  slot = std::move(value);
}

void Shard::will_modify(Item* item) {
  notify(item, false);
  item->second.flags &= ~kEntrySsdFlags;
}

void Shard::set_expire(Item* item, int64_t expire_ms) {
  Entry& e = item->second;
  if (e.expire_ms == expire_ms) return;
  if (e.expire_ms != 0) expiry_.erase({e.expire_ms, item});
  e.expire_ms = expire_ms;
  if (expire_ms != 0) expiry_.emplace(expire_ms, item);
  if (hooks != nullptr && (e.flags & kEntrySsd)) hooks->expire_changed(*this, *item);
}

void Shard::erase(Item* item) {
  notify(item, false);
  unlink(item);
}

void Shard::unlink(Item* item) {
  if (item->second.expire_ms != 0) expiry_.erase({item->second.expire_ms, item});
  if (item->second.flags & kEntryLeased) leases_.erase(item);
  map_.erase(item);
}

void Shard::lease(Item* item, uint64_t holder, int64_t until_ms) {
  item->second.flags |= kEntryLeased;
  std::vector<Lease>& held = leases_[item];
  for (Lease& l : held) {
    if (l.holder == holder) {
      l.until_ms = std::max(l.until_ms, until_ms);
      return;
    }
  }
  held.push_back({holder, until_ms});
}

namespace {
template <class Leases>
bool any_live(const Leases& held, int64_t now) {
  return std::any_of(held.begin(), held.end(), [&](const auto& l) { return l.until_ms > now; });
}
}  // namespace

bool Shard::leased(const Item* item, int64_t now) const {
  if (!(item->second.flags & kEntryLeased)) return false;
  auto it = leases_.find(item);
  return it != leases_.end() && any_live(it->second, now);
}

bool Shard::unlease(Item* item, uint64_t holder, int64_t now) {
  if (!(item->second.flags & kEntryLeased)) return false;
  auto it = leases_.find(item);
  if (it == leases_.end()) return false;
  std::vector<Lease>& held = it->second;
  auto mine = std::find_if(held.begin(), held.end(), [&](auto& l) { return l.holder == holder; });
  if (mine == held.end()) return false;
  const bool was = mine->until_ms > now;
  held.erase(mine);
  if (held.empty()) {
    leases_.erase(it);
    item->second.flags &= ~kEntryLeased;
  }
  return was;
}

void Shard::prune_leases(int64_t now) {
  for (auto it = leases_.begin(); it != leases_.end();) {
    std::erase_if(it->second, [&](const Lease& l) { return l.until_ms <= now; });
    if (!it->second.empty()) {
      ++it;
      continue;
    }
    const_cast<Item*>(it->first)->second.flags &= ~kEntryLeased;
    it = leases_.erase(it);
  }
}

size_t Shard::lease_count(int64_t now) const {
  size_t n = 0;
  for (const auto& [item, held] : leases_) n += any_live(held, now);
  return n;
}

bool Shard::erase(std::string_view key, int64_t now) {
  Item* item = find(key, now);
  if (item == nullptr) return false;
  erase(item);
  return true;
}

size_t Shard::expire_due(int64_t now, size_t budget) {
  size_t removed = 0;
  while (removed < budget && !expiry_.empty() && expiry_.begin()->first <= now) {
    Item* item = expiry_.begin()->second;
    notify(item, true);
    expiry_.erase(expiry_.begin());
    if (item->second.flags & kEntryLeased) leases_.erase(item);
    map_.erase(item);
    ++removed;
  }
  expired += removed;
  return removed;
}

Shard::Map Shard::take_all() {
  expiry_.clear();
  leases_.clear();
  return std::exchange(map_, Map());
}

// ---- Keyspace ----

Keyspace::Keyspace(size_t shards) {
  size_t n = 1;
  while (n < shards) n <<= 1;
  shards_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    shards_.push_back(std::make_unique<Shard>());
    shards_.back()->index_ = i;
  }
  mask_ = n - 1;
  shard_bits_ = static_cast<unsigned>(std::countr_zero(n));
}

size_t Keyspace::shard_index(std::string_view key) const {
  // The tables use the low 32 bits of the same hash; take the shard from the high bits.
  return (hash_key(key) >> 40) & mask_;
}

Keyspace::MultiLock::MultiLock(Keyspace& ks, std::span<const std::string_view> keys) : ks_(ks) {
  locked_.reserve(keys.size());
  for (auto k : keys) locked_.push_back(ks.shard_index(k));
  std::sort(locked_.begin(), locked_.end());
  locked_.erase(std::unique(locked_.begin(), locked_.end()), locked_.end());
  for (size_t i : locked_) ks_.shards_[i]->mu.lock();
}

Keyspace::MultiLock::~MultiLock() {
  for (auto it = locked_.rbegin(); it != locked_.rend(); ++it) ks_.shards_[*it]->mu.unlock();
}

size_t Keyspace::size() {
  size_t n = 0;
  for (auto& s : shards_) {
    std::lock_guard lock(s->mu);
    n += s->size();
  }
  return n;
}

size_t Keyspace::lease_count(int64_t now) {
  size_t n = 0;
  for (auto& s : shards_) {
    std::lock_guard lock(s->mu);
    n += s->lease_count(now);
  }
  return n;
}

size_t Keyspace::volatile_size() {
  size_t n = 0;
  for (auto& s : shards_) {
    std::lock_guard lock(s->mu);
    n += s->volatile_size();
  }
  return n;
}

void Keyspace::flush(bool async) {
  std::vector<Shard::Map> old;
  old.reserve(shards_.size());
  // Every shard at once (ascending order, as MultiLock): the SSD tier's flushed() must see no
  // write slip in between two shards.
  for (auto& s : shards_) s->mu.lock();
  for (auto& s : shards_) old.push_back(s->take_all());
  if (shards_[0]->hooks != nullptr) shards_[0]->hooks->flushed();
  for (auto it = shards_.rbegin(); it != shards_.rend(); ++it) (*it)->mu.unlock();
  if (async) std::thread([tables = std::move(old)]() mutable { tables.clear(); }).detach();
}

void Keyspace::set_hooks(ShardHooks* hooks) {
  for (auto& s : shards_) {
    std::lock_guard lock(s->mu);
    s->hooks = hooks;
  }
}

size_t Keyspace::active_expire(int64_t now, size_t budget_per_shard) {
  size_t removed = 0;
  for (auto& s : shards_) {
    std::lock_guard lock(s->mu);
    removed += s->expire_due(now, budget_per_shard);
    s->prune_leases(now);
  }
  return removed;
}

size_t Keyspace::rehash_step(size_t buckets_per_shard) {
  size_t busy = 0;
  for (auto& s : shards_) {
    std::lock_guard lock(s->mu);
    busy += s->rehash_step(buckets_per_shard);
  }
  return busy;
}

uint64_t Keyspace::scan(uint64_t cursor, size_t count, int64_t now,
                        const std::function<void(const std::string&, const Entry&)>& emit) {
  size_t s = cursor & mask_;
  uint64_t c = cursor >> shard_bits_;  // the shard table's cursor (below its size, < 2^32)
  if (count == 0) count = 1;
  // Redis's scanGenericCommand bound: at most 10 * count dictScan steps (buckets) per call.
  size_t budget = count > SIZE_MAX / 10 ? SIZE_MAX : count * 10;
  size_t visited = 0;
  std::string key;  // emit takes a std::string: one buffer reused for every key
  auto visit = [&](const Shard::Item& item) {
    ++visited;
    const Entry& e = item.second;
    if (e.expire_ms != 0 && e.expire_ms <= now) return;
    key.assign(item.key());
    emit(key, e);
  };
  for (; s < shards_.size(); ++s, c = 0) {
    Shard& shard = *shards_[s];
    {
      std::lock_guard lock(shard.mu);
      // An empty shard is done (whatever the cursor) and costs no budget, so SCAN 0 over an
      // empty keyspace completes in one call.
      if (shard.map().empty()) {
        c = 0;
      } else {
        do {
          --budget;
          c = shard.map().scan(c, visit);
        } while (c != 0 && budget > 0 && visited < count);
      }
    }
    if (c != 0) break;  // out of budget inside this shard: resume here
    if (budget == 0 || visited >= count) {
      ++s;  // this shard is done; resume at the next one
      break;
    }
  }
  if (s >= shards_.size()) return 0;
  return (c << shard_bits_) | s;
}

std::optional<std::string> Keyspace::random_key(int64_t now) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  auto live = [now](const Entry& e) { return e.expire_ms == 0 || e.expire_ms > now; };
  size_t start = rng() & mask_;
  for (size_t i = 0; i < shards_.size(); ++i) {
    Shard& shard = *shards_[(start + i) & mask_];
    std::lock_guard lock(shard.mu);
    const Shard::Map& map = shard.map();
    if (map.empty()) continue;
    for (int tries = 0; tries < 16; ++tries) {
      const Shard::Item* item = map.random_node(rng);
      if (live(item->second)) return std::string(item->key());
    }
    // Mostly expired keys not yet removed: fall back to the first live key of this shard.
    for (const auto& [key, e] : map)
      if (live(e)) return std::string(key);
  }
  return std::nullopt;
}

Keyspace::Stats Keyspace::stats() {
  Stats st;
  for (auto& s : shards_) {
    std::lock_guard lock(s->mu);
    st.hits += s->hits;
    st.misses += s->misses;
    st.expired += s->expired;
  }
  return st;
}

void Keyspace::reset_stats() {
  for (auto& s : shards_) {
    std::lock_guard lock(s->mu);
    s->hits = s->misses = s->expired = 0;
  }
}

}  // namespace tiering
