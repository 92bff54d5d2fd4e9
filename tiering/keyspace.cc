#include "tiering/keyspace.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <thread>

namespace tiering {

int64_t now_ms() {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

static uint32_t now_s(int64_t now) { return static_cast<uint32_t>(now / 1000); }

// ---- Shard ----

Shard::Item* Shard::find(std::string_view key, int64_t now) {
  auto it = map_.find(key);
  if (it == map_.end()) return nullptr;
  if (it->second.expire_ms != 0 && it->second.expire_ms <= now) {
    erase(&*it);
    ++expired;
    return nullptr;
  }
  return &*it;
}

Shard::Item* Shard::lookup(std::string_view key, int64_t now) {
  Item* item = find(key, now);
  if (item == nullptr) {
    ++misses;
    return nullptr;
  }
  ++hits;
  item->second.access_s = now_s(now);
  return item;
}

Shard::Item* Shard::peek(std::string_view key, int64_t now) {
  Item* item = find(key, now);
  if (item == nullptr) ++misses;
  else ++hits;
  return item;
}

Shard::Item* Shard::upsert(std::string_view key, ValueRef value, int64_t expire_ms, int64_t now) {
  auto it = map_.find(key);
  if (it == map_.end()) it = map_.try_emplace(std::string(key)).first;
  Item* item = &*it;
  item->second.value = std::move(value);
  item->second.access_s = now_s(now);
  set_expire(item, expire_ms);
  return item;
}

void Shard::set_expire(Item* item, int64_t expire_ms) {
  Entry& e = item->second;
  if (e.expire_ms == expire_ms) return;
  if (e.expire_ms != 0) expiry_.erase({e.expire_ms, std::string_view(item->first)});
  e.expire_ms = expire_ms;
  if (expire_ms != 0) expiry_.emplace(expire_ms, std::string_view(item->first));
}

void Shard::erase(Item* item) {
  if (item->second.expire_ms != 0)
    expiry_.erase({item->second.expire_ms, std::string_view(item->first)});
  map_.erase(item->first);
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
    std::string_view key = expiry_.begin()->second;
    expiry_.erase(expiry_.begin());
    map_.erase(map_.find(key));
    ++removed;
  }
  expired += removed;
  return removed;
}

Shard::Map Shard::take_all() {
  expiry_.clear();
  Map old;
  old.swap(map_);
  return old;
}

// ---- Keyspace ----

Keyspace::Keyspace(size_t shards) {
  size_t n = 1;
  while (n < shards) n <<= 1;
  shards_.reserve(n);
  for (size_t i = 0; i < n; ++i) shards_.push_back(std::make_unique<Shard>());
  mask_ = n - 1;
}

size_t Keyspace::shard_index(std::string_view key) const {
  // The tables use the low bits of the same hash; take the shard from the high bits.
  return (KeyHash{}(key) >> 40) & mask_;
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
  for (auto& s : shards_) {
    std::lock_guard lock(s->mu);
    old.push_back(s->take_all());
  }
  if (async) std::thread([tables = std::move(old)]() mutable { tables.clear(); }).detach();
}

size_t Keyspace::active_expire(int64_t now, size_t budget_per_shard) {
  size_t removed = 0;
  for (auto& s : shards_) {
    std::lock_guard lock(s->mu);
    removed += s->expire_due(now, budget_per_shard);
  }
  return removed;
}

uint64_t Keyspace::scan(uint64_t cursor, size_t count, int64_t now,
                        const std::function<void(const std::string&, const Entry&)>& emit) {
  constexpr int kBucketBits = 40;
  size_t s = cursor >> kBucketBits;
  size_t b = cursor & ((uint64_t{1} << kBucketBits) - 1);
  size_t visited = 0;
  if (count == 0) count = 1;
  while (s < shards_.size() && visited < count) {
    Shard& shard = *shards_[s];
    std::lock_guard lock(shard.mu);
    const auto& map = shard.map();
    size_t nb = map.bucket_count();
    for (; b < nb && visited < count; ++b) {
      for (auto it = map.begin(b); it != map.end(b); ++it) {
        if (it->second.expire_ms != 0 && it->second.expire_ms <= now) continue;
        emit(it->first, it->second);
        ++visited;
      }
    }
    if (b >= nb) {
      ++s;
      b = 0;
    }
  }
  if (s >= shards_.size()) return 0;
  return (uint64_t{s} << kBucketBits) | b;
}

std::optional<std::string> Keyspace::random_key(int64_t now) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  size_t start = rng() & mask_;
  for (size_t i = 0; i < shards_.size(); ++i) {
    Shard& shard = *shards_[(start + i) & mask_];
    std::lock_guard lock(shard.mu);
    const auto& map = shard.map();
    if (map.empty()) continue;
    size_t nb = map.bucket_count();
    for (int tries = 0; tries < 64; ++tries) {
      size_t b = rng() % nb;
      size_t n = map.bucket_size(b);
      if (n == 0) continue;
      auto it = map.begin(b);
      std::advance(it, rng() % n);
      if (it->second.expire_ms != 0 && it->second.expire_ms <= now) break;
      return it->first;
    }
    // A sparse table or an expired pick: fall back to the first live key of this shard.
    for (const auto& [key, e] : map)
      if (e.expire_ms == 0 || e.expire_ms > now) return key;
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
