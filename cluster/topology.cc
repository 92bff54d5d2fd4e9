// cluster/topology.cc - the topology's lookups, validation, SlotMap, split_evenly, new_id, and
// the slot-range and migration helpers (move_slots, prune_migrations). The JSON codec is in
// topology_json.cc.
#include "cluster/topology.h"

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <utility>

namespace cluster {
namespace {

bool is_id(std::string_view id) {
  return id.size() == 40 && std::all_of(id.begin(), id.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

[[noreturn]] void fail(const std::string& what) { throw TopologyError("topology: " + what); }

std::string range_text(const SlotRange& r) {
  return "[" + std::to_string(r.first) + ", " + std::to_string(r.last) + "]";
}

// Each range in bounds and first <= last; the list sorted and disjoint. `where` names the owner.
void check_ranges(const std::vector<SlotRange>& ranges, const std::string& where) {
  for (size_t i = 0; i < ranges.size(); ++i) {
    const SlotRange& r = ranges[i];
    if (r.first > r.last || r.last >= kSlots)
      fail(where + ": slot range " + range_text(r) + " is not within [0, 16383] with first <= last");
    if (i > 0 && r.first <= ranges[i - 1].last)
      fail(where + ": slot range " + range_text(r) + " is not after " + range_text(ranges[i - 1]) +
           " (ranges must be sorted and disjoint)");
  }
}

bool is_active_migration(const std::string& state) {
  return state == "streaming" || state == "handover";
}

}  // namespace

const NodeAddress* Topology::node(std::string_view id) const {
  for (const NodeAddress& n : nodes)
    if (n.id == id) return &n;
  return nullptr;
}

const Shard* Topology::shard(std::string_view id) const {
  for (const Shard& s : shards)
    if (s.id == id) return &s;
  return nullptr;
}

const Shard* Topology::shard_of_node(std::string_view node_id) const {
  for (const Shard& s : shards) {
    if (s.primary == node_id) return &s;
    if (std::find(s.replicas.begin(), s.replicas.end(), node_id) != s.replicas.end()) return &s;
  }
  return nullptr;
}

void validate(const Topology& t) {
  std::set<std::string_view> node_ids;
  for (const NodeAddress& n : t.nodes) {
    if (!is_id(n.id)) fail("node id '" + n.id + "' is not 40 lowercase hex characters");
    if (!node_ids.insert(n.id).second) fail("node id " + n.id + " appears twice");
  }
  if (t.shards.size() > kSlots) fail("more shards than slots");

  std::set<std::string_view> shard_ids;
  std::set<std::string_view> placed;  // nodes already named by some shard
  std::vector<int32_t> owner(kSlots, -1);  // slot -> shard index
  for (size_t si = 0; si < t.shards.size(); ++si) {
    const Shard& s = t.shards[si];
    if (!is_id(s.id)) fail("shard id '" + s.id + "' is not 40 lowercase hex characters");
    if (!shard_ids.insert(s.id).second) fail("shard id " + s.id + " appears twice");
    const std::string where = "shard " + s.id;
    std::vector<std::string_view> members;
    if (!s.primary.empty()) members.push_back(s.primary);
    members.insert(members.end(), s.replicas.begin(), s.replicas.end());
    for (std::string_view m : members) {
      if (!node_ids.count(m)) fail(where + " names node " + std::string(m) + ", which is not in nodes");
      if (!placed.insert(m).second)
        fail("node " + std::string(m) + " is named more than once (one shard, one role per node)");
    }
    check_ranges(s.slots, where);
    for (const SlotRange& r : s.slots)
      for (uint32_t slot = r.first; slot <= r.last; ++slot) {
        if (owner[slot] >= 0)
          fail("slot " + std::to_string(slot) + " is served by shard " + t.shards[owner[slot]].id +
               " and by shard " + s.id);
        owner[slot] = static_cast<int32_t>(si);
      }
  }

  std::set<std::string_view> migration_ids;
  std::vector<bool> migrating(kSlots, false);
  for (const Migration& m : t.migrations) {
    const std::string where = "migration '" + m.id + "'";
    if (m.id.empty()) fail("a migration has an empty id");
    if (!migration_ids.insert(m.id).second) fail(where + " appears twice");
    if (m.state != "streaming" && m.state != "handover" && m.state != "done" &&
        m.state != "failed" && m.state != "cancelled")
      fail(where + ": unknown state '" + m.state + "'");
    const Shard* source = t.shard(m.source_shard);
    if (!source) fail(where + ": source shard '" + m.source_shard + "' is not in shards");
    if (!t.shard(m.target_shard)) fail(where + ": target shard '" + m.target_shard + "' is not in shards");
    if (m.source_shard == m.target_shard) fail(where + ": source and target are the same shard");
    if (m.slots.empty()) fail(where + ": no slots");
    check_ranges(m.slots, where);
    if (!is_active_migration(m.state)) continue;
    // While a migration runs the source still owns its slots, and a slot moves once at a time.
    const auto source_index = static_cast<int32_t>(source - t.shards.data());
    for (const SlotRange& r : m.slots)
      for (uint32_t slot = r.first; slot <= r.last; ++slot) {
        if (owner[slot] != source_index)
          fail(where + ": slot " + std::to_string(slot) + " is not served by its source shard");
        if (migrating[slot]) fail(where + ": slot " + std::to_string(slot) + " is in two running migrations");
        migrating[slot] = true;
      }
  }
}

SlotMap::SlotMap(const Topology& topology) {
  shard_of_.fill(kNoShard);
  if (topology.shards.size() >= kNoShard) throw TopologyError("topology: too many shards for a SlotMap");
  for (size_t i = 0; i < topology.shards.size(); ++i)
    for (const SlotRange& r : topology.shards[i].slots) {
      if (r.first > r.last || r.last >= kSlots) throw TopologyError("topology: slot range out of bounds");
      std::fill(shard_of_.begin() + r.first, shard_of_.begin() + r.last + 1, static_cast<uint16_t>(i));
    }
}

size_t SlotMap::assigned() const {
  return static_cast<size_t>(
      std::count_if(shard_of_.begin(), shard_of_.end(), [](uint16_t s) { return s != kNoShard; }));
}

std::vector<SlotRange> split_evenly(size_t n) {
  if (n < 1 || n > kSlots)
    throw std::invalid_argument("split_evenly: n must be in [1, 16384], not " + std::to_string(n));
  std::vector<SlotRange> ranges;
  ranges.reserve(n);
  const size_t base = kSlots / n, extra = kSlots % n;
  size_t first = 0;
  for (size_t i = 0; i < n; ++i) {
    const size_t size = base + (i < extra ? 1 : 0);
    ranges.push_back({static_cast<uint16_t>(first), static_cast<uint16_t>(first + size - 1)});
    first += size;
  }
  return ranges;
}

std::string new_id() {
  static constexpr char kHex[] = "0123456789abcdef";
  std::random_device rd;
  std::string id(40, '0');
  for (size_t i = 0; i < id.size(); i += 8) {
    uint32_t bits = rd();
    for (size_t j = 0; j < 8; ++j, bits >>= 4) id[i + j] = kHex[bits & 15];
  }
  return id;
}

bool is_active(const Migration& m) { return is_active_migration(m.state); }

void normalize_slots(std::vector<SlotRange>& ranges) {
  std::sort(ranges.begin(), ranges.end(),
            [](const SlotRange& a, const SlotRange& b) { return a.first < b.first; });
  std::vector<SlotRange> merged;
  merged.reserve(ranges.size());
  for (const SlotRange& r : ranges) {
    if (!merged.empty() && static_cast<uint32_t>(merged.back().last) + 1 >= r.first)
      merged.back().last = std::max(merged.back().last, r.last);
    else
      merged.push_back(r);
  }
  ranges = std::move(merged);
}

void add_slots(std::vector<SlotRange>& ranges, SlotRange range) {
  ranges.push_back(range);
  normalize_slots(ranges);
}

void remove_slots(std::vector<SlotRange>& ranges, SlotRange range) {
  std::vector<SlotRange> kept;
  kept.reserve(ranges.size() + 1);
  for (const SlotRange& r : ranges) {
    if (r.last < range.first || r.first > range.last) {
      kept.push_back(r);
      continue;
    }
    if (r.first < range.first) kept.push_back({r.first, static_cast<uint16_t>(range.first - 1)});
    if (r.last > range.last) kept.push_back({static_cast<uint16_t>(range.last + 1), r.last});
  }
  ranges = std::move(kept);
}

size_t count_slots(const std::vector<SlotRange>& ranges) {
  size_t n = 0;
  for (const SlotRange& r : ranges) n += static_cast<size_t>(r.last) - r.first + 1;
  return n;
}

bool move_slots(Topology& t, const std::string& migration_id, std::string* error) {
  auto refuse = [&](const std::string& why) {
    if (error != nullptr) *error = "migration '" + migration_id + "': " + why;
    return false;
  };
  Migration* m = nullptr;
  for (Migration& x : t.migrations)
    if (x.id == migration_id) m = &x;
  if (m == nullptr) return refuse("not in the topology");
  if (!is_active(*m)) return refuse("its state is '" + m->state + "', not streaming or handover");
  if (m->source_shard == m->target_shard) return refuse("source and target are the same shard");
  Shard* source = nullptr;
  Shard* target = nullptr;
  for (Shard& s : t.shards) {
    if (s.id == m->source_shard) source = &s;
    if (s.id == m->target_shard) target = &s;
  }
  if (source == nullptr) return refuse("source shard '" + m->source_shard + "' is not in shards");
  if (target == nullptr) return refuse("target shard '" + m->target_shard + "' is not in shards");
  if (m->slots.empty()) return refuse("no slots");
  // Every slot of the migration must be the source's: check before changing anything.
  for (const SlotRange& r : m->slots) {
    if (r.first > r.last || r.last >= kSlots)
      return refuse("slot range " + range_text(r) + " is out of bounds");
    uint32_t slot = r.first;
    while (slot <= r.last) {
      auto held = std::find_if(source->slots.begin(), source->slots.end(), [&](const SlotRange& s) {
        return s.first <= slot && slot <= s.last;
      });
      if (held == source->slots.end())
        return refuse("slot " + std::to_string(slot) + " is not served by its source shard");
      slot = static_cast<uint32_t>(held->last) + 1;
    }
  }
  for (const SlotRange& r : m->slots) {
    remove_slots(source->slots, r);
    add_slots(target->slots, r);
  }
  m->state = "done";
  return true;
}

void prune_migrations(Topology& t, size_t keep_finished) {
  size_t finished = 0;
  for (const Migration& m : t.migrations)
    if (!is_active(m)) ++finished;
  if (finished <= keep_finished) return;
  size_t drop = finished - keep_finished;  // the oldest finished ones
  std::vector<Migration> kept;
  kept.reserve(t.migrations.size() - drop);
  for (Migration& m : t.migrations) {
    if (drop > 0 && !is_active(m)) {
      --drop;
      continue;
    }
    kept.push_back(std::move(m));
  }
  t.migrations = std::move(kept);
}

std::string slots_text(const std::vector<SlotRange>& slots) {
  std::string out;
  for (const SlotRange& r : slots) {
    if (!out.empty()) out += ",";
    out += std::to_string(r.first);
    if (r.last != r.first) out += "-" + std::to_string(r.last);
  }
  return out.empty() ? "-" : out;
}

}  // namespace cluster
