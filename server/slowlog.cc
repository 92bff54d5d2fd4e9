#include "server/slowlog.h"

namespace server {

void Slowlog::add(size_t max_len, int64_t duration_us, int64_t time_s,
                        std::span<const std::string_view> args, const std::string& peer,
                        const std::string& name) {
  constexpr size_t kMaxArgs = 32, kMaxArgLen = 128;
  SlowlogEntry e{0, time_s, duration_us, {}, peer, name};
  size_t n = std::min(args.size(), kMaxArgs);
  for (size_t i = 0; i < n; ++i) {
    if (i == kMaxArgs - 1 && args.size() > kMaxArgs) {
      e.args.push_back("... (" + std::to_string(args.size() - kMaxArgs + 1) + " more arguments)");
      break;
    }
    std::string_view a = args[i];
    if (a.size() > kMaxArgLen)
      e.args.push_back(std::string(a.substr(0, kMaxArgLen)) + "... (" +
                       std::to_string(a.size() - kMaxArgLen) + " more bytes)");
    else
      e.args.emplace_back(a);
  }
  std::lock_guard lock(mu_);
  e.id = next_id_++;
  entries_.push_front(std::move(e));
  while (entries_.size() > max_len) entries_.pop_back();
}

std::vector<SlowlogEntry> Slowlog::get(int64_t count) {
  std::lock_guard lock(mu_);
  size_t n = count < 0 ? entries_.size() : std::min<size_t>(count, entries_.size());
  return {entries_.begin(), entries_.begin() + n};
}

size_t Slowlog::size() {
  std::lock_guard lock(mu_);
  return entries_.size();
}

void Slowlog::reset() {
  std::lock_guard lock(mu_);
  entries_.clear();
}

}  // namespace server
