// clients/admin/node_links.cc - connections to the nodes. See node_links.h.
#include "clients/admin/node_links.h"

#include <hiredis/hiredis.h>

namespace admin {

namespace {

std::string key_of(const cluster::NodeAddress& n) { return n.host + ":" + std::to_string(n.port); }

}  // namespace

NodeLinks::~NodeLinks() {
  for (auto& [key, c] : links_)
    if (c != nullptr) redisFree(c);
}

redisContext* NodeLinks::link(const cluster::NodeAddress& n) {
  auto [it, fresh] = links_.try_emplace(key_of(n), nullptr);
  if (!fresh && it->second != nullptr) return it->second;
  const timeval timeout{timeout_ms_ / 1000, (timeout_ms_ % 1000) * 1000};
  redisContext* c = redisConnectWithTimeout(n.host.c_str(), n.port, timeout);
  if (c == nullptr || c->err) {
    if (c) redisFree(c);
    return nullptr;
  }
  redisSetTimeout(c, timeout);
  it->second = c;
  return c;
}

void NodeLinks::drop(const cluster::NodeAddress& n) {
  auto it = links_.find(key_of(n));
  if (it == links_.end() || it->second == nullptr) return;
  redisFree(it->second);
  it->second = nullptr;
}

std::map<std::string, std::string> NodeLinks::info(const cluster::NodeAddress& n) {
  std::map<std::string, std::string> fields;
  redisContext* c = link(n);
  if (c == nullptr) return fields;
  auto* reply = static_cast<redisReply*>(redisCommand(c, "INFO everything"));
  if (reply == nullptr) {
    drop(n);
    return fields;
  }
  if (reply->type == REDIS_REPLY_STRING) {
    const std::string text(reply->str, reply->len);
    for (size_t at = 0; at < text.size();) {
      size_t end = text.find("\r\n", at);
      if (end == std::string::npos) end = text.size();
      const std::string line = text.substr(at, end - at);
      if (const size_t colon = line.find(':'); colon != std::string::npos && line[0] != '#')
        fields[line.substr(0, colon)] = line.substr(colon + 1);
      at = end + 2;
    }
  }
  freeReplyObject(reply);
  return fields;
}

long long NodeLinks::count_keys(const cluster::NodeAddress& n, uint16_t slot) {
  redisContext* c = link(n);
  if (c == nullptr) return -1;
  auto* r = static_cast<redisReply*>(redisCommand(c, "CLUSTER COUNTKEYSINSLOT %d", int{slot}));
  if (r == nullptr) {
    drop(n);
    return -1;
  }
  const long long keys = r->type == REDIS_REPLY_INTEGER ? r->integer : -1;
  freeReplyObject(r);
  return keys;
}

}  // namespace admin

namespace admin {

std::string NodeLinks::failover(const cluster::NodeAddress& n, bool force) {
  const std::string where = n.host + ":" + std::to_string(n.port);
  redisContext* c = link(n);
  if (c == nullptr) return "cannot reach " + where;
  auto* reply = static_cast<redisReply*>(
      force ? redisCommand(c, "CLUSTER FAILOVER FORCE") : redisCommand(c, "CLUSTER FAILOVER"));
  if (reply == nullptr) {
    drop(n);
    return "no answer from " + where;
  }
  std::string error;
  if (reply->type != REDIS_REPLY_STATUS)
    error = reply->str ? std::string(reply->str, reply->len) : "unexpected reply";
  freeReplyObject(reply);
  return error;
}

}  // namespace admin
