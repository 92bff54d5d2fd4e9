// bench/kvbench/control.h - facts about the server for the report: INFO fields (version,
// memory, eviction, tiering, fast path) and a few CONFIG values, over a short control
// connection of their own.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "options.h"

namespace kvbench {

struct ServerInfo {
  std::string error;  ///< empty when the server answered
  std::vector<std::pair<std::string, std::string>> fields;
  /// The field's value, or "" when absent.
  std::string get(const std::string& key) const;
};

/// INFO fields worth keeping (redis_version, used_memory, maxmemory*, evicted_keys,
/// keyspace_*, db0, and anything about tiering, SSD, demotion, promotion, leases or the fast
/// path) plus `config:tiering.ssd.enabled` (empty when the server has no such setting).
/// Never throws: a failure is reported in `error`.
ServerInfo query_server_info(const Options& o);

}  // namespace kvbench
