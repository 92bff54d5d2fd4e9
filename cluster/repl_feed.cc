#include "cluster/repl_feed.h"

#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstring>
#include <span>
#include <vector>

namespace cluster {

namespace {
// Bytes of frames gathered into one write of the stream or the snapshot.
constexpr uint64_t kWriteBatch = 4u << 20;
// Keys read per step of the snapshot (each step holds one shard's lock briefly).
constexpr size_t kScanStep = 64;

}  // namespace

ReplicaFeed::ReplicaFeed(FeedOptions options)
    : options_(std::move(options)), sock_(options_.socket) {
  sent_.store(options_.start_offset);
}

ReplicaFeed::~ReplicaFeed() { stop(); }

void ReplicaFeed::log(bool warning, const std::string& line) const {
  if (options_.log) options_.log(warning, "replica " + options_.addr + ":" +
                                              std::to_string(options_.listening_port) + " " + line);
}

void ReplicaFeed::start() {
  // The frames from start_offset on stay in the backlog until sent (within its slack).
  reader_id_ = options_.backlog->add_reader(options_.start_offset);
  // Blocking I/O with timeouts on the feed's own threads (the socket came from an I/O thread's
  // event loop, which had made it non-blocking).
  sock_->set_timeouts(1000, options_.timeout_ms);
  last_ack_ms_.store(tiering::now_ms());
  writer_ = std::thread([this] { run_writer(); });
  reader_ = std::thread([this] { run_reader(); });
}

void ReplicaFeed::stop() {
  if (!writer_.joinable()) return;
  stop_.store(true);
  sock_->shutdown();
  options_.backlog->wake();
  writer_.join();
  reader_.join();
  sock_.reset();  // closes the socket
  options_.backlog->remove_reader(reader_id_);
  state_.store(State::kClosed, std::memory_order_release);
}

bool ReplicaFeed::write_all(std::vector<iovec>& iov) {
  size_t first = 0;
  while (first < iov.size()) {
    if (stop_.load(std::memory_order_relaxed)) return false;
    const int n = static_cast<int>(std::min<size_t>(iov.size() - first, IOV_MAX));
    const ssize_t w = sock_->writev(iov.data() + first, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK)
        log(true, "not reading: no progress for repl-timeout, dropping it");
      else if (!stop_.load())
        log(true, std::string("link lost while writing: ") + std::strerror(errno));
      return false;
    }
    size_t left = static_cast<size_t>(w);
    while (first < iov.size() && left >= iov[first].iov_len) left -= iov[first++].iov_len;
    if (left > 0) {
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
    }
  }
  iov.clear();
  return true;
}

void ReplicaFeed::run_writer() {
  if (!options_.full || snapshot()) stream();
  // However it ended, the reader ends too.
  stop_.store(true);
  sock_->shutdown();
  state_.store(State::kClosed, std::memory_order_release);
}

bool ReplicaFeed::snapshot() {
  state_.store(State::kSnapshot, std::memory_order_release);
  struct Item {
    std::string head;
    tiering::ValueRef value;
    std::string cold;  // bytes read from the SSD store
  };
  std::vector<Item> batch;
  std::vector<iovec> iov;
  uint64_t keys = 0, bytes = 0;
  auto flush = [&]() {
    for (Item& it : batch) {
      iov.push_back({it.head.data(), it.head.size()});
      if (it.value) iov.push_back({it.value->data(), it.value->size()});
      else if (!it.cold.empty()) iov.push_back({it.cold.data(), it.cold.size()});
    }
    const bool ok = write_all(iov);
    batch.clear();
    bytes = 0;
    return ok;
  };
  struct Cold {
    std::string key;
    int64_t expire_ms;
  };
  std::vector<Cold> colds;
  uint64_t cursor = 0;
  bool more = true;
  do {
    const int64_t now = tiering::now_ms();
    colds.clear();
    more = next_step(&cursor, now, [&](std::string_view key, const tiering::Entry& e) {
      if (!e.value) {
        colds.push_back({std::string(key), e.expire_ms});
        return;
      }
      Item it;
      it.value = e.value;  // a reference, taken under the shard's lock
      append_frame_head(it.head, FrameType::kSet, key, it.value->size(), e.expire_ms);
      bytes += it.head.size() + it.value->size();
      copied_bytes_.fetch_add(it.value->size(), std::memory_order_relaxed);
      batch.push_back(std::move(it));
      ++keys;
    });
    // Values on SSD only: read here, on the feed's thread (never a connection's).
    for (Cold& c : colds) {
      if (options_.ssd == nullptr) break;
      Item it;
      size_t size = 0;
      const tiering::SsdStatus st = options_.ssd->read(
          c.key,
          [&](size_t n) {
            it.cold.resize(n);
            return std::span<std::byte>(reinterpret_cast<std::byte*>(it.cold.data()), n);
          },
          &size);
      if (!st.ok()) continue;  // overwritten or deleted meanwhile: the stream has that change
      it.cold.resize(size);
      append_frame_head(it.head, FrameType::kSet, c.key, size, c.expire_ms);
      bytes += it.head.size() + size;
      copied_bytes_.fetch_add(size, std::memory_order_relaxed);
      batch.push_back(std::move(it));
      ++keys;
      if (bytes >= kWriteBatch && !flush()) return false;
    }
    copied_keys_.store(keys, std::memory_order_relaxed);
    if ((bytes >= kWriteBatch || !more) && !flush()) return false;
  } while (more && !stop_.load(std::memory_order_relaxed));
  if (stop_.load()) return false;
  std::string end;
  append_frame_head(end, FrameType::kSnapshotEnd, {}, keys, 0);
  iov.push_back({end.data(), end.size()});
  if (!write_all(iov)) return false;
  log(false, "full copy sent: " + std::to_string(keys) + " keys; streaming from offset " +
                 std::to_string(options_.start_offset));
  return true;
}

bool ReplicaFeed::next_step(
    uint64_t* cursor, int64_t now,
    const std::function<void(std::string_view, const tiering::Entry&)>& emit) {
  if (!options_.slots) {
    *cursor = options_.keyspace->scan(
        *cursor, kScanStep, now,
        [&](const std::string& key, const tiering::Entry& e) { emit(key, e); },
        /*include_hidden=*/true);
    return *cursor != 0;
  }
  // A migration: one slot per step (a slot's keys under its shard's lock, references only).
  const SlotSet& slots = *options_.slots;
  uint64_t slot = *cursor;
  while (slot < slots.size() && !slots.test(slot)) ++slot;
  if (slot >= slots.size()) return false;
  options_.keyspace->for_each_in_slot(static_cast<uint16_t>(slot), now, emit);
  *cursor = slot + 1;
  return true;
}

bool ReplicaFeed::wanted(const ReplBacklog::Frame& f) const {
  if (!options_.slots) return true;
  const size_t key_len = f.head.size() - FrameHeader::kSize;
  if (key_len == 0) return true;  // PING, FLUSH, TOPOLOGY
  const auto type = static_cast<FrameType>(static_cast<uint8_t>(f.head[0]));
  if (type == FrameType::kTopology) return true;
  const std::string_view key(f.head.data() + FrameHeader::kSize, key_len);
  return options_.slots->test(options_.keyspace->slot_of(key));
}

void ReplicaFeed::stream() {
  state_.store(State::kOnline, std::memory_order_release);
  ReplBacklog& backlog = *options_.backlog;
  uint64_t sent = options_.start_offset;
  std::vector<ReplBacklog::FramePtr> frames;
  std::vector<iovec> iov;
  while (!stop_.load(std::memory_order_relaxed)) {
    frames.clear();
    if (!backlog.read(sent, &frames, kWriteBatch)) {
      log(true, "fell behind the replication backlog (repl-backlog-size plus the replica "
                "output limit); it will take a full copy");
      return;
    }
    if (frames.empty()) {
      backlog.wait_beyond(sent, std::chrono::milliseconds(100));
      continue;
    }
    uint64_t bytes = 0, streamed = 0;
    for (const auto& f : frames) {
      bytes += f->size();
      if (!wanted(*f)) continue;
      iov.push_back({const_cast<char*>(f->head.data()), f->head.size()});
      if (f->value) iov.push_back({f->value->data(), f->value->size()});
      streamed += f->size();
    }
    if (!iov.empty() && !write_all(iov)) return;
    iov.clear();
    sent += bytes;
    stream_sent_.fetch_add(streamed, std::memory_order_release);
    sent_.store(sent, std::memory_order_release);
    backlog.move_reader(reader_id_, sent);
    frames.clear();  // drop the references before trimming
    backlog.trim();
  }
}

void ReplicaFeed::run_reader() {
  char buf[FrameHeader::kSize];
  size_t have = 0;
  while (!stop_.load(std::memory_order_relaxed)) {
    const ssize_t n = sock_->recv(buf + have, sizeof buf - have);
    if (n > 0) {
      have += static_cast<size_t>(n);
      if (have < sizeof buf) continue;
      have = 0;
      const auto h = decode_header(buf);
      if (!h || h->type != FrameType::kAck || h->key_len != 0) {
        log(true, "sent something other than an ACK frame: dropping it");
        break;
      }
      ack_offset_.store(h->value_len, std::memory_order_release);
      last_ack_ms_.store(tiering::now_ms(), std::memory_order_relaxed);
      if (options_.on_ack) options_.on_ack(h->value_len);
      continue;
    }
    if (n == 0) {
      if (!stop_.load()) log(false, "closed the link");
      break;
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK) break;
    // A second without an ACK: is the replica silent for too long? (It ACKs every second.)
    if (state() == State::kOnline &&
        tiering::now_ms() - last_ack_ms_.load(std::memory_order_relaxed) > options_.timeout_ms) {
      log(true, "timed out (no ACK for repl-timeout)");
      break;
    }
  }
  stop_.store(true);
  sock_->shutdown();
  options_.backlog->wake();
}

}  // namespace cluster
