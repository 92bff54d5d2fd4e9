// server/commands/kv_copy.cc - the fast path's copies: plan, copy, finish. See kv_copy.h.
#include "server/commands/kv_copy.h"

#include <algorithm>
#include <new>
#include <utility>

#include "server/config.h"
#include "server/connection.h"
#include "server/errors.h"
#include "server/commands/family.h"
#include "server/server.h"
#include "tiering/key_lock.h"

namespace server {
namespace {

using tiering::KeyLock;
using tiering::ValueRef;

bool resolve(CommandContext& ctx, std::span<const rdma::Descriptor> sgl, Window& w,
             std::string& error) {
  const rdma::Segment* first = sgl.empty() ? nullptr : ctx.conn.segments.find(sgl[0].segment);
  if (first != nullptr && first->kind == rdma::SegmentKind::kVerbs && ctx.conn.verbs) {
    w.endpoint = ctx.conn.verbs.get();
    w.timeout_ms = static_cast<uint32_t>(ctx.server.config().num(Key::kRdmaTimeout));
    return rdma::resolve_remote(ctx.conn.segments, sgl, w.remote, w.total, error);
  }
  return ctx.conn.segments.resolve(sgl, w.local, w.total, error);
}

// Copies the window's bytes into `dst` (n = the window's total): memcpy, or RDMA READ into the
// registered region (blocks the calling thread until the transfer completes).
bool copy_in(const Window& w, char* dst, size_t n, std::string& error) {
  if (n == 0) return true;
  if (w.endpoint == nullptr) {
    rdma::gather(w.local, {reinterpret_cast<std::byte*>(dst), n});
    return true;
  }
  const iovec local{dst, n};
  return w.endpoint->read({&local, 1}, w.remote, w.timeout_ms, error);
}

// Copies `n` bytes from `src` into the start of the window (n <= its total): memcpy, or RDMA
// WRITE from the registered region.
bool copy_out(const Window& w, const char* src, size_t n, std::string& error) {
  if (n == 0) return true;
  if (w.endpoint == nullptr) {
    rdma::scatter({reinterpret_cast<const std::byte*>(src), n}, w.local);
    return true;
  }
  std::vector<rdma::RemotePiece> remote;  // the window's first n bytes
  for (uint64_t left = n; const rdma::RemotePiece& r : w.remote) {
    if (left == 0) break;
    remote.push_back({r.addr, r.rkey, std::min<uint64_t>(r.length, left)});
    left -= remote.back().length;
  }
  const iovec local{const_cast<char*>(src), n};
  return w.endpoint->write({&local, 1}, remote, w.timeout_ms, error);
}

}  // namespace

void KvPlan::add_error(std::string error) {
  KeyStep& s = steps_.emplace_back();
  s.kind = KeyStep::Kind::kError;
  s.error = std::move(error);
}

void KvPlan::add_put(CommandContext& ctx, std::string_view key, uint64_t total,
                     std::span<const rdma::Descriptor> sgl) {
  KeyStep& s = steps_.emplace_back();
  s.key = key;
  s.kind = KeyStep::Kind::kError;
  if (!resolve(ctx, sgl, s.w, s.error)) return;
  if (s.w.total != total) {
    s.error = err::sgl_length_mismatch(s.w.total, total);
    return;
  }
  if (total > static_cast<uint64_t>(ctx.server.config().num(Key::kProtoMaxBulkLen))) {
    s.error = err::kStringTooLong;
    return;
  }
  // Larger than memory can ever hold: refused before a byte moves or a key is evicted.
  if (const uint64_t limit = ctx.server.memory_limit(); total > limit) {
    s.error = err::value_too_large(total, ctx.server.memory_limit_name(), limit);
    return;
  }
  // From here the plan's blocks cannot be evicted: a write on another thread that finds no
  // room waits for them (TransferPool::Hold) rather than answer -OOM.
  TransferPool* pool = ctx.server.transfers();
  if (pool != nullptr && !hold_.active()) hold_ = pool->hold();
  // No lock is held here: the allocation may make room (evict) if it must.
  try {
    s.value = new_value(ctx, total);
  } catch (const std::bad_alloc&) {
    // Copies in flight and values queued for the disk hold blocks that come back (or become
    // evictable) soon: the request waits and runs again, rather than fail a store under an
    // evicting policy. This plan's blocks go back as it unwinds; nothing was replied yet.
    if (ctx.may_suspend && ctx.conn.may_wait_for_room(/*own_holds=*/1)) throw WaitForRoom{};
    s.error = err::kOom;
    return;
  }
  s.kind = KeyStep::Kind::kPut;
  s.size = total;
  bytes_ += total;
}

void KvPlan::add_get(CommandContext& ctx, std::string_view key,
                     std::span<const rdma::Descriptor> sgl) {
  KeyStep& s = steps_.emplace_back();
  s.key = key;
  s.kind = KeyStep::Kind::kError;
  if (!resolve(ctx, sgl, s.w, s.error)) return;
  {
    KeyLock lock(ctx.ks, key, ctx.now_ms);
    const KeyLock::Item* item = lock.lookup(key);
    if (item == nullptr) {
      s.kind = KeyStep::Kind::kNull;
      return;
    }
    s.value = item->second.value;  // pinned by this reference until the step is done
  }
  s.size = s.value->size();
  if (s.size > s.w.total) {
    s.error = err::window_too_small(s.w.total, s.size);
    s.value = {};
    return;
  }
  s.kind = KeyStep::Kind::kGet;
  bytes_ += s.size;
}

void KvPlan::run(CommandContext& ctx, std::unique_ptr<KvPlan> plan) {
  const int64_t threshold = ctx.server.config().num(Key::kTransferOffloadThreshold);
  if (ctx.may_suspend && threshold > 0 && plan->bytes_ >= static_cast<uint64_t>(threshold) &&
      ctx.server.transfers() != nullptr) {
    if (!plan->hold_.active()) plan->hold_ = ctx.server.transfers()->hold();
    ctx.conn.defer_transfer(std::move(plan));
    return;
  }
  plan->copy();
  plan->finish(ctx);
}

void KvPlan::copy() {
  for (KeyStep& s : steps_) {
    if (s.kind == KeyStep::Kind::kPut) {
      if (!copy_in(s.w, s.value->data(), s.size, s.error)) s.kind = KeyStep::Kind::kError;
    } else if (s.kind == KeyStep::Kind::kGet) {
      if (!copy_out(s.w, s.value->data(), s.size, s.error)) s.kind = KeyStep::Kind::kError;
    }
  }
}

void KvPlan::finish(CommandContext& ctx) {
  if (batch_) ctx.out.array(steps_.size());
  uint64_t put = 0, got = 0;
  for (KeyStep& s : steps_) {
    switch (s.kind) {
      case KeyStep::Kind::kError:
        ctx.out.error(s.error);
        break;
      case KeyStep::Kind::kNull:
        ctx.out.null();
        break;
      case KeyStep::Kind::kPut: {
        put += s.size;
        KeyLock lock(ctx.ks, s.key, ctx.now_ms);
        if (options_.nx && lock.find(s.key)) {
          ctx.out.null();
          break;
        }
        lock.set(s.key, std::move(s.value), options_.expire_ms);
        ctx.out.ok();
        break;
      }
      case KeyStep::Kind::kGet:
        got += s.size;
        ctx.out.integer(static_cast<int64_t>(s.size));
        break;
    }
    s.value = {};  // an unpublished put's block goes back now; a get's pin ends
  }
  if (put != 0) ctx.server.stats().kv_put_bytes.fetch_add(put, std::memory_order_relaxed);
  if (got != 0) ctx.server.stats().kv_get_bytes.fetch_add(got, std::memory_order_relaxed);
}

}  // namespace server
