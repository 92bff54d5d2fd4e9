// server/transfer_pool.h - the transfer pool: a few threads that run the fast path's large copies
// (KV.PUT/KV.GET/KV.MPUT/KV.MGET above transfer.offload_threshold bytes) off the I/O threads, so
// the other connections of an I/O thread are not held up behind one large shared-memory copy or
// RDMA transfer (docs/fast-path.md, "Large transfers off the I/O threads").
//
// A command's handler plans its copies on the connection's thread (descriptors resolved, values
// allocated or looked up and pinned), then hands them over (Connection::defer_transfer). The
// connection waits on its coroutine (requests pipelined behind wait, in order) while a pool
// thread runs Transfer::copy() with no lock held; then, back on the connection's own thread,
// Transfer::finish() publishes what was put (the keyspace's observers see it there, as for any
// write) and writes the reply (Connection::finish_transfer, connection_transfer.cc).
#pragma once

#include <asio/thread_pool.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>

namespace server {

struct CommandContext;

/// A write found no room in memory while memory that comes back soon is held: plans on the
/// transfer pool (TransferPool::held) or values queued for the disk. Thrown by a fast-path
/// put's allocation (KvPlan::add_put) before the handler changed or replied anything, when
/// Connection::may_wait_for_room() says the request may wait; the pipeline waits and runs the
/// request again. Not a std::bad_alloc: nothing turns it into -OOM on the way.
struct WaitForRoom {};

/// The copies of one fast-path command, planned by its handler.
class Transfer {
 public:
  virtual ~Transfer() = default;
  /// Runs every copy (memcpy between mapped segments and region blocks, or RDMA READ/WRITE).
  /// Touches only what the plan holds (no keyspace, no lock, no per-thread state), so it may
  /// run on any thread, once. Errors are kept for finish().
  virtual void copy() = 0;
  /// After copy(), on the connection's own thread: publishes the values put (under their key
  /// locks) and writes the command's reply to ctx.out. Not called when the connection was
  /// closed meanwhile: the plan is then dropped (its values freed or unpinned).
  virtual void finish(CommandContext& ctx) = 0;
  /// The bytes copy() moves.
  virtual uint64_t bytes() const = 0;
};

/// A fixed set of threads running Transfer::copy(). Thread-safe.
class TransferPool {
 public:
  /// A plan holds region blocks that no eviction can take (its puts' new values, its gets'
  /// pinned ones) from before its first put allocates (or, a plan of gets only, its hand-over)
  /// until it is destroyed, its connection's finish included: one Hold for that time. What
  /// held() counts: a write that found no room while plans hold memory waits for them
  /// (memory.max_room_wait) rather than answer -OOM, since their blocks come back or become
  /// evictable once they finish. A put still allocating on another I/O thread counts too: its
  /// blocks are as unevictable as a copy's. Move-only; outlives the pool safely.
  class Hold {
   public:
    Hold() = default;
    Hold(Hold&& o) noexcept : count_(std::move(o.count_)) {}
    Hold& operator=(Hold&& o) noexcept {
      release();
      count_ = std::move(o.count_);
      return *this;
    }
    ~Hold() { release(); }
    /// Whether this Hold counts (taken, not moved from).
    bool active() const { return count_ != nullptr; }

   private:
    friend class TransferPool;
    explicit Hold(std::shared_ptr<std::atomic<int64_t>> c) : count_(std::move(c)) {
      count_->fetch_add(1, std::memory_order_relaxed);
    }
    void release() {
      if (count_) count_->fetch_sub(1, std::memory_order_relaxed);
      count_.reset();
    }
    std::shared_ptr<std::atomic<int64_t>> count_;
  };

  /// Starts `threads` threads (>= 1).
  explicit TransferPool(size_t threads);
  ~TransferPool();
  TransferPool(const TransferPool&) = delete;
  TransferPool& operator=(const TransferPool&) = delete;

  /// Runs `t->copy()` on a pool thread, then `done()` on that thread (it posts the
  /// connection's resumption). `t` must stay alive until `done` ran.
  void submit(Transfer* t, std::function<void()> done);
  /// Waits for the copies submitted so far and ends the threads (idempotent). Submitting
  /// after stop() is not allowed.
  void stop();
  /// Copies handed to the pool, and their bytes (INFO transfers_offloaded,
  /// transfer_offloaded_bytes).
  uint64_t offloaded() const { return offloaded_.load(std::memory_order_relaxed); }
  uint64_t offloaded_bytes() const { return offloaded_bytes_.load(std::memory_order_relaxed); }
  /// Copies running or queued now (INFO transfers_in_flight).
  uint64_t in_flight() const { return in_flight_.load(std::memory_order_relaxed); }
  /// A Hold for a plan handed over now.
  Hold hold() { return Hold(held_); }
  /// Plans that hold blocks and are not yet destroyed (their Holds).
  int64_t held() const { return held_->load(std::memory_order_relaxed); }

  size_t threads() const { return threads_; }

 private:
  const size_t threads_;
  asio::thread_pool pool_;
  std::atomic<uint64_t> offloaded_{0}, offloaded_bytes_{0}, in_flight_{0};
  // Shared with the Holds: a plan destroyed after the pool (at shutdown) still counts down.
  std::shared_ptr<std::atomic<int64_t>> held_ = std::make_shared<std::atomic<int64_t>>(0);
  std::atomic<bool> stopped_{false};
};

}  // namespace server
