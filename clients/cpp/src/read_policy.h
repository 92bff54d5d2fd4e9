// read_policy.h - which node of a shard serves a cluster client's read (Options::read_from):
// the primary, a replica in turn (kReplicas), or the node with the lowest measured round trip
// (kNearest).
//
// What kNearest measures, per node address: the round trip of a PING when the client connects
// to the node, then the wall time of each read the client sends it (one GET, one KV.MGET or
// pipeline of a batch's part: the node's latency and its load together), as an exponentially
// weighted average (each new sample weighs 1/4). A node whose last sample is older than
// kRefresh (or that has none yet) is picked for the next read of its shard, so every node's
// figure stays current; otherwise the lowest average wins (a replica on a tie).
//
// A replica that could not be reached (failed()) is skipped for kDownFor, by either mode: its
// shard's reads go to its other replicas, or to the primary.
//
// Thread-safe: one mutex guards the table of samples; the rotation is an atomic counter.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

#include "slot_map.h"
#include "stratakv/client.h"

namespace stratakv::detail {

class ReadPolicy {
 public:
  using Clock = std::chrono::steady_clock;
  /// A node's figure older than this is refreshed by sending it the next read of its shard.
  static constexpr std::chrono::milliseconds kRefresh{1000};
  /// The weight of a new sample in the average.
  static constexpr double kWeight = 0.25;
  /// How long a replica that could not be reached is skipped.
  static constexpr std::chrono::milliseconds kDownFor{5000};
  /// choose()'s answer for the slot's primary.
  static constexpr int kPrimary = -1;

  explicit ReadPolicy(ReadFrom mode) : mode_(mode) {}

  ReadFrom mode() const { return mode_; }
  /// Whether reads may go to replicas (mode() is not kPrimary).
  bool uses_replicas() const { return mode_ != ReadFrom::kPrimary; }

  /// The node that serves a read of `slot` (< 16384) with `map`: kPrimary, or an index in
  /// map.replicas(). kPrimary when the mode is kPrimary or the slot's replicas are unknown.
  /// `now` is injectable for tests.
  int choose(const SlotMap& map, uint16_t slot, Clock::time_point now = Clock::now());

  /// Records one round trip of the node at `address` ("host:port"), measured at `now`.
  void record(const std::string& address, std::chrono::nanoseconds rtt, Clock::time_point now = Clock::now());
  /// The replica at `address` could not be reached at `now`: skipped until now + kDownFor.
  void failed(const std::string& address, Clock::time_point now = Clock::now());
  /// The node's average round trip in microseconds; nullopt before its first sample.
  std::optional<double> average_us(const std::string& address) const;

 private:
  struct Figure {
    double average_us = 0;
    bool measured = false;
    Clock::time_point at{};  // last sample, or when the node was last picked to refresh it
    Clock::time_point down_until{};  // failed(): skipped before this
  };

  const ReadFrom mode_;
  std::atomic<uint64_t> turn_{0};
  std::atomic<bool> any_down_{false};  // some replica failed() (choose() then looks it up)
  mutable std::mutex mu_;
  std::unordered_map<std::string, Figure> figures_;
};

}  // namespace stratakv::detail
