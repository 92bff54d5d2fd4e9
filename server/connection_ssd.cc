// server/connection_ssd.cc - what a connection does around a command when the SSD tier is on
// (tiering/ssd_tier.h, docs/ssd-tier.md), for stages 4, 5 and 7 of the request pipeline
// (server/pipeline.h, which runs them in order): pin the memory values of the command's keys, load
// the keys that are on SSD only on the I/O pool (never on this thread) and resume when they
// are in memory, then, after the command, release what it pinned and hold its reply until the
// SSD records it superseded are gone from disk. A connection runs its commands one at a time,
// so pipelined replies keep their order across the waits.
#include <asio/co_spawn.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>

#include <algorithm>
#include <chrono>
#include <memory>
#include <thread>

#include "server/connection.h"
#include "server/errors.h"
#include "server/server.h"

namespace server {

bool Connection::ssd_pin(const PreparedCommand& cmd, const resp::Request& req, int64_t now_ms) {
  tiering::SsdTier* tier = server_.ssd();
  ssd_loads_.clear();
  for (size_t i : cmd.keys)
    if (tier->prepare(req[i], now_ms, ssd_pins_)) ssd_loads_.push_back(req[i]);
  return !ssd_loads_.empty();
}

tiering::SsdTier::Loaded Connection::load_one(tiering::SsdTier& tier, std::string_view key,
                                              int64_t now, bool prefetch) {
  try {
    return tier.load(key, now, [this, now, prefetch](size_t n) -> tiering::ValueRef {
      // A promotion must fit maxmemory as a write does: first values with an SSD copy leave
      // (free, nothing lost), then wait for demotions to make room (this is a pool thread:
      // blocking is fine), else free it now. A prefetch never waits: no room, no prefetch.
      // With tiering.ssd.admission reuse the coldest values go at once instead (no waiting).
      if (server_.must_wait_for_room(n, Server::RoomFor::kLoad))
        server_.evictor().make_room(n, false, now,
                                    /*drop_unwritten=*/server_.ssd()->selective());
      if (prefetch) {
        if (server_.must_wait_for_room(n, Server::RoomFor::kLoad)) return {};
        return tiering::ValueRef::allocate(n);
      }
      Server::RoomWait wait(server_, n, Server::RoomFor::kLoad);
      while (wait.again()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      return server_.allocate_value(n);
    });
  } catch (const std::bad_alloc&) {
    return {{}, false, {tiering::SsdStatus::Code::kNoMemory, "out of memory"}};
  }
}

void Connection::collect_prefetch(std::string_view ahead, int64_t now_ms) {
  constexpr size_t kMaxPrefetch = 32;  // keys; the I/O pool has a few threads
  tiering::SsdTier* tier = server_.ssd();
  ssd_prefetch_.clear();
  if (ahead.empty() || tier->promote_after() != 1) return;
  resp::Parser peek;  // copies what it parses: only the read buffer's rest, a few KiB at most
  size_t off = 0;
  while (off < ahead.size() && ssd_prefetch_.size() < kMaxPrefetch) {
    resp::Parser::Status st;
    off += peek.feed(ahead.data() + off, ahead.size() - off, &st);
    if (st != resp::Parser::Status::kRequest) break;
    const resp::Request& r = peek.request();
    // Stages 1-3 as the request will pass them: a refused one (a key another node serves, for
    // one) loads nothing.
    prepare(server_, r, authenticated, acl_user(), peek_);
    if (!peek_.runs() || !peek_.reads_values) continue;
    for (size_t i : peek_.keys) {
      const std::string_view key = r[i];
      if (ssd_prefetch_.size() == kMaxPrefetch) break;
      if (std::find(ssd_loads_.begin(), ssd_loads_.end(), key) != ssd_loads_.end() ||
          std::find(ssd_prefetch_.begin(), ssd_prefetch_.end(), key) != ssd_prefetch_.end())
        continue;
      if (tier->cold(key, now_ms)) ssd_prefetch_.emplace_back(key);
    }
  }
}

asio::awaitable<bool> Connection::ssd_load(int64_t& now_ms, std::string_view ahead) {
  tiering::SsdTier* tier = server_.ssd();
  // Replies already made go out first: a pipelined hit does not wait for this read.
  if (!writer_.empty() && !co_await flush()) {
    closed_ = true;
    co_return false;
  }
  using Loaded = tiering::SsdTier::Loaded;
  const int64_t now = now_ms;
  // The keys on SSD of the read commands pipelined behind this one are loaded now too, so a
  // pipeline of GETs reads the disk in parallel rather than key by key.
  collect_prefetch(ahead, now);
  const size_t own = ssd_loads_.size(), total = own + ssd_prefetch_.size();
  // One task per key on the I/O pool, so a command's keys (KV.MGET's batch) are read in
  // parallel; this coroutine resumes when the last one is done.
  std::vector<Loaded> loaded(total);
  auto ex = co_await asio::this_coro::executor;
  co_await asio::async_initiate<decltype(asio::use_awaitable), void()>(
      [&](auto handler) {
        auto done = std::make_shared<decltype(handler)>(std::move(handler));
        auto left = std::make_shared<std::atomic<size_t>>(total);
        for (size_t i = 0; i < total; ++i) {
          const bool prefetch = i >= own;
          const std::string_view key = prefetch ? ssd_prefetch_[i - own] : ssd_loads_[i];
          asio::post(server_.ssd_pool(), [this, tier, now, i, key, prefetch, &loaded, done,
                                          left, ex] {
            loaded[i] = load_one(*tier, key, now, prefetch);
            if (left->fetch_sub(1, std::memory_order_acq_rel) == 1)
              asio::post(ex, [done] { std::move(*done)(); });
          });
        }
      },
      asio::use_awaitable);
  now_ms = tiering::now_ms();
  // Prefetched values stay in memory for their commands (promoted); nothing else to keep.
  for (size_t i = own; i < total; ++i)
    if (loaded[i].transient) tier->release(ssd_prefetch_[i - own], loaded[i].pin);
  loaded.resize(own);
  for (size_t i = 0; i < loaded.size(); ++i) {
    Loaded& l = loaded[i];
    if (!l.status.ok()) {  // the pipeline counts the command as rejected
      if (l.status.code == tiering::SsdStatus::Code::kNoMemory) writer_.error(err::kOom);
      else writer_.error(err::ssd_read_failed(l.status.message));
      co_return false;  // ssd_release() drops what the others loaded
    }
    if (!l.pin) continue;  // the key went away meanwhile: the command finds it missing
    if (l.transient) ssd_transient_.emplace_back(ssd_loads_[i], l.pin);
    ssd_pins_.push_back(std::move(l.pin));
  }
  co_return true;
}

asio::awaitable<void> Connection::ssd_throttle(uint64_t incoming) {
  // Replies already made go out first.
  if (!writer_.empty() && !co_await flush()) {
    closed_ = true;
    co_return;
  }
  Server::RoomWait wait(server_, incoming, Server::RoomFor::kWrite);
  asio::steady_timer timer(co_await asio::this_coro::executor);
  while (!closed_.load(std::memory_order_relaxed) && wait.again()) {
    timer.expires_after(std::chrono::milliseconds(1));
    co_await timer.async_wait(asio::use_awaitable);
  }
}

uint64_t Connection::ssd_release() {
  tiering::SsdTier* tier = server_.ssd();
  for (auto& [key, pin] : ssd_transient_) tier->release(key, pin);
  ssd_transient_.clear();
  ssd_pins_.clear();
  return tiering::SsdTier::take_barrier();
}

asio::awaitable<void> Connection::ssd_wait(uint64_t ticket) {
  tiering::SsdTier* tier = server_.ssd();
  auto ex = co_await asio::this_coro::executor;
  co_await asio::async_initiate<decltype(asio::use_awaitable), void()>(
      [tier, ticket, ex](auto handler) {
        auto h = std::make_shared<decltype(handler)>(std::move(handler));
        tier->when_processed(ticket, [h, ex] { asio::post(ex, [h] { std::move (*h)(); }); });
      },
      asio::use_awaitable);
}

}  // namespace server
