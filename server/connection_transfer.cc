// server/connection_transfer.cc - a connection's wait for a large fast-path copy on the transfer
// pool (server/transfer_pool.h): the handler planned it (Connection::defer_transfer); this
// coroutine flushes the replies made so far, hands the copy to the pool and waits (its I/O thread
// serves other connections meanwhile; this connection's pipelined requests wait, in order), then,
// back on its own thread, publishes and replies (Transfer::finish), as finish_script resumes
// after a script.
#include <asio/post.hpp>
#include <asio/use_awaitable.hpp>

#include <chrono>
#include <memory>

#include "server/connection.h"
#include "server/keyspace_events.h"
#include "server/server.h"
#include "server/transfer_pool.h"

namespace server {

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
