// cluster/repl_feed.h - a primary's feed of one replica: the full copy when the replica needs
// one, then the stream of changes from the backlog, and the replica's acknowledgements
// (docs/replication.md).
//
// Full copy without fork and without pausing clients (Dragonfly's way rather than Redis's
// RDB): the stream is held in the backlog from offset O on (add_reader), then every live key
// is sent as a SET frame with its value by reference, read under its shard's lock one small
// batch at a time (Keyspace::scan), and a cold key's bytes are read from the SSD store on this
// thread. Then SNAPSHOT_END, then the frames from O. Each key's copy shows a state at or after
// O, and the stream from O carries every change after O as a state (SET with the whole value,
// DELETE, EXPIRE), so the replica ends equal to the primary once it has applied the stream.
//
// Two threads per replica, neither an I/O thread: one writes (blocking writes with a timeout,
// values gathered straight from the region: no copy), one reads the ACK frames. stop() shuts
// the socket down, which ends both.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <sys/uio.h>

#include "cluster/repl_backlog.h"
#include "tiering/keyspace.h"
#include "tiering/ssd_store.h"

namespace cluster {

/// What a ReplicaFeed needs. The keyspace and the store must outlive the feed.
struct FeedOptions {
  int fd = -1;                      ///< the replica's socket; the feed owns and closes it
  std::string addr;                 ///< the replica's ip (INFO's slaveN:ip=)
  uint16_t listening_port = 0;      ///< REPLCONF listening-port (INFO's port=)
  bool full = false;                ///< send a full copy first
  uint64_t start_offset = 0;        ///< stream offset to send from
  tiering::Keyspace* keyspace = nullptr;
  tiering::SsdStore* ssd = nullptr;  ///< where cold values are read; null: no SSD tier
  std::shared_ptr<ReplBacklog> backlog;  ///< shared: a replica may replace its own meanwhile
  int timeout_ms = 60'000;          ///< repl-timeout: a replica silent this long is dropped
  /// Called on the feed's reader thread with each acknowledged offset.
  std::function<void(uint64_t offset)> on_ack;
  /// Log sink: (warning?, line). Called from the feed's threads.
  std::function<void(bool warning, std::string_view line)> log;
};

/// One replica's feed. Thread-safe getters; start/stop from one controlling thread.
class ReplicaFeed {
 public:
  enum class State { kSnapshot, kOnline, kClosed };

  explicit ReplicaFeed(FeedOptions options);
  ~ReplicaFeed();  ///< stop()
  ReplicaFeed(const ReplicaFeed&) = delete;
  ReplicaFeed& operator=(const ReplicaFeed&) = delete;

  void start();
  /// Closes the link and joins the threads.
  void stop();

  State state() const { return state_.load(std::memory_order_acquire); }
  /// Offset up to which the replica acknowledged applying (0 before its first ACK).
  uint64_t ack_offset() const { return ack_offset_.load(std::memory_order_acquire); }
  /// Wall clock (Unix ms) of the last ACK (INFO's lag).
  int64_t last_ack_ms() const { return last_ack_ms_.load(std::memory_order_relaxed); }
  /// Offset up to which frames were written to the socket.
  uint64_t sent_offset() const { return sent_.load(std::memory_order_relaxed); }
  const std::string& addr() const { return options_.addr; }
  uint16_t port() const { return options_.listening_port; }

 private:
  void run_writer();
  void run_reader();
  bool snapshot();
  void stream();
  // Writes every byte of `iov` (blocking, with the socket's send timeout). False on error/stop.
  bool write_all(std::vector<iovec>& iov);
  void log(bool warning, const std::string& line) const;

  FeedOptions options_;
  std::thread writer_, reader_;
  std::atomic<bool> stop_{false};
  std::atomic<State> state_{State::kSnapshot};
  std::atomic<uint64_t> ack_offset_{0};
  std::atomic<int64_t> last_ack_ms_{0};
  std::atomic<uint64_t> sent_{0};
  uint64_t reader_id_ = 0;
};

}  // namespace cluster
