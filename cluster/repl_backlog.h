// cluster/repl_backlog.h - the replication backlog: the recent stream of a primary's changes,
// as frames (repl_frame.h), from which every replica is fed and a replica that lost its link
// for a moment resumes (Redis's repl_backlog; docs/replication.md).
//
// On a primary it is an observer of the keyspace (tiering/change.h): every change becomes a
// frame appended under the changed key's shard lock, so the frames of one shard are in that
// shard's change order. A SET frame holds a reference to the value, not a copy: the bytes go
// from the region to the replica's socket once (the value cannot change in place while the
// backlog holds it: a change in place needs the only reference). On a replica the backlog is
// fed with the frames as received (relay), so its offsets stay the primary's and a promoted
// replica can continue the stream for the others.
//
// Size: `repl-backlog-size` bytes of frames (values counted) are kept for resuming; a replica
// being fed holds back trimming of the frames it still has to send, up to `reader_slack` bytes
// more (Redis's client-output-buffer-limit for replicas), past which it loses its place and
// must take a full copy. Trimming runs on the feeders' threads and the cron, never in the write
// path. Overwritten values a frame still references stay in memory until it is trimmed.
//
// Thread-safety: every call is thread-safe. The observer calls take the backlog's mutex inside
// a shard lock (lock order: shard locks, then the backlog's); no other call takes a shard lock.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "cluster/repl_frame.h"
#include "tiering/change.h"
#include "tiering/value.h"

namespace cluster {

class ReplBacklog final : public tiering::KeyspaceObserver {
 public:
  /// One frame: `head` is its header and key, `value` (SET only) its bytes, by reference.
  struct Frame {
    uint64_t offset = 0;  ///< stream offset of its first byte
    std::string head;
    tiering::ValueRef value;
    uint64_t size() const { return head.size() + (value ? value->size() : 0); }
  };
  using FramePtr = std::shared_ptr<const Frame>;

  /// An empty backlog whose next byte is at `start_offset`.
  explicit ReplBacklog(uint64_t start_offset) : start_(start_offset), end_(start_offset) {}

  /// Bytes kept for resuming (repl-backlog-size), and how many more a lagging reader may hold
  /// back before it loses its place.
  void set_limits(uint64_t keep_bytes, uint64_t reader_slack);

  // ---- the stream's sources ----
  void on_change(tiering::Shard& shard, const tiering::Change& change) override;
  void on_flush() override;
  /// Appends one frame (a replica's relay of what it applied, or the primary's PING).
  void append(FrameType type, std::string_view key, tiering::ValueRef value, int64_t expire_ms);

  // ---- readers ----
  /// The offset after the last byte appended (Redis's master_repl_offset).
  uint64_t offset() const;
  /// The offset of the oldest byte held (resuming from before it needs a full copy).
  uint64_t first_offset() const;
  /// Bytes of frames held (values counted).
  uint64_t held_bytes() const;
  /// Whether a replica that has every byte before `at` can resume from here: `at` is held and
  /// is a frame boundary, or is the end.
  bool can_resume_from(uint64_t at) const;
  /// Appends to `out` the frames from offset `from` on (a frame boundary), whole frames up to
  /// about `max_bytes`. False when `from` is no longer held (trimmed) or not a boundary.
  bool read(uint64_t from, std::vector<FramePtr>* out, uint64_t max_bytes) const;
  /// Waits until offset() > `from`, wake() or `timeout`. Returns whether there is more.
  bool wait_beyond(uint64_t from, std::chrono::milliseconds timeout);
  /// Wakes every wait_beyond() (a feeder stopping).
  void wake();

  /// A reader that must not lose the frames from `at` on (trimming keeps them, within the
  /// slack). Returns its id.
  uint64_t add_reader(uint64_t at);
  void move_reader(uint64_t id, uint64_t at);
  void remove_reader(uint64_t id);
  /// Drops the oldest frames beyond the limits; their values are released outside the lock.
  void trim();

 private:
  // Appends `f` (mu_ held). Returns whether someone waits.
  void push(std::shared_ptr<Frame> f);
  size_t index_of(uint64_t offset) const;  // mu_ held; frames_.size() when not a boundary

  mutable std::mutex mu_;
  std::condition_variable cv_;
  int waiting_ = 0;  // under mu_
  std::deque<FramePtr> frames_;
  uint64_t start_;  // offset of frames_.front() (or end_ when empty)
  uint64_t end_;
  uint64_t held_ = 0;
  uint64_t keep_bytes_ = 128ull << 20;
  uint64_t reader_slack_ = 256ull << 20;
  std::map<uint64_t, uint64_t> readers_;  // id -> offset it still needs
  uint64_t next_reader_ = 1;
  uint64_t wake_gen_ = 0;
};

}  // namespace cluster
