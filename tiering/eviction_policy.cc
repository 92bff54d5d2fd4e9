// tiering/eviction_policy.cc - maxmemory-policy names (eviction_policy.h).
#include "tiering/eviction_policy.h"

#include <array>

namespace tiering {

namespace {

constexpr std::array<EvictionPolicyName, 8> kPolicyNames = {{
    {"volatile-lru", EvictionPolicy::kVolatileLru},
    {"volatile-lfu", EvictionPolicy::kVolatileLfu},
    {"volatile-random", EvictionPolicy::kVolatileRandom},
    {"volatile-ttl", EvictionPolicy::kVolatileTtl},
    {"allkeys-lru", EvictionPolicy::kAllkeysLru},
    {"allkeys-lfu", EvictionPolicy::kAllkeysLfu},
    {"allkeys-random", EvictionPolicy::kAllkeysRandom},
    {"noeviction", EvictionPolicy::kNoEviction},
}};

bool iequals_ascii(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i], y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

}  // namespace

std::span<const EvictionPolicyName> eviction_policy_names() { return kPolicyNames; }

std::optional<EvictionPolicy> parse_eviction_policy(std::string_view name) {
  for (const EvictionPolicyName& n : kPolicyNames)
    if (iequals_ascii(n.name, name)) return n.policy;
  return std::nullopt;
}

std::string_view eviction_policy_name(EvictionPolicy policy) {
  for (const EvictionPolicyName& n : kPolicyNames)
    if (n.policy == policy) return n.name;
  return {};
}

bool volatile_policy(EvictionPolicy p) {
  return p == EvictionPolicy::kVolatileLru || p == EvictionPolicy::kVolatileLfu ||
         p == EvictionPolicy::kVolatileRandom || p == EvictionPolicy::kVolatileTtl;
}

bool lfu_policy(EvictionPolicy p) {
  return p == EvictionPolicy::kVolatileLfu || p == EvictionPolicy::kAllkeysLfu;
}

}  // namespace tiering
