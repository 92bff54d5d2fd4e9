// cluster/etcd_client.cc - EtcdClient's unary calls: kv range/put/txn/deleterange and leases
// (cluster/etcd_client.h). The watch is in etcd_watch.cc, the transport in etcd_transport.cc.
#include "cluster/etcd_client.h"

#include <utility>

#include "cluster/etcd_transport.h"

namespace cluster {

using etcd_detail::base64_encode;
using etcd_detail::decode_kv;
using etcd_detail::int_field;
using etcd_detail::Json;

namespace {

constexpr int kGrpcNotFound = 5;

Json put_request(std::string_view key, std::string_view value, int64_t lease_id) {
  Json put = {{"key", base64_encode(key)}, {"value", base64_encode(value)}};
  if (lease_id != 0) put["lease"] = std::to_string(lease_id);
  return put;
}

}  // namespace

std::vector<std::string> parse_endpoints(std::string_view list) {
  std::vector<std::string> out;
  for (size_t at = 0; at <= list.size();) {
    size_t comma = list.find(',', at);
    if (comma == std::string_view::npos) comma = list.size();
    std::string_view e = list.substr(at, comma - at);
    while (!e.empty() && e.front() == ' ') e.remove_prefix(1);
    while (!e.empty() && e.back() == ' ') e.remove_suffix(1);
    if (!e.empty())
      out.push_back(e.find("://") == std::string_view::npos ? "http://" + std::string(e)
                                                            : std::string(e));
    at = comma + 1;
  }
  return out;
}

EtcdClient::EtcdClient(EtcdOptions options) : impl_(std::make_unique<Impl>(std::move(options))) {}

EtcdClient::~EtcdClient() = default;

std::optional<KeyValue> EtcdClient::get(std::string_view key, int64_t* revision) {
  const Json reply = impl_->transport.request("/v3/kv/range", {{"key", base64_encode(key)}}, true);
  if (revision) *revision = int_field(reply.value("header", Json::object()), "revision");
  auto kvs = reply.find("kvs");
  if (kvs == reply.end() || !kvs->is_array() || kvs->empty()) return std::nullopt;
  return decode_kv(kvs->front());
}

std::vector<KeyValue> EtcdClient::get_prefix(std::string_view prefix, int64_t* revision) {
  const std::string key = prefix.empty() ? std::string(1, '\0') : std::string(prefix);
  const Json body = {{"key", base64_encode(key)}, {"range_end", base64_encode(etcd_detail::prefix_range_end(prefix))}};
  const Json reply = impl_->transport.request("/v3/kv/range", body, true);
  if (revision) *revision = int_field(reply.value("header", Json::object()), "revision");
  std::vector<KeyValue> out;
  auto kvs = reply.find("kvs");
  if (kvs != reply.end() && kvs->is_array())
    for (const Json& kv : *kvs) out.push_back(decode_kv(kv));
  return out;
}

int64_t EtcdClient::put(std::string_view key, std::string_view value, int64_t lease_id) {
  const Json reply = impl_->transport.request("/v3/kv/put", put_request(key, value, lease_id), true);
  return int_field(reply.value("header", Json::object()), "revision");
}

bool EtcdClient::compare_and_swap(std::string_view key, int64_t expected_mod_revision,
                                  std::string_view value, int64_t lease_id) {
  const Json body = {
      {"compare", Json::array({{{"key", base64_encode(key)},
                                {"target", "MOD"},
                                {"result", "EQUAL"},
                                {"mod_revision", std::to_string(expected_mod_revision)}}})},
      {"success", Json::array({{{"request_put", put_request(key, value, lease_id)}}})}};
  const Json reply = impl_->transport.request("/v3/kv/txn", body, false);
  auto ok = reply.find("succeeded");
  return ok != reply.end() && ok->is_boolean() && ok->get<bool>();
}

bool EtcdClient::erase(std::string_view key) {
  const Json reply = impl_->transport.request("/v3/kv/deleterange", {{"key", base64_encode(key)}}, true);
  return int_field(reply, "deleted") > 0;
}

int64_t EtcdClient::lease_grant(int64_t ttl_seconds) {
  const Json reply = impl_->transport.request("/v3/lease/grant", {{"TTL", std::to_string(ttl_seconds)}}, true);
  const int64_t id = int_field(reply, "ID");
  if (id == 0) throw EtcdError("etcd lease grant: no ID in the reply", 0);
  return id;
}

int64_t EtcdClient::lease_keepalive(int64_t lease_id) {
  // A stream in gRPC: the gateway answers one request with {"result": LeaseKeepAliveResponse}.
  const Json reply = impl_->transport.request("/v3/lease/keepalive", {{"ID", std::to_string(lease_id)}}, true);
  return int_field(reply.value("result", Json::object()), "TTL");
}

bool EtcdClient::lease_revoke(int64_t lease_id) {
  try {
    impl_->transport.request("/v3/lease/revoke", {{"ID", std::to_string(lease_id)}}, true);
    return true;
  } catch (const EtcdError& e) {
    if (e.code() == kGrpcNotFound) return false;
    throw;
  }
}

std::string EtcdClient::post(std::string_view path, std::string_view json_body) {
  const Json body = Json::parse(json_body, nullptr, false);
  if (body.is_discarded()) throw std::invalid_argument("EtcdClient::post: the body is not JSON");
  return impl_->transport.request(path, body, false).dump();
}

std::string EtcdClient::endpoint() const {
  return impl_->transport.endpoint_url(impl_->transport.preferred());
}

}  // namespace cluster
