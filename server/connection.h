// server/connection.h - one client connection: read, parse, run each request through the
// pipeline (server/pipeline.h), reply.
//
// A connection lives on one worker thread. Its loop (a C++20 coroutine on Asio) reads into a
// fixed read buffer, feeds the RESP parser, runs every complete request, and writes all replies
// of that batch in one scatter-gather write before reading again: pipelined replies keep request
// order and a connection's output is bounded by one batch. When the parser is inside a large
// bulk, the socket is read straight into the value's own buffer (one copy, socket to home).
#pragma once

#include <asio.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "cluster/repl_socket.h"
#include "resp/parser.h"
#include "resp/writer.h"
#include "rdma/segment.h"
#include "rdma/verbs_transport.h"
#include "server/acl.h"
#include "server/command.h"
#include "server/output_limit.h"
#include "server/pipeline.h"
#include "server/pubsub.h"
#include "server/script_runner.h"
#include "server/transaction.h"
#include "server/transfer_pool.h"
#include "tiering/ssd_tier.h"
#include "tiering/value.h"

namespace server {

class Server;
class TlsContext;
struct TlsStream;
struct Worker;

class Connection : public std::enable_shared_from_this<Connection> {
 public:
  using Socket = asio::generic::stream_protocol::socket;

  /// `id` is the client ID (CLIENT ID), taken from the registry in accept order. `peer`/`local`
  /// are "ip:port" or, for the Unix socket, its path. With `tls` (a client of tls-port), the
  /// connection runs TLS over `socket` with that context, checking the client's certificate per
  /// tls-auth-clients as it is now.
  Connection(Server& server, Worker& worker, uint64_t id, Socket socket, std::string peer,
             std::string local, bool is_unix, std::shared_ptr<TlsContext> tls = nullptr);
  ~Connection();

  /// Registers the client and starts its loop on the worker's thread.
  void start();
  /// Closes the connection as soon as possible. Thread-safe.
  void close();
  /// Closes the connection once the pending replies are written (QUIT, CLIENT KILL of self).
  void close_after_reply() { close_after_reply_ = true; }
  /// Whether every channel, shard channel and pattern this client is subscribed to is allowed
  /// by its user's rules as they are now. The connection's thread only.
  bool subscriptions_allowed();
  /// ACL SETUSER changed this client's user (any thread): on the connection's thread, a client
  /// subscribed to something the user may no longer use is closed (Redis 7.0's
  /// ACLKillPubsubClientsIfNeeded).
  void recheck_subscriptions();

  uint64_t id() const { return id_; }
  /// Whether this client came in on tls-port (its bytes are encrypted).
  bool is_tls() const { return tls_ != nullptr; }
  const std::string& peer() const { return peer_; }
  const std::string& local() const { return local_; }
  Worker& worker() { return worker_; }
  resp::Writer& writer() { return writer_; }

  // Session state, changed by commands on this connection's own thread.
  bool authenticated = false;
  /// The ACL user this connection runs as (server/acl.h): the default user until AUTH, HELLO
  /// AUTH or RESET change it. Re-read from the registry when it changed (one atomic load per
  /// request while it did not); a deleted user's connection is closed and checks as a user with
  /// no permission meanwhile. Connection thread only.
  const acl::User* acl_user() {
    if (server_acl_generation() != user_generation_) [[unlikely]] refresh_user();
    return user_.get();
  }
  /// Runs as `user` from now on (AUTH, HELLO AUTH, RESET), authenticated.
  void set_user(std::shared_ptr<const acl::User> user);
  /// The user's name, for CLIENT LIST. Thread-safe.
  std::string user_name() const;
  /// Adds an ACL LOG entry for a denial on this connection (acl.c addACLLogEntry): `reason`
  /// "command", "key", "channel" or "auth"; `object` the command, key, channel or "AUTH";
  /// `username` this connection's user or the one AUTH named; `context` "lua" for a script's
  /// call, else "multi" inside MULTI or "toplevel".
  void log_acl_denial(std::string_view reason, std::string_view object, std::string_view username,
                      int64_t now_ms, std::string_view context = {});
  /// log_acl_denial for a request the pipeline refused with a NOPERM verdict.
  void log_acl_refusal(const PreparedCommand& cmd, std::span<const std::string_view> args,
                       int64_t now_ms, std::string_view context = {});
  bool no_evict = false;
  /// Client memory registered by KV.REGISTER; unmapped when the connection closes.
  rdma::SegmentTable segments;
  /// File descriptors received with SCM_RIGHTS (Unix socket), oldest first, each waiting for
  /// the KV.REGISTER SHM that claims it; the rest are closed with the connection. At most 64
  /// (a vector: a deque allocates 576 bytes up front, for every connection).
  std::vector<int> passed_fds;
  /// Keys this connection leased (KV.PREFIX ... PIN) and the deadline it asked, so that
  /// KV.UNPIN and closing end exactly its own leases.
  std::unordered_map<std::string, int64_t> pins;
  /// Ends this connection's lease of `key`. Returns whether it was unexpired.
  bool unpin(std::string_view key, int64_t now_ms);
  /// MULTI/EXEC state: queued commands, watched keys.
  Transaction txn;
  /// Runs EXEC: the queued commands atomically, under one ExecLock (exec.cc). The EXEC
  /// command's handler.
  void exec(CommandContext& ctx);
  /// Pub/Sub: this client's subscriptions (cmd_pubsub.cc). Any thread may read its counts.
  PubSubClient& pubsub() { return pubsub_; }
  const PubSubClient& pubsub() const { return pubsub_; }
  /// Makes the mailbox this client subscribes with, if it has none yet (before a subscribe).
  void ensure_mailbox();
  /// Redis's RESP2 subscribed mode: a subscription and RESP2, where only (P|S)SUBSCRIBE,
  /// (P|S)UNSUBSCRIBE, PING, QUIT and RESET run (RESP3 clients may run anything).
  bool subscribed_resp2() const { return pubsub_.active() && protocol() == 2; }
  /// MONITOR (server/monitor.h): from now on every command other clients run streams to this
  /// client, through its mailbox. False when it monitors already (Redis then replies nothing).
  bool start_monitor();
  /// Ends MONITOR (RESET; closing does it too).
  void stop_monitor();
  /// Whether this client is a monitor. Any thread.
  bool monitoring() const { return monitoring_.load(std::memory_order_relaxed); }
  /// Feeds the command `args` this client ran to the monitors, as coming from this client
  /// (its "ip:port", or "unix:<path>"). Call only when Server::monitors().active().
  void feed_monitors(std::span<const std::string_view> args);
  /// Appends the messages that arrived for this client to its pending replies (the loop does
  /// before each write; PUBLISH to put a message to itself before its reply, as Redis).
  void drain_mailbox();
  /// EVAL's hand-over (cmd_script.cc): the pipeline runs `call` on a script thread while this
  /// connection waits, then replies (connection_script.cc).
  void defer_script(ScriptCall call) { script_call_.emplace(std::move(call)); }
  /// A fast-path command's large copy (server/transfer_pool.h): after the handler, this
  /// connection waits (its coroutine) while the transfer pool runs `t->copy()`, then
  /// `t->finish()` publishes and replies here (connection_transfer.cc). Only from a handler
  /// called with CommandContext::may_suspend.
  void defer_transfer(std::unique_ptr<Transfer> t) { transfer_ = std::move(t); }
  /// Whether the write being run, finding no room, may wait for memory that comes back soon
  /// rather than answer -OOM: under an evicting policy, region blocks held by fast-path plans
  /// (TransferPool::held, less `own_holds`: the asking request's own plan, whose blocks go back
  /// when it waits) or by values queued for the disk, and memory.max_room_wait has not passed
  /// since the request first asked (that first ask starts its clock and counts INFO
  /// write_room_waits). Only for the pipeline's own calls (CommandContext::may_suspend): not
  /// inside EXEC or a script.
  bool may_wait_for_room(int64_t own_holds = 0);
  /// This connection's RDMA queue pair (KV.CONNECT VERBS); null until then.
  std::unique_ptr<rdma::VerbsEndpoint> verbs;
  /// READONLY (cluster mode): reads of the slots this node holds as a replica are served
  /// here instead of redirected to the primary; READWRITE ends it.
  bool readonly_reads = false;
  /// REPLCONF listening-port: the port a replica on this connection announced (0: none).
  uint16_t replica_listening_port = 0;
  /// REPLCONF capa stratakv: the replica reads stratakv's frames (PSYNC requires it).
  bool replica_capa_stratakv = false;
  /// PSYNC: once this request's reply is written, the socket goes to `fn` (a replica's feed,
  /// which owns it from then on; on tls-port with the TLS session) and this connection ends
  /// without closing it.
  void hand_off_after_reply(std::function<void(std::unique_ptr<cluster::ReplSocket>)> fn) {
    handoff_ = std::move(fn);
  }
  /// WAIT: after this request, the connection waits (its coroutine, not the thread) until
  /// `needed` replicas acknowledged `offset` or `timeout_ms` passed (0: no limit), then
  /// replies the number that did. Later requests wait behind it, as in Redis.
  void suspend_for_wait(uint64_t offset, int needed, int64_t timeout_ms) {
    wait_ = PendingWait{offset, needed, timeout_ms};
  }
  /// A request whose work must not run on this thread (file I/O: ACL SAVE/LOAD): after the
  /// handler, `job` runs on the server's main loop while this connection waits (its coroutine,
  /// as WAIT), then its result is replied here: "" = +OK, else the error text.
  void defer_io(std::function<std::string()> job) { io_job_ = std::move(job); }
  /// RESP protocol version of replies (2 or 3).
  int protocol() const { return writer_.protocol(); }
  void set_protocol(int v) {
    writer_.set_protocol(v);
    resp_.store(v, std::memory_order_relaxed);
  }

  // Descriptive fields, read by CLIENT LIST from other threads. Thread-safe.
  void set_name(std::string name);
  std::string name() const;
  void set_lib(std::string_view attr, std::string value);
  /// One line of CLIENT LIST / CLIENT INFO, in Redis 7.2's field order (no trailing newline).
  std::string describe(int64_t now_ms) const;
  /// Milliseconds since the last request.
  int64_t idle_ms(int64_t now_ms) const;
  /// After kIdleBufferMs without a byte read: the client gives back its read buffer and the
  /// capacity its parser and reply writer kept (Redis frees an idle client's query buffer in
  /// clientsCron); the next bytes take a new one. Not on tls-port (its reads are not
  /// interrupted). Thread-safe: called by the cron, done on the connection's thread.
  void release_idle_buffers(int64_t now_ms);
  static constexpr int64_t kIdleBufferMs = 2000;
  /// Bytes of the read buffer (16 KiB).
  static constexpr size_t kReadBufferSize = 16 * 1024;

  /// Runs one request through every stage of the pipeline, without the SSD tier (pipeline.cc).
  /// `now_ms` is the wall clock of the batch it came in.
  void process(const resp::Request& req, int64_t now_ms);
  /// The same with the SSD tier: loads, back-pressure waits and reply barriers suspend this
  /// coroutine (never the thread). `now_ms` is refreshed after a load; `ahead` is the read
  /// buffer's bytes after the request (the keys of the reads there are prefetched).
  asio::awaitable<void> process_tiered(const resp::Request& req, int64_t& now_ms,
                                       std::string_view ahead);

 private:
  // How a request ended, for its stats (pipeline.cc): refused before its handler ran (Redis's
  // rejected_calls), run, or run and replied an error (failed_calls).
  enum class Outcome : uint8_t { kRejected, kCalled, kFailed };
  // Pipeline stages (pipeline.cc). take_bulk_redirect: a request whose large bulk was dropped
  // (allocate_bulk) becomes a redirect. room_for_write: stage 5's maxmemory check, evicting per
  // policy; false: reply -OOM. call: stage 6, the handler, run again after making room when it
  // throws tiering::NeedRoom. record: stage 8. redirect: a -MOVED as this connection sees it
  // (READONLY reads of a replica's slots run; tls-port clients are sent to tls-ports).
  void take_bulk_redirect(PreparedCommand& cmd);
  void redirect(PreparedCommand& cmd);
  // The transaction queueing stage (exec.cc): inside MULTI, a command other than EXEC, DISCARD,
  // MULTI, WATCH, QUIT or RESET is checked (a refused one flags the transaction), then queued
  // with +QUEUED instead of run. True when it took the request.
  bool queue_stage(const resp::Request& req, const PreparedCommand& cmd, int64_t now_ms);
  // One queued command run inside EXEC (exec.cc): its stats go to exec_stats_. A NeedRoom
  // escapes when `may_retry` (EXEC runs again); else the command answers -OOM.
  void run_queued(const QueuedCommand& q, int64_t now_ms, bool may_retry);
  // The ACL check of each queued command again at EXEC (execCommand: the rules may have
  // changed since it was queued): per queued command, "" or its -NOPERM error; empty when the
  // user is unrestricted. Logs each refusal (context "multi").
  std::vector<std::string> acl_recheck(int64_t now_ms);
  struct ExecStat {
    uint32_t id;
    uint64_t us;
    bool failed;
    bool ran;  // false: refused by acl_recheck, not called
  };
  std::vector<ExecStat> exec_stats_;  // the running EXEC's commands
  // Scripts (connection_script.cc). finish_script: runs the call EVAL deferred on a script
  // thread, this coroutine waiting, and replies; the call's outcome for stage 8. busy_stage:
  // while a script holds shards the request would lock, waits (this coroutine) until it is
  // done or has run for busy-reply-threshold, then replies -BUSY; true when it replied.
  asio::awaitable<Outcome> finish_script();
  asio::awaitable<bool> busy_stage(const resp::Request& req, int64_t now_ms);
  std::optional<ScriptCall> script_call_;
  // The transfer pool (connection_transfer.cc). finish_transfer: runs the copy the handler
  // deferred on the pool, this coroutine waiting, then publishes and replies on this thread;
  // the call's outcome for stage 8. A client closed meanwhile: the result is dropped.
  asio::awaitable<Outcome> finish_transfer(const resp::Request& req, const PreparedCommand& cmd);
  std::unique_ptr<Transfer> transfer_;
  // A write found no room while memory that comes back soon is held (may_wait_for_room):
  // room_wait_ asks the pipeline's caller to wait_for_room() and run the request again;
  // room_wait_until_ is the request's deadline (reset once it completed).
  asio::awaitable<void> wait_for_room();
  bool room_wait_ = false;
  std::optional<std::chrono::steady_clock::time_point> room_wait_until_;
  std::vector<size_t> busy_shards_, busy_keys_;
  // The slot migration stage (connection_migration.cc): true when the request is a write to a
  // slot migrating out, counted in flight (SlotOwner::write_begin) until it completed; during
  // a handover's pause it waits first. False (not counted) otherwise, or when the connection
  // closed meanwhile.
  asio::awaitable<bool> migration_stage(const resp::Request& req);
  std::vector<size_t> migration_keys_;
  std::vector<uint16_t> migration_slots_;
  // The writer's error observer: every error reply counts in total_error_replies and errorstats.
  static void count_error_reply(void* self, std::string_view text);
  bool room_for_write(int64_t now_ms);
  // The subscribed-mode stage (pipeline.cc): in RESP2 with a subscription, a command other than
  // (P|S)SUBSCRIBE, (P|S)UNSUBSCRIBE, PING, QUIT, RESET is refused (processCommand). True when
  // it refused the request.
  bool subscribed_stage(const resp::Request& req, const PreparedCommand& cmd, int64_t now_ms);
  // Pub/Sub delivery (connection.cc). make_mailbox: the mailbox publishers deliver into, whose
  // wake posts wake_reader() to this connection's thread. wake_reader: a message arrived; if
  // the loop is waiting for the socket, that read is cancelled so the loop writes it now.
  std::shared_ptr<Subscriber> make_mailbox();
  void wake_reader();
  // client-output-buffer-limit (output_limit.h): whether `bytes` of output are past this
  // client's class's limit (pubsub with a subscription, else normal). Any thread.
  bool over_output_limit(size_t bytes);
  // Logs Redis's line for a client closed by its output limit, and closes it. Any thread.
  void close_for_output_limit();
  Outcome call(const resp::Request& req, const PreparedCommand& cmd, int64_t now_ms);
  void record(const resp::Request& req, const PreparedCommand& cmd, Outcome outcome,
              int64_t now_ms);
  // record(), out of line: for the stages outside pipeline.cc (scripts).
  void record_call(const resp::Request& req, const PreparedCommand& cmd, Outcome outcome,
                   int64_t now_ms);
  asio::awaitable<void> run();
  // WAIT's suspension (suspend_for_wait); replies the count.
  asio::awaitable<void> finish_wait();
  asio::awaitable<void> finish_io_job();
  asio::awaitable<bool> flush();
  /// Reads what the socket has into `buf` (at least one byte, or an error). On the Unix socket
  /// it uses recvmsg, keeping file descriptors passed with SCM_RIGHTS in passed_fds.
  asio::awaitable<std::pair<asio::error_code, size_t>> read_some(std::span<char> buf);
  /// After a protocol error's reply: ends the sending side and drops what the client still
  /// sends for up to 5 s, so that it reads the reply instead of a reset (plain TCP/Unix only).
  asio::awaitable<void> linger_close();
  // TLS (server/tls.h): the handshake, before the first request (false: the client is
  // dropped, as Redis logs it at verbose level); the stream's writes.
  asio::awaitable<bool> tls_handshake();
  // Hands the socket (and a TLS session) to handoff_ once the last reply is written.
  void handoff();
  asio::awaitable<std::pair<asio::error_code, size_t>> tls_write(
      const std::vector<asio::const_buffer>& bufs);
  // The parser's allocator of large bulks: a block of the region, read into straight from the
  // socket; staged on the heap when memory is short; dropped unread when a key before it is in
  // a slot another node serves (stage 3, before any byte of it is allocated).
  resp::LargeBulk allocate_bulk(size_t len);
  // Moves this client's part of a server-wide figure from `counted` to `now`.
  static void account(size_t now, std::atomic<size_t>& counted, std::atomic<uint64_t>& total);
  // The SSD tier around one command (connection_ssd.cc). ssd_pin: pins the memory values of
  // the command's keys; true when some are on SSD only and ssd_load must run. ssd_load: loads
  // them on the I/O pool; false when it replied an error instead (the command must not run);
  // refreshes `now_ms`. ssd_release: after the command, releases what ssd_pin and ssd_load
  // held and returns the ticket its reply must wait for (0: none), which ssd_wait waits for.
  bool ssd_pin(const PreparedCommand& cmd, const resp::Request& req, int64_t now_ms);
  // Back-pressure of the disk (docs/ssd-tier.md, "Memory while demoting"). ssd_throttle: waits
  // (this coroutine, not the thread) while a write bringing `incoming` bytes must
  // (Server::RoomWait), so writers slow to the disk's pace instead of evicting what is not on
  // SSD yet or getting -OOM.
  asio::awaitable<void> ssd_throttle(uint64_t incoming);
  // `ahead`: the read buffer's bytes after this request; the keys on SSD of the read commands
  // among them are prefetched (collect_prefetch) alongside this command's.
  asio::awaitable<bool> ssd_load(int64_t& now_ms, std::string_view ahead);
  void collect_prefetch(std::string_view ahead, int64_t now_ms);
  // One key of ssd_load, on an I/O pool thread. A prefetch never waits for room.
  tiering::SsdTier::Loaded load_one(tiering::SsdTier& tier, std::string_view key, int64_t now,
                                    bool prefetch);
  uint64_t ssd_release();
  asio::awaitable<void> ssd_wait(uint64_t ticket);

  Server& server_;
  Worker& worker_;
  Socket socket_;
  // tls-port's clients: the TLS stream over socket_ (null on the plain port and the Unix
  // socket). Reads and writes test it once each: no virtual call on the plain path.
  std::unique_ptr<TlsStream> tls_;
  const std::string peer_, local_;
  const bool is_unix_;
  const uint64_t id_;
  const int64_t created_ms_;
  std::atomic<int64_t> last_ms_;
  std::atomic<int> resp_{2};
  std::atomic<bool> closed_{false};
  std::atomic<bool> monitoring_{false};
  struct PendingWait {
    uint64_t offset;
    int needed;
    int64_t timeout_ms;
  };
  std::optional<PendingWait> wait_;
  std::shared_ptr<asio::steady_timer> wait_timer_;  // while WAIT waits (close() cancels it)
  std::function<void(std::unique_ptr<cluster::ReplSocket>)> handoff_;
  std::function<std::string()> io_job_;  // defer_io
  bool close_after_reply_ = false;
  // When the previous command ended (or the batch began): each command's duration for the
  // slowlog is measured from here, so it costs one clock read per command.
  std::chrono::steady_clock::time_point command_end_;
  int64_t call_us_ = 0;  // the last call's duration

  // The request being run, resolved once (reused: no allocation per request), and one more
  // for the requests the SSD tier's prefetch peeks at.
  PreparedCommand prepared_, peek_;
  // Set by allocate_bulk when it dropped a bulk of the request being received: the slot of the
  // key before it and the node serving it then (take_bulk_redirect).
  int bulk_redirect_slot_ = -1;
  std::string bulk_redirect_to_;
  // Set by allocate_bulk when it dropped a bulk larger than memory can ever hold: its length.
  uint64_t bulk_too_large_ = 0;
  std::vector<std::string_view> partial_args_;  // allocate_bulk's scratch

  resp::Parser parser_;
  resp::Writer writer_;
  // The read buffer (kReadBufferSize bytes, or null): taken once the socket has bytes to read
  // (an idle connection waits for them holding none), given back by release_idle_buffers.
  std::unique_ptr<char[]> rbuf_;
  std::atomic<bool> holds_buffers_{false};  // rbuf_ is held (the cron's hint)
  bool shrink_requested_ = false;  // the read was cancelled to give the buffers back
  void take_read_buffer();
  void shrink_buffers();
  // Publishes CLIENT LIST's qbuf (`unread` bytes) and qbuf-free (the rest of what the read
  // buffer and the parser hold).
  void note_query_buffer(size_t unread);
  std::vector<resp::OutBuffer> out_scratch_;
  std::atomic<size_t> reserved_counted_{0};  // this client's part of reserved_bulk_bytes
  std::atomic<size_t> heap_counted_{0};      // ... of query_heap_bytes
  std::atomic<const CommandSpec*> last_cmd_{nullptr};

  // SSD tier state of the command being run (connection_ssd.cc).
  std::vector<tiering::ValueRef> ssd_pins_;
  std::vector<std::pair<std::string_view, tiering::ValueRef>> ssd_transient_;
  std::vector<std::string_view> ssd_loads_;
  std::vector<std::string> ssd_prefetch_;

  mutable std::mutex info_mu_;
  std::string name_, lib_name_, lib_ver_, user_name_ = "default";
  // acl_user()'s state: the user, and the registry generation it was read at.
  std::shared_ptr<const acl::User> user_;
  uint64_t user_generation_ = 0;
  uint64_t server_acl_generation() const;
  void refresh_user();

  // Pub/Sub and output accounting.
  PubSubClient pubsub_;
  std::vector<MessageRef> inbox_;       // drain_mailbox's scratch
  bool reading_ = false;                // the loop waits for the socket (wake_reader cancels)
  OutputLimiter out_limiter_;
  std::atomic<size_t> out_bytes_{0};    // replies being written now (omem, output limits)
  std::atomic<size_t> qbuf_{0};         // bytes read and not yet run (CLIENT LIST qbuf)
  std::atomic<size_t> qbuf_free_{0};

};

}  // namespace server
