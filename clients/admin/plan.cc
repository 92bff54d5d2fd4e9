// clients/admin/plan.cc - topology changes as pure functions. See plan.h.
#include "clients/admin/plan.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <tuple>

namespace admin {

namespace {

std::string address_of(const cluster::NodeAddress& n) {
  return n.host + ":" + std::to_string(n.port);
}

bool names(const cluster::NodeAddress& n, std::string_view which) {
  return n.id == which || address_of(n) == which;
}

// The record to change: one version higher, the finished migrations pruned.
cluster::Topology next(const cluster::Topology& t) {
  cluster::Topology n = t;
  n.version = t.version + 1;
  cluster::prune_migrations(n);
  return n;
}

std::string short_id(const std::string& id) { return id.substr(0, 8); }

// The active migration holding a slot of [first, last]; nullptr when none.
const cluster::Migration* active_migration_over(const cluster::Topology& t, uint16_t first,
                                                uint16_t last) {
  for (const cluster::Migration& m : t.migrations) {
    if (!cluster::is_active(m)) continue;
    for (const cluster::SlotRange& r : m.slots)
      if (r.first <= last && first <= r.last) return &m;
  }
  return nullptr;
}

}  // namespace

const cluster::NodeAddress& find_node(const std::vector<cluster::NodeAddress>& nodes,
                                      std::string_view which) {
  for (const cluster::NodeAddress& n : nodes)
    if (names(n, which)) return n;
  throw PlanError("no node " + std::string(which) + " (give a node id or host:port)");
}

size_t find_shard(const cluster::Topology& t, std::string_view which) {
  for (size_t i = 0; i < t.shards.size(); ++i) {
    const cluster::Shard& s = t.shards[i];
    if (s.id == which) return i;
    std::vector<std::string> members = s.replicas;
    if (!s.primary.empty()) members.push_back(s.primary);
    for (const std::string& id : members)
      if (const cluster::NodeAddress* n = t.node(id); n != nullptr && names(*n, which)) return i;
  }
  throw PlanError("no shard " + std::string(which) +
                  " (give a shard id, or the id or host:port of one of its nodes)");
}

cluster::SlotRange parse_range(std::string_view text) {
  auto number = [&](std::string_view s) {
    unsigned v = 0;
    auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
    if (ec != std::errc() || p != s.data() + s.size() || s.empty() || v >= cluster::kSlots)
      throw PlanError("invalid slot range '" + std::string(text) + "' (0-16383, as first-last)");
    return static_cast<uint16_t>(v);
  };
  const size_t dash = text.find('-');
  if (dash == std::string_view::npos) {
    const uint16_t s = number(text);
    return {s, s};
  }
  const cluster::SlotRange r{number(text.substr(0, dash)), number(text.substr(dash + 1))};
  if (r.first > r.last) throw PlanError("invalid slot range '" + std::string(text) + "'");
  return r;
}

cluster::Topology create(std::vector<cluster::NodeAddress> nodes, size_t shards, size_t replicas,
                         const std::string& name) {
  if (shards == 0 || shards > cluster::kSlots)
    throw PlanError("the number of shards must be 1 to 16384");
  const size_t needed = shards * (1 + replicas);
  if (nodes.size() < needed)
    throw PlanError(std::to_string(shards) + " shards with " + std::to_string(replicas) +
                    " replicas each need " + std::to_string(needed) + " nodes; " +
                    std::to_string(nodes.size()) + " are registered");
  std::sort(nodes.begin(), nodes.end(), [](const auto& a, const auto& b) {
    return a.host != b.host ? a.host < b.host : a.port < b.port;
  });
  nodes.resize(needed);
  cluster::Topology t;
  t.version = 1;
  t.name = name;
  t.nodes = nodes;
  const std::vector<cluster::SlotRange> ranges = cluster::split_evenly(shards);
  for (size_t i = 0; i < shards; ++i) {
    cluster::Shard s;
    s.id = cluster::new_id();
    s.slots = {ranges[i]};
    s.primary = nodes[i].id;
    s.primary_epoch = 1;
    t.shards.push_back(std::move(s));
  }
  // Replicas: the rest, round-robin over the shards, preferring another host than the primary's.
  std::vector<cluster::NodeAddress> rest(nodes.begin() + static_cast<long>(shards), nodes.end());
  for (size_t round = 0; round < replicas; ++round) {
    for (size_t i = 0; i < shards; ++i) {
      const std::string& primary_host = nodes[i].host_id;
      auto pick = std::find_if(rest.begin(), rest.end(),
                               [&](const auto& n) { return n.host_id != primary_host; });
      if (pick == rest.end()) pick = rest.begin();
      t.shards[i].replicas.push_back(pick->id);
      rest.erase(pick);
    }
  }
  cluster::validate(t);
  return t;
}

cluster::Topology add_node(const cluster::Topology& t, const cluster::NodeAddress& node,
                           std::string_view replica_of) {
  if (t.node(node.id) != nullptr)
    throw PlanError("node " + address_of(node) + " is in the topology already");
  cluster::Topology n = next(t);
  n.nodes.push_back(node);
  if (replica_of.empty()) {
    cluster::Shard s;
    s.id = cluster::new_id();
    s.primary = node.id;
    s.primary_epoch = 1;
    n.shards.push_back(std::move(s));
  } else {
    n.shards[find_shard(t, replica_of)].replicas.push_back(node.id);
  }
  cluster::validate(n);
  return n;
}

cluster::Topology remove_node(const cluster::Topology& t, std::string_view which) {
  const cluster::NodeAddress& node = find_node(t.nodes, which);
  const std::string id = node.id;
  cluster::Topology n = next(t);
  for (size_t i = 0; i < n.shards.size(); ++i) {
    cluster::Shard& s = n.shards[i];
    if (s.primary == id) {
      if (!s.slots.empty())
        throw PlanError("node " + address_of(node) +
                        " is the primary of a shard that serves slots: move them first");
      if (!s.replicas.empty())
        throw PlanError("node " + address_of(node) + " is the primary of a shard with replicas");
      for (const cluster::Migration& m : n.migrations)
        if (cluster::is_active(m) && (m.source_shard == s.id || m.target_shard == s.id))
          throw PlanError("node " + address_of(node) + "'s shard is in migration " +
                          short_id(m.id) + ", still running: wait for it or cancel it");
      // Finished migrations of the shard go with it (the record names existing shards only).
      const std::string shard_id = s.id;
      std::erase_if(n.migrations, [&](const cluster::Migration& m) {
        return m.source_shard == shard_id || m.target_shard == shard_id;
      });
      n.shards.erase(n.shards.begin() + static_cast<long>(i));
      break;
    }
    std::erase(s.replicas, id);
  }
  std::erase_if(n.nodes, [&](const cluster::NodeAddress& a) { return a.id == id; });
  cluster::validate(n);
  return n;
}

cluster::Topology assign_slots(const cluster::Topology& t, uint16_t first, uint16_t last,
                               std::string_view to) {
  if (first > last || last >= cluster::kSlots) throw PlanError("invalid slot range");
  const size_t target = find_shard(t, to);
  if (const cluster::Migration* m = active_migration_over(t, first, last))
    throw PlanError("slots " + slots_text({{first, last}}) + " are in migration " +
                    short_id(m->id) + ", still running: wait for it or cancel it");
  cluster::Topology n = next(t);
  for (cluster::Shard& s : n.shards) cluster::remove_slots(s.slots, {first, last});
  cluster::add_slots(n.shards[target].slots, {first, last});
  cluster::validate(n);
  return n;
}



std::string describe_shard(const cluster::Topology& t, const cluster::Shard& shard) {
  const cluster::NodeAddress* p = shard.primary.empty() ? nullptr : t.node(shard.primary);
  return "shard " + short_id(shard.id) + " (" + (p ? address_of(*p) : std::string("no primary")) +
         ")";
}

cluster::Topology start_migration(const cluster::Topology& t, std::string_view from,
                                  std::string_view to, std::vector<cluster::SlotRange> slots,
                                  const std::string& id) {
  const cluster::Shard& source = t.shards[find_shard(t, from)];
  const cluster::Shard& target = t.shards[find_shard(t, to)];
  if (source.id == target.id)
    throw PlanError(std::string(from) + " and " + std::string(to) + " are the same " +
                    describe_shard(t, source) + ": nothing to move");
  if (slots.empty()) throw PlanError("no slots to move");
  for (const cluster::SlotRange& r : slots)
    if (r.first > r.last || r.last >= cluster::kSlots) throw PlanError("invalid slot range");
  cluster::normalize_slots(slots);
  if (target.primary.empty())
    throw PlanError(describe_shard(t, target) + " has no primary to take the slots");
  if (source.primary.empty())
    throw PlanError(describe_shard(t, source) + " has no primary to send its slots");
  // Every slot must be the source's now: name the first that is not, and its owner.
  const cluster::SlotMap map(t);
  for (const cluster::SlotRange& r : slots)
    for (uint32_t slot = r.first; slot <= r.last; ++slot) {
      const uint16_t owner = map.shard_of(static_cast<uint16_t>(slot));
      if (owner != cluster::SlotMap::kNoShard && t.shards[owner].id == source.id) continue;
      throw PlanError("slot " + std::to_string(slot) + " is not served by " +
                      describe_shard(t, source) + ": " +
                      (owner == cluster::SlotMap::kNoShard
                           ? std::string("no shard serves it (assign-slots gives it one)")
                           : describe_shard(t, t.shards[owner]) + " does"));
    }
  for (const cluster::SlotRange& r : slots)
    if (const cluster::Migration* m = active_migration_over(t, r.first, r.last))
      throw PlanError("slots " + slots_text({r}) + " overlap migration " + short_id(m->id) + " (" +
                      slots_text(m->slots) + ", " + m->state +
                      "): wait for it or cancel it (cancel-migration " + short_id(m->id) + ")");
  cluster::Topology n = next(t);
  n.migrations.push_back({id, std::move(slots), source.id, target.id, "streaming"});
  cluster::validate(n);
  return n;
}

size_t find_migration(const cluster::Topology& t, std::string_view which) {
  std::vector<size_t> found;
  for (size_t i = 0; i < t.migrations.size(); ++i) {
    const cluster::Migration& m = t.migrations[i];
    if (which.empty() ? cluster::is_active(m) : m.id.rfind(which, 0) == 0) found.push_back(i);
    if (!which.empty() && m.id == which) return i;  // an exact id wins over prefixes
  }
  if (which.empty()) {
    if (found.empty()) throw PlanError("no migration is running");
    if (found.size() > 1)
      throw PlanError(std::to_string(found.size()) +
                      " migrations are running: name one (stratakv-admin status lists them)");
  } else {
    if (found.empty()) throw PlanError("no migration " + std::string(which));
    if (found.size() > 1)
      throw PlanError("several migrations start with " + std::string(which) + ": give more of the id");
  }
  return found[0];
}

cluster::Topology cancel_migration(const cluster::Topology& t, std::string_view which) {
  const size_t i = find_migration(t, which);
  const cluster::Migration& m = t.migrations[i];
  if (!cluster::is_active(m))
    throw PlanError("migration " + short_id(m.id) + " is " + m.state + " already: nothing to cancel");
  cluster::Topology n = t;  // not next(): pruning first would move the index
  n.version = t.version + 1;
  n.migrations[i].state = "cancelled";
  cluster::prune_migrations(n);
  cluster::validate(n);
  return n;
}

std::vector<Move> plan_rebalance(const cluster::Topology& t,
                                 const std::vector<std::string>& exclude) {
  for (const cluster::Migration& m : t.migrations)
    if (cluster::is_active(m))
      throw PlanError("migration " + short_id(m.id) + " (" + slots_text(m.slots) + ", " + m.state +
                      ") is running: wait for it or cancel it first");
  const size_t count = t.shards.size();
  std::vector<bool> excluded(count, false);
  for (const std::string& e : exclude) excluded[find_shard(t, e)] = true;

  // Who takes part: shards with a primary. Sharing ones get a share; excluded ones give all.
  std::vector<std::vector<cluster::SlotRange>> work(count);
  std::vector<size_t> sharing;
  size_t pool = 0;
  for (size_t i = 0; i < count; ++i) {
    const cluster::Shard& s = t.shards[i];
    work[i] = s.slots;
    cluster::normalize_slots(work[i]);
    if (s.primary.empty()) {
      if (excluded[i] && !s.slots.empty())
        throw PlanError(describe_shard(t, s) + " has no primary: its slots cannot move");
      continue;
    }
    pool += cluster::count_slots(s.slots);
    if (!excluded[i]) sharing.push_back(i);
  }
  if (sharing.empty()) throw PlanError("no shard with a primary is left to serve the slots");

  // Shares: floor(pool / n) each; the remainder to those holding the most now (then by order).
  std::vector<long> want(count, 0);  // slots to gain (> 0) or give (< 0)
  std::vector<size_t> by_size = sharing;
  std::stable_sort(by_size.begin(), by_size.end(), [&](size_t a, size_t b) {
    return cluster::count_slots(work[a]) > cluster::count_slots(work[b]);
  });
  const size_t base = pool / sharing.size(), extra = pool % sharing.size();
  for (size_t k = 0; k < by_size.size(); ++k)
    want[by_size[k]] = static_cast<long>(base + (k < extra ? 1 : 0));
  for (size_t i = 0; i < count; ++i)
    if (!t.shards[i].primary.empty())
      want[i] -= static_cast<long>(cluster::count_slots(work[i]));
    else
      want[i] = 0;

  auto touches = [](const std::vector<cluster::SlotRange>& ranges, uint32_t first, uint32_t last) {
    int n = 0;
    for (const cluster::SlotRange& r : ranges) {
      if (first > 0 && r.last == first - 1) ++n;
      if (r.first == last + 1) ++n;
    }
    return n;
  };

  std::vector<Move> moves;
  std::map<std::pair<size_t, size_t>, size_t> move_of;  // (donor, receiver) -> index in moves
  for (size_t r = 0; r < count; ++r) {
    while (want[r] > 0) {
      // The best chunk over every donor: the edge of a range, or a whole range.
      // Key: (touches the receiver + whole range, size, touches another donor's slots, then the
      // first donor and the lowest slot).
      std::tuple<int, long, int, long, long> best_key{-1, 0, 0, 0, 0};
      size_t best_donor = count;
      cluster::SlotRange best_chunk{};
      for (size_t d = 0; d < count; ++d) {
        if (want[d] >= 0) continue;
        for (const cluster::SlotRange& range : work[d]) {
          const long size = static_cast<long>(range.last) - range.first + 1;
          const long take = std::min({want[r], -want[d], size});
          const cluster::SlotRange chunks[2] = {
              {range.first, static_cast<uint16_t>(range.first + take - 1)},
              {static_cast<uint16_t>(range.last - take + 1), range.last}};
          for (const cluster::SlotRange& c : chunks) {
            int other = 0;  // the chunk touches slots another donor still gives: keep them close
            for (size_t o = 0; o < count; ++o)
              if (o != d && want[o] < 0 && touches(work[o], c.first, c.last) > 0) other = 1;
            const std::tuple<int, long, int, long, long> key{
                touches(work[r], c.first, c.last) + (take == size ? 1 : 0), take, other,
                -static_cast<long>(d), -static_cast<long>(c.first)};
            if (key > best_key) {
              best_key = key;
              best_donor = d;
              best_chunk = c;
            }
          }
        }
      }
      if (best_donor == count) break;  // cannot happen: gains and gifts balance
      const long take = static_cast<long>(best_chunk.last) - best_chunk.first + 1;
      cluster::remove_slots(work[best_donor], best_chunk);
      cluster::add_slots(work[r], best_chunk);
      want[best_donor] += take;
      want[r] -= take;
      auto [it, fresh] = move_of.try_emplace({best_donor, r}, moves.size());
      if (fresh) moves.push_back({t.shards[best_donor].id, t.shards[r].id, {}});
      cluster::add_slots(moves[it->second].slots, best_chunk);
    }
  }
  return moves;
}

}  // namespace admin
