// cluster/topology_agent.cc - TopologyAgent (cluster/topology_agent.h).
#include "cluster/topology_agent.h"

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <stdexcept>
#include <utility>

namespace cluster {
namespace {

using std::chrono::milliseconds;

constexpr milliseconds kBackoffFirst{100}, kBackoffMax{1000};
constexpr int kGrpcNotFound = 5;  // "etcdserver: requested lease not found"
constexpr std::chrono::seconds kLogEvery{30};  // a repeated failure is logged this often

std::string trim_prefix(std::string prefix) {
  while (!prefix.empty() && prefix.back() == '/') prefix.pop_back();
  return prefix;
}

// Retry delays: 100 ms doubling to 1 s, back to 100 ms after a success.
class Backoff {
 public:
  milliseconds next() {
    const milliseconds d = delay_;
    delay_ = std::min(delay_ * 2, kBackoffMax);
    return d;
  }
  void reset() { delay_ = kBackoffFirst; }

 private:
  milliseconds delay_ = kBackoffFirst;
};

}  // namespace

TopologyAgent::TopologyAgent(AgentOptions options, OnChange on_change)
    : options_(std::move(options)),
      on_change_(std::move(on_change)),
      topology_key_(trim_prefix(options_.prefix) + "/topology"),
      node_key_(trim_prefix(options_.prefix) + "/nodes/" + options_.self.address.id),
      client_(options_.etcd) {
  if (trim_prefix(options_.prefix).empty()) throw std::invalid_argument("TopologyAgent: empty prefix");
  const std::string& id = options_.self.address.id;
  if (id.size() != 40 || id.find_first_not_of("0123456789abcdef") != std::string::npos)
    throw std::invalid_argument("TopologyAgent: node id '" + id + "' is not 40 lowercase hex characters");
  if (options_.lease_ttl_s < 1) throw std::invalid_argument("TopologyAgent: lease TTL below 1 s");
  applied_version_ = options_.self.topology_version;
  repl_offset_ = options_.self.repl_offset;
}

TopologyAgent::~TopologyAgent() { stop(); }

void TopologyAgent::log(const std::string& line) const {
  const std::string text = "cluster-agent node=" + options_.self.address.id.substr(0, 8) + " " + line;
  if (options_.log) options_.log(text);
  else std::fprintf(stderr, "%s\n", text.c_str());
}

void TopologyAgent::start() {
  {
    std::lock_guard lock(mu_);
    if (started_) return;
    started_ = true;
  }
  const std::string& path = options_.saved_path;
  std::error_code ec;
  if (!path.empty() && std::filesystem::exists(path, ec)) {
    try {
      auto saved = std::make_shared<const Topology>(load_topology_file(path));
      const auto mtime = std::filesystem::last_write_time(path);
      {
        std::lock_guard lock(mu_);
        saved_at_ = std::chrono::file_clock::to_sys(mtime);
      }
      log("event=saved_topology_loaded version=" + std::to_string(saved->version) + " path=" + path);
      publish(std::move(saved));
    } catch (const std::exception& e) {
      log(std::string("event=saved_topology_ignored error=\"") + e.what() + "\"");
    }
  }
  lease_thread_ = std::jthread([this](std::stop_token st) { lease_loop(std::move(st)); });
  watch_thread_ = std::jthread([this](std::stop_token st) { watch_loop(std::move(st)); });
}

void TopologyAgent::stop() {
  if (!lease_thread_.joinable() && !watch_thread_.joinable()) return;
  lease_thread_.request_stop();
  watch_thread_.request_stop();
  {
    std::lock_guard lock(mu_);  // a waiter checks the stop token under mu_: no lost wake-up
  }
  cv_.notify_all();
  lease_thread_.join();
  watch_thread_.join();
  int64_t lease = 0;
  {
    std::lock_guard lock(mu_);
    if (lease_link_.ok) lease = lease_id_;
    lease_id_ = 0;
    lease_link_.ok = watch_link_.ok = false;
  }
  if (lease == 0) return;
  try {
    client_.lease_revoke(lease);
    log("event=deregistered lease=" + std::to_string(lease));
  } catch (const std::exception& e) {
    log(std::string("event=revoke_failed error=\"") + e.what() + "\"");
  }
}

std::shared_ptr<const Topology> TopologyAgent::current() const {
  std::lock_guard lock(mu_);
  return current_;
}

TopologyAgent::Status TopologyAgent::status() const {
  std::lock_guard lock(mu_);
  Status s;
  s.etcd_connected = lease_link_.ok && watch_link_.ok;
  s.version = current_ ? current_->version : 0;
  if (last_contact_)
    s.last_contact_ms = std::chrono::duration_cast<milliseconds>(Clock::now() - *last_contact_).count();
  if (lease_renewed_)
    s.lease_renewed_ms = std::chrono::duration_cast<milliseconds>(Clock::now() - *lease_renewed_).count();
  if (saved_at_)
    s.saved_age_s = std::max<int64_t>(
        0, std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now() - *saved_at_).count());
  s.lease_id = lease_id_;
  s.last_error = last_error_;
  return s;
}

void TopologyAgent::set_progress(uint64_t applied_version, uint64_t repl_offset) {
  bool wake = false;
  {
    std::lock_guard lock(mu_);
    if (applied_version != applied_version_) wake = record_dirty_ = true;
    applied_version_ = applied_version;
    repl_offset_ = repl_offset;
  }
  if (wake) cv_.notify_all();
}

NodeRecord TopologyAgent::record() const {
  std::lock_guard lock(mu_);
  NodeRecord r = options_.self;
  r.topology_version = applied_version_;
  r.repl_offset = repl_offset_;
  r.role = "none";
  r.shard.clear();
  const std::string& id = r.address.id;
  if (const Shard* s = current_ ? current_->shard_of_node(id) : nullptr) {
    r.role = s->primary == id ? "primary" : "replica";
    r.shard = s->id;
  }
  return r;
}

void TopologyAgent::contact(Link& link) {
  uint64_t failures = 0;
  {
    std::lock_guard lock(mu_);
    link.ok = true;
    last_contact_ = Clock::now();
    if (&link == &lease_link_) lease_renewed_ = last_contact_;
    failures = std::exchange(link.failures, 0);
  }
  if (failures > 0) log(std::string("event=") + link.name + "_restored failures=" + std::to_string(failures));
}

void TopologyAgent::failure(Link& link, const std::string& what) {
  bool show = false;
  uint64_t failures = 0;
  {
    std::lock_guard lock(mu_);
    link.ok = false;
    last_error_ = what;
    failures = ++link.failures;
    const Clock::time_point now = Clock::now();
    if (failures == 1 || now - link.logged >= kLogEvery) {
      show = true;
      link.logged = now;
    }
  }
  if (show)
    log(std::string("event=") + link.name + "_failed failures=" + std::to_string(failures) + " error=\"" +
        what + "\"");
}

bool TopologyAgent::wait(std::stop_token& stop, milliseconds d, bool wake_on_dirty) {
  std::unique_lock lock(mu_);
  cv_.wait_for(lock, stop, d, [&] { return wake_on_dirty && record_dirty_; });
  return !stop.stop_requested();
}

void TopologyAgent::lease_loop(std::stop_token stop) {
  Backoff backoff;
  int64_t lease = 0;
  int64_t ttl_s = options_.lease_ttl_s;
  std::optional<NodeRecord> written;  // what the record in etcd holds under `lease`, if known
  while (!stop.stop_requested()) {
    try {
      const Clock::time_point sent = Clock::now();
      auto alive_until = [&](int64_t ttl) {
        lease_deadline_.store((sent + std::chrono::seconds(ttl)).time_since_epoch().count(),
                              std::memory_order_release);
        if (options_.on_lease) options_.on_lease(sent + std::chrono::seconds(ttl));
      };
      if (lease == 0) {
        const int64_t id = client_.lease_grant(options_.lease_ttl_s);
        alive_until(options_.lease_ttl_s);
        {
          std::lock_guard lock(mu_);
          lease_id_ = lease = id;
          record_dirty_ = false;
        }
        written.reset();
        NodeRecord now = record();
        client_.put(node_key_, encode(now), lease);
        written = std::move(now);
        log("event=registered key=" + node_key_ + " lease=" + std::to_string(lease));
      } else {
        ttl_s = client_.lease_keepalive(lease);
        if (ttl_s > 0) alive_until(std::min<int64_t>(ttl_s, options_.lease_ttl_s));
        if (ttl_s == 0) {
          log("event=lease_lost lease=" + std::to_string(lease) + " action=register_again");
          std::lock_guard lock(mu_);
          lease = lease_id_ = 0;
          lease_link_.ok = false;
          continue;
        }
        {
          std::lock_guard lock(mu_);
          record_dirty_ = false;
        }
        if (NodeRecord now = record(); !written || !(now == *written)) {
          const bool first = !written;  // the put after the grant failed
          client_.put(node_key_, encode(now), lease);
          written = std::move(now);
          if (first) log("event=registered key=" + node_key_ + " lease=" + std::to_string(lease));
        }
      }
      contact(lease_link_);
      backoff.reset();
      wait(stop, milliseconds(std::max<int64_t>(ttl_s, 1) * 1000 / 3), true);
    } catch (const EtcdError& e) {
      if (e.code() == kGrpcNotFound && lease != 0) {  // a put under a lease that is gone
        std::lock_guard lock(mu_);
        lease = lease_id_ = 0;
      }
      failure(lease_link_, e.what());
      wait(stop, backoff.next(), false);
    } catch (const EtcdUnavailable& e) {
      failure(lease_link_, e.what());
      wait(stop, backoff.next(), false);
    }
  }
}

void TopologyAgent::watch_loop(std::stop_token stop) {
  Backoff backoff;
  while (!stop.stop_requested()) {
    try {
      // Read, then watch from just after the read: no change between the two is missed.
      int64_t revision = 0;
      const std::optional<KeyValue> kv = client_.get(topology_key_, &revision);
      contact(watch_link_);
      backoff.reset();
      if (kv) offer(kv->value, kv->mod_revision);
      else log("event=no_topology key=" + topology_key_);
      client_.watch(topology_key_, revision + 1, [&](const WatchEvent& e) {
        contact(watch_link_);
        if (e.type == WatchEvent::Type::kPut) offer(e.kv.value, e.kv.mod_revision);
        else log("event=topology_deleted action=keep_current");
      }, stop);
    } catch (const EtcdCompacted& e) {
      log(std::string("event=watch_compacted action=read_again error=\"") + e.what() + "\"");
    } catch (const EtcdError& e) {
      failure(watch_link_, e.what());
      wait(stop, backoff.next(), false);
    } catch (const EtcdUnavailable& e) {
      failure(watch_link_, e.what());
      wait(stop, backoff.next(), false);
    }
  }
}

void TopologyAgent::offer(const std::string& json, int64_t mod_revision) {
  std::shared_ptr<const Topology> t;
  try {
    t = std::make_shared<const Topology>(decode(json));
  } catch (const TopologyError& e) {
    log("event=topology_rejected mod_revision=" + std::to_string(mod_revision) + " error=\"" + e.what() + "\"");
    return;
  }
  const std::shared_ptr<const Topology> now = current();
  if (now && t->version <= now->version) {
    if (t->version < now->version)
      log("event=topology_ignored version=" + std::to_string(t->version) + " current=" +
          std::to_string(now->version));
    return;
  }
  if (!options_.saved_path.empty()) {
    try {
      save_topology_file(options_.saved_path, *t);
      std::lock_guard lock(mu_);
      saved_at_ = std::chrono::system_clock::now();
    } catch (const TopologyError& e) {
      log(std::string("event=save_failed error=\"") + e.what() + "\"");
    }
  }
  log("event=topology_applied version=" + std::to_string(t->version) +
      " mod_revision=" + std::to_string(mod_revision));
  publish(std::move(t));
}

void TopologyAgent::publish(std::shared_ptr<const Topology> topology) {
  {
    std::lock_guard lock(mu_);
    current_ = topology;
    record_dirty_ = true;  // role or shard may have changed
  }
  cv_.notify_all();
  if (!on_change_) return;
  try {
    on_change_(std::move(topology));
  } catch (const std::exception& e) {
    log(std::string("event=on_change_failed error=\"") + e.what() + "\"");
  }
}

}  // namespace cluster
