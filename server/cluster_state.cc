// server/cluster_state.cc - the node's identity and the topology it serves by. See
// cluster_state.h.
#include "server/cluster_state.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "cluster/failover.h"
#include "cluster/topology_agent.h"
#include "cluster/topology_file.h"
#include "server/config.h"
#include "server/errors.h"
#include "server/log.h"
#include "server/slot_owner.h"

namespace server {

namespace {

bool is_node_id(std::string_view s) {
  if (s.size() != 40) return false;
  for (char c : s)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

// `name` under `dir`, unless `name` is absolute.
std::string under_dir(const std::string& dir, const std::string& name) {
  if (name.empty() || name.front() == '/' || dir.empty()) return name;
  return (std::filesystem::path(dir) / name).string();
}

// The host clients reach this node at: cluster-announce-ip, else the first bind address
// unless it is a wildcard, else the loopback address.
std::string announced_host(Config& config) {
  std::string host = config.str(Key::kClusterAnnounceIp);
  if (!host.empty()) return host;
  host = config.str(Key::kBind);
  if (auto sp = host.find(' '); sp != std::string::npos) host.resize(sp);
  if (host.empty() || host == "*" || host == "0.0.0.0" || host == "::" || host == "-::*")
    return "127.0.0.1";
  return host;
}

// A topology of this node alone, serving every slot in one shard (no etcd, no file).
cluster::Topology alone(const cluster::NodeAddress& self) {
  cluster::Topology t;
  t.version = 1;
  t.name = "standalone";
  t.nodes.push_back(self);
  cluster::Shard shard;
  shard.id = self.id;  // one node, one shard: the same id serves for both
  shard.slots.push_back({0, cluster::kSlots - 1});
  shard.primary = self.id;
  t.shards.push_back(std::move(shard));
  return t;
}

}  // namespace

std::string load_or_make_node_id(const std::string& path, std::string* error) {
  error->clear();
  std::ifstream in(path);
  if (in) {
    std::string line;
    while (std::getline(in, line)) {
      if (line.empty() || line[0] == '#') continue;
      if (line.rfind("id ", 0) == 0 && is_node_id(line.substr(3))) return line.substr(3);
      break;
    }
    *error = "the node id file " + path + " is malformed (expected a line 'id <40 hex>')";
    return {};
  }
  if (std::filesystem::exists(path)) {
    *error = "cannot read the node id file " + path;
    return {};
  }
  const std::string id = cluster::new_id();
  const std::string text =
      "# stratakv node identity (cluster-config-file): made once, kept across restarts\nid " +
      id + "\n";
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  bool ok = fd >= 0 && ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size()) &&
            ::fsync(fd) == 0;
  if (fd >= 0) ok = ::close(fd) == 0 && ok;
  if (!ok || std::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    *error = "cannot write the node id file " + path;
    return {};
  }
  return id;
}

std::string host_identity(const std::string& configured) {
  if (!configured.empty()) return configured;
  std::ifstream in("/etc/machine-id");
  std::string id;
  if (in && std::getline(in, id) && !id.empty()) return id;
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) == 0 && name[0] != '\0') return name;
  return "unknown-host";
}

ClusterState::ClusterState(Config& config, SlotOwner& owner)
    : config_(config), owner_(owner), enabled_(config.num(Key::kClusterEnabled) != 0) {}

ClusterState::~ClusterState() { stop(); }

void ClusterState::stop() {
  if (failover_) failover_->stop();
  if (agent_) agent_->stop();
}

std::string ClusterState::request_manual_failover(bool force) {
  if (!failover_) return std::string(err::kFailoverNoEtcd);
  const std::shared_ptr<const ClusterView> v = view();
  if (!v || v->my_shard < 0 || v->i_am_primary) return std::string(err::kFailoverNotReplica);
  failover_->request_manual(force);
  return {};
}

uint64_t ClusterState::promotions() const { return failover_ ? failover_->promotions() : 0; }

void ClusterState::update_fence() {
  owner_.set_unconfirmed(started_unconfirmed_ && fencing_.load());
  if (!fencing_.load()) owner_.set_fence_deadline(SlotOwner::kNoFence);
  else if (lapsed_.load()) owner_.set_fence_deadline(SlotOwner::kFencedNow);
  else owner_.set_fence_deadline(lease_deadline_.load());
}

void ClusterState::on_lease(std::chrono::steady_clock::time_point deadline) {
  std::lock_guard lock(fence_mu_);
  const int64_t prev = lease_deadline_.exchange(deadline.time_since_epoch().count());
  // The previous deadline had passed (or this is the first grant): another node may have been
  // promoted meanwhile, so the fence stays until etcd's record confirms this node's role.
  if (std::chrono::steady_clock::now().time_since_epoch().count() > prev && !lapsed_.exchange(true) &&
      fencing_.load())
    log::warning("cluster: the lease in etcd lapsed; writes stay refused until the topology "
                 "confirms this node is still primary");
  update_fence();
}

void ClusterState::confirm(std::shared_ptr<const cluster::Topology> topology) {
  apply(topology);  // a newer version is served first (no effect otherwise)
  const std::shared_ptr<const ClusterView> v = view();
  std::lock_guard lock(fence_mu_);
  if (!v || v->topology->version != topology->version) return;
  if (started_unconfirmed_) {
    started_unconfirmed_ = false;
    update_fence();
  }
  if (v->i_am_primary && lapsed_.exchange(false)) {
    log::notice("cluster: etcd confirms this node is primary (topology version " +
                std::to_string(topology->version) + "); writes accepted");
    update_fence();
  }
}

ClusterState::EtcdLink ClusterState::etcd_link() const {
  EtcdLink link;
  if (!agent_) return link;
  const cluster::TopologyAgent::Status st = agent_->status();
  link.etcd = true;
  link.connected = st.etcd_connected;
  link.last_contact_ms = st.last_contact_ms;
  link.lease_renewed_ms = st.lease_renewed_ms;
  link.saved_age_s = st.saved_age_s;
  link.last_error = st.last_error;
  return link;
}

std::optional<std::string> ClusterState::start_etcd() {
  cluster::AgentOptions o;
  o.etcd.endpoints = cluster::parse_endpoints(config_.str(Key::kClusterEtcdEndpoints));
  o.etcd.user = config_.str(Key::kClusterEtcdUser);
  o.etcd.password = config_.str(Key::kClusterEtcdPassword);
  o.etcd.ca_file = config_.str(Key::kClusterEtcdCaFile);
  o.etcd.cert_file = config_.str(Key::kClusterEtcdCertFile);
  o.etcd.key_file = config_.str(Key::kClusterEtcdKeyFile);
  o.prefix = config_.str(Key::kClusterEtcdPrefix);
  o.self.address = self_;
  o.self.role = "none";
  o.lease_ttl_s = static_cast<int>(config_.num(Key::kClusterEtcdLeaseTtl));
  o.saved_path = under_dir(config_.str(Key::kDir), config_.str(Key::kClusterSavedTopology));
  o.log = [](std::string_view line) { log::notice(line); };
  o.on_lease = [this](std::chrono::steady_clock::time_point deadline) { on_lease(deadline); };
  const cluster::EtcdOptions etcd_options = o.etcd;  // the failover agent's, below
  etcd_options_ = std::make_unique<cluster::EtcdOptions>(o.etcd);
  etcd_prefix_ = o.prefix;
  {
    std::lock_guard lock(fence_mu_);
    started_unconfirmed_ = true;  // the saved copy may be stale: see SlotOwner::unconfirmed
  }
  try {
    // Each topology the agent applies (the saved copy now, then etcd's newer versions on its
    // watch thread) is served at once; the node record then says which version it serves.
    agent_ = std::make_unique<cluster::TopologyAgent>(
        std::move(o), [this](std::shared_ptr<const cluster::Topology> t) {
          const uint64_t version = t->version;
          if (apply(std::move(t)) && agent_) agent_->set_progress(version, 0);
        });
  } catch (const std::exception& e) {
    return std::string("cluster.etcd: ") + e.what();
  }
  source_ = "etcd";
  saved_phase_ = true;
  agent_->start();
  saved_phase_ = false;
  // Failover: a replica takes its primary's place when the primary's lease is gone, and a
  // fenced primary learns from etcd when it may write again (cluster/failover.h).
  cluster::FailoverOptions f;
  f.etcd = etcd_options;
  f.prefix = config_.str(Key::kClusterEtcdPrefix);
  f.my_id = self_.id;
  f.current = [this] { return agent_->current(); };
  f.repl_offset = [this] { return repl_offset_ ? repl_offset_() : 0; };
  f.publish_offset = [this](uint64_t offset) {
    const std::shared_ptr<const ClusterView> v = view();
    agent_->set_progress(v ? v->topology->version : 0, offset);
  };
  f.promotable = [this] { return !promotable_ || promotable_(); };
  f.wants_confirmation = [this] { return fencing_.load() && lapsed_.load(); };
  f.confirm = [this](std::shared_ptr<const cluster::Topology> t) { confirm(std::move(t)); };
  // tls-replication: a manual failover talks to the primary's tls-port over TLS.
  f.primary_tls = [this]() -> std::shared_ptr<ssl_ctx_st> {
    if (!config_.num(Key::kTlsReplication) || !tls_client_) return nullptr;
    return tls_client_();
  };
  f.tls_replication = [this] { return config_.num(Key::kTlsReplication) != 0; };
  f.primary_auth = [this] {
    return std::pair{config_.str(Key::kMasterUser), config_.str(Key::kMasterAuth)};
  };
  f.log = [](std::string_view line) { log::notice(line); };
  failover_ = std::make_unique<cluster::FailoverAgent>(std::move(f));
  failover_->start();
  return std::nullopt;
}

std::shared_ptr<const ClusterView> ClusterState::view() const {
  std::lock_guard lock(view_mu_);
  return view_;
}

std::optional<std::string> ClusterState::load_or_make_id() {
  const std::string dir = config_.str(Key::kDir);
  std::error_code ec;
  if (!dir.empty()) std::filesystem::create_directories(dir, ec);
  std::string error;
  self_.id = load_or_make_node_id(under_dir(dir, config_.str(Key::kClusterConfigFile)), &error);
  if (!error.empty()) return error;
  return std::nullopt;
}

std::optional<std::string> ClusterState::start(uint16_t tcp_port) {
  if (!enabled_) return std::nullopt;
  if (auto error = load_or_make_id()) return error;
  self_.host = announced_host(config_);
  const int64_t port = config_.num(Key::kClusterAnnouncePort);
  self_.port = port != 0 ? static_cast<uint16_t>(port) : tcp_port;
  // The record carries tls-port too: a replica with tls-replication (or a migration's target
  // with tls-cluster) links to it (docs/tls.md). Set at start only, so the configured value is
  // the port listened on.
  self_.tls_port = static_cast<uint16_t>(config_.num(Key::kTlsPort));
  std::string unix_socket = config_.str(Key::kUnixSocket);
  if (!unix_socket.empty()) {
    std::error_code ec;
    const auto abs = std::filesystem::absolute(unix_socket, ec);
    if (!ec) unix_socket = abs.string();
  }
  self_.unix_socket = unix_socket;
  self_.host_id = host_identity(config_.str(Key::kClusterHostId));
  owner_.set_cluster_enabled(true);

  const std::string file = config_.str(Key::kClusterTopologyFile);
  std::shared_ptr<const cluster::Topology> first;
  if (!config_.str(Key::kClusterEtcdEndpoints).empty()) {
    if (!file.empty()) return "cluster.topology-file and cluster.etcd.endpoints exclude each other";
    // Until a topology comes (the saved copy, or etcd's), the node knows only itself and
    // serves no slot: -CLUSTERDOWN.
    cluster::Topology empty;
    empty.name = "unknown";
    empty.nodes.push_back(self_);
    apply(std::make_shared<const cluster::Topology>(std::move(empty)));
    return start_etcd();
  }
  if (!file.empty()) {
    try {
      first = std::make_shared<const cluster::Topology>(cluster::load_topology_file(file));
    } catch (const cluster::TopologyError& e) {
      return std::string("cluster.topology-file: ") + e.what();
    }
    source_ = "file";
  } else {
    first = std::make_shared<const cluster::Topology>(alone(self_));
    source_ = "self";
  }
  apply(std::move(first));
  return std::nullopt;
}

bool ClusterState::apply(std::shared_ptr<const cluster::Topology> topology) {
  std::lock_guard lock(apply_mu_);
  const std::shared_ptr<const ClusterView> current = view();
  // Only newer versions (0 is the placeholder of a node that has none yet).
  if (current && current->topology->version >= topology->version) return false;

  auto view = std::make_shared<ClusterView>();
  view->topology = topology;
  view->slots = cluster::SlotMap(*topology);
  // This node in the topology: by its id, else (a static file written before the id existed)
  // by its announced address.
  view->my_id = self_.id;
  if (topology->node(self_.id) == nullptr) {
    for (const cluster::NodeAddress& n : topology->nodes)
      if (n.host == self_.host && n.port == self_.port) view->my_id = n.id;
  }
  for (size_t i = 0; i < topology->shards.size(); ++i) {
    const cluster::Shard& shard = topology->shards[i];
    bool mine = shard.primary == view->my_id;
    for (const std::string& r : shard.replicas) mine = mine || r == view->my_id;
    if (mine) {
      view->my_shard = static_cast<int>(i);
      view->i_am_primary = shard.primary == view->my_id;
    }
  }

  // Slots: runs of one shard at a time, each one assign() (or unserve()).
  for (uint32_t first = 0; first < cluster::kSlots;) {
    const uint16_t shard_index = view->slots.shard_of(static_cast<uint16_t>(first));
    uint32_t last = first;
    while (last + 1 < cluster::kSlots &&
           view->slots.shard_of(static_cast<uint16_t>(last + 1)) == shard_index)
      ++last;
    const auto f = static_cast<uint16_t>(first), l = static_cast<uint16_t>(last);
    const size_t count = last - first + 1;
    const cluster::Shard* shard =
        shard_index == cluster::SlotMap::kNoShard ? nullptr : &topology->shards[shard_index];
    const cluster::NodeAddress* primary =
        shard == nullptr || shard->primary.empty() ? nullptr : topology->node(shard->primary);
    if (shard != nullptr) view->slots_assigned += count;
    // A replica holds its shard's keys: READONLY connections read them here.
    owner_.set_replica_slots(f, l, shard != nullptr && view->my_shard >= 0 &&
                                       shard_index == static_cast<uint16_t>(view->my_shard) &&
                                       !view->i_am_primary);
    if (primary == nullptr) {
      owner_.unserve(f, l);
    } else {
      view->slots_ok += count;
      if (primary->id == view->my_id) owner_.assign(f, l, {});
      else
        owner_.assign(f, l, primary->host + ":" + std::to_string(primary->port),
                      primary->tls_port == 0 ? std::string() : primary->host + ":" + std::to_string(primary->tls_port));
    }
    first = last + 1;
  }
  view->ok = view->slots_ok == cluster::kSlots ||
             config_.num(Key::kClusterRequireFullCoverage) == 0;
  owner_.set_cluster_down(!view->ok);
  // Fencing applies to a primary whose shard has replicas, in etcd mode (without replicas no
  // node could take its place: it keeps writing through an etcd outage).
  {
    std::lock_guard lock(fence_mu_);
    // A topology from etcd (not the saved copy) says where this node stands.
    if (!saved_phase_.load()) started_unconfirmed_ = false;
    const bool fence = agent_ != nullptr && view->i_am_primary && view->my_shard >= 0 &&
                       !topology->shards[static_cast<size_t>(view->my_shard)].replicas.empty();
    fencing_.store(fence);
    update_fence();
    // A manual failover paused this node's writes (REPLCONF pause-writes, up to 10 s) and then
    // made it a replica: the pause ends here, or a promotion back within those seconds would
    // find its writes still refused. (Lifting it from the new primary instead could let this
    // node write before it learnt its new role.)
    if (!view->i_am_primary) owner_.pause_writes_until(0);
  }
  // Follow this node's role: a replica replicates from its shard's primary.
  if (role_hook_ && view->my_shard >= 0) {
    const cluster::Shard& mine = topology->shards[static_cast<size_t>(view->my_shard)];
    if (view->i_am_primary) role_hook_(nullptr);
    else if (const cluster::NodeAddress* p = topology->node(mine.primary)) role_hook_(p);
  }
  {
    std::lock_guard lock(view_mu_);
    view_ = view;
  }
  if (view_hook_) view_hook_(view);
  log::notice("cluster: serving topology version " + std::to_string(topology->version) + " (" +
              std::to_string(topology->shards.size()) + " shards, " +
              std::to_string(topology->nodes.size()) + " nodes)");
  return true;
}

bool ClusterState::apply_json(std::string_view json) {
  std::shared_ptr<const cluster::Topology> topology;
  try {
    topology = std::make_shared<const cluster::Topology>(cluster::decode(json));
  } catch (const cluster::TopologyError& e) {
    log::warning(std::string("cluster: a topology record that does not decode: ") + e.what());
    return false;
  }
  return apply(std::move(topology));
}

}  // namespace server
