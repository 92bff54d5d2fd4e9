// routed_ops.h - a Client's calls over its node(s): each routes its keys to the nodes that
// serve them (cluster_batch.h; a one-server client calls its node directly) and runs the node
// commands of node_ops.h. Values are moved as they are: striping is striping.h's, above this.
//
// Thread-safe. Errors as the Client's calls (client.h): per-key failures in the Results,
// whole-call failures thrown.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "cluster_core.h"
#include "transport.h"

namespace stratakv::detail {

/// Stores items[i]; Result i for item i.
std::vector<Result> routed_put(ClusterCore& cc, std::span<const PutItem> items, const PutOptions& options);
/// Reads items[i] into its window; Result i for item i.
std::vector<Result> routed_get_into(ClusterCore& cc, std::span<const GetItem> items);
/// Reads a value of unknown length into alloc(length); nullopt when missing. In a cluster,
/// follows -MOVED/-ASK and retries after a lost connection (alloc may then be called again).
std::optional<size_t> routed_get_with(ClusterCore& cc, std::string_view key, const Allocator& alloc);
/// One answer per key: kOk exists, kMiss not, kError (the server's text).
std::vector<Result> routed_exists(ClusterCore& cc, std::span<const std::string_view> keys);
/// Deletes the keys; returns how many existed. Throws the first key's error.
size_t routed_remove(ClusterCore& cc, std::span<const std::string_view> keys);
/// Leading keys of the chain present (cluster_prefix.cc).
size_t routed_prefix(ClusterCore& cc, std::span<const std::string_view> keys, std::optional<uint64_t> pin_ms);
/// Ends this client's leases of the keys on every node; returns how many were leased.
size_t routed_unpin(ClusterCore& cc, std::span<const std::string_view> keys);

/// Every key matching the glob `pattern`, from every primary of a cluster (SCAN per node, the
/// nodes in parallel). Throws the first node's error.
std::vector<std::string> routed_scan(ClusterCore& cc, std::string_view pattern);

}  // namespace stratakv::detail
