// cluster_batch.h - one call's keys over the nodes that serve them: the keys are grouped by
// node (with one map, cluster_core.h), each node gets its part in one operation (one KV.MPUT,
// one KV.MGET, one pipeline), the parts run at once on the pool, and each result lands at its
// key's index. Then, per key:
//   -MOVED       the map learns the slot's owner (and is refreshed); the key is retried;
//   -ASK         the key is sent once to the named node after ASKING (the map stays);
//   a lost node  (Error kConnection) the map is refreshed and the node's keys are retried;
// for at most Options::cluster_max_attempts rounds. A key still redirected after the last round
// keeps its -MOVED as its error; a node still unreachable throws its Error(kConnection). What
// fails a part as a whole otherwise (kServer, kProtocol) is thrown once every part is done
// (the parts use the caller's memory: nothing returns while one runs).
//
// Reads (`read`, with Options::read_from other than kPrimary) make one round more, first: each
// key goes to the node ReadPolicy chooses for its slot (a replica, or with kNearest perhaps the
// primary). A key a replica misses, answers with an error (-MOVED: the map learns it and is
// refreshed), or cannot answer (a lost replica: its pool is forgotten, the map refreshed, the
// replica skipped for a while) is asked of its primary in the rounds that follow, as above.
// Every read part's wall time is a sample of its node's round trip (kNearest).
//
// A one-server client runs the operation on its node, on the caller's thread, unchanged.
#pragma once

#include <algorithm>
#include <chrono>
#include <exception>
#include <numeric>
#include <span>
#include <vector>

#include "cluster/slot.h"
#include "cluster_core.h"

namespace stratakv::detail {

/// `op(ClientCore& node, std::span<const Item> part, std::span<Result> part_out, bool asking)`
/// runs a part on one node; Item has a `key`. out.size() == items.size(). `read`: the op only
/// reads (it may go to replicas, see above).
template <class Item, class Op>
void route_keys(ClusterCore& cc, std::span<const Item> items, std::span<Result> out, const Op& op,
                bool read = false) {
  if (!cc.cluster()) return op(cc.only(), items, out, false);
  struct Part {
    size_t node = 0;  // index in map->nodes(), or nodes().size() + index in map->replicas()
    std::vector<size_t> idx;  // keys, in the caller's order
    std::exception_ptr error;
    bool lost = false;  // the error is kConnection
  };
  std::vector<uint16_t> slots(items.size());
  for (size_t i = 0; i < items.size(); ++i) slots[i] = cluster::key_slot(items[i].key);
  std::vector<size_t> pending(items.size());
  std::iota(pending.begin(), pending.end(), size_t{0});
  const int attempts = cc.options().cluster_max_attempts;
  ReadPolicy& reads = cc.reads();
  // Round 0, the replica round, counts against no limit.
  for (int attempt = read && reads.uses_replicas() ? 0 : 1; !pending.empty(); ++attempt) {
    const bool last = attempt >= attempts;
    const bool replica_round = attempt == 0;
    const std::shared_ptr<const SlotMap> map = cc.map();
    const size_t primaries = map->nodes().size();
    std::vector<Part> parts;
    std::vector<int> part_of(primaries + map->replicas().size(), -1);
    for (size_t i : pending) {
      const uint16_t owner = map->owner(slots[i]);
      if (owner == SlotMap::kNone) {
        out[i] = {Result::Status::kError, 0, "CLUSTERDOWN Hash slot not served"};
        continue;
      }
      size_t n = owner;
      if (replica_round) {
        const int r = reads.choose(*map, slots[i]);
        if (r != ReadPolicy::kPrimary) n = primaries + static_cast<size_t>(r);
      }
      if (part_of[n] < 0) part_of[n] = static_cast<int>(parts.size()), parts.push_back({n});
      parts[static_cast<size_t>(part_of[n])].idx.push_back(i);
    }
    auto address_of = [&](const Part& part) -> const NodeAddress& {
      return part.node < primaries ? map->nodes()[part.node] : map->replicas()[part.node - primaries];
    };
    cc.pool().run(parts.size(), [&](size_t p) {
      Part& part = parts[p];
      try {
        const NodeAddress& a = address_of(part);
        const std::shared_ptr<ClientCore> node = part.node < primaries ? cc.node(a) : cc.replica(a);
        const auto t0 = std::chrono::steady_clock::now();
        if (part.idx.size() == items.size()) {
          op(*node, items, out, false);  // no copies
        } else {
          std::vector<Item> sub;
          sub.reserve(part.idx.size());
          for (size_t i : part.idx) sub.push_back(items[i]);
          std::vector<Result> sub_out(sub.size());
          op(*node, std::span<const Item>(sub), std::span<Result>(sub_out), false);
          for (size_t k = 0; k < sub.size(); ++k) out[part.idx[k]] = std::move(sub_out[k]);
        }
        if (read) reads.record(a.address(), std::chrono::steady_clock::now() - t0);
      } catch (const Error& e) {
        part.error = std::current_exception();
        part.lost = e.kind() == Error::Kind::kConnection;
      } catch (...) {
        part.error = std::current_exception();
      }
    });
    std::vector<size_t> again;
    std::exception_ptr fatal;
    for (Part& part : parts) {
      const NodeAddress& from = address_of(part);
      if (part.node >= primaries) {  // a replica: what it did not answer goes to the primary
        std::vector<Redirect> moved;
        if (part.error) {
          if (part.lost) {
            reads.failed(from.address());
            cc.node_failed(from, map, true);
          }
          again.insert(again.end(), part.idx.begin(), part.idx.end());
          continue;
        }
        for (size_t i : part.idx) {
          if (out[i].status == Result::Status::kOk) continue;
          again.push_back(i);  // a miss (the write may not have reached it yet), or an error
          if (out[i].status != Result::Status::kError) continue;
          std::optional<Redirect> r = parse_redirect(out[i].error);
          if (r && !r->ask) {
            if (r->host.empty()) r->host = from.host;
            moved.push_back(*r);
          }
        }
        cc.learn_moved(moved, from, map);
        continue;
      }
      if (part.error) {
        if (part.lost && !last) {
          again.insert(again.end(), part.idx.begin(), part.idx.end());
          cc.node_failed(from, map);
        } else if (!fatal) {
          fatal = part.error;
        }
        continue;
      }
      std::vector<Redirect> moved;
      for (size_t i : part.idx) {
        if (out[i].status != Result::Status::kError) continue;
        std::optional<Redirect> r = parse_redirect(out[i].error);
        if (!r) continue;
        if (r->host.empty()) r->host = from.host;
        if (!r->ask) {
          moved.push_back(*r);
          if (!last) again.push_back(i);
          continue;
        }
        try {  // -ASK: this key, once, on the node named, after ASKING
          op(*cc.node({r->host, r->port, {}}), items.subspan(i, 1), out.subspan(i, 1), true);
        } catch (const Error& e) {
          if (e.kind() != Error::Kind::kServer && !fatal) fatal = std::current_exception();
          else out[i] = {Result::Status::kError, 0, e.what()};
        }
      }
      cc.learn_moved(moved, from, map);
    }
    if (fatal) std::rethrow_exception(fatal);
    std::sort(again.begin(), again.end());  // the caller's order (a key may come twice)
    pending = std::move(again);
  }
}

}  // namespace stratakv::detail
