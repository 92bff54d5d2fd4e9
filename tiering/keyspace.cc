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

uint16_t hash_slot(std::string_view key) {
  return static_cast<uint16_t>(hash_key(key) & (kSlotCount - 1));
}

// ---- Shard ----

Shard::Shard() : own_slots_(new SlotKeys[kSlotCount]()), slots_(own_slots_.get()) {}

void Shard::announce(ChangeKind kind, ChangeCause cause, uint8_t prev_flags,
                     std::string_view key, uint16_t slot, const ValueRef* value,
                     int64_t expire_ms, bool created) {
  const Change c{kind, cause, prev_flags, slot, ++seq_, key, value, expire_ms, created};
  for (KeyspaceObserver* o : *observers_) o->on_change(*this, c);
}

void Shard::slot_link(Item* item, uint16_t slot) {
  SlotKeys& s = slots_[slot];
  item->second.slot_prev = nullptr;
  item->second.slot_next = s.head;
  if (s.head != nullptr) s.head->second.slot_prev = item;
  s.head = item;
  ++s.count;
}

void Shard::slot_unlink(Item* item, uint16_t slot) {
  SlotKeys& s = slots_[slot];
  Entry& e = item->second;
  if (e.slot_prev != nullptr) e.slot_prev->second.slot_next = e.slot_next;
  else s.head = e.slot_next;
  if (e.slot_next != nullptr) e.slot_next->second.slot_prev = e.slot_prev;
  --s.count;
}

void Shard::expire_item(Item* item) {
  const uint8_t prev = item->second.flags;
  const uint16_t slot = slot_of(item->key());
  // Out of every index first; the node (whose bytes the change's key points at) goes last.
  detach(item, slot);
  announce(ChangeKind::kDelete, ChangeCause::kExpiry, prev, item->key(), slot, nullptr, 0);
  map_.erase(item);
  ++expired;
}

Shard::Item* Shard::find(std::string_view key, int64_t now) {
  Item* item = map_.find(key);
  if (item == nullptr) return nullptr;
  if (item->second.expire_ms != 0 && item->second.expire_ms <= now) {
    if (!passive_expiry_) expire_item(item);
    return nullptr;
  }
  return item;
}

Shard::Item* Shard::lookup(std::string_view key, int64_t now) {
  Item* item = find(key, now);
  if (item == nullptr) {
    ++misses;
    for (KeyspaceObserver* o : *observers_) o->on_miss(*this, key);
    return nullptr;
  }
  ++hits;
  touch(item->second, now);
  item->second.flags |= kEntryRead;
  return item;
}

Shard::Item* Shard::peek(std::string_view key, int64_t now) {
  Item* item = find(key, now);
  if (item == nullptr) {
    ++misses;
    for (KeyspaceObserver* o : *observers_) o->on_miss(*this, key);
  } else {
    ++hits;
  }
  return item;
}

Shard::Item* Shard::upsert(std::string_view key, ValueRef value, int64_t expire_ms, int64_t now,
                           ValueRef* replaced, ChangeCause cause, int slot_hint) {
  auto [item, inserted] = map_.try_emplace(key);
  const uint16_t slot = slot_of(key, slot_hint);
  if (inserted) {
    slot_link(item, slot);
    item->second.lfu_minutes = lfu_minutes(now);
  }
  Entry& e = item->second;
  const uint8_t prev = inserted ? 0 : e.flags;
  e.flags &= static_cast<uint8_t>(~(kEntrySsdFlags | kEntryRead));
  if (replaced != nullptr) *replaced = std::move(e.value);  // else released by the assignment
  e.value = std::move(value);
  touch(e, now);
  if (e.expire_ms != expire_ms) {
    if (e.expire_ms != 0) expiry_.erase({e.expire_ms, item});
    e.expire_ms = expire_ms;
    if (expire_ms != 0) expiry_.emplace(expire_ms, item);
  }
  announce(ChangeKind::kSet, cause, prev, item->key(), slot, &e.value, e.expire_ms, inserted);
  return item;
}

void Shard::set_value(Item* item, ValueRef value, ValueRef* replaced, int slot) {
  Entry& e = item->second;
  const uint8_t prev = e.flags;
  e.flags &= static_cast<uint8_t>(~(kEntrySsdFlags | kEntryRead));
  if (replaced != nullptr) *replaced = std::move(e.value);
  e.value = std::move(value);
  announce(ChangeKind::kSet, ChangeCause::kCommand, prev, item->key(),
           slot_of(item->key(), slot), &e.value, e.expire_ms);
}

void Shard::modified(Item* item, int slot) {
  Entry& e = item->second;
  const uint8_t prev = e.flags;
  e.flags &= static_cast<uint8_t>(~(kEntrySsdFlags | kEntryRead));
  announce(ChangeKind::kSet, ChangeCause::kCommand, prev, item->key(),
           slot_of(item->key(), slot), &e.value, e.expire_ms);
}

void Shard::set_expire(Item* item, int64_t expire_ms, int slot) {
  Entry& e = item->second;
  if (e.expire_ms == expire_ms) return;
  if (e.expire_ms != 0) expiry_.erase({e.expire_ms, item});
  e.expire_ms = expire_ms;
  if (expire_ms != 0) expiry_.emplace(expire_ms, item);
  announce(ChangeKind::kExpire, ChangeCause::kCommand, e.flags, item->key(),
           slot_of(item->key(), slot), nullptr, expire_ms);
}

void Shard::erase(Item* item, ChangeCause cause, ValueRef* removed, int slot_hint) {
  const uint8_t prev = item->second.flags;
  const uint16_t slot = slot_of(item->key(), slot_hint);
  if (removed != nullptr) *removed = std::move(item->second.value);
  detach(item, slot);
  announce(ChangeKind::kDelete, cause, prev, item->key(), slot, nullptr, 0);
  map_.erase(item);
}

void Shard::drop_value(Item* item, ValueRef* dropped) {
  Entry& e = item->second;
  const uint8_t prev = e.flags;
  *dropped = std::move(e.value);
  announce(ChangeKind::kDemoted, ChangeCause::kTiering, prev, item->key(), slot_of(item->key()),
           nullptr, e.expire_ms);
}

void Shard::install_value(Item* item, ValueRef value) {
  Entry& e = item->second;
  const uint8_t prev = e.flags;
  e.value = std::move(value);
  announce(ChangeKind::kPromoted, ChangeCause::kTiering, prev, item->key(),
           slot_of(item->key()), &e.value, e.expire_ms);
}

Shard::Item* Shard::recover(std::string_view key, int64_t expire_ms, uint8_t flags,
                            int64_t now) {
  auto [item, inserted] = map_.try_emplace(key);
  if (!inserted) return nullptr;
  const uint16_t slot = slot_of(key);
  slot_link(item, slot);
  Entry& e = item->second;
  e.lfu_minutes = lfu_minutes(now);
  touch(e, now);
  e.flags = flags;
  e.expire_ms = expire_ms;
  if (expire_ms != 0) expiry_.emplace(expire_ms, item);
  announce(ChangeKind::kRecovered, ChangeCause::kTiering, 0, item->key(), slot, nullptr,
           expire_ms);
  return item;
}

void Shard::detach(Item* item, uint16_t slot) {
  if (item->second.expire_ms != 0) expiry_.erase({item->second.expire_ms, item});
  if (item->second.flags & kEntryLeased) leases_.erase(item);
  slot_unlink(item, slot);
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
  if (passive_expiry_) return 0;
  while (removed < budget && !expiry_.empty() && expiry_.begin()->first <= now) {
    expire_item(expiry_.begin()->second);
    ++removed;
  }
  return removed;
}

Shard::Map Shard::take_all() {
  expiry_.clear();
  leases_.clear();
  for (size_t slot = index_; slot < kSlotCount; slot += slot_stride_) slots_[slot] = SlotKeys();
  return std::exchange(map_, Map());
}

// ---- Keyspace ----

Keyspace::Keyspace(size_t shards, SlotFn slot_of)
    : slots_(kSlotCount), slot_fn_(slot_of != nullptr ? slot_of : &hash_slot) {
  size_t n = 1;
  while (n < shards && n < kSlotCount) n <<= 1;
  shards_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    auto shard = std::unique_ptr<Shard>(new Shard(Shard::InKeyspace{}));
    shard->index_ = i;
    shard->slot_stride_ = n;
    shard->slot_fn_ = slot_fn_;
    shard->slots_ = slots_.data();
    shard->observers_ = &observers_;
    shards_.push_back(std::move(shard));
  }
  mask_ = n - 1;
  shard_bits_ = static_cast<unsigned>(std::countr_zero(n));
}

void Keyspace::add_observer(KeyspaceObserver* observer) {
  // Every shard locked: observers are read under a shard's lock, so none is mid-change.
  lock_all();
  if (std::find(observers_.begin(), observers_.end(), observer) == observers_.end())
    observers_.push_back(observer);
  unlock_all();
}

void Keyspace::remove_observer(KeyspaceObserver* observer) {
  lock_all();
  std::erase(observers_, observer);
  unlock_all();
}

uint64_t Keyspace::count_in_slot(uint16_t slot) {
  Shard& shard = *shards_[shard_of_slot(slot)];
  std::lock_guard lock(shard.mu);
  return shard.count_in_slot(slot);
}

std::vector<std::string> Keyspace::keys_in_slot(uint16_t slot, size_t count, int64_t now) {
  std::vector<std::string> keys;
  if (hidden(slot)) return keys;
  Shard& shard = *shards_[shard_of_slot(slot)];
  std::lock_guard lock(shard.mu);
  shard.for_each_in_slot(slot, [&](const Shard::Item& item) {
    if (keys.size() >= count) return false;
    const int64_t at = item.second.expire_ms;
    if (at == 0 || at > now) keys.emplace_back(item.key());
    return true;
  });
  return keys;
}

void Keyspace::for_each_live(int64_t now,
                             const std::function<void(std::string_view, const Entry&)>& fn) {
  const bool hiding = any_hidden();
  for (auto& s : shards_) {
    std::lock_guard lock(s->mu);
    for (const auto& [key, e] : s->map())
      if ((e.expire_ms == 0 || e.expire_ms > now) && !(hiding && hidden_key(key))) fn(key, e);
  }
}

void Keyspace::for_each_in_slot(uint16_t slot, int64_t now,
                                const std::function<void(std::string_view, const Entry&)>& fn) {
  Shard& shard = *shards_[shard_of_slot(slot)];
  std::lock_guard lock(shard.mu);
  shard.for_each_in_slot(slot, [&](const Shard::Item& item) {
    const int64_t at = item.second.expire_ms;
    if (at == 0 || at > now) fn(item.key(), item.second);
    return true;
  });
}

size_t Keyspace::remove_slot_keys(uint16_t slot, size_t max_keys) {
  Shard& shard = *shards_[shard_of_slot(slot)];
  std::vector<ValueRef> released;  // freed after the lock (a block's free takes the region's)
  size_t removed = 0;
  {
    std::lock_guard lock(shard.mu);
    while (removed < max_keys && shard.slots_[slot].head != nullptr) {
      ValueRef value;
      shard.erase(shard.slots_[slot].head, ChangeCause::kCommand, &value, slot);
      if (value) released.push_back(std::move(value));
      ++removed;
    }
  }
  return removed;
}

void Keyspace::set_hidden(uint16_t slot, bool hide) {
  const uint64_t bit = uint64_t{1} << (slot & 63);
  const uint64_t before = hide ? hidden_[slot >> 6].fetch_or(bit) : hidden_[slot >> 6].fetch_and(~bit);
  if (hide && !(before & bit)) hidden_count_.fetch_add(1);
  if (!hide && (before & bit)) hidden_count_.fetch_sub(1);
}

Keyspace::TableFigures Keyspace::table_figures() {
  TableFigures t;
  for (auto& s : shards_) {
    std::lock_guard lock(s->mu);
    t.keys += s->size();
    t.node_bytes += s->size() * sizeof(Shard::Item) + s->map().bucket_bytes();
    t.volatile_keys += s->volatile_size();
  }
  return t;
}

void Keyspace::lock_all() {
  for (auto& s : shards_) s->mu.lock();
}

void Keyspace::unlock_all() {
  for (auto it = shards_.rbegin(); it != shards_.rend(); ++it) (*it)->mu.unlock();
}

size_t Keyspace::size() {
  size_t n = 0;
  for (auto& s : shards_) {
    std::lock_guard lock(s->mu);
    n += s->size();
  }
  if (!any_hidden()) return n;
  // Less the keys of hidden slots: each shard's slots counted under its lock.
  for (size_t i = 0; i < shards_.size(); ++i) {
    Shard& s = *shards_[i];
    std::lock_guard lock(s.mu);
    for (size_t slot = i; slot < kSlotCount; slot += shards_.size())
      if (hidden(static_cast<uint16_t>(slot)))
        n -= std::min<uint64_t>(n, s.count_in_slot(static_cast<uint16_t>(slot)));
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
  // Every shard at once: observers' on_flush() must see no write slip in between two shards.
  lock_all();
  for (auto& s : shards_) old.push_back(s->take_all());
  for (KeyspaceObserver* o : observers_) o->on_flush();
  unlock_all();
  if (async) std::thread([tables = std::move(old)]() mutable { tables.clear(); }).detach();
}

void Keyspace::set_passive_expiry(bool passive) {
  lock_all();
  passive_expiry_ = passive;
  for (auto& s : shards_) s->passive_expiry_ = passive;
  unlock_all();
}

size_t Keyspace::active_expire(int64_t now, size_t budget_per_shard) {
  size_t removed = 0;
  for (auto& s : shards_) {
    if (s->mu.held_long()) continue;  // a script holds it: next tick
    std::lock_guard lock(s->mu);
    removed += s->expire_due(now, budget_per_shard);
    s->prune_leases(now);
  }
  return removed;
}

size_t Keyspace::rehash_step(size_t buckets_per_shard) {
  size_t busy = 0;
  for (auto& s : shards_) {
    if (s->mu.held_long()) continue;
    std::lock_guard lock(s->mu);
    busy += s->rehash_step(buckets_per_shard);
  }
  return busy;
}

uint64_t Keyspace::scan(uint64_t cursor, size_t count, int64_t now,
                        const std::function<void(const std::string&, const Entry&)>& emit,
                        bool include_hidden) {
  size_t s = cursor & mask_;
  uint64_t c = cursor >> shard_bits_;  // the shard table's cursor (below its size, < 2^32)
  if (count == 0) count = 1;
  // Redis's scanGenericCommand bound: at most 10 * count dictScan steps (buckets) per call.
  size_t budget = count > SIZE_MAX / 10 ? SIZE_MAX : count * 10;
  size_t visited = 0;
  std::string key;  // emit takes a std::string: one buffer reused for every key
  const bool hiding = !include_hidden && any_hidden();
  auto visit = [&](const Shard::Item& item) {
    ++visited;
    const Entry& e = item.second;
    if (e.expire_ms != 0 && e.expire_ms <= now) return;
    if (hiding && hidden_key(item.key())) return;
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
  const bool hiding = any_hidden();
  auto live = [&](const Shard::Item& item) {
    const Entry& e = item.second;
    return (e.expire_ms == 0 || e.expire_ms > now) && !(hiding && hidden_key(item.key()));
  };
  size_t start = rng() & mask_;
  for (size_t i = 0; i < shards_.size(); ++i) {
    Shard& shard = *shards_[(start + i) & mask_];
    std::lock_guard lock(shard.mu);
    const Shard::Map& map = shard.map();
    if (map.empty()) continue;
    for (int tries = 0; tries < 16; ++tries) {
      const Shard::Item* item = map.random_node(rng);
      if (live(*item)) return std::string(item->key());
    }
    // Mostly expired (or hidden) keys: fall back to the first live key of this shard.
    for (const Shard::Item& item : map)
      if (live(item)) return std::string(item.key());
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
