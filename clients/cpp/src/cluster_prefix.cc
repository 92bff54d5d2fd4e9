// cluster_prefix.cc - prefix_match over the nodes of a cluster (docs/cluster.md, "Batches of the
// fast path route each key"): each node gets only its own keys of the chain, in chain order,
// in one KV.PREFIX (with PIN, on its lease connection), all nodes at once. Node n answers how
// many of its keys lead its part of the chain: its first absent key, at chain index a_n, ends
// the whole chain's run, which is min(a_n) (the chain's length when every node has all of its
// keys). So leases are taken on every node involved; a node may also lease present keys past
// the run (they end at their deadline, or with unpin).
//
// A node that answers [count, index, -MOVED ...] does not serve the key at `index` any more:
// what follows it on that node is unknown. When that key comes before the run's end, the map
// learns the new owner and the lookup runs again (at most Options::cluster_max_attempts
// times); after the last attempt, or for -ASK, the run ends there (a shorter hit is safe: the
// caller recomputes more). Against servers without KV.PREFIX: EXISTS until the first miss.
//
// Lookups without a pin follow Options::read_from: a node's part goes first to the node
// ReadPolicy chooses (a replica of every slot of the part); from the first key that node does
// not have (a miss: the write may not have reached it; a key it does not serve), the rest of
// the part is asked of the primary, whose answer continues the count. A replica that cannot
// answer leaves the whole part to the primary. Pinning lookups always go to the primary: the
// lease must be where evictions are decided.
#include <algorithm>
#include <chrono>
#include <exception>

#include "cluster/slot.h"
#include "node_ops.h"
#include "routed_ops.h"

namespace stratakv::detail {
namespace {

// A node without KV.PREFIX (a plain Redis): its leading present keys, by EXISTS; no lease.
PrefixReply exists_prefix(ClientCore& node, std::span<const std::string_view> keys) {
  std::vector<KeyItem> items;
  for (std::string_view k : keys) items.push_back({k});
  std::vector<Result> out(items.size());
  node_exists(node, items, out);
  PrefixReply reply;
  while (reply.count < out.size() && out[reply.count].ok()) ++reply.count;
  if (reply.count < out.size() && out[reply.count].status == Result::Status::kError) {
    if (!parse_redirect(out[reply.count].error)) throw Error(Error::Kind::kServer, out[reply.count].error);
    reply.left_at = reply.count;
    reply.redirect = out[reply.count].error;
  }
  return reply;
}

PrefixReply node_chain(ClientCore& node, std::span<const std::string_view> keys,
                       std::optional<uint64_t> pin_ms) {
  PrefixReply reply = node_prefix(node, keys, pin_ms);
  return reply.supported ? reply : exists_prefix(node, keys);
}

// An unpinned part's run on the replica ReadPolicy chooses: nullopt when the choice is the
// primary, or the replica does not hold every slot of the part, or cannot answer (then it is
// skipped for a while and the map refreshed). Else the replica's reply, which the caller
// continues on the primary when it stops short of the part.
std::optional<PrefixReply> replica_chain(ClusterCore& cc, const std::shared_ptr<const SlotMap>& map,
                                         std::span<const uint16_t> slots,
                                         std::span<const std::string_view> keys) {
  ReadPolicy& reads = cc.reads();
  const int r = reads.choose(*map, slots.front());
  if (r == ReadPolicy::kPrimary) return std::nullopt;
  for (uint16_t slot : slots) {
    const std::span<const uint16_t> of = map->replicas_of(slot);
    if (std::find(of.begin(), of.end(), static_cast<uint16_t>(r)) == of.end()) return std::nullopt;
  }
  const NodeAddress& a = map->replicas()[static_cast<size_t>(r)];
  try {
    const auto t0 = std::chrono::steady_clock::now();
    PrefixReply reply = node_chain(*cc.replica(a), keys, std::nullopt);
    reads.record(a.address(), std::chrono::steady_clock::now() - t0);
    if (reply.left_at) reply.count = *reply.left_at;  // from the key it does not serve: the primary
    reply.left_at.reset();
    reply.redirect.clear();
    return reply;
  } catch (const Error& e) {
    if (e.kind() == Error::Kind::kConnection) {
      reads.failed(a.address());
      cc.node_failed(a, map, true);
      return std::nullopt;
    }
    if (e.kind() == Error::Kind::kServer) return std::nullopt;
    throw;
  }
}

}  // namespace

size_t routed_prefix(ClusterCore& cc, std::span<const std::string_view> keys, std::optional<uint64_t> pin_ms) {
  if (keys.empty()) return 0;
  if (!cc.cluster()) {
    const PrefixReply r = node_chain(cc.only(), keys, pin_ms);
    if (r.left_at) throw Error(Error::Kind::kServer, r.redirect);  // not a cluster client
    return r.count;
  }
  struct Part {
    uint16_t node = 0;
    std::vector<size_t> idx;  // chain indices, in order
    std::vector<std::string_view> keys;
    std::vector<uint16_t> slots;
    PrefixReply reply;
    std::exception_ptr error;
    bool lost = false;
  };
  std::vector<uint16_t> slots(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) slots[i] = cluster::key_slot(keys[i]);
  const int attempts = cc.options().cluster_max_attempts;
  for (int attempt = 1;; ++attempt) {
    const bool last = attempt >= attempts;
    const std::shared_ptr<const SlotMap> map = cc.map();
    std::vector<Part> parts;
    std::vector<int> part_of(map->nodes().size(), -1);
    size_t run = keys.size();
    for (size_t i = 0; i < keys.size(); ++i) {
      const uint16_t n = map->owner(slots[i]);
      if (n == SlotMap::kNone) {  // no node serves it: the run ends there
        run = i;
        break;
      }
      if (part_of[n] < 0) part_of[n] = static_cast<int>(parts.size()), parts.push_back({n});
      Part& p = parts[static_cast<size_t>(part_of[n])];
      p.idx.push_back(i);
      p.keys.push_back(keys[i]);
      p.slots.push_back(slots[i]);
    }
    cc.pool().run(parts.size(), [&](size_t k) {
      Part& p = parts[k];
      try {
        size_t have = 0;  // leading keys of the part a replica has
        if (!pin_ms && cc.reads().uses_replicas()) {
          if (std::optional<PrefixReply> r = replica_chain(cc, map, p.slots, p.keys)) {
            if (r->count == p.keys.size()) {  // the replica has the whole part
              p.reply = *r;
              return;
            }
            have = r->count;
          }
        }
        const std::span<const std::string_view> rest = std::span<const std::string_view>(p.keys).subspan(have);
        p.reply = node_chain(*cc.node(map->nodes()[p.node]), rest, pin_ms);
        p.reply.count += have;
        if (p.reply.left_at) *p.reply.left_at += have;
      } catch (const Error& e) {
        p.error = std::current_exception();
        p.lost = e.kind() == Error::Kind::kConnection;
      } catch (...) {
        p.error = std::current_exception();
      }
    });
    // Join: the first absent key of any node ends the run; a key a node no longer serves
    // (unknown) before that means another round.
    size_t unknown = keys.size();
    const Part* unknown_from = nullptr;
    bool lost = false;
    std::vector<std::pair<Redirect, const NodeAddress*>> moved;  // every node's news
    for (const Part& p : parts) {
      if (p.error) {
        if (!p.lost || last) std::rethrow_exception(p.error);
        cc.node_failed(map->nodes()[p.node], map);
        lost = true;
        continue;
      }
      if (p.reply.left_at) {
        const size_t at = p.idx[*p.reply.left_at];
        if (at < unknown) unknown = at, unknown_from = &p;
        std::optional<Redirect> r = parse_redirect(p.reply.redirect);
        if (r && !r->ask) moved.push_back({*r, &map->nodes()[p.node]});
      } else if (p.reply.count < p.idx.size()) {
        run = std::min(run, p.idx[p.reply.count]);
      }
    }
    if (lost) continue;
    if (unknown >= run) return run;
    std::optional<Redirect> r = parse_redirect(unknown_from->reply.redirect);
    if (last || !r || r->ask) return unknown;
    for (auto& [m, from] : moved) {
      if (m.host.empty()) m.host = from->host;
      cc.learn_moved({&m, 1}, *from, map);
    }
  }
}

}  // namespace stratakv::detail
