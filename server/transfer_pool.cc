// server/transfer_pool.cc - the transfer pool's threads. See transfer_pool.h.
#include "server/transfer_pool.h"

#include <asio/post.hpp>

#include <utility>

namespace server {

TransferPool::TransferPool(size_t threads) : threads_(threads), pool_(threads) {}

TransferPool::~TransferPool() { stop(); }

void TransferPool::submit(Transfer* t, std::function<void()> done) {
  offloaded_.fetch_add(1, std::memory_order_relaxed);
  offloaded_bytes_.fetch_add(t->bytes(), std::memory_order_relaxed);
  in_flight_.fetch_add(1, std::memory_order_relaxed);
  asio::post(pool_, [this, t, done = std::move(done)] {
    t->copy();
    in_flight_.fetch_sub(1, std::memory_order_relaxed);
    done();
  });
}

void TransferPool::stop() {
  if (stopped_.exchange(true)) return;
  pool_.join();
}

}  // namespace server
