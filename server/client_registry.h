// server/client_registry.h - every connected client, by id: for CLIENT LIST/KILL, maxclients,
// idle timeouts and shutdown. Thread-safe.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>

namespace server {

class Connection;

class ClientRegistry {
 public:
  /// Allocates the next client id (ids start at 1 and are never reused, as in Redis).
  uint64_t next_id() { return next_id_.fetch_add(1) + 1; }
  void add(uint64_t id, std::weak_ptr<Connection> conn);
  void remove(uint64_t id);
  /// Number of connected clients.
  size_t count() const { return count_.load(std::memory_order_relaxed); }
  /// The client with `id`, or null.
  std::shared_ptr<Connection> find(uint64_t id);
  /// Calls `fn` for every live client, in id order, without holding the registry's lock.
  void for_each(const std::function<void(Connection&)>& fn);

 private:
  std::mutex mu_;
  std::map<uint64_t, std::weak_ptr<Connection>> clients_;
  std::atomic<uint64_t> next_id_{0};
  std::atomic<size_t> count_{0};
};

}  // namespace server
