// server/connection_transfer.cc - a connection's wait for a large fast-path copy on the transfer
// pool (server/transfer_pool.h): the handler planned it (Connection::defer_transfer); this
// coroutine flushes the replies made so far, hands the copy to the pool and waits (its I/O thread
// serves other connections meanwhile; this connection's pipelined requests wait, in order), then,
// back on its own thread, publishes and replies (Transfer::finish), as finish_script resumes
// after a script. And a write's wait for memory that such copies, or values queued for the
// disk, hold (wait_for_room).
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include <asio/use_awaitable.hpp>

#include <chrono>
#include <memory>

#include "server/config.h"
#include "server/connection.h"
#include "server/keyspace_events.h"
#include "server/log.h"
#include "server/server.h"
#include "server/transfer_pool.h"

namespace server {

bool Connection::may_wait_for_room(int64_t own_holds) {
  // Under noeviction a full memory is the policy's answer (-OOM at once, as Redis): what the
  // copies publish would stay, not make room.
  if (server_.evictor().policy() == tiering::EvictionPolicy::kNoEviction) return false;
  TransferPool* pool = server_.transfers();
  const int64_t copies = pool != nullptr ? pool->held() - own_holds : 0;
  const uint64_t queued = server_.ssd() != nullptr ? server_.ssd()->pending_bytes() : 0;
  if (copies <= 0 && queued == 0) return false;
  const auto now = std::chrono::steady_clock::now();
  if (!room_wait_until_) {
    const int64_t max_ms = server_.config().num(Key::kMaxRoomWait);
    if (max_ms <= 0) return false;
    room_wait_until_ = now + std::chrono::milliseconds(max_ms);
    server_.stats().write_room_waits.fetch_add(1, std::memory_order_relaxed);
  }
  if (now < *room_wait_until_) return true;
  // At most one line per 10 s, as the allocator's own "found no room" warning.
  static std::atomic<int64_t> last_ms{0};
  const int64_t ms = tiering::now_ms();
  if (int64_t last = last_ms.load(std::memory_order_relaxed);
      ms - last >= 10'000 && last_ms.compare_exchange_strong(last, ms))
    log::warning("A write waited memory.max_room_wait (" +
                 std::to_string(server_.config().num(Key::kMaxRoomWait)) +
                 " ms) for memory held by copies in flight (" + std::to_string(copies) +
                 " now) and values queued for the disk (" + std::to_string(queued) +
                 " bytes now), and got -OOM");
  return false;
}

asio::awaitable<void> Connection::wait_for_room() {
  room_wait_ = false;
  // A copy of 32 MiB takes a few ms, a value's write to the disk tens: look again every
  // millisecond (the request then runs again from its start, evicting what came back).
  asio::steady_timer timer(worker_.io, std::chrono::milliseconds(1));
  co_await timer.async_wait(asio::use_awaitable);
}

asio::awaitable<Connection::Outcome> Connection::finish_transfer(const resp::Request& req,
                                                                 const PreparedCommand& cmd) {
  std::unique_ptr<Transfer> transfer = std::move(transfer_);
  // Replies already made go out first: a pipelined reply does not wait for the copy.
  if (!writer_.empty() && !co_await flush()) {
    closed_ = true;
    co_return Outcome::kRejected;  // the plan is dropped: its values freed or unpinned
  }
  auto ex = co_await asio::this_coro::executor;
  Transfer* t = transfer.get();
  co_await asio::async_initiate<decltype(asio::use_awaitable), void()>(
      [&](auto handler) {
        auto done = std::make_shared<decltype(handler)>(std::move(handler));
        server_.transfers()->submit(t, [done, ex] {
          asio::post(ex, [done] { std::move(*done)(); });
        });
      },
      asio::use_awaitable);
  // Closed meanwhile (CLIENT KILL, an output limit, shutdown): the copy is done, its result
  // dropped (nothing published, nothing replied; the plan's values freed or unpinned). A client
  // that merely went away is noticed at the next read: its command completes, as any other.
  if (closed_.load(std::memory_order_relaxed)) co_return Outcome::kRejected;
  // Back on this connection's thread: the values put are published here, the write path's
  // observers told as for any write (keyspace events named after this command, published when
  // finish returned; the SSD tier's barrier is this thread's, taken by ssd_release after).
  const uint64_t errors_before = writer_.errors();
  {
    KeyspaceEvents::CommandScope events(server_.keyspace_events(), cmd.spec);
    CommandContext ctx{server_, *this, writer_, req, req.args(), tiering::now_ms(),
                       server_.keyspace()};
    transfer->finish(ctx);
  }
  // The call's duration includes the copy (stats, slowlog); the next command's starts now.
  const auto end = std::chrono::steady_clock::now();
  call_us_ += std::chrono::duration_cast<std::chrono::microseconds>(end - command_end_).count();
  command_end_ = end;
  co_return writer_.errors() != errors_before ? Outcome::kFailed : Outcome::kCalled;
}

}  // namespace server
