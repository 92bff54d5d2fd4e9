#include "server/client_registry.h"

#include <vector>

#include "server/connection.h"

namespace server {

void ClientRegistry::add(uint64_t id, std::weak_ptr<Connection> conn) {
  std::lock_guard lock(mu_);
  clients_.emplace(id, std::move(conn));
  count_.store(clients_.size(), std::memory_order_relaxed);
}

void ClientRegistry::remove(uint64_t id) {
  std::lock_guard lock(mu_);
  clients_.erase(id);
  count_.store(clients_.size(), std::memory_order_relaxed);
}

std::shared_ptr<Connection> ClientRegistry::find(uint64_t id) {
  std::lock_guard lock(mu_);
  auto it = clients_.find(id);
  return it == clients_.end() ? nullptr : it->second.lock();
}

void ClientRegistry::for_each(const std::function<void(Connection&)>& fn) {
  std::vector<std::shared_ptr<Connection>> live;
  {
    std::lock_guard lock(mu_);
    live.reserve(clients_.size());
    for (auto& [id, weak] : clients_)
      if (auto c = weak.lock()) live.push_back(std::move(c));
  }
  for (auto& c : live) fn(*c);
}

}  // namespace server
