#include "server/migration.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

#include "cluster/etcd_client.h"
#include "server/cluster_state.h"
#include "server/config.h"
#include "server/log.h"
#include "server/replication.h"
#include "server/server.h"
#include "server/slot_owner.h"

namespace server {

namespace {

using Clock = std::chrono::steady_clock;
// A target this close to the source's stream (bytes not yet acknowledged) is caught up: the
// handover's pause then only has that much to send.
constexpr uint64_t kCaughtUp = 4u << 20;
// Keys the janitor removes per tick (the thread ticks every 20 ms at most).
constexpr size_t kJanitorBudget = 2048;
// Bounds of the handover's waits (a pause past them is ended and tried again later).
constexpr int kDrainMs = 2000, kSendMs = 5000;
constexpr size_t kRecords = 16;

bool active(const cluster::Migration& m) { return cluster::is_active(m); }

const cluster::Migration* find(const cluster::Topology& t, std::string_view id) {
  for (const cluster::Migration& m : t.migrations)
    if (m.id == id) return &m;
  return nullptr;
}


int64_t us_since(Clock::time_point t0) {
  return std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count();
}

}  // namespace

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

Migrations::Migrations(Server& server) : server_(server) {}

Migrations::~Migrations() { stop(); }

void Migrations::start() {
  if (!server_.cluster().enabled() || server_.cluster().etcd_options() == nullptr) return;
  thread_ = std::thread([this] { run(); });
}

void Migrations::stop() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::vector<std::unique_ptr<Export>> exports;
  std::vector<std::unique_ptr<Import>> imports;
  {
    std::lock_guard lock(mu_);
    exports = std::move(exports_);
    imports = std::move(imports_);
  }
  SlotOwner& owner = server_.slot_owner();
  for (auto& x : exports) {
    x->feed->stop();
    for (const auto& r : x->ranges) {
      owner.set_held(r.first, r.last, false);
      owner.set_migrating(r.first, r.last, false);
    }
  }
  for (auto& i : imports) i->link->stop();
}

void Migrations::on_view(const std::shared_ptr<const ClusterView>& view) {
  // A node hides the keys of the slots another shard serves: a target's import until the
  // handover, a source's copy until the janitor has dropped it. Only where migrations run
  // (etcd mode): a static topology's slots move only by hand (DEBUG SET-SLOT-OWNER).
  tiering::Keyspace& ks = server_.keyspace();
  const bool migrations = server_.cluster().etcd_options() != nullptr;
  for (uint32_t slot = 0; slot < cluster::kSlots; ++slot) {
    const uint16_t owner = view->slots.shard_of(static_cast<uint16_t>(slot));
    const bool hide = migrations && view->my_shard >= 0 && owner != cluster::SlotMap::kNoShard &&
                      owner != static_cast<uint16_t>(view->my_shard);
    if (ks.hidden(static_cast<uint16_t>(slot)) != hide) ks.set_hidden(static_cast<uint16_t>(slot), hide);
  }
  {
    std::lock_guard lock(mu_);
    view_ = view;
    woken_ = true;
  }
  cv_.notify_all();
}

std::string Migrations::check_export(std::string_view id) const {
  if (!server_.cluster().enabled() || server_.cluster().etcd_options() == nullptr)
    return "ERR slot migration needs a cluster whose topology is kept in etcd";
  std::shared_ptr<const ClusterView> view;
  {
    std::lock_guard lock(mu_);
    view = view_;
  }
  const cluster::Migration* m = view ? find(*view->topology, id) : nullptr;
  if (m == nullptr)
    return "TRYAGAIN this node does not know migration " + std::string(id) + " yet";
  if (!active(*m)) return "ERR migration " + std::string(id) + " is " + m->state;
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
  const cluster::Migration* m = view ? find(*view->topology, id) : nullptr;
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

void Migrations::run() {
  std::unique_lock lock(mu_);
  while (!stop_) {
    cv_.wait_for(lock, std::chrono::milliseconds(20), [this] { return stop_ || woken_; });
    woken_ = false;
    if (stop_) break;
    lock.unlock();
    tick();
    lock.lock();
  }
}

void Migrations::tick() {
  std::shared_ptr<const ClusterView> view;
  {
    std::lock_guard lock(mu_);
    view = view_;
  }
  if (!view || !view->topology) return;
  reconcile_imports(*view);
  check_exports(*view);
  check_orphans(*view);
  janitor(*view);
}

void Migrations::reconcile_imports(const ClusterView& view) {
  const cluster::Topology& t = *view.topology;
  const cluster::Shard* mine =
      view.my_shard >= 0 ? &t.shards[static_cast<size_t>(view.my_shard)] : nullptr;
  // The imports this node should run: active migrations into its shard, while it is primary.
  struct Want {
    const cluster::Migration* m;
    std::string addr;
  };
  std::vector<Want> want;
  for (const cluster::Migration& m : t.migrations) {
    if (!active(m) || mine == nullptr || !view.i_am_primary || m.target_shard != mine->id) continue;
    if (gave_up_.count(m.id)) continue;
    const cluster::Shard* source = t.shard(m.source_shard);
    const cluster::NodeAddress* p = source ? t.node(source->primary) : nullptr;
    if (p == nullptr) continue;  // no primary: the source's slots are down; wait
    want.push_back({&m, p->host + ":" + std::to_string(p->port)});
  }
  // End the imports no longer wanted (done, rolled back, another source primary, no room).
  std::vector<std::unique_ptr<Import>> ended;
  {
    std::lock_guard lock(mu_);
    for (auto& i : imports_) {
      const bool no_room = i->no_room->load();
      const bool keep = !no_room && std::any_of(want.begin(), want.end(), [&](const Want& w) {
        return w.m->id == i->id && w.addr == i->source_addr;
      });
      if (keep) continue;
      if (no_room) gave_up_.insert(i->id);
      ended.push_back(std::move(i));
    }
    std::erase(imports_, nullptr);
  }
  for (auto& i : ended) {
    i->link->stop();
    const cluster::Migration* m = find(t, i->id);
    Record r = i->row(i->no_room->load() ? "failed (out of memory)" : m ? m->state : "gone");
    r.ended_ms = tiering::now_ms();
    if (r.state != "done") {
      std::lock_guard lock(mu_);
      ++rollbacks_;
    }
    log::notice("migration " + i->id.substr(0, 8) + " import ended: " + r.state);
    record(std::move(r));
  }
  // Start the ones missing.
  for (const Want& w : want) {
    bool have = false;
    {
      std::lock_guard lock(mu_);
      for (const auto& i : imports_) have = have || i->id == w.m->id;
    }
    if (have) continue;
    auto imp = std::make_unique<Import>();
    imp->id = w.m->id;
    imp->source_addr = w.addr;
    imp->source_shard = w.m->source_shard;
    imp->ranges = w.m->slots;
    imp->started_ms = tiering::now_ms();
    const cluster::Shard* source = t.shard(w.m->source_shard);
    const cluster::NodeAddress* p = t.node(source->primary);
    cluster::LinkOptions o;
    o.host = p->host;
    o.port = p->port;
    // tls-cluster: the source's tls-port, over TLS (docs/tls.md). Without a published tls-port
    // or a TLS context the link is not made in the clear: it fails, and so does the migration.
    if (server_.config().num(Key::kTlsCluster)) {
      o.tls = [this] { return server_.tls_client(); };
      o.port = p->tls_port;
      if (o.port == 0)
        log::warning("migration " + w.m->id.substr(0, 8) + ": tls-cluster is on but the source " +
                     source->primary.substr(0, 8) + " publishes no tls-port");
    }
    o.masteruser = server_.config().str(Key::kMasterUser);
    o.masterauth = server_.config().str(Key::kMasterAuth);
    o.keyspace = &server_.keyspace();
    o.allocate = [this](size_t size) { return server_.allocate_value(size); };
    o.sync_command = {"CLUSTER", "SYNCSLOTS", w.m->id};
    o.clear = [ks = &server_.keyspace(), ranges = imp->ranges] {
      for (const auto& r : ranges)
        for (uint32_t s = r.first; s <= r.last; ++s)
          while (ks->remove_slot_keys(static_cast<uint16_t>(s), 4096) > 0) {
          }
    };
    o.on_no_room = [flag = imp->no_room](uint64_t) { flag->store(true); };
    o.on_topology = [this](std::string_view json) { server_.cluster().apply_json(json); };
    o.timeout_ms = static_cast<int>(server_.config().num(Key::kReplTimeout) * 1000);
    o.retry_ms = 100;  // the source may learn of the migration a moment after this node
    const std::string tag = "migration " + imp->id.substr(0, 8) + " import: source ";
    o.log = [tag](bool warning, std::string_view line) {
      (warning ? log::warning : log::notice)(tag + std::string(line));
    };
    log::notice("migration " + imp->id.substr(0, 8) + " import of slots " +
                cluster::slots_text(imp->ranges) + " from " + w.addr);
    imp->link = std::make_unique<cluster::ReplicaLink>(std::move(o));
    imp->link->start();
    std::lock_guard lock(mu_);
    imports_.push_back(std::move(imp));
  }
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
    const cluster::Migration* m = find(*view.topology, x->id);
    bool replaced;
    {
      std::lock_guard lock(mu_);
      replaced = x->replaced;
    }
    if (replaced || m == nullptr || !active(*m)) {
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

bool Migrations::mark_failed(const std::string& id, const std::string& why) {
  std::string error;
  bool inactive = false;
  auto t = update_topology(
      [&](cluster::Topology& t) {
        for (cluster::Migration& m : t.migrations)
          if (m.id == id && active(m)) {
            m.state = "failed";
            cluster::prune_migrations(t, kRecords);
            ++t.version;
            return true;
          }
        inactive = true;
        return false;
      },
      &error);
  if (!t) {
    if (!inactive) log::warning("migration " + id.substr(0, 8) + ": cannot mark it failed yet: " + error);
    return inactive;
  }
  log::warning("migration " + id.substr(0, 8) + " failed: " + why + "; rolled back");
  {
    std::lock_guard lock(mu_);
    ++rollbacks_;
  }
  server_.cluster().apply(std::move(t));
  return true;
}

void Migrations::check_orphans(const ClusterView& view) {
  const int64_t now = tiering::now_ms();
  if (now - last_orphan_check_ms_ < 1000 || !view.i_am_primary || view.my_shard < 0) return;
  last_orphan_check_ms_ = now;
  const cluster::Topology& t = *view.topology;
  const std::string& mine = t.shards[static_cast<size_t>(view.my_shard)].id;
  for (const cluster::Migration& m : t.migrations) {
    if (!active(m) || m.source_shard != mine) continue;
    {
      std::lock_guard lock(mu_);
      if (std::any_of(exports_.begin(), exports_.end(),
                      [&](const auto& x) { return x->id == m.id; }))
        continue;
    }
    const cluster::Shard* target = t.shard(m.target_shard);
    bool registered = false;
    if (target != nullptr && !target->primary.empty()) {
      try {
        if (!etcd_) etcd_ = std::make_unique<cluster::EtcdClient>(*server_.cluster().etcd_options());
        registered = etcd_->get(server_.cluster().etcd_prefix() + "/nodes/" + target->primary)
                         .has_value();
      } catch (const std::exception&) {
        continue;  // etcd unreachable: decide nothing
      }
    }
    if (!registered) mark_failed(m.id, "the target shard's primary is not registered (gone)");
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
        const cluster::Migration* m = find(t, x.id);
        if (m != nullptr && m->state == "done") {  // an earlier CAS whose answer was lost
          done_already = std::make_shared<const cluster::Topology>(t);
          return false;
        }
        if (m == nullptr || !active(*m)) {
          error = "the migration is " + (m ? m->state : std::string("gone"));
          return false;
        }
        if (!cluster::move_slots(t, x.id, &error)) return false;
        cluster::prune_migrations(t, kRecords);
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

std::shared_ptr<const cluster::Topology> Migrations::update_topology(
    const std::function<bool(cluster::Topology&)>& change, std::string* error) {
  const cluster::EtcdOptions* options = server_.cluster().etcd_options();
  if (options == nullptr) {
    *error = "no etcd";
    return nullptr;
  }
  try {
    if (!etcd_) etcd_ = std::make_unique<cluster::EtcdClient>(*options);
    cluster::EtcdClient& client = *etcd_;
    const std::string key = server_.cluster().etcd_prefix() + "/topology";
    for (int attempt = 0; attempt < 8; ++attempt) {
      const std::optional<cluster::KeyValue> kv = client.get(key);
      if (!kv) {
        *error = "etcd holds no topology";
        return nullptr;
      }
      cluster::Topology t = cluster::decode(kv->value);
      if (!change(t)) return nullptr;
      cluster::validate(t);
      if (client.compare_and_swap(key, kv->mod_revision, cluster::encode(t)))
        return std::make_shared<const cluster::Topology>(std::move(t));
    }
    *error = "the record kept changing (8 lost CAS)";
  } catch (const std::exception& e) {
    *error = e.what();
  }
  return nullptr;
}

void Migrations::janitor(const ClusterView& view) {
  // Only a primary etcd confirmed drops keys: its view is the cluster's.
  if (!view.i_am_primary || view.my_shard < 0 || server_.slot_owner().unconfirmed()) return;
  tiering::Keyspace& ks = server_.keyspace();
  if (stale_version_ != view.topology->version) {
    stale_version_ = view.topology->version;
    cluster::SlotSet importing;
    const std::string& mine = view.topology->shards[static_cast<size_t>(view.my_shard)].id;
    for (const cluster::Migration& m : view.topology->migrations)
      if (active(m) && m.target_shard == mine)
        for (const auto& r : m.slots)
          for (uint32_t s = r.first; s <= r.last; ++s) importing.set(s);
    stale_.clear();
    for (uint32_t s = 0; s < cluster::kSlots; ++s)
      if (ks.hidden(static_cast<uint16_t>(s)) && !importing.test(s) &&
          ks.count_in_slot(static_cast<uint16_t>(s)) > 0)
        stale_.push_back(static_cast<uint16_t>(s));
    if (!stale_.empty())
      log::notice("cluster: dropping the keys of " + std::to_string(stale_.size()) +
                  " slots other shards serve, in the background");
  }
  size_t budget = kJanitorBudget;
  while (!stale_.empty() && budget > 0) {
    const uint16_t slot = stale_.back();
    const size_t n = ks.remove_slot_keys(slot, budget);
    budget -= std::min(budget, n);
    {
      std::lock_guard lock(mu_);
      janitor_keys_ += n;
    }
    if (ks.count_in_slot(slot) == 0) stale_.pop_back();
  }
  std::lock_guard lock(mu_);
  stale_left_ = stale_.size();
}

void Migrations::record(Record r) {
  std::lock_guard lock(mu_);
  records_.push_back(std::move(r));
  if (records_.size() > kRecords) records_.erase(records_.begin());
}

void Migrations::describe(resp::Writer& out) const {
  std::vector<Record> rows;
  {
    std::lock_guard lock(mu_);
    for (const auto& x : exports_)
      rows.push_back(x->row(x->feed->state() == cluster::ReplicaFeed::State::kSnapshot ? "copying"
                                                                                      : "streaming"));
    for (const auto& i : imports_)
      rows.push_back(i->row(i->link->state() == cluster::ReplicaLink::State::kUp ? "streaming"
                                                                                 : "copying"));
    rows.insert(rows.end(), records_.rbegin(), records_.rend());
  }
  out.array(rows.size());
  for (const Record& r : rows) {
    out.map(9);
    out.bulk("id");
    out.bulk(r.id);
    out.bulk("role");
    out.bulk(r.role);
    out.bulk("slots");
    out.bulk(r.slots);
    out.bulk(r.role == "export" ? "target_shard" : "source_shard");
    out.bulk(r.peer);
    out.bulk("state");
    out.bulk(r.state);
    out.bulk("keys");
    out.integer(static_cast<int64_t>(r.keys));
    out.bulk("bytes");
    out.integer(static_cast<int64_t>(r.bytes));
    out.bulk("elapsed_ms");
    out.integer((r.ended_ms ? r.ended_ms : tiering::now_ms()) - r.started_ms);
    out.bulk("write_pause_us");
    out.integer(r.pause_us);
  }
}

void Migrations::info(std::string* out) const {
  std::lock_guard lock(mu_);
  auto field = [out](std::string_view name, uint64_t v) {
    out->append(name);
    out->push_back(':');
    out->append(std::to_string(v));
    out->append("\r\n");
  };
  field("migrations_exporting", exports_.size());
  field("migrations_importing", imports_.size());
  field("migration_handovers", handovers_);
  field("migration_rollbacks", rollbacks_);
  field("migration_janitor_keys", janitor_keys_);
  field("migration_janitor_slots", stale_left_);
  field("migration_last_pause_us", static_cast<uint64_t>(last_pause_us_));
  field("migration_max_pause_us", static_cast<uint64_t>(max_pause_us_));
}

}  // namespace server
