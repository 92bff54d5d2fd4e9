// tiering/eviction_policy.h - Redis's maxmemory-policy values and their names (evict.c,
// config.c's maxmemory_policy_enum). A leaf: the config parser reads policies by name without
// the evictor (tiering/eviction.h).
#pragma once

#include <optional>
#include <span>
#include <string_view>

namespace tiering {

/// Redis's maxmemory-policy values. Convert by name (parse_eviction_policy,
/// eviction_policy_name), never by position.
enum class EvictionPolicy {
  kVolatileLru,
  kVolatileLfu,
  kVolatileRandom,
  kVolatileTtl,
  kAllkeysLru,
  kAllkeysLfu,
  kAllkeysRandom,
  kNoEviction,
};

/// A maxmemory-policy name and the policy it selects.
struct EvictionPolicyName {
  std::string_view name;  ///< NUL-terminated (a literal)
  EvictionPolicy policy;
};

/// Every maxmemory-policy name, in the order of Redis's config table (maxmemory_policy_enum in
/// config.c), which is the order CONFIG SET's error lists them in. The one place the names and
/// the policies meet.
std::span<const EvictionPolicyName> eviction_policy_names();
/// The policy called `name`, ASCII case-insensitively (as CONFIG SET reads enums); null when
/// `name` is not a maxmemory-policy.
std::optional<EvictionPolicy> parse_eviction_policy(std::string_view name);
/// The name of `policy`, as CONFIG GET and INFO show it ("allkeys-lru").
std::string_view eviction_policy_name(EvictionPolicy policy);
/// Whether `policy` is volatile-lfu or allkeys-lfu (access frequency is tracked).
bool lfu_policy(EvictionPolicy policy);
/// Whether `policy` evicts only keys with a TTL (the volatile-* policies).
bool volatile_policy(EvictionPolicy policy);

}  // namespace tiering
