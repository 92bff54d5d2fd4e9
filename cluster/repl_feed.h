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
// Slot migration's source uses the same feed with `slots` set (docs/cluster.md, "Slot
// migration"): the copy walks only those slots' key lists (Keyspace::for_each_in_slot, never a
// scan of the keyspace) and the stream carries only their keys' frames, plus the frames that
// carry no key (PING, FLUSH, TOPOLOGY). The target acknowledges the bytes of the frames it
// received (stream_sent()'s count), not the backlog's offsets.
//
// Two threads per replica, neither an I/O thread: one writes (blocking writes with a timeout,
// values gathered straight from the region: no copy; over TLS, encrypted straight from it),
// one reads the ACK frames. stop() shuts the socket down, which ends both.
#pragma once

#include <atomic>
#include <bitset>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <sys/uio.h>

#include "cluster/repl_backlog.h"
#include "cluster/repl_socket.h"
#include "tiering/keyspace.h"
#include "tiering/ssd_store.h"

namespace cluster {

/// A set of hash slots (bit s: slot s).
using SlotSet = std::bitset<tiering::kSlotCount>;

/// What a ReplicaFeed needs. The keyspace and the store must outlive the feed.
struct FeedOptions {
  /// The replica's socket, plain or TLS (the client connection's session, past its handshake);
  /// the feed owns and closes it.
  std::unique_ptr<ReplSocket> socket;
  std::string addr;                 ///< the replica's ip (INFO's slaveN:ip=)
  uint16_t listening_port = 0;      ///< REPLCONF listening-port (INFO's port=)
  bool full = false;                ///< send a full copy first
  uint64_t start_offset = 0;        ///< stream offset to send from
  tiering::Keyspace* keyspace = nullptr;
  tiering::SsdStore* ssd = nullptr;  ///< where cold values are read; null: no SSD tier
  std::shared_ptr<ReplBacklog> backlog;  ///< shared: a replica may replace its own meanwhile
  int timeout_ms = 60'000;          ///< repl-timeout: a replica silent this long is dropped
  /// A slot migration's feed: only these slots' keys and changes (see above). Null: a replica's
  /// feed, every key.
  std::shared_ptr<const SlotSet> slots;
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
  /// Offset of the backlog up to which frames were written to the socket (or skipped, for a
  /// slot migration's frames of other slots).
  uint64_t sent_offset() const { return sent_.load(std::memory_order_acquire); }
  /// Bytes of stream frames written to the socket since the copy: what the peer acknowledges.
  /// A replica's equals sent_offset() less the start offset; a slot migration's counts only
  /// its frames. Read it after sent_offset(): it is stored before.
  uint64_t stream_sent() const { return stream_sent_.load(std::memory_order_acquire); }
  /// Keys and bytes of values the copy sent so far (a migration's progress).
  uint64_t copied_keys() const { return copied_keys_.load(std::memory_order_relaxed); }
  uint64_t copied_bytes() const { return copied_bytes_.load(std::memory_order_relaxed); }
  const std::string& addr() const { return options_.addr; }
  uint16_t port() const { return options_.listening_port; }

 private:
  void run_writer();
  void run_reader();
  bool snapshot();
  // Collects the copy's next step into `emit` (a value by reference, or a cold key whose bytes
  // are on SSD: null value). Returns false when the copy is complete.
  bool next_step(uint64_t* cursor, int64_t now,
                 const std::function<void(std::string_view, const tiering::Entry&)>& emit);
  void stream();
  // Whether the stream frame `f` goes to this feed's peer (a slot migration's filter).
  bool wanted(const ReplBacklog::Frame& f) const;
  // Writes every byte of `iov` (blocking, with the socket's send timeout). False on error/stop.
  bool write_all(std::vector<iovec>& iov);
  void log(bool warning, const std::string& line) const;

  FeedOptions options_;
  std::unique_ptr<ReplSocket>& sock_;  // options_.socket
  std::thread writer_, reader_;
  std::atomic<bool> stop_{false};
  std::atomic<State> state_{State::kSnapshot};
  std::atomic<uint64_t> ack_offset_{0};
  std::atomic<int64_t> last_ack_ms_{0};
  std::atomic<uint64_t> sent_{0};
  std::atomic<uint64_t> stream_sent_{0};
  std::atomic<uint64_t> copied_keys_{0}, copied_bytes_{0};
  uint64_t reader_id_ = 0;
};

}  // namespace cluster
