// cluster/repl_link.h - a replica's link to its primary: the handshake, the full copy or the
// resumption, then the stream of changes applied through the keyspace's write path
// (docs/replication.md).
//
// Handshake, in RESP as Redis's replicas do it: `AUTH [masteruser] masterauth` when set,
// `REPLCONF listening-port <port>`, `REPLCONF capa stratakv`, then `PSYNC <replid> <offset>`
// ("?" and -1 the first time). `+CONTINUE <replid>` resumes at the offset; `+FULLRESYNC
// <replid> <offset>` flushes this node's keys, applies the copy, then the stream from
// <offset>. A dropped link is tried again every second; the replication id and offset survive
// it, so a short break resumes from the primary's backlog.
//
// Applying: every frame becomes one change of the keyspace's write API (a SET's bytes are read
// from the socket straight into their region block: one copy), and stream frames are relayed
// to `relay` so this node's backlog keeps the primary's offsets. The link sends an ACK frame
// whenever it has applied everything received so far, and at least every second.
//
// Import mode (`sync_command` set): the target of a slot migration (docs/cluster.md, "Slot
// migration") links to the source the same way: AUTH, then `sync_command` (CLUSTER SYNCSLOTS
// <id>) instead of REPLCONF and PSYNC, answered +FULLRESYNC; `clear` removes the migrated
// slots' keys instead of every key; a value this node cannot hold ends the link (`on_no_room`)
// instead of being dropped; a TOPOLOGY frame is handed to `on_topology` and acknowledged at
// once.
//
// Over TLS when `tls` is set (tls-replication, tls-cluster; docs/tls.md): the stream is the same,
// decrypted straight into the value's block.
//
// One thread of its own (blocking sockets with timeouts), never an I/O thread. Thread-safe
// getters; start/stop from one controlling thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cluster/repl_frame.h"
#include "cluster/repl_socket.h"
#include "tiering/keyspace.h"
#include "tiering/value.h"

namespace cluster {

/// What a ReplicaLink needs. The keyspace must outlive the link.
struct LinkOptions {
  std::string host;
  uint16_t port = 0;
  std::string masteruser, masterauth;  ///< AUTH to the primary ("" masterauth: none)
  /// tls-replication / tls-cluster: TLS to host:port with the client context this returns at
  /// each connection attempt (the primary's certificate verified against its CAs, this node's
  /// shown; a CONFIG SET of the files applies at the next attempt). Empty: plain TCP.
  std::function<std::shared_ptr<ssl_ctx_st>()> tls;
  uint16_t listening_port = 0;         ///< this node's port, announced to the primary
  tiering::Keyspace* keyspace = nullptr;
  /// A value of `size` bytes in the region (making room if need be); null when it cannot fit.
  std::function<tiering::ValueRef(size_t size)> allocate;
  /// Each stream frame applied (not the full copy's): this node's backlog appends it, so its
  /// offsets stay the primary's. `frame_size` is the frame's size on the wire; a SET whose
  /// value this node could not hold comes with a null value (the relay cannot repeat it).
  std::function<void(FrameType, std::string_view key, tiering::ValueRef, int64_t expire_ms,
                     uint64_t frame_size)>
      relay;
  /// A full copy begins: the stream continues from `offset` of `replid` (reset the backlog).
  std::function<void(const std::string& replid, uint64_t offset)> on_full_sync;
  /// Resuming from an earlier replication id's history under a new one (+CONTINUE <new id>).
  std::function<void(const std::string& replid)> on_new_replid;
  /// Import mode: the command sent after AUTH instead of REPLCONF and PSYNC. Empty: a replica.
  std::vector<std::string> sync_command;
  /// Removes every key this link feeds: at a full copy's start and on a FLUSH frame. Empty:
  /// the whole keyspace (Keyspace::flush).
  std::function<void()> clear;
  /// A value this node cannot hold (allocate() gave nothing): a replica drops the key and goes
  /// on; with `on_no_room` set (import mode) it is called with the value's size and the link's
  /// session ends.
  std::function<void(uint64_t size)> on_no_room;
  /// A TOPOLOGY frame's record (JSON), on the link's thread; then the frame is acknowledged.
  std::function<void(std::string_view json)> on_topology;
  std::string replid = "?";  ///< resume point to ask for ("?": none)
  int64_t offset = -1;
  int timeout_ms = 60'000;   ///< repl-timeout: a primary silent this long is dropped
  int retry_ms = 1000;       ///< between two connection attempts (Redis's replicas: a second)
  std::function<void(bool warning, std::string_view line)> log;
};

class ReplicaLink {
 public:
  /// Redis's master_link_status and master_sync_in_progress in one.
  enum class State { kConnecting, kHandshake, kSyncing, kUp };

  explicit ReplicaLink(LinkOptions options);
  ~ReplicaLink();  ///< stop()
  ReplicaLink(const ReplicaLink&) = delete;
  ReplicaLink& operator=(const ReplicaLink&) = delete;

  void start();
  /// Closes the link and joins the thread.
  void stop();
  /// Closes the current connection (CLIENT KILL TYPE master); the link reconnects and resumes.
  void drop_connection();

  State state() const { return state_.load(std::memory_order_acquire); }
  /// The replication id and the offset applied (every byte before it).
  std::string replid() const;
  uint64_t offset() const { return offset_.load(std::memory_order_acquire); }
  /// Whether this node holds a complete copy of the primary's history up to offset(): a full
  /// copy was applied (now or in an earlier connection). A replica without one must not be
  /// promoted.
  bool synced() const { return have_offset_.load(std::memory_order_acquire); }
  /// Wall clock (Unix ms) of the last byte received from the primary.
  int64_t last_io_ms() const { return last_io_ms_.load(std::memory_order_relaxed); }
  /// Wall clock when the link last went down (0: never up yet).
  int64_t down_since_ms() const { return down_since_ms_.load(std::memory_order_relaxed); }
  uint64_t full_syncs() const { return full_syncs_.load(std::memory_order_relaxed); }
  uint64_t partial_syncs() const { return partial_syncs_.load(std::memory_order_relaxed); }
  /// Keys of the stream this node could not hold (its region full): dropped locally.
  uint64_t dropped_values() const { return dropped_.load(std::memory_order_relaxed); }
  const std::string& host() const { return options_.host; }
  uint16_t port() const { return options_.port; }

 private:
  void run();
  // One connection's life; returns when it ends.
  void session();
  bool handshake(std::string* reply);
  bool command(const std::vector<std::string>& args, std::string* line);
  bool read_line(std::string* line);
  bool read_exact(char* dst, size_t n);
  bool send_ack();
  // Applies one frame (its header read); reads its key and value. False: the link is broken.
  bool apply(const FrameHeader& h, bool in_stream);
  void log(bool warning, const std::string& line) const;

  LinkOptions options_;
  std::thread thread_;
  std::atomic<bool> stop_{false};
  std::atomic<int> fd_{-1};            // the socket's, for drop_connection() from any thread
  std::unique_ptr<ReplSocket> sock_;  // the link thread's
  std::atomic<State> state_{State::kConnecting};
  mutable std::mutex id_mu_;
  std::string replid_;
  std::atomic<uint64_t> offset_{0};
  std::atomic<bool> have_offset_{false};
  uint64_t acked_ = 0;
  int64_t last_ack_ms_ = 0;
  std::atomic<int64_t> last_io_ms_{0}, down_since_ms_{0};
  std::atomic<uint64_t> full_syncs_{0}, partial_syncs_{0}, dropped_{0};
  // Received bytes not yet consumed: [rpos_, rend_) of rbuf_.
  std::vector<char> rbuf_;
  size_t rpos_ = 0, rend_ = 0;
  std::string key_;  // the frame's key (reused)
  uint64_t failed_connects_ = 0;  // connection attempts failed in a row (the log's throttle)
};

}  // namespace cluster
