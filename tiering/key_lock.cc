#include "tiering/key_lock.h"

#include <algorithm>

namespace tiering {

KeyLock::KeyLock(Keyspace& ks, std::span<const std::string_view> keys, int64_t now)
    : ks_(ks), now_(now), single_(0) {
  locked_.reserve(keys.size());
  for (std::string_view k : keys) locked_.push_back(ks.shard_index(k));
  std::sort(locked_.begin(), locked_.end());
  locked_.erase(std::unique(locked_.begin(), locked_.end()), locked_.end());
  if (locked_.size() == 1) {
    single_ = locked_[0];
    locked_.clear();
  }
  if (locked_.empty()) {
    if (!keys.empty()) ks_.shard(single_).mu.lock();
    else single_ = SIZE_MAX;  // no key: nothing locked
    return;
  }
  for (size_t i : locked_) ks_.shard(i).mu.lock();
}

void KeyLock::hand_over_to_transaction() {
  std::vector<ValueRef>* to = ShardMutex::reentrant()->garbage;
  if (to == nullptr) return;
  if (garbage_one_) to->push_back(std::move(garbage_one_));
  for (ValueRef& v : garbage_) to->push_back(std::move(v));
  garbage_.clear();
}

void KeyLock::unlock_all() {
  for (auto it = locked_.rbegin(); it != locked_.rend(); ++it) ks_.shard(*it).mu.unlock();
}

const KeyLock::Item* KeyLock::set(std::string_view key, ValueRef value, int64_t expire_ms) {
  ValueRef replaced;
  Item* item = shard(key).upsert(key, std::move(value), expire_ms, now_, &replaced,
                                 ChangeCause::kCommand, hint(key));
  keep(std::move(replaced));
  return item;
}

void KeyLock::set_value(const Item* item, ValueRef value) {
  ValueRef replaced;
  shard_of_item(item).set_value(mut(item), std::move(value), &replaced, hint(item->key()));
  keep(std::move(replaced));
}

Value* KeyLock::writable_in_place(const Item* item, size_t size) {
  const ValueRef& v = item->second.value;
  if (!v || v.use_count() != 1 || v->capacity() < size) return nullptr;
  return const_cast<Value*>(v.get());
}

void KeyLock::modified(const Item* item) {
  shard_of_item(item).modified(mut(item), hint(item->key()));
}

void KeyLock::set_expire(const Item* item, int64_t expire_ms) {
  shard_of_item(item).set_expire(mut(item), expire_ms, hint(item->key()));
}

ValueRef KeyLock::remove(const Item* item) {
  ValueRef removed;
  shard_of_item(item).erase(mut(item), ChangeCause::kCommand, &removed, hint(item->key()));
  keep(removed);  // the caller's copy may be its last reference: released after the locks
  return removed;
}

void KeyLock::rename(const Item* src, std::string_view dst) {
  // The value keeps its deadline and access stats.
  const Entry& from = src->second;
  const int64_t expire_ms = from.expire_ms;
  const uint32_t access = from.access;
  const uint16_t lfu_minutes = from.lfu_minutes;
  const uint8_t lfu = from.lfu;
  const Item* at = set(dst, remove(src), expire_ms);
  Entry& e = mut(at)->second;
  e.access = access;
  e.lfu = lfu;
  e.lfu_minutes = lfu_minutes;
}

void KeyLock::lease(const Item* item, uint64_t holder, int64_t until_ms) {
  shard_of_item(item).lease(mut(item), holder, until_ms);
}

bool KeyLock::unlease(const Item* item, uint64_t holder) {
  return shard_of_item(item).unlease(mut(item), holder, now_);
}

}  // namespace tiering
