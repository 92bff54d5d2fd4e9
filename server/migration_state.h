// server/migration_state.h - what Migrations keeps of each migration it runs on this node: an
// Export (this node's shard is the source: a feed and the backlog it reads) or an Import (the
// target: the link that applies the source's stream). Private to migration.cc (the thread, the
// target's side, the record) and migration_export.cc (the source's side, the handover).
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/repl_backlog.h"
#include "cluster/repl_feed.h"
#include "cluster/repl_link.h"
#include "cluster/topology.h"
#include "server/migration.h"

namespace server {

/// Finished migrations kept: in the topology record (cluster::prune_migrations) and in
/// CLUSTER GETSLOTMIGRATIONS's rows.
inline constexpr size_t kMigrationRecords = 16;

/// Migration `id` in the record `t`, or null.
inline const cluster::Migration* find_migration(const cluster::Topology& t, std::string_view id) {
  for (const cluster::Migration& m : t.migrations)
    if (m.id == id) return &m;
  return nullptr;
}

struct Migrations::Export {
  std::string id;
  std::vector<cluster::SlotRange> ranges;
  std::string target;  // the target shard's id
  std::unique_ptr<cluster::ReplicaFeed> feed;
  std::shared_ptr<cluster::ReplBacklog> backlog;
  int64_t started_ms = 0;
  int64_t next_try_ms = 0;  // the next handover attempt (wall clock)
  bool replaced = false;    // a newer feed of the same migration took over (mu_)

  /// Its CLUSTER GETSLOTMIGRATIONS row, in `state`.
  Record row(std::string state) const {
    return {.id = id, .role = "export", .slots = cluster::slots_text(ranges), .peer = target,
            .state = std::move(state), .keys = feed->copied_keys(),
            .bytes = feed->copied_bytes(), .started_ms = started_ms};
  }
};

struct Migrations::Import {
  std::string id, source_addr, source_shard;
  std::vector<cluster::SlotRange> ranges;
  std::unique_ptr<cluster::ReplicaLink> link;
  std::shared_ptr<std::atomic<bool>> no_room = std::make_shared<std::atomic<bool>>(false);
  int64_t started_ms = 0;

  /// Its CLUSTER GETSLOTMIGRATIONS row, in `state` (bytes: of the stream applied).
  Record row(std::string state) const {
    return {.id = id, .role = "import", .slots = cluster::slots_text(ranges),
            .peer = source_shard, .state = std::move(state), .bytes = link->offset(),
            .started_ms = started_ms};
  }
};

}  // namespace server
