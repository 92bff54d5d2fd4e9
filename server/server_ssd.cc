// server/server_ssd.cc - the SSD tier's life in the server: config to options, open and recover
// at start-up, flush_on_shutdown and stop at the end (docs/ssd-tier.md).
#include <algorithm>
#include <chrono>
#include <string>

#include "server/log.h"
#include "server/server.h"

namespace server {

void Server::start_ssd_tier() {
  if (config_.num(Key::kSsdEnabled) == 0) return;
  static const char* const kCompression[] = {"none", "snappy", "lz4", "zstd"};
  tiering::SsdTierOptions o;
  o.store.path = config_.str(Key::kSsdPath);
  o.store.capacity = static_cast<uint64_t>(config_.num(Key::kSsdCapacity));
  o.store.recover = config_.num(Key::kSsdRecover) != 0;
  o.store.sync = config_.num(Key::kSsdSync) != 0;
  o.store.compression = kCompression[config_.num(Key::kSsdCompression)];
  o.store.min_blob_size = static_cast<uint64_t>(config_.num(Key::kSsdMinBlobSize));
  o.store.direct_reads = config_.num(Key::kSsdDirectReads) != 0;
  o.store.write_buffer_size = static_cast<uint64_t>(config_.num(Key::kSsdWriteBufferSize));
  o.store.blob_gc = config_.num(Key::kSsdBlobGc) != 0;
  o.store.wal_values = config_.num(Key::kSsdWalValues) != 0;
  o.promote_after = static_cast<uint32_t>(config_.num(Key::kPromoteAfter));
  o.reclaim = config_.num(Key::kSsdReclaim) != 0;
  o.reclaim_options.space_amp_percent =
      static_cast<uint32_t>(config_.num(Key::kSsdReclaimSpaceAmp));
  o.admission = ssd_admission();
  o.max_write_rate = static_cast<uint64_t>(config_.num(Key::kSsdMaxWriteRate));
  // Values queued for demotion are still in memory: bound how far that runs ahead of the disk.
  o.max_pending_bytes = std::clamp<uint64_t>(memory_limit() / 8, 8 << 20, 256 << 20);
  o.log = [](bool warning, std::string_view m) {
    if (warning) log::warning(m);
    else log::notice(m);
  };
  // Records are keyed by [slot][key] (docs/ssd-tier.md, "On-disk format"): the store gets the
  // server's key-to-slot map, and says through the log what it did to an existing store.
  o.store.log = o.log;
  tiering::SsdStatus st;
  ssd_ = tiering::SsdTier::open(keyspace_, std::move(o), &st);
  if (ssd_ == nullptr) {
    ssd_error_ = st.message;
    log::warning("ssd tier disabled: cannot open the store: " + st.message);
    return;
  }
  if (config_.num(Key::kSsdRecover) != 0) ssd_->recover(tiering::now_ms());
  ssd_->start();
  evictor_.set_demoter(ssd_.get());
  ssd_pool_ = std::make_unique<asio::thread_pool>(
      static_cast<size_t>(config_.num(Key::kSsdIoThreads)));
  log::notice("ssd tier path=" + config_.str(Key::kSsdPath) +
              " capacity=" + std::to_string(config_.num(Key::kSsdCapacity)) +
              " records=" + std::to_string(ssd_->store().live_records()) +
              " bytes=" + std::to_string(ssd_->store().live_bytes()));
}

bool Server::must_wait_for_room(uint64_t incoming, RoomFor who) const {
  const tiering::SsdTier* tier = ssd_.get();
  // A failing tier takes no demotions, nor does noeviction: nothing to wait for (the write
  // gets -OOM if it must).
  if (!demotes()) return false;
  double limit = static_cast<double>(memory_limit());
  if (who == RoomFor::kWrite) {
    // The admission budget bounds the queue itself (selective): no wait for it then.
    if (!tier->selective() && tier->pending_bytes() > tier->max_pending_bytes()) return true;
    limit *= config_.fraction(Key::kEvictionHighWatermark);
  }
  // Blocks held for large bulks in flight need their room in the region as well, and so does
  // the room other writes found and have not filled yet.
  const uint64_t held = reserved_bulk_bytes() + room_claimed_.load(std::memory_order_relaxed);
  return static_cast<double>(used_memory_now() + held + incoming) > limit;
}

tiering::Admission Server::ssd_admission() const {
  return config_.choice(Key::kSsdAdmission) == "wait" ? tiering::Admission::kWait
                                                      : tiering::Admission::kReuse;
}

bool Server::demotes() const {
  // A disk at its capacity plus slack takes no demotion until reclaim frees space: writes
  // then make room by evicting, as without the tier, and wait for nothing.
  const int64_t now = tiering::now_ms();
  return ssd_ != nullptr && ssd_->accepting(now) && !ssd_->over_capacity(now) &&
         evictor_.policy() != tiering::EvictionPolicy::kNoEviction;
}

Server::RoomWait::RoomWait(Server& server, uint64_t incoming, RoomFor who)
    : server_(server),
      incoming_(incoming),
      who_(who),
      start_(std::chrono::steady_clock::now()),
      idle_since_(start_) {
  server_.evictor().want(incoming_);
}

Server::RoomWait::~RoomWait() {
  server_.evictor().unwant(incoming_);
  if (tiering::SsdTier* tier = server_.ssd()) {
    const auto waited = std::chrono::steady_clock::now() - start_;
    if (waited < std::chrono::milliseconds(1)) return;
    tier->stats().write_waits.fetch_add(1, std::memory_order_relaxed);
    tier->stats().write_wait_us.fetch_add(
        std::chrono::duration_cast<std::chrono::microseconds>(waited).count(),
        std::memory_order_relaxed);
  }
}

bool Server::RoomWait::again() {
  constexpr auto kIdleGiveUp = std::chrono::milliseconds(100);
  // tiering.ssd.admission reuse: nobody waits for the disk; room is made by evicting.
  if (server_.ssd()->selective()) return false;
  if (!server_.must_wait_for_room(incoming_, who_)) return false;
  const auto now = std::chrono::steady_clock::now();
  if (now - start_ >= std::chrono::milliseconds(server_.config().num(Key::kSsdMaxWriteWait)))
    return false;
  // The evictor queues victims for demotion (it may not have noticed yet); the writer frees
  // them. Nothing queued for a while: nothing evictable, so no room will come.
  server_.evictor().notify();
  if (server_.ssd()->pending_bytes() > 0) idle_since_ = now;
  else if (now - idle_since_ >= kIdleGiveUp) return false;
  return true;
}

void Server::stop_ssd_tier() {
  if (ssd_ == nullptr) return;
  ssd_pool_->join();  // reads in flight finish; no connection is left to resume
  // A warm restart: the values held only in memory go to SSD, within a time limit. The log
  // says what was kept and what was lost, whatever the reason.
  const ShutdownSave save = shutdown_save_.load();
  const int64_t limit_s = config_.num(Key::kSsdFlushOnShutdownTimeout);
  std::string why_not;
  if (save == ShutdownSave::kNoSave) why_not = "SHUTDOWN NOSAVE";
  else if (save == ShutdownSave::kDefault && config_.num(Key::kSsdFlushOnShutdown) == 0)
    why_not = "tiering.ssd.flush_on_shutdown is no";
  else if (limit_s == 0) why_not = "tiering.ssd.flush_on_shutdown_timeout is 0";
  else if (!ssd_->healthy()) why_not = "the tier is failing: " + ssd_->last_error();
  tiering::SsdTier::ShutdownFlush r;
  const auto start = std::chrono::steady_clock::now();
  if (why_not.empty()) {
    log::notice("ssd tier: flush_on_shutdown: writing the values held only in memory (time "
                "limit " + std::to_string(limit_s) + " s)");
    r = ssd_->demote_all(limit_s * 1000);
    if (r.timed_out)
      why_not = "the time limit of " + std::to_string(limit_s) +
                " s (tiering.ssd.flush_on_shutdown_timeout) passed";
    else if (!r.status.ok()) why_not = "a write failed: " + r.status.message;
  } else {
    r = ssd_->memory_only(tiering::now_ms());
  }
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - start).count();
  const std::string line = "ssd tier: shutdown kept keys=" + std::to_string(r.kept_keys) +
                           " bytes=" + std::to_string(r.kept_bytes) +
                           " dropped keys=" + std::to_string(r.dropped_keys) +
                           " bytes=" + std::to_string(r.dropped_bytes) +
                           " ssd_keys=" + std::to_string(ssd_->store().live_records()) +
                           " ms=" + std::to_string(ms);
  if (r.dropped_keys == 0) log::notice(line);
  else log::warning(line + " (dropped: held only in memory, lost; " +
                    (why_not.empty() ? std::string("not writable") : why_not) + ")");
  ssd_->stop();
}

}  // namespace server
