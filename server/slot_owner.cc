// server/slot_owner.cc - the slot ownership map. See slot_owner.h.
#include "server/slot_owner.h"


namespace server {

SlotOwner::SlotOwner() : owner_(cluster::kSlots, 0) {
  for (auto& word : foreign_) word.store(0, std::memory_order_relaxed);
  for (auto& word : replica_) word.store(0, std::memory_order_relaxed);
}

void SlotOwner::set_replica_slots(uint16_t first, uint16_t last, bool held) {
  std::lock_guard lock(mu_);
  for (uint32_t s = first; s <= last; ++s) {
    const uint64_t bit = uint64_t{1} << (s & 63);
    if (held) replica_[s >> 6].fetch_or(bit, std::memory_order_relaxed);
    else replica_[s >> 6].fetch_and(~bit, std::memory_order_relaxed);
  }
}

namespace {
// index_'s key: both addresses (a space never appears in "host:port").
std::string endpoint_key(std::string_view plain, std::string_view tls) {
  std::string key;
  key.reserve(plain.size() + 1 + tls.size());
  return key.append(plain).append(1, ' ').append(tls);
}
}  // namespace

std::string SlotOwner::address(uint16_t slot, bool tls) const {
  std::lock_guard lock(mu_);
  const uint16_t at = owner_[slot];
  if (at == 0 || at == kUnserved) return {};
  const Endpoint& e = addresses_[at - 1];
  return tls && !e.tls.empty() ? e.tls : e.plain;
}

void SlotOwner::assign(uint16_t first, uint16_t last, std::string_view address, std::string_view tls_address) {
  std::lock_guard lock(mu_);
  uint16_t at = 0;
  if (!address.empty()) {
    std::string key = endpoint_key(address, tls_address);
    auto it = index_.find(key);
    if (it == index_.end()) {
      // Past one address per slot, forget those no slot names any more first: the table then
      // never holds more than kSlots + 1 (its 16-bit indexes never wrap, whatever a client
      // sends), and the sweep runs once per kSlots new addresses at most.
      if (addresses_.size() >= cluster::kSlots) drop_unused_addresses();
      addresses_.push_back({std::string(address), std::string(tls_address)});
      it = index_.emplace(std::move(key), static_cast<uint16_t>(addresses_.size())).first;
    }
    at = it->second;
  }
  set_owner(first, last, at);
}

void SlotOwner::unserve(uint16_t first, uint16_t last) {
  std::lock_guard lock(mu_);
  set_owner(first, last, kUnserved);
}

void SlotOwner::set_owner(uint16_t first, uint16_t last, uint16_t at) {
  uint32_t count = foreign_count_.load(std::memory_order_relaxed);
  for (uint32_t s = first; s <= last; ++s) {
    const bool was = owner_[s] != 0, now = at != 0;
    owner_[s] = at;
    if (was == now) continue;
    const uint64_t bit = uint64_t{1} << (s & 63);
    std::atomic<uint64_t>& word = foreign_[s >> 6];
    if (now) {
      word.fetch_or(bit, std::memory_order_relaxed);
      ++count;
    } else {
      word.fetch_and(~bit, std::memory_order_relaxed);
      --count;
    }
  }
  foreign_count_.store(count, std::memory_order_relaxed);
}

void SlotOwner::drop_unused_addresses() {
  std::vector<uint16_t> remap(addresses_.size() + 1, 0);
  for (uint16_t at : owner_)
    if (at != kUnserved) remap[at] = 1;
  std::vector<Endpoint> kept;
  for (size_t i = 1; i < remap.size(); ++i) {
    if (remap[i] == 0) continue;
    kept.push_back(std::move(addresses_[i - 1]));
    remap[i] = static_cast<uint16_t>(kept.size());
  }
  remap[0] = 0;
  for (uint16_t& at : owner_)
    if (at != kUnserved) at = remap[at];
  addresses_ = std::move(kept);
  index_.clear();
  for (size_t i = 0; i < addresses_.size(); ++i)
    index_.emplace(endpoint_key(addresses_[i].plain, addresses_[i].tls), static_cast<uint16_t>(i + 1));
}

void SlotOwner::set_bits(SlotBits& bits, std::atomic<uint32_t>& count, uint16_t first,
                         uint16_t last, bool on) {
  for (uint32_t slot = first; slot <= last; ++slot) {
    const uint64_t bit = uint64_t{1} << (slot & 63);
    std::atomic<uint64_t>& word = bits[slot >> 6];
    const uint64_t before = on ? word.fetch_or(bit, std::memory_order_seq_cst)
                               : word.fetch_and(~bit, std::memory_order_seq_cst);
    if (on && !(before & bit)) count.fetch_add(1, std::memory_order_seq_cst);
    if (!on && (before & bit)) count.fetch_sub(1, std::memory_order_seq_cst);
  }
}

}  // namespace server
