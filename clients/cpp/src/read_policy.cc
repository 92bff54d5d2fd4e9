// read_policy.cc - the choice of the node that serves a read (read_policy.h).
#include "read_policy.h"

#include <limits>

namespace stratakv::detail {

int ReadPolicy::choose(const SlotMap& map, uint16_t slot, Clock::time_point now) {
  if (mode_ == ReadFrom::kPrimary) return kPrimary;
  const std::span<const uint16_t> replicas = map.replicas_of(slot);
  if (replicas.empty()) return kPrimary;
  if (mode_ == ReadFrom::kReplicas) {
    const uint64_t turn = turn_.fetch_add(1, std::memory_order_relaxed);
    if (!any_down_.load(std::memory_order_relaxed)) return replicas[turn % replicas.size()];
    std::lock_guard lk(mu_);
    for (size_t k = 0; k < replicas.size(); ++k) {  // the next one in turn that is not down
      const uint16_t r = replicas[(turn + k) % replicas.size()];
      auto it = figures_.find(map.replicas()[r].address());
      if (it == figures_.end() || it->second.down_until <= now) return r;
    }
    return kPrimary;
  }
  // kNearest: a node due for a new figure first, else the lowest average (replicas first on a tie).
  const NodeAddress* primary = map.node_of(slot);
  std::lock_guard lk(mu_);
  int best = kPrimary;
  double best_us = std::numeric_limits<double>::infinity();
  auto consider = [&](int candidate, const NodeAddress& a) -> bool {
    Figure& f = figures_[a.address()];
    if (f.down_until > now) return false;
    if (now - f.at >= kRefresh) {  // never picked yet (at is the clock's epoch), or stale
      f.at = now;  // one read refreshes it; the others meanwhile choose by the averages
      best = candidate;
      return true;
    }
    if (f.measured && f.average_us < best_us) best = candidate, best_us = f.average_us;
    return false;
  };
  for (uint16_t r : replicas)
    if (consider(r, map.replicas()[r])) return best;
  if (primary != nullptr && consider(kPrimary, *primary)) return best;
  return best;
}

void ReadPolicy::record(const std::string& address, std::chrono::nanoseconds rtt, Clock::time_point now) {
  if (mode_ != ReadFrom::kNearest) return;
  const double us = static_cast<double>(rtt.count()) / 1000.0;
  std::lock_guard lk(mu_);
  Figure& f = figures_[address];
  f.average_us = f.measured ? f.average_us + kWeight * (us - f.average_us) : us;
  f.measured = true;
  f.at = now;
}

void ReadPolicy::failed(const std::string& address, Clock::time_point now) {
  std::lock_guard lk(mu_);
  figures_[address].down_until = now + kDownFor;
  any_down_.store(true, std::memory_order_relaxed);
}

std::optional<double> ReadPolicy::average_us(const std::string& address) const {
  std::lock_guard lk(mu_);
  auto it = figures_.find(address);
  if (it == figures_.end() || !it->second.measured) return std::nullopt;
  return it->second.average_us;
}

}  // namespace stratakv::detail
