// server/transaction.cc - a connection's MULTI state and the registry of watched keys
// (transaction.h).
#include "server/transaction.h"

#include <algorithm>

namespace server {

void WatchRegistry::watch(std::string_view key, Transaction* txn) {
  std::lock_guard lock(mu_);
  auto [it, inserted] = by_key_.try_emplace(std::string(key));
  it->second.push_back(txn);
  if (inserted) watched_.fetch_add(1, std::memory_order_relaxed);
}

void WatchRegistry::unwatch(const std::vector<std::string>& keys, Transaction* txn) {
  std::lock_guard lock(mu_);
  for (const std::string& key : keys) {
    auto it = by_key_.find(key);
    if (it == by_key_.end()) continue;
    std::erase(it->second, txn);
    if (it->second.empty()) {
      by_key_.erase(it);
      watched_.fetch_sub(1, std::memory_order_relaxed);
    }
  }
}

void WatchRegistry::on_change(tiering::Shard&, const tiering::Change& change) {
  if (watched_.load(std::memory_order_relaxed) == 0) return;
  // A value moving between memory and SSD is no change of the key (Redis has no such event).
  using K = tiering::ChangeKind;
  if (change.kind != K::kSet && change.kind != K::kExpire && change.kind != K::kDelete) return;
  std::lock_guard lock(mu_);
  auto it = by_key_.find(std::string(change.key));
  if (it == by_key_.end()) return;
  for (Transaction* txn : it->second) txn->break_watch();
}

void WatchRegistry::on_flush() {
  if (watched_.load(std::memory_order_relaxed) == 0) return;
  std::lock_guard lock(mu_);
  for (auto& [key, txns] : by_key_)
    for (Transaction* txn : txns) txn->break_watch();
}

void Transaction::queue(const CommandSpec* spec, std::span<const std::string_view> args) {
  QueuedCommand& q = queue_.emplace_back();
  q.spec = spec;
  q.bytes.assign(args.begin(), args.end());
  std::vector<std::string_view> views(q.bytes.begin(), q.bytes.end());
  q.req = resp::Request(std::move(views));
  queued_count_.store(static_cast<int64_t>(queue_.size()), std::memory_order_relaxed);
}

void Transaction::end() {
  active_ = aborted_ = false;
  queue_.clear();
  queued_count_.store(-1, std::memory_order_relaxed);
  slot = -1;
  cross_slot = false;
  unwatch();
}

bool Transaction::add_watch(std::string_view key) {
  if (std::find(watched_.begin(), watched_.end(), key) != watched_.end()) return false;
  watched_.emplace_back(key);
  return true;
}

void Transaction::unwatch() {
  if (!watched_.empty()) registry_.unwatch(watched_, this);
  watched_.clear();
  broken_.store(false, std::memory_order_relaxed);
}

}  // namespace server
