// clients/admin/etcd_store.cc - the topology and node records in etcd. See etcd_store.h.
#include "clients/admin/etcd_store.h"

#include <nlohmann/json.hpp>
#include <stdexcept>

namespace admin {

EtcdStore::EtcdStore(cluster::EtcdOptions options, std::string prefix)
    : etcd_(std::move(options)), prefix_(std::move(prefix)) {
  while (!prefix_.empty() && prefix_.back() == '/') prefix_.pop_back();
  topology_key_ = prefix_ + "/topology";
}

std::optional<std::pair<cluster::Topology, int64_t>> EtcdStore::topology() {
  const std::optional<cluster::KeyValue> kv = etcd_.get(topology_key_);
  if (!kv) return std::nullopt;
  return std::make_pair(cluster::decode(kv->value), kv->mod_revision);
}

std::vector<Registered> EtcdStore::nodes() {
  std::vector<Registered> out;
  for (const cluster::KeyValue& kv : etcd_.get_prefix(prefix_ + "/nodes/")) {
    Registered r;
    try {
      r.record = cluster::decode_node_record(kv.value);
    } catch (const cluster::TopologyError&) {
      continue;  // not a node record of ours: skipped
    }
    r.lease = kv.lease;
    if (kv.lease != 0) {
      // /v3/lease/timetolive: {"TTL": "<seconds left>"} (-1 when the lease is gone).
      const std::string reply = etcd_.post(
          "/v3/lease/timetolive", nlohmann::json{{"ID", std::to_string(kv.lease)}}.dump());
      const nlohmann::json j = nlohmann::json::parse(reply, nullptr, false);
      if (j.is_object() && j.contains("TTL")) {
        const auto& ttl = j["TTL"];
        r.lease_ttl_left_s = ttl.is_string() ? std::stoll(ttl.get<std::string>())
                                             : ttl.get<int64_t>();
      }
    }
    out.push_back(std::move(r));
  }
  return out;
}

cluster::Topology EtcdStore::update(
    const std::function<cluster::Topology(const std::optional<cluster::Topology>&)>& change) {
  for (int attempt = 0; attempt < 10; ++attempt) {
    const auto current = topology();
    std::optional<cluster::Topology> now;
    int64_t revision = 0;
    if (current) {
      now = current->first;
      revision = current->second;
    }
    const cluster::Topology next = change(now);
    if (etcd_.compare_and_swap(topology_key_, revision, cluster::encode(next))) return next;
  }
  throw std::runtime_error("the topology kept changing under this update (10 attempts): try again");
}

}  // namespace admin
