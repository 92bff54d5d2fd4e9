// server/slot_owner.h - which of the 16384 hash slots this node serves, and which node serves
// each of the others: what the request pipeline's slot ownership stage asks about every key
// (server/pipeline.h), before anything is loaded, moved or allocated for it.
//
// Outside a cluster one node serves every slot. In a cluster, ClusterState (cluster_state.h)
// calls assign() / unserve() as each new topology arrives; tests also take slots away with the
// test aid DEBUG SET-SLOT-OWNER (docs/commands.md).
#pragma once

#include <array>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "cluster/slot.h"

namespace server {

class SlotOwner {
 public:
  SlotOwner();

  /// Whether this node serves `slot` (< cluster::kSlots). Lock-free: one relaxed load while
  /// the node serves every slot, two otherwise. Thread-safe.
  bool owns(uint16_t slot) const {
    if (foreign_count_.load(std::memory_order_relaxed) == 0) return true;
    return ((foreign_[slot >> 6].load(std::memory_order_relaxed) >> (slot & 63)) & 1) == 0;
  }
  /// Whether this node serves every slot (owns() is true for all). Thread-safe.
  bool owns_all() const { return foreign_count_.load(std::memory_order_relaxed) == 0; }
  /// The "host:port" of the node that serves `slot` (another node's for a slot owns() says is
  /// not ours), as -MOVED names it; "" when this node or no node serves it (unserve()). With
  /// `tls` (the client came in on tls-port) the node's "host:tls-port" when it has one: the
  /// port of the client's kind, as Redis 7.0's clusterRedirectClient names it under
  /// tls-cluster. Takes a mutex: for redirects only. Thread-safe.
  std::string address(uint16_t slot, bool tls = false) const;
  /// Slots [first, last] are served by the node at `address` ("host:port"; `tls_address`, its
  /// "host:tls-port" or "" when it has none), or by this node when `address` is empty.
  /// Requires first <= last < cluster::kSlots. Thread-safe; a request being checked meanwhile
  /// sees each slot either way.
  void assign(uint16_t first, uint16_t last, std::string_view address, std::string_view tls_address = {});
  /// Slots [first, last] are served by no node (their shard has no primary, or no shard has
  /// them): their keys get -CLUSTERDOWN Hash slot not served. Same requirements as assign().
  void unserve(uint16_t first, uint16_t last);

  /// Cluster mode, on a replica: whether this node holds `slot`'s keys as a replica of the
  /// shard serving it, so a READONLY connection's reads of it are served here (Redis Cluster's
  /// READONLY). Lock-free: one relaxed load. Thread-safe.
  bool holds_as_replica(uint16_t slot) const {
    return ((replica_[slot >> 6].load(std::memory_order_relaxed) >> (slot & 63)) & 1) != 0;
  }
  /// Slots [first, last] are (or are not) held by this node as a replica. Thread-safe.
  void set_replica_slots(uint16_t first, uint16_t last, bool held);

  /// Fencing (docs/replication.md): whether this node, a primary whose lease in etcd may have
  /// expired, must refuse writes. One relaxed load when no deadline is set; else a steady
  /// clock read. Thread-safe.
  bool fenced() const {
    const int64_t d = fence_deadline_.load(std::memory_order_acquire);
    const int64_t p = paused_until_.load(std::memory_order_acquire);
    if (d == kNoFence && p == 0) return false;
    const int64_t now = std::chrono::steady_clock::now().time_since_epoch().count();
    return (d != kNoFence && now > d) || now < p;
  }
  /// A primary restarted from its saved topology (etcd mode, a shard with replicas) serves no
  /// key, reads included, until etcd confirms its role: a replica may have taken its place
  /// meanwhile, and its recovered keys would be stale. One relaxed load. Thread-safe.
  bool unconfirmed() const { return unconfirmed_.load(std::memory_order_relaxed); }
  void set_unconfirmed(bool on) { unconfirmed_.store(on, std::memory_order_relaxed); }
  /// A manual failover's pause: writes are refused until `until` (steady clock ticks; 0 ends
  /// it). Thread-safe.
  void pause_writes_until(int64_t until) { paused_until_.store(until, std::memory_order_release); }
  /// Writes are refused after `deadline` (steady clock ticks; kFencedNow: at once), or never
  /// (kNoFence). Thread-safe.
  void set_fence_deadline(int64_t deadline) {
    fence_deadline_.store(deadline, std::memory_order_release);
  }
  static constexpr int64_t kNoFence = 0;
  static constexpr int64_t kFencedNow = 1;

  // ---- slot migration's source (server/migration.h) ----

  /// Whether some slot is migrating out of this node: the connection's migration stage runs
  /// only then. One relaxed load. Thread-safe.
  bool migrating_any() const { return migrating_count_.load(std::memory_order_relaxed) != 0; }
  /// Whether `slot` is migrating out: its writes are counted in flight (write_begin).
  bool migrating(uint16_t slot) const { return test(migrating_, slot); }
  void set_migrating(uint16_t first, uint16_t last, bool on) {
    set_bits(migrating_, migrating_count_, first, last, on);
  }
  /// Whether writes to `slot` wait: the handover's pause (they wait, they do not fail).
  bool held(uint16_t slot) const { return test(held_, slot, std::memory_order_seq_cst); }
  void set_held(uint16_t first, uint16_t last, bool on) {
    set_bits(held_, held_count_, first, last, on);
  }
  /// A write to a migrating slot begins (before it checks held()) and ends. The handover sets
  /// held() first and then waits for writes_in_flight() to reach 0: with both sides
  /// sequentially consistent, a write either sees the hold or is waited for.
  void write_begin() { in_flight_.fetch_add(1, std::memory_order_seq_cst); }
  void write_end() { in_flight_.fetch_sub(1, std::memory_order_seq_cst); }
  int64_t writes_in_flight() const { return in_flight_.load(std::memory_order_seq_cst); }

  /// Cluster mode: whether the cluster is down as a whole (Redis's cluster_state:fail, with
  /// cluster-require-full-coverage and a slot served by nobody): every command with keys gets
  /// -CLUSTERDOWN The cluster is down. Thread-safe.
  bool cluster_down() const { return cluster_down_.load(std::memory_order_relaxed); }
  void set_cluster_down(bool down) { cluster_down_.store(down, std::memory_order_relaxed); }

  /// Cluster mode: a command's keys must all hash to one slot, else -CROSSSLOT (Redis's
  /// getNodeByQuery). Off (no cluster yet): keys of any slots go together, as in a standalone
  /// Redis. Thread-safe.
  bool cluster_enabled() const { return cluster_enabled_.load(std::memory_order_relaxed); }
  void set_cluster_enabled(bool on) { cluster_enabled_.store(on, std::memory_order_relaxed); }

 private:
  // owner_ of a slot no node serves.
  static constexpr uint16_t kUnserved = 0xFFFF;
  // Sets owner_[first..last] to `at` (0 = this node) and the foreign bits with it (under mu_).
  void set_owner(uint16_t first, uint16_t last, uint16_t at);
  // Removes the addresses no slot refers to and renumbers owner_ (under mu_).
  void drop_unused_addresses();

  using SlotBits = std::array<std::atomic<uint64_t>, cluster::kSlots / 64>;
  static bool test(const SlotBits& bits, uint16_t slot,
                   std::memory_order order = std::memory_order_relaxed) {
    return ((bits[slot >> 6].load(order) >> (slot & 63)) & 1) != 0;
  }
  // Sets or clears bits first..last, keeping `count` (the number of set bits) exact.
  static void set_bits(SlotBits& bits, std::atomic<uint32_t>& count, uint16_t first,
                       uint16_t last, bool on);
  SlotBits migrating_{}, held_{};
  std::atomic<uint32_t> migrating_count_{0}, held_count_{0};
  std::atomic<int64_t> in_flight_{0};

  // Bit s set: slot s is served by another node.
  std::array<std::atomic<uint64_t>, cluster::kSlots / 64> foreign_;
  std::atomic<uint32_t> foreign_count_{0};
  // Bit s set: this node holds slot s as a replica (holds_as_replica).
  std::array<std::atomic<uint64_t>, cluster::kSlots / 64> replica_;
  std::atomic<bool> cluster_enabled_{false};
  std::atomic<bool> cluster_down_{false};
  std::atomic<int64_t> fence_deadline_{kNoFence};
  std::atomic<int64_t> paused_until_{0};
  std::atomic<bool> unconfirmed_{false};
  mutable std::mutex mu_;
  // per slot: 1 + index into addresses_, 0 = this node, kUnserved = no node
  std::vector<uint16_t> owner_;
  struct Endpoint {
    std::string plain;  // "host:port"
    std::string tls;    // "host:tls-port", or "" (no tls-port)
  };
  std::vector<Endpoint> addresses_;                  // other nodes'
  std::unordered_map<std::string, uint16_t> index_;  // "plain tls" -> its owner_ value
};

}  // namespace server
