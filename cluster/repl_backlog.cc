#include "cluster/repl_backlog.h"

#include <algorithm>

namespace cluster {

void ReplBacklog::set_limits(uint64_t keep_bytes, uint64_t reader_slack) {
  std::lock_guard lock(mu_);
  keep_bytes_ = keep_bytes;
  reader_slack_ = reader_slack;
}

void ReplBacklog::push(std::shared_ptr<Frame> f) {
  f->offset = end_;
  const uint64_t size = f->size();
  end_ += size;
  held_ += size;
  frames_.push_back(std::move(f));
}

void ReplBacklog::on_change(tiering::Shard&, const tiering::Change& c) {
  auto f = std::make_shared<Frame>();
  switch (c.kind) {
    case tiering::ChangeKind::kSet:
      f->value = *c.value;
      append_frame_head(f->head, FrameType::kSet, c.key, f->value->size(), c.expire_ms);
      break;
    case tiering::ChangeKind::kExpire:
      append_frame_head(f->head, FrameType::kExpire, c.key, 0, c.expire_ms);
      break;
    case tiering::ChangeKind::kDelete:
      append_frame_head(f->head, FrameType::kDelete, c.key, 0, 0);
      break;
    case tiering::ChangeKind::kDemoted:
    case tiering::ChangeKind::kPromoted:
    case tiering::ChangeKind::kRecovered:
      return;  // where a value lives is each node's own business: the content is unchanged
  }
  bool wake;
  {
    std::lock_guard lock(mu_);
    push(std::move(f));
    wake = waiting_ > 0;
  }
  if (wake) cv_.notify_all();
}

void ReplBacklog::on_flush() { append(FrameType::kFlush, {}, {}, 0); }

void ReplBacklog::append(FrameType type, std::string_view key, tiering::ValueRef value,
                         int64_t expire_ms) {
  auto f = std::make_shared<Frame>();
  append_frame_head(f->head, type, key, value ? value->size() : 0, expire_ms);
  f->value = std::move(value);
  bool wake;
  {
    std::lock_guard lock(mu_);
    push(std::move(f));
    wake = waiting_ > 0;
  }
  if (wake) cv_.notify_all();
}

uint64_t ReplBacklog::offset() const {
  std::lock_guard lock(mu_);
  return end_;
}

uint64_t ReplBacklog::first_offset() const {
  std::lock_guard lock(mu_);
  return start_;
}

uint64_t ReplBacklog::held_bytes() const {
  std::lock_guard lock(mu_);
  return held_;
}

size_t ReplBacklog::index_of(uint64_t offset) const {
  if (offset < start_ || offset >= end_) return frames_.size();
  // Frames are in offset order: binary search for the one starting at `offset`.
  auto it = std::lower_bound(frames_.begin(), frames_.end(), offset,
                             [](const FramePtr& f, uint64_t o) { return f->offset < o; });
  if (it == frames_.end() || (*it)->offset != offset) return frames_.size();
  return static_cast<size_t>(it - frames_.begin());
}

bool ReplBacklog::can_resume_from(uint64_t at) const {
  std::lock_guard lock(mu_);
  return at == end_ || index_of(at) < frames_.size();
}

bool ReplBacklog::read(uint64_t from, std::vector<FramePtr>* out, uint64_t max_bytes) const {
  std::lock_guard lock(mu_);
  if (from == end_) return true;
  size_t i = index_of(from);
  if (i == frames_.size()) return false;
  uint64_t bytes = 0;
  for (; i < frames_.size() && (bytes == 0 || bytes < max_bytes); ++i) {
    bytes += frames_[i]->size();
    out->push_back(frames_[i]);
  }
  return true;
}

bool ReplBacklog::wait_beyond(uint64_t from, std::chrono::milliseconds timeout) {
  std::unique_lock lock(mu_);
  const uint64_t gen = wake_gen_;
  ++waiting_;
  cv_.wait_for(lock, timeout, [&] { return end_ > from || wake_gen_ != gen; });
  --waiting_;
  return end_ > from;
}

void ReplBacklog::wake() {
  {
    std::lock_guard lock(mu_);
    ++wake_gen_;
  }
  cv_.notify_all();
}

uint64_t ReplBacklog::add_reader(uint64_t at) {
  std::lock_guard lock(mu_);
  readers_[next_reader_] = at;
  return next_reader_++;
}

void ReplBacklog::move_reader(uint64_t id, uint64_t at) {
  std::lock_guard lock(mu_);
  if (auto it = readers_.find(id); it != readers_.end()) it->second = at;
}

void ReplBacklog::remove_reader(uint64_t id) {
  std::lock_guard lock(mu_);
  readers_.erase(id);
}

void ReplBacklog::trim() {
  std::vector<FramePtr> dropped;  // released after the lock: freeing a value takes the region's
  {
    std::lock_guard lock(mu_);
    uint64_t needed = end_;  // the oldest byte a reader still has to send
    for (const auto& [id, at] : readers_) needed = std::min(needed, at);
    while (!frames_.empty()) {
      const uint64_t size = frames_.front()->size();
      const bool over_keep = held_ > keep_bytes_;
      const bool reader_needs = frames_.front()->offset + size > needed;
      const bool over_slack = held_ > keep_bytes_ + reader_slack_;
      if (!over_keep || (reader_needs && !over_slack)) break;
      dropped.push_back(std::move(frames_.front()));
      frames_.pop_front();
      held_ -= size;
      start_ += size;
    }
    if (frames_.empty()) start_ = end_;
  }
}

}  // namespace cluster
