// server/migration.cc - the migrations' thread (server/migration.h): the view it follows, the
// target's side (links that import a range, steps 1 and 3), failed and orphaned migrations,
// the record's CAS, the janitor (step 5) and the figures. The source's side is
// migration_export.cc.
#include "server/migration.h"

#include <algorithm>
#include <chrono>

#include "cluster/etcd_client.h"
#include "server/cluster_state.h"
#include "server/config.h"
#include "server/log.h"
#include "server/migration_state.h"
#include "server/replication.h"
#include "server/server.h"
#include "server/slot_owner.h"

namespace server {

namespace {

// Keys the janitor removes per tick (the thread ticks every 20 ms at most).
constexpr size_t kJanitorBudget = 2048;

}  // namespace

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
    if (!cluster::is_active(m) || mine == nullptr || !view.i_am_primary || m.target_shard != mine->id) continue;
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
    const cluster::Migration* m = find_migration(t, i->id);
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

bool Migrations::mark_failed(const std::string& id, const std::string& why) {
  std::string error;
  bool inactive = false;
  auto t = update_topology(
      [&](cluster::Topology& t) {
        for (cluster::Migration& m : t.migrations)
          if (m.id == id && cluster::is_active(m)) {
            m.state = "failed";
            cluster::prune_migrations(t, kMigrationRecords);
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
    if (!cluster::is_active(m) || m.source_shard != mine) continue;
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
      if (cluster::is_active(m) && m.target_shard == mine)
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
  if (records_.size() > kMigrationRecords) records_.erase(records_.begin());
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
