#include "tiering/exec_lock.h"

#include <algorithm>
#include <cassert>

namespace tiering {

ExecLock::ExecLock(Keyspace& ks, std::span<const std::string_view> keys, bool all,
                   bool long_hold)
    : ks_(ks), long_hold_(long_hold) {
  assert(ShardMutex::reentrant() == nullptr && "transactions do not nest");
  if (all) {
    for (size_t i = 0; i < ks.shard_count(); ++i) locked_.push_back(i);
  } else {
    locked_.reserve(keys.size());
    for (std::string_view k : keys) locked_.push_back(ks.shard_index(k));
    std::sort(locked_.begin(), locked_.end());
    locked_.erase(std::unique(locked_.begin(), locked_.end()), locked_.end());
  }
  if (long_hold_)
    for (size_t i : locked_) ks_.shard(i).mu.mark_long(1);
  for (size_t i : locked_) {
    ks_.shard(i).mu.lock();
    reentrant_.held.push_back(&ks_.shard(i).mu);
  }
  std::sort(reentrant_.held.begin(), reentrant_.held.end());
  reentrant_.garbage = &garbage_;
  ShardMutex::set_reentrant(&reentrant_);
}

ExecLock::~ExecLock() {
  ShardMutex::set_reentrant(nullptr);
  for (auto it = locked_.rbegin(); it != locked_.rend(); ++it) ks_.shard(*it).mu.unlock();
  if (long_hold_)
    for (size_t i : locked_) ks_.shard(i).mu.mark_long(-1);
  garbage_.clear();  // no shard lock held now
}

}  // namespace tiering
