// server/acl_log.cc - ACL LOG's entries (acl_log.h).
#include "server/acl_log.h"

namespace server {

// Redis's ACL_LOG_GROUPING_MAX_TIME_DELTA: alike entries within this many ms are grouped.
constexpr int64_t kGroupingMs = 60000;

void AclLog::add(Entry e, int64_t now_ms, size_t max_len) {
  std::lock_guard lock(mu_);
  e.ms = now_ms;
  for (auto it = entries_.begin(); it != entries_.end(); ++it) {
    if (it->reason == e.reason && it->context == e.context && it->object == e.object &&
        it->username == e.username && now_ms - it->ms < kGroupingMs) {
      // The entry moves to the head with its count grown and the newest client's info.
      Entry grown = std::move(*it);
      entries_.erase(it);
      ++grown.count;
      grown.ms = now_ms;
      grown.client_info = std::move(e.client_info);
      entries_.push_front(std::move(grown));
      return;
    }
  }
  entries_.push_front(std::move(e));
  while (entries_.size() > max_len) entries_.pop_back();
}

std::vector<AclLog::Entry> AclLog::newest(size_t count) const {
  std::lock_guard lock(mu_);
  std::vector<Entry> out;
  for (size_t i = 0; i < entries_.size() && i < count; ++i) out.push_back(entries_[i]);
  return out;
}

void AclLog::reset() {
  std::lock_guard lock(mu_);
  entries_.clear();
}

}  // namespace server
