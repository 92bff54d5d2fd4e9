// server/migration_export.cc - a slot migration's source side (server/migration.h, steps 2
// and 4): the feed a target's CLUSTER SYNCSLOTS attaches, the watch on it, and the handover
// (the write pause, the owner's CAS, the TOPOLOGY frame).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>

#include "server/cluster_state.h"
#include "server/log.h"
#include "server/migration.h"
#include "server/migration_state.h"
#include "server/replication.h"
#include "server/server.h"
#include "server/slot_owner.h"

namespace server {

namespace {

using Clock = std::chrono::steady_clock;
// A target this close to the source's stream (bytes not yet acknowledged) is caught up: the
// handover's pause then only has that much to send.
constexpr uint64_t kCaughtUp = 4u << 20;
// Bounds of the handover's waits (a pause past them is ended and tried again later).
constexpr int kDrainMs = 2000, kSendMs = 5000;

int64_t us_since(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count();
}

}  // namespace

std::string Migrations::check_export(std::string_view id) const {
  if (!server_.cluster().enabled() || server_.cluster().etcd_options() == nullptr)
    return "ERR slot migration needs a cluster whose topology is kept in etcd";
  std::shared_ptr<const ClusterView> view;
  {
    std::lock_guard lock(mu_);
    view = view_;
  }
  const cluster::Migration* m = view ? find_migration(*view->topology, id) : nullptr;
  if (m == nullptr)
    return "TRYAGAIN this node does not know migration " + std::string(id) + " yet";
  if (!cluster::is_active(*m)) return "ERR migration " + std::string(id) + " is " + m->state;
  const cluster::Shard* mine =
      view->my_shard >= 0 ? &view->topology->shards[static_cast<size_t>(view->my_shard)] : nullptr;
  if (mine == nullptr || mine->id != m->source_shard || !view->i_am_primary)
    return "ERR this node is not the primary of migration " + std::string(id) + "'s source shard";
  return "";
}

void Migrations::attach_export(std::unique_ptr<cluster::ReplSocket> socket,
                               const std::string& id) {
  std::shared_ptr<const ClusterView> view;
  {
    std::lock_guard lock(mu_);
    view = view_;
  }
  const cluster::Migration* m = view ? find_migration(*view->topology, id) : nullptr;
  if (m == nullptr) return;  // `socket` closes
  auto slots = std::make_shared<cluster::SlotSet>();
  for (const auto& r : m->slots)
    for (uint32_t s = r.first; s <= r.last; ++s) slots->set(s);
  cluster::FeedOptions o = server_.replication().export_feed(std::move(socket), slots);
  if (!o.backlog) return;  // a replica now (the socket closes with `o`)
  auto x = std::make_unique<Export>();
  x->id = id;
  x->ranges = m->slots;
  x->target = m->target_shard;
  x->backlog = o.backlog;
  x->started_ms = tiering::now_ms();
  const std::string tag = "migration " + id.substr(0, 8) + " ";
  o.log = [tag](bool warning, std::string_view line) {
    (warning ? log::warning : log::notice)(tag + std::string(line));
  };
  x->feed = std::make_unique<cluster::ReplicaFeed>(std::move(o));
  SlotOwner& owner = server_.slot_owner();
  for (const auto& r : x->ranges) owner.set_migrating(r.first, r.last, true);
  log::notice(tag + "started: copying slots " + cluster::slots_text(x->ranges) + " to shard " +
              x->target.substr(0, 8));
  x->feed->start();
  {
    std::lock_guard lock(mu_);
    for (auto& old : exports_)
      if (old->id == id) old->replaced = true;
    exports_.push_back(std::move(x));
    server_.replication().set_exports(static_cast<int>(exports_.size()));
    woken_ = true;
  }
  cv_.notify_all();
}

void Migrations::end_export(Export& x, const std::string& state, int64_t pause_us) {
  x.feed->stop();
  SlotOwner& owner = server_.slot_owner();
  bool replaced;
  {
    std::lock_guard lock(mu_);
    replaced = x.replaced;
  }
  if (!replaced) {
    for (const auto& r : x.ranges) {
      owner.set_held(r.first, r.last, false);
      owner.set_migrating(r.first, r.last, false);
    }
  }
  Record r = x.row(replaced ? "restarted" : state);
  r.ended_ms = tiering::now_ms();
  r.pause_us = pause_us;
  record(std::move(r));
  std::lock_guard lock(mu_);
  std::erase_if(exports_, [&](const std::unique_ptr<Export>& e) { return e.get() == &x; });
  server_.replication().set_exports(static_cast<int>(exports_.size()));
}

void Migrations::check_exports(const ClusterView& view) {
  std::vector<Export*> xs;
  {
    std::lock_guard lock(mu_);
    for (auto& x : exports_) xs.push_back(x.get());
  }
  for (Export* x : xs) {
    const cluster::Migration* m = find_migration(*view.topology, x->id);
    bool replaced;
    {
      std::lock_guard lock(mu_);
      replaced = x->replaced;
    }
    if (replaced || m == nullptr || !cluster::is_active(*m)) {
      // Cancelled (or finished by someone else): the target drops its copy, this node serves on.
      if (!replaced) log::notice("migration " + x->id.substr(0, 8) + " ended: " + (m ? m->state : "gone"));
      end_export(*x, m ? m->state : "gone");
      continue;
    }
    if (x->feed->state() == cluster::ReplicaFeed::State::kClosed) {
      // The target went away (or fell behind the stream): the migration fails and rolls back.
      if (mark_failed(x->id, "the target's link closed")) end_export(*x, "failed");
      continue;
    }
    const int64_t now = tiering::now_ms();
    const bool caught_up =
        x->feed->state() == cluster::ReplicaFeed::State::kOnline &&
        x->backlog->offset() - x->feed->sent_offset() <= kCaughtUp &&
        x->feed->stream_sent() - std::min(x->feed->stream_sent(), x->feed->ack_offset()) <= kCaughtUp;
    if (caught_up && now >= x->next_try_ms && !hold_handovers_.load()) handover(*x);
  }
}

bool Migrations::handover(Export& x) {
  SlotOwner& owner = server_.slot_owner();
  cluster::ReplicaFeed& feed = *x.feed;
  const std::string tag = "migration " + x.id.substr(0, 8) + " ";
  auto hold = [&](bool on) {
    for (const auto& r : x.ranges) owner.set_held(r.first, r.last, on);
  };
  auto wait_until = [&](const auto& done, int ms) {
    const auto deadline = Clock::now() + std::chrono::milliseconds(ms);
    while (!done()) {
      if (Clock::now() > deadline || feed.state() == cluster::ReplicaFeed::State::kClosed) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    return true;
  };
  auto retry_later = [&](const std::string& why) {
    hold(false);
    x.next_try_ms = tiering::now_ms() + 1000;
    log::warning(tag + "handover put off: " + why + "; writes resumed, trying again in 1 s");
    return false;
  };

  // 1. The pause: new writes to the range wait; those in flight complete.
  hold(true);
  const Clock::time_point t0 = Clock::now();
  if (!wait_until([&] { return owner.writes_in_flight() == 0; }, kDrainMs))
    return retry_later("writes in flight did not complete");
  const int64_t drained_us = us_since(t0);
  // 2. What is left goes to the target, which applies it.
  const uint64_t end = x.backlog->offset();
  if (!wait_until([&] { return feed.sent_offset() >= end; }, kSendMs))
    return retry_later("the stream did not reach the target");
  const uint64_t sent = feed.stream_sent();
  if (!wait_until([&] { return feed.ack_offset() >= sent; }, kSendMs))
    return retry_later("the target did not acknowledge");
  const int64_t caught_up_us = us_since(t0);
  // 3. The owner changes by one CAS.
  std::string error;
  std::shared_ptr<const cluster::Topology> done_already;
  auto t = update_topology(
      [&](cluster::Topology& t) {
        const cluster::Migration* m = find_migration(t, x.id);
        if (m != nullptr && m->state == "done") {  // an earlier CAS whose answer was lost
          done_already = std::make_shared<const cluster::Topology>(t);
          return false;
        }
        if (m == nullptr || !cluster::is_active(*m)) {
          error = "the migration is " + (m ? m->state : std::string("gone"));
          return false;
        }
        if (!cluster::move_slots(t, x.id, &error)) return false;
        cluster::prune_migrations(t, kMigrationRecords);
        ++t.version;
        return true;
      },
      &error);
  if (!t) t = done_already;
  if (!t) {
    if (error.rfind("the migration is", 0) == 0) {
      hold(false);
      log::notice(tag + "ended before its handover: " + error);
      end_export(x, "cancelled");
      return true;
    }
    return retry_later("the topology could not be written: " + error);
  }
  // 4. The target (and this node's replicas) learn it from the stream at once; then this node
  // serves it, and the writes that waited get -MOVED.
  const int64_t cas_us = us_since(t0);
  x.backlog->append(cluster::FrameType::kTopology, cluster::encode(*t), {}, 0);
  const uint64_t end2 = x.backlog->offset();
  if (wait_until([&] { return feed.sent_offset() >= end2; }, 1000)) {
    const uint64_t sent2 = feed.stream_sent();
    wait_until([&] { return feed.ack_offset() >= sent2; }, 1000);
  }
  const int64_t told_us = us_since(t0);
  server_.cluster().apply(t);
  hold(false);
  const int64_t pause_us = us_since(t0);
  {
    std::lock_guard lock(mu_);
    ++handovers_;
    last_pause_us_ = pause_us;
    max_pause_us_ = std::max(max_pause_us_, pause_us);
  }
  char pause[32];
  std::snprintf(pause, sizeof pause, "%.2f", static_cast<double>(pause_us) / 1000.0);
  log::notice(tag + "handed over: slots " + cluster::slots_text(x.ranges) + " served by shard " +
              x.target.substr(0, 8) + " from topology version " + std::to_string(t->version) +
              "; writes paused " + pause + " ms (drain " + std::to_string(drained_us) +
              " us, catch-up " + std::to_string(caught_up_us - drained_us) + " us, CAS " +
              std::to_string(cas_us - caught_up_us) + " us, target told " +
              std::to_string(told_us - cas_us) + " us, served " + std::to_string(pause_us - told_us) +
              " us); " + std::to_string(feed.copied_keys()) + " keys copied");
  end_export(x, "done", pause_us);
  return true;
}

}  // namespace server
