// node_ops.h - what one Client call sends to one node: the commands of put, get, exists,
// prefix_match, unpin and remove on that node's connection pool (ClientCore). A Client on one
// server calls these directly; on a cluster, cluster_batch.h splits a call's keys by node and
// calls these once per node, in parallel.
//
// Per-key failures (a missing key, a window too small, -MOVED from a cluster node) are that
// key's Result; what fails as a whole (a lost connection, an error reply to the whole command)
// throws Error. All functions are thread-safe (each borrows a connection of the pool).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "core.h"
#include "transport.h"

namespace stratakv::detail {

/// One key of a keys-only batch (exists, remove).
struct KeyItem {
  std::string_view key;
};

/// Stores items[i] (KV.PUT/KV.MPUT on the fast path, SET on RESP); its outcome in out[i].
/// `asking`: plain RESP, each SET after an ASKING (keys a node named in -ASK).
void node_put(ClientCore& node, std::span<const PutItem> items, const PutOptions& options,
              std::span<Result> out, bool asking = false);
/// Reads items[i] into its pieces (KV.GET/KV.MGET, or GET); out[i] kOk with the length, kMiss
/// or kError.
void node_get_into(ClientCore& node, std::span<const GetItem> items, std::span<Result> out,
                   bool asking = false);
/// Reads a value of unknown length into alloc(length); nullopt when missing. Throws
/// Error(kServer) on an error reply (its text, e.g. "MOVED 12 10.0.0.2:7000").
std::optional<size_t> node_get_with(ClientCore& node, std::string_view key, const Allocator& alloc,
                                    bool asking = false);
/// One EXISTS per key, pipelined: out[i] kOk (exists), kMiss (does not) or kError (its text).
void node_exists(ClientCore& node, std::span<const KeyItem> keys, std::span<Result> out,
                 bool asking = false);
/// Deletes keys. `per_key` (a cluster: one DEL may not span slots): one DEL per key,
/// pipelined, out[i] kOk (deleted) / kMiss (absent) / kError; else one DEL of every key, whose
/// count is returned (out untouched). Returns how many keys existed.
size_t node_remove(ClientCore& node, std::span<const KeyItem> keys, std::span<Result> out,
                   bool per_key, bool asking = false);

/// A node's answer to KV.PREFIX.
struct PrefixReply {
  size_t count = 0;         ///< leading keys present (of the keys sent)
  bool supported = true;    ///< false: the server has no KV.PREFIX (count is then 0)
  std::optional<size_t> left_at;  ///< [count, index, -MOVED ...]: keys[index] is another node's
  std::string redirect;     ///< that entry's text ("MOVED 7 10.0.0.2:7000")
};
/// KV.PREFIX keys... [PIN pin_ms]. With a pin, on the node's lease connection (leases belong
/// to the connection that took them). Throws Error(kServer) on an error reply.
PrefixReply node_prefix(ClientCore& node, std::span<const std::string_view> keys,
                        std::optional<uint64_t> pin_ms);
/// Every key of the node that matches the glob `pattern`: SCAN cursor MATCH pattern COUNT 1000
/// until the cursor is 0 (keys written meanwhile may or may not be listed; each key once).
/// Throws Error(kServer) on an error reply.
std::vector<std::string> node_scan(ClientCore& node, std::string_view pattern);
/// KV.UNPIN on the node's lease connection, one command (a cluster node skips the keys another
/// node serves). Returns the keys that were leased. Throws Error(kServer) on an error reply.
size_t node_unpin(ClientCore& node, std::span<const std::string_view> keys);

}  // namespace stratakv::detail
