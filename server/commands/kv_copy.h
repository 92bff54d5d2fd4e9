// server/commands/kv_copy.h - the copies of the fast path's puts and gets (docs/fast-path.md),
// planned on the connection's thread, run inline or on the transfer pool, finished on the
// connection's thread (server/transfer_pool.h).
//
// A plan is one KeyStep per key of a KV.PUT/KV.GET/KV.MPUT/KV.MGET: what its reply will be and
// the copy it needs first. Planning resolves the descriptors, checks the lengths and allocates the
// new value of a put (with no lock held: it may evict) or takes a reference to the value of a get
// under its key lock (the reference pins it: a DEL or overwrite meanwhile cannot tear what is
// copied). The copy runs with no lock held and touches only the plan. Finishing publishes each
// put's value under its key lock, in key order (readers see the old value or the new one, whole,
// and only once all its bytes are in) and writes the replies.
#pragma once

#include <sys/uio.h>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "rdma/segment.h"
#include "rdma/verbs_transport.h"
#include "server/transfer_pool.h"
#include "tiering/value.h"

namespace server {

struct CommandContext;

/// A scatter-gather list resolved for one transport: mapped pieces (shm) or pieces of client
/// memory reached by one-sided RDMA through `endpoint` (verbs). One list uses one transport.
struct Window {
  std::vector<iovec> local;
  std::vector<rdma::RemotePiece> remote;
  uint64_t total = 0;  ///< bytes
  rdma::VerbsEndpoint* endpoint = nullptr;  ///< verbs only: the connection's queue pair
  uint32_t timeout_ms = 0;                  ///< verbs only: rdma.timeout
};

/// `[EX s | PX ms] [NX]` of KV.PUT/KV.MPUT.
struct PutOptions {
  int64_t expire_ms = 0;  ///< absolute Unix ms; 0 = none
  bool nx = false;
};

/// One key's step of a plan.
struct KeyStep {
  enum class Kind : uint8_t {
    kError,  ///< replies `error` (a bad descriptor, a length, -OOM, a failed copy, MOVED ...)
    kNull,   ///< replies nil (a missing key)
    kPut,    ///< copies `size` bytes into `value`, then publishes it: +OK, or nil if NX refused
    kGet,    ///< copies `value`'s `size` bytes out, then replies the length
  };
  Kind kind = Kind::kNull;
  std::string_view key;  ///< valid while the request's arguments are
  std::string error;
  Window w;
  tiering::ValueRef value;
  uint64_t size = 0;  ///< bytes copied
};

/// The copies of one fast-path command (a Transfer: runs inline or on the transfer pool).
/// Not thread-safe: one thread at a time, handed over by the pool.
class KvPlan final : public Transfer {
 public:
  /// `batch`: KV.MPUT/KV.MGET (the reply is an array of one entry per step); `o`: a put's
  /// options.
  KvPlan(bool batch, PutOptions o) : batch_(batch), options_(o) {}

  /// Plans a put of `total` bytes at `key` from `sgl`: a kPut step, or kError for a bad
  /// descriptor, a length that does not match the list's, a value over proto-max-bulk-len or
  /// over what memory can ever hold, or no room (-OOM). Throws tiering::NeedRoom as
  /// new_value() does (the pipeline makes room and runs the handler again), and WaitForRoom
  /// instead of -OOM when memory that comes back soon is held (copies in flight, values queued
  /// for the disk) and the request may wait for it (Connection::may_wait_for_room).
  void add_put(CommandContext& ctx, std::string_view key, uint64_t total,
               std::span<const rdma::Descriptor> sgl);
  /// Plans a get of `key` into `sgl`: kGet (the value pinned), kNull for a missing key, or
  /// kError for a bad descriptor or a window smaller than the value.
  void add_get(CommandContext& ctx, std::string_view key, std::span<const rdma::Descriptor> sgl);
  /// A step that only replies `error` (a key another node serves, a malformed entry).
  void add_error(std::string error);

  /// Runs the plan: hands it to the transfer pool when the call may suspend (not inside EXEC
  /// or a script) and its bytes reach transfer.offload_threshold (the connection then waits and
  /// calls finish on its own thread); else copies and finishes now.
  static void run(CommandContext& ctx, std::unique_ptr<KvPlan> plan);

  void copy() override;
  void finish(CommandContext& ctx) override;
  uint64_t bytes() const override { return bytes_; }

 private:
  const bool batch_;
  const PutOptions options_;
  std::vector<KeyStep> steps_;
  uint64_t bytes_ = 0;
  // From the first put's allocation (or the hand-over to the pool) until this plan is destroyed.
  TransferPool::Hold hold_;
};

}  // namespace server
