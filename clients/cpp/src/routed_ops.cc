// routed_ops.cc - the Client's calls over its nodes (routed_ops.h), but for prefix lookups
// (cluster_prefix.cc).
#include "routed_ops.h"

#include <atomic>

#include "cluster_batch.h"
#include "node_ops.h"

namespace stratakv::detail {
namespace {

std::vector<KeyItem> key_items(std::span<const std::string_view> keys) {
  std::vector<KeyItem> items;
  items.reserve(keys.size());
  for (std::string_view k : keys) items.push_back({k});
  return items;
}

}  // namespace

std::vector<Result> routed_put(ClusterCore& cc, std::span<const PutItem> items, const PutOptions& options) {
  std::vector<Result> out(items.size());
  if (items.empty()) return out;
  route_keys(cc, items, std::span<Result>(out),
             [&](ClientCore& node, std::span<const PutItem> part, std::span<Result> part_out, bool asking) {
               node_put(node, part, options, part_out, asking);
             });
  return out;
}

std::vector<Result> routed_get_into(ClusterCore& cc, std::span<const GetItem> items) {
  std::vector<Result> out(items.size());
  if (items.empty()) return out;
  route_keys(cc, items, std::span<Result>(out),
             [&](ClientCore& node, std::span<const GetItem> part, std::span<Result> part_out, bool asking) {
               node_get_into(node, part, part_out, asking);
             });
  return out;
}

std::optional<size_t> routed_get_with(ClusterCore& cc, std::string_view key, const Allocator& alloc) {
  if (!cc.cluster()) return node_get_with(cc.only(), key, alloc);
  const uint16_t slot = cluster::key_slot(key);
  std::optional<NodeAddress> ask;  // the node an -ASK named
  for (int attempt = 1;; ++attempt) {
    const bool last = attempt >= cc.options().cluster_max_attempts;
    const std::shared_ptr<const SlotMap> map = cc.map();
    NodeAddress at;
    if (ask) {
      at = *ask;
    } else if (const NodeAddress* n = map->node_of(slot)) {
      at = *n;
    } else {
      throw Error(Error::Kind::kServer, "CLUSTERDOWN Hash slot not served");
    }
    try {
      return node_get_with(*cc.node(at), key, alloc, ask.has_value());
    } catch (const Error& e) {
      if (last) throw;
      if (e.kind() == Error::Kind::kConnection) {
        cc.node_failed(at, map);
        ask.reset();
        continue;
      }
      std::optional<Redirect> r = e.kind() == Error::Kind::kServer ? parse_redirect(e.what()) : std::nullopt;
      if (!r) throw;
      if (r->host.empty()) r->host = at.host;
      ask.reset();
      if (r->ask) ask = NodeAddress{r->host, r->port, {}};
      else cc.learn_moved({&*r, 1}, at, map);
    }
  }
}

std::vector<Result> routed_exists(ClusterCore& cc, std::span<const std::string_view> keys) {
  std::vector<Result> out(keys.size());
  if (keys.empty()) return out;
  const std::vector<KeyItem> items = key_items(keys);
  route_keys(cc, std::span<const KeyItem>(items), std::span<Result>(out),
             [&](ClientCore& node, std::span<const KeyItem> part, std::span<Result> part_out, bool asking) {
               node_exists(node, part, part_out, asking);
             });
  return out;
}

size_t routed_remove(ClusterCore& cc, std::span<const std::string_view> keys) {
  if (keys.empty()) return 0;
  const std::vector<KeyItem> items = key_items(keys);
  std::vector<Result> out(keys.size());
  if (!cc.cluster()) return node_remove(cc.only(), items, out, false);
  route_keys(cc, std::span<const KeyItem>(items), std::span<Result>(out),
             [&](ClientCore& node, std::span<const KeyItem> part, std::span<Result> part_out, bool asking) {
               node_remove(node, part, part_out, true, asking);
             });
  size_t n = 0;
  for (const Result& r : out) {
    if (r.status == Result::Status::kError) throw Error(Error::Kind::kServer, r.error);
    n += r.status == Result::Status::kOk;
  }
  return n;
}

size_t routed_unpin(ClusterCore& cc, std::span<const std::string_view> keys) {
  if (keys.empty()) return 0;
  if (!cc.cluster()) return node_unpin(cc.only(), keys);
  // Leases live on the lease connection of the node that granted them: each node's keys go
  // there. A node that no longer serves a key (-MOVED) or lost the connection holds no lease.
  const std::shared_ptr<const SlotMap> map = cc.map();
  std::vector<std::vector<std::string_view>> parts(map->nodes().size());
  for (std::string_view k : keys) {
    const uint16_t n = map->owner(cluster::key_slot(k));
    if (n != SlotMap::kNone) parts[n].push_back(k);
  }
  std::atomic<size_t> total{0};
  std::vector<std::exception_ptr> errors(parts.size());
  cc.pool().run(parts.size(), [&](size_t i) {
    if (parts[i].empty()) return;
    try {
      total += node_unpin(*cc.node(map->nodes()[i]), parts[i]);
    } catch (const Error& e) {
      const bool no_lease = e.kind() == Error::Kind::kConnection ||
                            (e.kind() == Error::Kind::kServer && parse_redirect(e.what()));
      if (!no_lease) errors[i] = std::current_exception();
    } catch (...) {
      errors[i] = std::current_exception();
    }
  });
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  return total;
}

std::vector<std::string> routed_scan(ClusterCore& cc, std::string_view pattern) {
  if (!cc.cluster()) return node_scan(cc.only(), pattern);
  const std::shared_ptr<const SlotMap> map = cc.map();
  std::vector<std::vector<std::string>> parts(map->nodes().size());
  std::vector<std::exception_ptr> errors(parts.size());
  cc.pool().run(parts.size(), [&](size_t i) {
    try {
      parts[i] = node_scan(*cc.node(map->nodes()[i]), pattern);
    } catch (...) {
      errors[i] = std::current_exception();
    }
  });
  for (const auto& e : errors)
    if (e) std::rethrow_exception(e);
  std::vector<std::string> out;
  for (auto& p : parts)
    for (auto& k : p) out.push_back(std::move(k));
  return out;
}

}  // namespace stratakv::detail
