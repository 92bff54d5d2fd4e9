#include "server/replication.h"

#include <algorithm>
#include <random>

#include "resp/writer.h"
#include "server/config.h"
#include "server/log.h"
#include "server/server.h"

namespace server {

namespace {
// How far a replica being fed may hold back the backlog's trimming beyond repl-backlog-size
// (Redis's client-output-buffer-limit for replicas: a 256mb hard limit).
constexpr uint64_t kReplicaSlack = 256ull << 20;

void log_line(bool warning, std::string_view line) {
  if (warning) log::warning(line);
  else log::notice(line);
}
}  // namespace

Replication::Replication(Server& server) : server_(server), replid_(new_replid()) {
  replid2_ = std::string(40, '0');
}

Replication::~Replication() { stop(); }

std::string Replication::new_replid() {
  static constexpr char kHex[] = "0123456789abcdef";
  std::random_device rd;
  std::mt19937_64 gen((static_cast<uint64_t>(rd()) << 32) ^ rd());
  std::string id(40, '0');
  for (char& c : id) c = kHex[gen() & 15];
  return id;
}

void Replication::start() {
  const std::string of = server_.config().str(Key::kReplicaOf);
  // In cluster mode the topology names each shard's primary and replicas (the role hook).
  if (of.empty() || server_.config().num(Key::kClusterEnabled)) return;
  const size_t sp = of.find(' ');
  const std::string host = of.substr(0, sp);
  const int port = sp == std::string::npos ? 0 : std::atoi(of.c_str() + sp + 1);
  if (host.empty() || port <= 0 || port > 65535) {
    log::warning("replicaof '" + of + "' is not 'host port': staying a primary");
    return;
  }
  replicate_from(host, static_cast<uint16_t>(port));
}

void Replication::close_links() {
  std::unique_ptr<cluster::ReplicaLink> link;
  std::vector<std::unique_ptr<cluster::ReplicaFeed>> feeds;
  {
    std::lock_guard lock(mu_);
    link = std::move(link_);
    feeds = std::move(feeds_);
  }
  // Joined outside mu_: their threads call back into this object.
  link.reset();
  feeds.clear();
}

void Replication::stop() {
  close_links();
  std::lock_guard lock(mu_);
  if (backlog_ && backlog_observes_) {
    server_.keyspace().remove_observer(backlog_.get());
    backlog_observes_ = false;
  }
}

void Replication::sync_limits() {
  if (!backlog_) return;
  // Frames reference values in the region, so what the backlog holds of overwritten, deleted
  // or evicted values is memory eviction cannot free: at most an eighth of the memory limit
  // for resuming, a quarter more for replicas being fed (docs/replication.md, "The backlog").
  const uint64_t limit = server_.memory_limit();
  backlog_->set_limits(
      std::min(static_cast<uint64_t>(server_.config().num(Key::kReplBacklogSize)), limit / 8),
      std::min(kReplicaSlack, limit / 4));
}

void Replication::ensure_backlog(uint64_t start_offset) {
  if (!backlog_) {
    backlog_ = std::make_shared<cluster::ReplBacklog>(start_offset);
    sync_limits();
  }
  if (!replica_.load() && !backlog_observes_) {
    // From now on every change is a frame (registration locks every shard: one moment).
    server_.keyspace().add_observer(backlog_.get());
    backlog_observes_ = true;
  }
}

void Replication::replicate_from(const std::string& host, uint16_t port) {
  // Our replicas reconnect and resync against the new history (Redis drops them too).
  close_links();

  std::lock_guard lock(mu_);
  uint64_t offset = 0;
  bool have_offset = false;
  if (backlog_) {
    offset = backlog_->offset();
    have_offset = true;
    if (backlog_observes_) {
      server_.keyspace().remove_observer(backlog_.get());
      backlog_observes_ = false;
    }
  }
  replica_.store(true);
  server_.keyspace().set_passive_expiry(true);
  primary_host_ = host;
  primary_port_ = port;

  cluster::LinkOptions o;
  o.host = host;
  o.port = port;
  o.masteruser = server_.config().str(Key::kMasterUser);
  o.masterauth = server_.config().str(Key::kMasterAuth);
  // tls-replication: the link goes to host:port (the primary's tls-port) over TLS, and the port
  // announced is this node's tls-port, as Redis's replicas do (docs/tls.md).
  const bool tls = server_.config().num(Key::kTlsReplication) != 0;
  o.listening_port = tls ? server_.tls_port() : server_.tcp_port();
  if (tls) o.tls = [this] { return server_.tls_client(); };
  o.keyspace = &server_.keyspace();
  o.allocate = [this](size_t size) { return server_.allocate_value(size); };
  o.relay = [this](cluster::FrameType t, std::string_view key, tiering::ValueRef v, int64_t ms,
                   uint64_t size) { relay(t, key, std::move(v), ms, size); };
  o.on_full_sync = [this](const std::string& id, uint64_t off) {
    std::vector<std::unique_ptr<cluster::ReplicaFeed>> feeds;
    {
      std::lock_guard lock(mu_);
      replid_ = id;
      replid2_ = std::string(40, '0');
      second_offset_ = 0;
      backlog_ = std::make_shared<cluster::ReplBacklog>(off);
      sync_limits();
      // This node's own replicas followed the old history: they resync (as in Redis).
      feeds = std::move(feeds_);
    }
    feeds.clear();
  };
  o.on_new_replid = [this](const std::string& id) {
    std::lock_guard lock(mu_);
    replid2_ = replid_;
    second_offset_ = backlog_ ? backlog_->offset() : 0;
    replid_ = id;
  };
  if (have_offset) {
    o.replid = replid_;
    o.offset = static_cast<int64_t>(offset);
  }
  o.timeout_ms = static_cast<int>(server_.config().num(Key::kReplTimeout) * 1000);
  // A migration's handover on the primary: the new topology, before etcd's watch brings it.
  o.on_topology = [this](std::string_view json) {
    if (server_.cluster().enabled()) server_.cluster().apply_json(json);
  };
  o.log = log_line;
  log::notice("connecting to primary " + host + ":" + std::to_string(port) +
              (tls ? " over TLS" : "") + " (REPLICAOF); this node is a replica");
  link_ = std::make_unique<cluster::ReplicaLink>(std::move(o));
  link_->start();
}

void Replication::follow(const std::string& host, uint16_t port) {
  {
    std::lock_guard lock(mu_);
    if (replica_.load() && link_ && primary_host_ == host && primary_port_ == port) return;
  }
  replicate_from(host, port);
}

void Replication::relay(cluster::FrameType type, std::string_view key, tiering::ValueRef value,
                        int64_t expire_ms, uint64_t frame_size) {
  std::shared_ptr<cluster::ReplBacklog> backlog;
  {
    std::lock_guard lock(mu_);
    backlog = backlog_;
  }
  if (!backlog) return;
  if (type == cluster::FrameType::kSet && !value && frame_size > cluster::FrameHeader::kSize + key.size()) {
    // This node could not hold the value, so it cannot repeat the frame: its backlog restarts
    // after it (its own replicas take a full copy).
    std::lock_guard lock(mu_);
    if (backlog_ == backlog)
      backlog_ = std::make_shared<cluster::ReplBacklog>(backlog->offset() + frame_size);
    sync_limits();
    return;
  }
  backlog->append(type, key, std::move(value), expire_ms);
}

void Replication::promote() {
  std::unique_ptr<cluster::ReplicaLink> link;
  {
    std::lock_guard lock(mu_);
    if (!replica_.load()) return;
    link = std::move(link_);
  }
  link.reset();  // the last frame applied is the last one in the backlog
  std::lock_guard lock(mu_);
  const uint64_t offset = backlog_ ? backlog_->offset() : 0;
  replid2_ = replid_;
  second_offset_ = offset;
  replid_ = new_replid();
  replica_.store(false);
  server_.keyspace().set_passive_expiry(false);
  ensure_backlog(offset);
  log::notice("promoted to primary (REPLICAOF NO ONE): new replication id " + replid_ +
              ", history of " + replid2_ + " kept up to offset " + std::to_string(offset));
  primary_host_.clear();
  primary_port_ = 0;
}

Replication::SyncPlan Replication::plan_sync(std::string_view replid, int64_t offset) {
  std::lock_guard lock(mu_);
  ensure_backlog(0);
  SyncPlan plan;
  const bool ours = replid == replid_ || (replid == replid2_ && offset >= 0 &&
                                          static_cast<uint64_t>(offset) <= second_offset_);
  if (ours && offset >= 0 && backlog_->can_resume_from(static_cast<uint64_t>(offset))) {
    plan.full = false;
    plan.offset = static_cast<uint64_t>(offset);
    plan.reply = "+CONTINUE " + replid_;
    return plan;
  }
  plan.full = true;
  plan.offset = backlog_->offset();
  plan.reply = "+FULLRESYNC " + replid_ + " " + std::to_string(plan.offset);
  return plan;
}

cluster::FeedOptions Replication::export_feed(std::unique_ptr<cluster::ReplSocket> socket,
                                              std::shared_ptr<const cluster::SlotSet> slots) {
  std::lock_guard lock(mu_);
  cluster::FeedOptions o;
  o.socket = std::move(socket);
  o.addr = "migration";
  o.full = true;
  o.keyspace = &server_.keyspace();
  o.ssd = server_.ssd() != nullptr ? &server_.ssd()->store() : nullptr;
  o.timeout_ms = static_cast<int>(server_.config().num(Key::kReplTimeout) * 1000);
  o.slots = std::move(slots);
  if (replica_.load()) return o;
  ensure_backlog(0);
  o.start_offset = backlog_->offset();
  o.backlog = backlog_;
  return o;
}

void Replication::attach(std::unique_ptr<cluster::ReplSocket> socket, std::string ip,
                         uint16_t listening_port, const SyncPlan& plan) {
  std::lock_guard lock(mu_);
  cluster::FeedOptions o;
  const bool tls = socket->tls();
  o.socket = std::move(socket);
  o.addr = std::move(ip);
  o.listening_port = listening_port;
  o.full = plan.full;
  o.start_offset = plan.offset;
  o.keyspace = &server_.keyspace();
  o.ssd = server_.ssd() != nullptr ? &server_.ssd()->store() : nullptr;
  o.backlog = backlog_;
  o.timeout_ms = static_cast<int>(server_.config().num(Key::kReplTimeout) * 1000);
  o.on_ack = [this](uint64_t) { on_ack(); };
  o.log = log_line;
  log::notice("replica " + o.addr + ":" + std::to_string(listening_port) +
              (tls ? " (TLS)" : "") +
              (plan.full ? " asks for a full copy; streaming from offset "
                         : " resumes at offset ") +
              std::to_string(plan.offset));
  auto feed = std::make_unique<cluster::ReplicaFeed>(std::move(o));
  feed->start();
  feeds_.push_back(std::move(feed));
}

uint64_t Replication::applied_offset() const {
  std::lock_guard lock(mu_);
  if (replica_.load() && link_) return link_->offset();
  return backlog_ ? backlog_->offset() : 0;
}

bool Replication::promotable() const {
  std::lock_guard lock(mu_);
  return !replica_.load() || (link_ && link_->synced());
}

uint64_t Replication::backlog_bytes() const {
  std::lock_guard lock(mu_);
  return backlog_ ? backlog_->held_bytes() : 0;
}

uint64_t Replication::offset() const {
  std::lock_guard lock(mu_);
  return backlog_ ? backlog_->offset() : 0;
}

int Replication::acked(uint64_t offset) const {
  std::lock_guard lock(mu_);
  int n = 0;
  for (const auto& f : feeds_)
    if (f->state() == cluster::ReplicaFeed::State::kOnline && f->ack_offset() >= offset) ++n;
  return n;
}

int Replication::replica_count() const {
  std::lock_guard lock(mu_);
  int n = 0;
  for (const auto& f : feeds_)
    if (f->state() != cluster::ReplicaFeed::State::kClosed) ++n;
  return n;
}

uint64_t Replication::wait_for(uint64_t offset, int needed, std::function<void()> wake) {
  std::lock_guard lock(wait_mu_);
  const uint64_t id = next_waiter_++;
  waiters_.push_back({id, offset, needed, std::move(wake)});
  // An ACK may have come between the caller's check and now.
  if (acked(offset) >= needed) {
    waiters_.back().wake();
    waiters_.pop_back();
  }
  return id;
}

void Replication::cancel_wait(uint64_t id) {
  std::lock_guard lock(wait_mu_);
  std::erase_if(waiters_, [&](const Waiter& w) { return w.id == id; });
}

void Replication::on_ack() {
  std::lock_guard lock(wait_mu_);
  std::erase_if(waiters_, [&](Waiter& w) {
    if (acked(w.offset) < w.needed) return false;
    w.wake();
    return true;
  });
}

bool Replication::drop_primary_link() {
  std::lock_guard lock(mu_);
  if (!link_) return false;
  link_->drop_connection();
  return true;
}

int Replication::drop_replicas() {
  std::vector<std::unique_ptr<cluster::ReplicaFeed>> feeds;
  {
    std::lock_guard lock(mu_);
    feeds = std::move(feeds_);
  }
  const int n = static_cast<int>(feeds.size());
  feeds.clear();  // joined outside mu_
  return n;
}

void Replication::cron(int64_t now_ms) {
  std::vector<std::unique_ptr<cluster::ReplicaFeed>> closed;
  {
    std::lock_guard lock(mu_);
    for (auto& f : feeds_)
      if (f->state() == cluster::ReplicaFeed::State::kClosed) closed.push_back(std::move(f));
    std::erase(feeds_, nullptr);
    sync_limits();
    if (backlog_ && !replica_.load() && (!feeds_.empty() || exports_.load() > 0)) {
      // Redis's repl-ping-replica-period: a heartbeat in the stream, so replicas see a live
      // primary (and their offsets move) when no write comes.
      const int64_t period = server_.config().num(Key::kReplPingReplicaPeriod) * 1000;
      if (now_ms - last_ping_ms_ >= period) {
        backlog_->append(cluster::FrameType::kPing, {}, {}, now_ms);
        last_ping_ms_ = now_ms;
      }
    }
    if (backlog_) backlog_->trim();
  }
  closed.clear();  // joined outside mu_
}

void Replication::info(std::string* s) const {
  auto field = [s](std::string_view name, const std::string& value) {
    s->append(name);
    s->push_back(':');
    s->append(value);
    s->append("\r\n");
  };
  const int64_t now = tiering::now_ms();
  std::lock_guard lock(mu_);
  const bool replica = replica_.load();
  const uint64_t offset = backlog_ ? backlog_->offset() : 0;
  field("role", replica ? "slave" : "master");
  if (replica && link_) {
    const auto state = link_->state();
    const bool up = state == cluster::ReplicaLink::State::kUp;
    field("master_host", primary_host_);
    field("master_port", std::to_string(primary_port_));
    field("master_link_status", up ? "up" : "down");
    field("master_last_io_seconds_ago",
          std::to_string(link_->last_io_ms() ? (now - link_->last_io_ms()) / 1000 : -1));
    field("master_sync_in_progress", state == cluster::ReplicaLink::State::kSyncing ? "1" : "0");
    field("slave_read_repl_offset", std::to_string(link_->offset()));
    field("slave_repl_offset", std::to_string(link_->offset()));
    if (!up && link_->down_since_ms() != 0)
      field("master_link_down_since_seconds",
            std::to_string((now - link_->down_since_ms()) / 1000));
    field("slave_priority", "100");
    field("slave_read_only", server_.config().num(Key::kReplicaReadOnly) ? "1" : "0");
    field("replica_announced", "1");
    field("master_full_syncs", std::to_string(link_->full_syncs()));
    field("master_partial_syncs", std::to_string(link_->partial_syncs()));
    field("replica_dropped_values", std::to_string(link_->dropped_values()));
  }
  int n = 0;
  std::string lines;
  for (const auto& f : feeds_) {
    const auto st = f->state();
    if (st == cluster::ReplicaFeed::State::kClosed) continue;
    const int64_t lag = f->last_ack_ms() ? (now - f->last_ack_ms()) / 1000 : 0;
    lines += "slave" + std::to_string(n++) + ":ip=" + f->addr() +
             ",port=" + std::to_string(f->port()) +
             ",state=" + (st == cluster::ReplicaFeed::State::kOnline ? "online" : "send_bulk") +
             ",offset=" + std::to_string(f->ack_offset()) + ",lag=" + std::to_string(lag) +
             "\r\n";
  }
  field("connected_slaves", std::to_string(n));
  s->append(lines);
  field("master_failover_state", "no-failover");
  field("master_replid", replid_);
  field("master_replid2", replid2_);
  field("master_repl_offset", std::to_string(offset));
  field("second_repl_offset",
        replid2_ == std::string(40, '0') ? "-1" : std::to_string(second_offset_ + 1));
  field("repl_backlog_active", backlog_ ? "1" : "0");
  field("repl_backlog_size", std::to_string(server_.config().num(Key::kReplBacklogSize)));
  field("repl_backlog_first_byte_offset",
        std::to_string(backlog_ ? backlog_->first_offset() + 1 : 0));
  field("repl_backlog_histlen", std::to_string(backlog_ ? backlog_->held_bytes() : 0));
}

void Replication::role(resp::Writer& out) const {
  std::lock_guard lock(mu_);
  if (replica_.load() && link_) {
    out.array(5);
    out.bulk("slave");
    out.bulk(primary_host_);
    out.integer(primary_port_);
    switch (link_->state()) {
      case cluster::ReplicaLink::State::kConnecting: out.bulk("connecting"); break;
      case cluster::ReplicaLink::State::kHandshake: out.bulk("handshake"); break;
      case cluster::ReplicaLink::State::kSyncing: out.bulk("sync"); break;
      case cluster::ReplicaLink::State::kUp: out.bulk("connected"); break;
    }
    out.integer(static_cast<int64_t>(link_->offset()));
    return;
  }
  out.array(3);
  out.bulk("master");
  out.integer(static_cast<int64_t>(backlog_ ? backlog_->offset() : 0));
  size_t n = 0;
  for (const auto& f : feeds_)
    if (f->state() == cluster::ReplicaFeed::State::kOnline) ++n;
  out.array(n);
  for (const auto& f : feeds_) {
    if (f->state() != cluster::ReplicaFeed::State::kOnline) continue;
    out.array(3);
    out.bulk(f->addr());
    out.bulk(std::to_string(f->port()));
    out.bulk(std::to_string(f->ack_offset()));
  }
}

}  // namespace server
