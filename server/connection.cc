// server/connection.cc - a connection's life and I/O (connection.h): its read loop, the
// large bulk read into its value's own block, the batched scatter-gather write, TLS, and the
// hand-offs to the I/O pool and the script threads. Its Pub/Sub side is connection_pubsub.cc,
// its client's identity and buffers connection_client.cc; the SSD, transfer, script and
// migration stages are in the other connection_*.cc.
#include "server/connection.h"

#include <sys/socket.h>
#include <unistd.h>

#include <asio/experimental/as_tuple.hpp>
#include <cstring>
#include <tuple>

#include "server/commands/family.h"
#include "server/log.h"
#include "server/replication.h"
#include "server/server.h"
#include "server/tls.h"
#include "tiering/key_lock.h"
#include "tiering/value.h"

namespace server {

namespace {
// Replies pending past this many bytes are written before the batch ends, which bounds a
// connection's output buffer under deep pipelines.
constexpr size_t kFlushThreshold = 256 * 1024;
}  // namespace

Connection::Connection(Server& server, Worker& worker, uint64_t id, Socket socket,
                       std::string peer, std::string local, bool is_unix,
                       std::shared_ptr<TlsContext> tls)
    : txn(server.watches()),
      server_(server),
      worker_(worker),
      socket_(std::move(socket)),
      peer_(std::move(peer)),
      local_(std::move(local)),
      is_unix_(is_unix),
      id_(id),
      created_ms_(tiering::now_ms()),
      last_ms_(created_ms_),
      parser_({}, [this](size_t len) { return allocate_bulk(len); }),
      pubsub_(server.pubsub()) {
  user_generation_ = server_.acl().generation();
  user_ = server_.acl().default_user();
  authenticated = !server_.acl().default_needs_auth();
  writer_.set_error_observer(&Connection::count_error_reply, this);
  if (tls != nullptr) {
    const std::string_view auth = server_.config().choice(Key::kTlsAuthClients);
    tls_ = std::make_unique<TlsStream>(std::move(tls), socket_,
                                       auth == "no"         ? TlsAuthClients::kNo
                                       : auth == "optional" ? TlsAuthClients::kOptional
                                                            : TlsAuthClients::kYes);
  }
}

Connection::~Connection() {
  // No publisher calls into this connection once its mailbox is closed (pubsub_'s destructor
  // then drops the subscriptions), nor does a command's feed once it left the monitors.
  stop_monitor();
  if (Subscriber* box = pubsub_.mailbox()) box->close();
  for (int fd : passed_fds) ::close(fd);
}

asio::awaitable<void> Connection::linger_close() {
  // The error reply is out. A client still sending a request the parser refused (a value over
  // proto-max-bulk-len) would get a reset on its next write, losing the reply before it reads
  // it (its error says "broken pipe"). So, as web servers' lingering close does: end our side
  // (the client sees EOF after the reply) and read and drop what still comes, until the
  // client closes, kLingerMs pass, or the client is killed. Not over TLS (its close_notify is
  // the stream's own business): closed at once, as before.
  constexpr auto kLingerMs = std::chrono::milliseconds(5000);
  if (tls_ != nullptr || closed_.load(std::memory_order_relaxed)) co_return;
  asio::error_code ec;
  socket_.shutdown(Socket::shutdown_send, ec);
  if (ec) co_return;
  asio::steady_timer deadline(worker_.io);
  deadline.expires_after(kLingerMs);
  deadline.async_wait([this](asio::error_code e) {
    asio::error_code ignored;
    if (!e) socket_.cancel(ignored);
  });
  if (rbuf_ == nullptr) take_read_buffer();
  while (!closed_.load(std::memory_order_relaxed)) {
    auto [read_ec, n] = co_await read_some({rbuf_.get(), kReadBufferSize});
    if (read_ec) break;  // EOF, an error, or the deadline's cancel
    WorkerStats::bump(worker_.stats.net_in, n);
  }
  deadline.cancel();
}

asio::awaitable<std::pair<asio::error_code, size_t>> Connection::read_some(std::span<char> buf) {
  auto token = asio::experimental::as_tuple(asio::use_awaitable);
  // TLS: SSL_read decrypts straight into `buf` (a large bulk's own block, too).
  if (tls_ != nullptr) [[unlikely]] {
    auto [ec, n] = co_await tls_->stream.async_read_some(asio::buffer(buf.data(), buf.size()), token);
    co_return std::pair{ec, n};
  }
  if (!is_unix_) {
    auto [ec, n] = co_await socket_.async_read_some(asio::buffer(buf.data(), buf.size()), token);
    co_return std::pair{ec, n};
  }
  // The kernel delivers passed descriptors only to a recvmsg with room for them (a plain read
  // closes them), so the Unix socket is read with recvmsg: try, and wait only when empty.
  constexpr size_t kMaxFds = 8;  // per message; a client passes one per KV.REGISTER
  constexpr size_t kMaxPending = 64;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFds)];
  for (;;) {
    iovec iov{buf.data(), buf.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t n = ::recvmsg(socket_.native_handle(), &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n >= 0) {
      for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS) continue;
        const size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (size_t i = 0; i < count; ++i) {
          int fd;
          std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
          if (passed_fds.size() < kMaxPending) passed_fds.push_back(fd);
          else ::close(fd);  // a client passing descriptors it never claims gets no more
        }
      }
      if (n == 0) co_return std::pair{asio::error_code(asio::error::eof), size_t{0}};
      co_return std::pair{asio::error_code(), static_cast<size_t>(n)};
    }
    if (errno == EINTR) continue;
    if (errno != EAGAIN && errno != EWOULDBLOCK)
      co_return std::pair{asio::error_code(errno, asio::system_category()), size_t{0}};
    auto [ec] = co_await socket_.async_wait(Socket::wait_read, token);
    if (ec) co_return std::pair{ec, size_t{0}};
  }
}

resp::LargeBulk Connection::allocate_bulk(size_t len) {
  // Stage 3 of the pipeline, early: a bulk after a key in a slot another node serves is
  // dropped unread (the request is answered with the redirect), not allocated in the region.
  if (!server_.slot_owner().owns_all()) {
    partial_args_.clear();
    const size_t argc = parser_.partial_request(&partial_args_);
    const int slot = unowned_slot_before(server_, partial_args_, argc, authenticated, acl_user());
    partial_args_.clear();
    if (slot >= 0) {
      bulk_redirect_slot_ = slot;
      bulk_redirect_to_ = server_.slot_owner().address(static_cast<uint16_t>(slot), is_tls());
      return {nullptr, {}, /*discard=*/true};
    }
  }
  // A value larger than maxmemory (or the region) can never be stored: dropped unread, and the
  // request answered with an error naming the size and the limit, after no allocation at all.
  if (const uint64_t limit = server_.memory_limit(); len > limit) [[unlikely]] {
    bulk_too_large_ = len;
    return {nullptr, {}, /*discard=*/true};
  }
  // A header only promises bytes: its buffer must not push other keys out. So the value's
  // block is taken from the region only while memory, counting every promise in flight,
  // stays within maxmemory, and never by evicting; otherwise the parser stages the bulk on
  // the heap (one more copy) and the command allocates (and evicts, if need be) once the
  // bytes are all here. Under steady eviction, used memory sits between the watermarks, so the
  // headroom above the high watermark keeps typical values on the one-copy path.
  const uint64_t promised = server_.stats().reserved_bulk_bytes.load(std::memory_order_relaxed);
  if (server_.used_memory_now() + promised + len > server_.memory_limit()) return {};
  tiering::ValueRef value = server_.allocate_value(len, 0, /*may_evict=*/false);
  if (!value) return {};
  char* data = value->data();
  return {data, value_keepalive(std::move(value))};
}

bool Connection::unpin(std::string_view key, int64_t now_ms) {
  auto it = pins.find(std::string(key));
  if (it == pins.end()) return false;
  pins.erase(it);
  tiering::KeyLock lock(server_.keyspace(), key, now_ms);
  const tiering::KeyLock::Item* item = lock.find(key);
  return item != nullptr && lock.unlease(item, id_);
}

void Connection::start() {
  server_.clients().add(id_, weak_from_this());
  asio::co_spawn(worker_.io, [self = shared_from_this()] { return self->run(); }, asio::detached);
}

void Connection::close() {
  if (closed_.exchange(true)) return;
  // Gone for every other client at once, as Redis frees a killed client: a second CLIENT KILL
  // or a CLIENT LIST must not find it while its coroutine winds down (run() leaves the
  // registry again at its end; removing twice is harmless).
  server_.clients().remove(id_);
  asio::post(worker_.io, [self = shared_from_this()] {
    asio::error_code ec;
    self->socket_.shutdown(Socket::shutdown_both, ec);
    self->socket_.close(ec);
    if (self->wait_timer_) self->wait_timer_->cancel();
  });
}

asio::awaitable<bool> Connection::flush() {
  out_scratch_.clear();
  writer_.buffers(&out_scratch_);
  std::vector<asio::const_buffer> bufs;
  bufs.reserve(out_scratch_.size());
  size_t total = 0;
  for (const auto& b : out_scratch_) {
    bufs.emplace_back(b.data, b.size);
    total += b.size;
  }
  // asio's default completion condition (transfer_all) writes at most 64 KiB per sendmsg; a
  // 32 MiB reply would take 512 system calls. Hand the kernel everything at once instead.
  auto all = [](const asio::error_code& e, size_t) -> size_t { return e ? 0 : SIZE_MAX; };
  out_bytes_.store(total, std::memory_order_relaxed);  // omem and the output limits count it
  asio::error_code ec;
  size_t n = 0;
  if (tls_ != nullptr) [[unlikely]] {
    std::tie(ec, n) = co_await tls_write(bufs);
  } else {
    std::tie(ec, n) = co_await asio::async_write(socket_, bufs, all,
                                                 asio::experimental::as_tuple(asio::use_awaitable));
  }
  out_bytes_.store(0, std::memory_order_relaxed);
  WorkerStats::bump(worker_.stats.net_out, n);
  writer_.clear();
  co_return !ec && n == total;
}

asio::awaitable<std::pair<asio::error_code, size_t>> Connection::tls_write(
    const std::vector<asio::const_buffer>& bufs) {
  // Asio's SSL stream encrypts one record (up to 16 KiB) per write into the socket; small
  // pieces side by side (a pipeline's replies) are gathered into one record of up to 8 KiB,
  // and a large value is encrypted straight from its block.
  auto [ec, n] =
      co_await asio::async_write(tls_->stream, bufs, asio::experimental::as_tuple(asio::use_awaitable));
  co_return std::pair{ec, n};
}

void Connection::handoff() {
  // On tls-port the TLS session goes with the socket (docs/tls.md, "Replication over TLS"): the
  // feed takes one reference and moves it off Asio's memory BIO onto the socket. Bytes OpenSSL
  // still held from the client would be lost there (a replica sends none before PSYNC's reply):
  // then the connection just closes, and the replica connects again.
  SSL* ssl = nullptr;
  if (tls_ != nullptr) {
    ssl = tls_->stream.native_handle();
    if (SSL_pending(ssl) > 0 || BIO_ctrl_pending(SSL_get_rbio(ssl)) > 0) {
      log::warning("replication handover refused: the TLS client " + peer_ +
                   " sent data after its request");
      return;
    }
    SSL_up_ref(ssl);
    tls_.reset();
  }
  asio::error_code ec;
  const int fd = socket_.release(ec);
  if (ec) {
    if (ssl != nullptr) SSL_free(ssl);
    return;
  }
  handoff_(ssl != nullptr ? std::make_unique<cluster::ReplSocket>(fd, ssl)
                          : std::make_unique<cluster::ReplSocket>(fd));
}

asio::awaitable<bool> Connection::tls_handshake() {
  auto [ec] = co_await tls_->stream.async_handshake(asio::ssl::stream_base::server,
                                                    asio::experimental::as_tuple(asio::use_awaitable));
  if (!ec) co_return true;
  // A client without a valid certificate, or not speaking TLS (a plain-text client on
  // tls-port): dropped, as Redis does, with its line at verbose level.
  log::verbose("Error accepting a client connection: " + tls_error_text(ec) + " (addr=" + peer_ +
               " laddr=" + local_ + ")");
  co_return false;
}

void Connection::account(size_t now, std::atomic<size_t>& counted,
                         std::atomic<uint64_t>& total) {
  const size_t before = counted.load(std::memory_order_relaxed);
  if (now == before) return;
  if (now > before) total.fetch_add(now - before, std::memory_order_relaxed);
  else total.fetch_sub(before - now, std::memory_order_relaxed);
  counted.store(now, std::memory_order_relaxed);
}

asio::awaitable<void> Connection::finish_wait() {
  const PendingWait w = *wait_;
  wait_.reset();
  Replication& repl = server_.replication();
  // A client's timeout may be up to INT64_MAX ms: past a year it is as good as none (0), and
  // adding it to the clock would overflow.
  constexpr int64_t kYearMs = int64_t{365} * 24 * 3600 * 1000;
  const int64_t timeout_ms = w.timeout_ms > kYearMs ? 0 : w.timeout_ms;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  wait_timer_ = std::make_shared<asio::steady_timer>(worker_.io);
  // An ACK that satisfies the wait cancels the timer, on this connection's thread.
  const uint64_t id = repl.wait_for(w.offset, w.needed, [t = wait_timer_, ex = worker_.io.get_executor()] {
    asio::post(ex, [t] { t->cancel(); });
  });
  // Woken each second to notice a client gone (WAIT 0 waits without limit).
  while (!closed_.load(std::memory_order_relaxed) && repl.acked(w.offset) < w.needed) {
    auto step = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    if (timeout_ms > 0) {
      if (std::chrono::steady_clock::now() >= deadline) break;
      step = std::min(step, deadline);
    }
    wait_timer_->expires_at(step);
    auto [ec] = co_await wait_timer_->async_wait(asio::experimental::as_tuple(asio::use_awaitable));
    char c;
    if (::recv(socket_.native_handle(), &c, 1, MSG_PEEK | MSG_DONTWAIT) == 0) closed_ = true;
    if (ec && repl.acked(w.offset) >= w.needed) break;
  }
  repl.cancel_wait(id);
  wait_timer_.reset();
  writer_.integer(repl.acked(w.offset));
}

asio::awaitable<void> Connection::finish_io_job() {
  std::function<std::string()> job = std::move(io_job_);
  io_job_ = nullptr;
  // On the main loop, this coroutine resumed on its own thread after (as finish_script does).
  std::string result;
  auto ex = co_await asio::this_coro::executor;
  co_await asio::async_initiate<decltype(asio::use_awaitable), void()>(
      [&](auto handler) {
        auto done = std::make_shared<decltype(handler)>(std::move(handler));
        asio::post(server_.main_io(), [&result, job = std::move(job), done, ex] {
          result = job();
          asio::post(ex, [done] { std::move(*done)(); });
        });
      },
      asio::use_awaitable);
  if (result.empty()) writer_.ok();
  else writer_.error(result);
}

asio::awaitable<void> Connection::run() {
  Config& config = server_.config();
  size_t pos = 0, have = 0;
  int64_t batch_ms = 0;  // wall clock of the batch: one clock read per read, not per command
  if (tls_ != nullptr && !co_await tls_handshake()) closed_.store(true);
  while (!closed_.load(std::memory_order_relaxed)) {
    // 1. Run every complete request in the buffer.
    bool protocol_error = false;
    command_end_ = std::chrono::steady_clock::now();
    while (pos < have && !closed_.load(std::memory_order_relaxed)) {
      parser_.set_unauthenticated(!authenticated && server_.acl().default_needs_auth());
      parser_.limits().max_bulk_len = config.num(Key::kProtoMaxBulkLen);
      resp::Parser::Status st;
      pos += parser_.feed(rbuf_.get() + pos, have - pos, &st);
      if (st == resp::Parser::Status::kRequest) {
        const resp::Request& req = parser_.request();  // valid until the next feed()
        // While a script runs: a request that would lock a shard it holds waits here, on this
        // coroutine (never blocking the thread), or gets -BUSY (connection_script.cc).
        if (server_.scripts().any_running()) [[unlikely]] {
          if (co_await busy_stage(req, batch_ms)) continue;
        }
        // While a slot migrates out: a write to it waits out the handover's pause, and is
        // counted in flight until it completed (connection_migration.cc).
        struct InFlight {
          SlotOwner* owner = nullptr;
          void end() {
            if (owner != nullptr) owner->write_end();
            owner = nullptr;
          }
          ~InFlight() { end(); }
        } in_flight;
        if (server_.slot_owner().migrating_any()) [[unlikely]] {
          if (co_await migration_stage(req)) in_flight.owner = &server_.slot_owner();
          if (closed_.load(std::memory_order_relaxed)) break;
        }
        // Every stage of the pipeline (server/pipeline.h); with the SSD tier, as a coroutine
        // that may wait for loads, room and the disk.
        if (server_.ssd() == nullptr) {
          process(req, batch_ms);
          // A write that found the memory held by copies in flight or values queued for the
          // disk: runs again once it came back, or gets -OOM after memory.max_room_wait.
          while (room_wait_) [[unlikely]] {
            co_await wait_for_room();
            process(req, tiering::now_ms());
          }
          // EVAL: its script runs on a script thread while this coroutine waits.
          if (script_call_) [[unlikely]]
            record_call(req, prepared_, co_await finish_script(), batch_ms);
          // A large fast-path copy: on the transfer pool while this coroutine waits.
          if (transfer_) [[unlikely]]
            record_call(req, prepared_, co_await finish_transfer(req, prepared_), batch_ms);
        } else {
          co_await process_tiered(req, batch_ms, std::string_view(rbuf_.get() + pos, have - pos));
        }
        room_wait_until_.reset();
        in_flight.end();  // the write is done: a handover need not wait for its reply to go out
        if (wait_) co_await finish_wait();
        if (io_job_) [[unlikely]] co_await finish_io_job();
        if (closed_.load(std::memory_order_relaxed)) break;
        if (close_after_reply_ || handoff_) break;
        if (writer_.pending_bytes() >= kFlushThreshold) {
          drain_mailbox();
          if (over_output_limit(writer_.pending_bytes())) {
            close_for_output_limit();
            break;
          }
          if (!co_await flush()) closed_ = true;
        }
      } else if (st == resp::Parser::Status::kError) {
        writer_.error(parser_.error());
        protocol_error = true;
        break;
      }
    }

    if (closed_.load(std::memory_order_relaxed)) break;

    // 2. Account for the partial request held by the parser (Server::used_memory_now leaves it
    // out); enforce the query buffer limit.
    account(parser_.reserved_bulk_bytes(), reserved_counted_, server_.stats().reserved_bulk_bytes);
    account(parser_.heap_bytes(), heap_counted_, server_.stats().query_heap_bytes);
    const size_t reserved = parser_.reserved_bytes();
    if (reserved > static_cast<size_t>(config.num(Key::kClientQueryBufferLimit))) {
      log::warning("closing client that reached max query buffer length id=" +
                   std::to_string(id_) + " addr=" + peer_ + " qbuf=" + std::to_string(reserved));
      break;
    }

    // 3. Write the batch's replies and the messages published to this client meanwhile, then
    // free the last request's buffers now rather than at the next read (a staged bulk is a
    // whole value's size). Output past client-output-buffer-limit closes the client.
    drain_mailbox();
    if (!writer_.empty()) {
      if (over_output_limit(writer_.pending_bytes())) {
        close_for_output_limit();
        break;
      }
      if (!co_await flush()) break;
    }
    if (protocol_error) {
      co_await linger_close();
      break;
    }
    if (close_after_reply_ || handoff_) break;
    parser_.release_request();
    note_query_buffer(0);

    // 4. Read more: into the large bulk's own buffer when inside one, else the read buffer.
    // A message that arrived while the replies were written goes first; one that arrives
    // during the read cancels it (wake_reader) and the loop goes round to write it.
    pos = have = 0;
    const Subscriber* box = pubsub_.mailbox();
    if (box != nullptr && box->pending()) continue;
    std::span<char> window = parser_.large_bulk_window();
    asio::error_code read_ec;
    size_t n = 0;
    reading_ = true;
    if (!window.empty()) {
      std::tie(read_ec, n) = co_await read_some(window);
      if (!read_ec) parser_.commit_large_bulk(n);
    } else {
      if (rbuf_ == nullptr) {
        // No read buffer (new, or given back while idle): wait until the socket has bytes,
        // then take one. Over TLS the stream's engine may hold decrypted bytes: read at once.
        if (tls_ == nullptr) {
          std::tie(read_ec) = co_await socket_.async_wait(
              Socket::wait_read, asio::experimental::as_tuple(asio::use_awaitable));
        }
        if (!read_ec) take_read_buffer();
      }
      if (!read_ec) {
        std::tie(read_ec, n) = co_await read_some({rbuf_.get(), kReadBufferSize});
        if (!read_ec) have = n;
      }
    }
    reading_ = false;
    if (read_ec == asio::error::operation_aborted && !closed_.load(std::memory_order_relaxed)) {
      if (shrink_requested_) shrink_buffers();  // idle: release_idle_buffers cancelled the read
      continue;  // or woken for messages
    }
    if (read_ec) break;
    WorkerStats::bump(worker_.stats.net_in, n);
    note_query_buffer(have);
    batch_ms = tiering::now_ms();
    last_ms_.store(batch_ms, std::memory_order_relaxed);
  }

  // PSYNC: the reply written, the socket belongs to the replica's feed from now on.
  if (handoff_ && !closed_.load() && co_await flush()) handoff();
  // Closed: no more messages, no more subscriptions nor monitoring; end this client's leases,
  // release what the partial request held, and leave the registry.
  stop_monitor();
  if (Subscriber* box = pubsub_.mailbox()) box->close();
  pubsub_.unsubscribe_all();
  const int64_t now = tiering::now_ms();
  while (!pins.empty()) unpin(std::string(pins.begin()->first), now);
  parser_.reset();
  server_.stats().reserved_bulk_bytes.fetch_sub(reserved_counted_.exchange(0));
  server_.stats().query_heap_bytes.fetch_sub(heap_counted_.exchange(0));
  writer_.clear();
  server_.clients().remove(id_);
  closed_.store(true);
  asio::error_code ec;
  socket_.close(ec);
}

}  // namespace server
