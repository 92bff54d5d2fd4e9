#include "cluster_core.h"

#include <sys/stat.h>

#include <chrono>
#include <set>

#include "session.h"

namespace stratakv::detail {
namespace {

// Threads that run the node parts of one call (besides the caller's).
constexpr size_t kPoolThreads = 15;

bool is_unix_socket(const std::string& path) {
  struct stat st {};
  return !path.empty() && path[0] == '/' && ::stat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
}

// CONFIG GET's value (a [name, value] array), or "" when the server does not say.
std::string config_get(Session& s, std::string_view name) {
  Args a{"CONFIG", "GET", name};
  Reply r = s.call(a);
  if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || r->element[1]->type != REDIS_REPLY_STRING) return {};
  return std::string(text(r->element[1]));
}

// Options::read_from, else the URL's (a cluster's reads only).
ReadFrom read_from(bool cluster, const Url& url, const Options& options) {
  if (!cluster) return ReadFrom::kPrimary;
  if (options.read_from != ReadFrom::kPrimary) return options.read_from;
  return url.read_from.value_or(ReadFrom::kPrimary);
}

// The key of a pool in nodes_.
std::string pool_key(const NodeAddress& a, bool readonly) { return (readonly ? "ro " : "") + a.address(); }

std::string string_reply(Session& s, std::initializer_list<std::string_view> args) {
  Args a(args);
  Reply r = s.call(a);
  return r->type == REDIS_REPLY_STRING || r->type == REDIS_REPLY_STATUS ? std::string(text(r.get())) : "";
}

}  // namespace

ClusterCore::ClusterCore(Url url, Options options)
    : cluster_(false), seeds_{std::move(url)},
      shared_(std::make_shared<ClientShared>(std::move(options))), pool_(kPoolThreads),
      reads_(ReadFrom::kPrimary) {}

ClusterCore::ClusterCore(std::vector<Url> seeds, Options options)
    : cluster_(true), seeds_(std::move(seeds)),
      shared_(std::make_shared<ClientShared>(std::move(options))), pool_(kPoolThreads),
      reads_(read_from(true, seeds_.front(), shared_->options())) {
  shared_->set_memfd_buffers(true);  // any node may be on this host (shm)
}

ClusterCore::~ClusterCore() = default;

void ClusterCore::start() {
  if (!cluster_) {
    only_ = std::make_shared<ClientCore>(seeds_.front(), shared_);
    only_->start();
    // One node: buffers are made for its transport only (a memfd for shm, NIC memory for verbs).
    if (only_->choice() != TransportChoice::kVerbs) shared_->close_device();
    shared_->set_memfd_buffers(traits(only_->choice()).shared_memory);
    map_ = std::make_shared<const SlotMap>(SlotMap::single({seeds_.front().host, seeds_.front().port, {}}));
    return;
  }
  std::exception_ptr last;
  for (const Url& seed : seeds_) {
    try {
      Session s(seed, options());
      std::optional<SlotMap> m = fetch_map(s, seed.host);
      apply(m ? std::move(*m) : SlotMap::single({seed.host, seed.port, {}}));
      last = nullptr;
      break;
    } catch (const Error& e) {
      if (e.kind() != Error::Kind::kConnection) throw;
      last = std::current_exception();
    }
  }
  if (last) std::rethrow_exception(last);
  const auto m = map();
  const size_t primaries = m->nodes().size();
  const size_t replicas = reads_.uses_replicas() ? m->replicas().size() : 0;
  pool_.run(primaries + replicas, [&](size_t i) {
    try {
      if (i < primaries) node(m->nodes()[i]);
      else replica(m->replicas()[i - primaries]);
    } catch (...) {  // retried when the node is first used
    }
  });
}

std::string_view ClusterCore::transport() {
  if (only_) return traits(only_->choice()).name;
  std::set<std::string_view> names;
  std::lock_guard lk(mu_);
  for (const auto& [address, f] : nodes_) {
    if (f.wait_for(std::chrono::seconds(0)) != std::future_status::ready) continue;
    try {
      names.insert(traits(f.get()->choice()).name);
    } catch (...) {
    }
  }
  if (names.size() == 1) return *names.begin();
  return names.empty() ? "resp" : "mixed";
}

std::shared_ptr<const SlotMap> ClusterCore::map() const {
  std::lock_guard lk(mu_);
  return map_;
}

std::shared_ptr<ClientCore> ClusterCore::node(const NodeAddress& a, bool readonly) {
  const std::string address = pool_key(a, readonly);
  std::promise<std::shared_ptr<ClientCore>> made;
  std::shared_future<std::shared_ptr<ClientCore>> f;
  bool maker = false;
  {
    std::lock_guard lk(mu_);
    auto it = nodes_.find(address);
    if (it != nodes_.end()) {
      f = it->second;
    } else {
      f = made.get_future().share();
      nodes_.emplace(address, f);
      maker = true;
    }
  }
  if (maker) {
    try {
      made.set_value(make_node(a, readonly));
    } catch (...) {
      {
        std::lock_guard lk(mu_);
        nodes_.erase(address);  // the next call tries again
      }
      made.set_exception(std::current_exception());
    }
  }
  return f.get();
}

std::shared_ptr<ClientCore> ClusterCore::make_node(const NodeAddress& a, bool readonly) {
  Url url = node_url(a);
  url.readonly = readonly;
  auto core = std::make_shared<ClientCore>(url, shared_);
  core->start();
  if (reads_.mode() == ReadFrom::kNearest) {  // the node's first figure: one PING
    const auto t0 = std::chrono::steady_clock::now();
    core->with_session([](Session& s) {
      Args ping{"PING"};
      s.call_ok(ping);
    });
    reads_.record(a.address(), std::chrono::steady_clock::now() - t0);
  }
  return core;
}

Url ClusterCore::node_url(const NodeAddress& a) {
  Url tcp = seeds_.front();
  tcp.scheme = Url::Scheme::kTcp;
  tcp.host = a.host;
  tcp.port = a.port;
  // Over TLS (rediss+cluster://) every node is reached as the seeds are: the map's ports are
  // the nodes' tls-ports (CLUSTER SLOTS answers a TLS client so), and no Unix socket is tried.
  if (!options().cluster_unix_sockets || tcp.tls) return tcp;
  try {
    Session s(tcp, options());
    Url ux = tcp;
    ux.scheme = Url::Scheme::kUnix;
    ux.path = config_get(s, "unixsocket");
    if (!is_unix_socket(ux.path)) return tcp;
    // The server behind the path must be this node (a path may exist on several hosts).
    Session u(ux, options());
    const bool same = !a.id.empty() ? string_reply(u, {"CLUSTER", "MYID"}) == a.id
                                    : config_get(u, "port") == std::to_string(a.port);
    return same ? ux : tcp;
  } catch (const Error&) {
    return tcp;  // making the node over TCP reports what is wrong
  }
}

std::optional<SlotMap> ClusterCore::fetch_map(Session& s, std::string_view host) {
  // INFO first: a map read after it is at least that version (a later refresh replaces it).
  Args info{"CLUSTER", "INFO"};
  Args slots{"CLUSTER", "SLOTS"};
  s.append(info);
  s.append(slots);
  Reply ri = s.read();
  Reply rs = s.read();
  if (rs->type == REDIS_REPLY_ERROR) {
    const std::string_view e = text(rs.get());
    if (e.starts_with("ERR This instance has cluster support disabled") || e.starts_with("ERR unknown command"))
      return std::nullopt;
    throw Error(Error::Kind::kServer, std::string(e));
  }
  const bool has_info = ri->type == REDIS_REPLY_STRING;
  return SlotMap::from_cluster_slots(rs.get(), host, has_info ? cluster_epoch(text(ri.get())) : 0);
}

void ClusterCore::apply(SlotMap m) {
  std::lock_guard lk(mu_);
  if (map_ && m.version() < map_->version()) return;
  if (!map_ || m.version() > map_->version()) learnt_.clear();
  for (const auto& [slot, owner] : learnt_) m.set_owner(slot, owner.first, owner.second);
  map_ = std::make_shared<const SlotMap>(std::move(m));
}

void ClusterCore::learn_moved(std::span<const Redirect> moved, const NodeAddress& from,
                              const std::shared_ptr<const SlotMap>& seen) {
  if (moved.empty()) return;
  bool stale;
  {
    std::lock_guard lk(mu_);
    stale = map_ == seen;
    SlotMap m = *map_;
    for (const Redirect& r : moved) {
      const std::string& host = r.host.empty() ? from.host : r.host;
      m.set_owner(r.slot, host, r.port);
      learnt_[r.slot] = {host, r.port};
    }
    map_ = std::make_shared<const SlotMap>(std::move(m));
  }
  if (stale) refresh(&from, nullptr);
}

void ClusterCore::node_failed(const NodeAddress& failed, const std::shared_ptr<const SlotMap>& seen,
                              bool replica) {
  std::shared_future<std::shared_ptr<ClientCore>> gone;  // closed outside the lock
  bool stale;
  {
    std::lock_guard lk(mu_);
    auto it = nodes_.find(pool_key(failed, replica));
    if (it != nodes_.end() && it->second.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
      gone = std::move(it->second);
      nodes_.erase(it);  // made afresh when next used (the server may have restarted)
    }
    stale = map_ == seen;
  }
  gone = {};
  if (stale) refresh(nullptr, &failed);
}

void ClusterCore::refresh(const NodeAddress* first, const NodeAddress* avoid) {
  {
    std::unique_lock lk(mu_);
    if (refreshing_) {
      refreshed_.wait(lk, [&] { return !refreshing_; });
      return;
    }
    refreshing_ = true;
  }
  std::vector<NodeAddress> candidates;
  if (first) candidates.push_back(*first);
  const std::shared_ptr<const SlotMap> known = map();
  for (const NodeAddress& n : known->nodes()) candidates.push_back(n);
  // A replica knows the new map once it took over from a primary that is gone (failover).
  for (const NodeAddress& n : known->replicas()) candidates.push_back(n);
  for (const Url& u : seeds_) candidates.push_back({u.host, u.port, {}});
  std::set<std::string> tried;
  if (avoid) tried.insert(avoid->address());
  for (const NodeAddress& c : candidates) {
    if (!tried.insert(c.address()).second) continue;
    try {
      Url url = seeds_.front();
      url.host = c.host;
      url.port = c.port;
      Session s(url, options());  // a control connection of its own: no pool is waited for
      std::optional<SlotMap> m = fetch_map(s, c.host);
      if (!m) continue;
      apply(std::move(*m));
      break;
    } catch (const std::exception&) {  // the next candidate
    }
  }
  {
    std::lock_guard lk(mu_);
    refreshing_ = false;
  }
  refreshed_.notify_all();
}

}  // namespace stratakv::detail
