// tiering/ssd_store.h - the SSD tier's storage: a RocksDB database of demoted values.
//
// DESIGN.md, "The SSD tier"; docs/ssd-tier.md, "On-disk format". The store knows nothing of the
// keyspace: it keeps records (key -> expiry + bytes) and says how many bytes they take. The tier
// above it (ssd_tier.h) decides what to demote, when, and what a record means for the keyspace.
//
// Layout (format 2): five column families in one database under `path`. A record's RocksDB key
// is its *record key*: the key's hash slot (SsdOptions::slot_of), 2 bytes big endian, then the
// key's bytes, so one slot's records are one key range (scan_slots()).
//   values   record key -> the value's XXH3-64 checksum (8 bytes), then its bytes. Values of at
//            least `min_blob_size` bytes go to blob files (RocksDB's integrated BlobDB): the
//            LSM tree holds a small blob index, so compactions never rewrite tensor payloads.
//            read() checks the checksum on the bytes it copied (RocksDB's own CRC32c is
//            software in Debian's build, several times slower).
//   records  record key -> 24-byte header {seq u64, expire_ms i64, size u64} (little endian).
//            Small, never blobs: recovery (scan()) reads only these, never a value.
//   order    seq (8 bytes, big endian) -> the bare key: demotion order, oldest first, for
//            capacity drops. An entry whose seq no longer matches the key's header is stale
//            (the key was rewritten or removed) and is skipped and deleted lazily.
//   format   "version" -> "2": the format of the store (open() refuses one it does not know).
//   default  empty (RocksDB's mandatory family; format 1 kept its values there).
// One WriteBatch spans the families, so a record is written or removed atomically; with the
// WAL off, atomic_flush keeps the families consistent with each other after a crash.
//
// Format 1 (stratakv before the slot prefix): `default` (bare key -> value), `meta` (bare key
// -> header) and `order`, no `format` family. open() converts it in place (ssd_store_format.cc).
//
// Capacity: `capacity` bounds the live bytes (bare key + value of every record). drop_oldest()
// removes records in demotion order (FIFO) until the store is under a target; the caller
// decides per key whether it may go. RocksDB's own overhead (WAL, obsolete blob files awaiting
// garbage collection, SST indexes) comes on top of the live bytes.
//
// Expiry: scan() skips and sweep_expired() removes records past their deadline. There is no
// compaction filter: the expiry lives in `records`, and a filter on the value family would have
// to read every blob to decide.
//
// Errors: every call returns an SsdStatus; nothing throws out of the store (a full disk, an I/O
// error or corruption is a status with RocksDB's message). Thread-safety: read(), scan(),
// scan_slots() and the figures may run on any threads at once; the mutating calls (write,
// remove, drop_oldest, sweep_expired, clear) are serialised by the store's write mutex.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace rocksdb {
class DB;
class ColumnFamilyHandle;
class Status;
class Cache;
class Env;
class EventListener;
class FileSystem;
}  // namespace rocksdb

namespace tiering {

/// The outcome of a store call: a code and, unless ok, a message (RocksDB's text, prefixed
/// with what the store was doing).
struct SsdStatus {
  enum class Code { kOk, kNotFound, kNoSpace, kIoError, kCorruption, kNoMemory, kInvalid, kBusy };
  Code code = Code::kOk;
  std::string message;

  bool ok() const { return code == Code::kOk; }
  static SsdStatus OK() { return {}; }
  /// From a RocksDB status; `what` says what failed ("write", "open /data/ssd", ...).
  static SsdStatus from(const rocksdb::Status& s, std::string_view what);
};

/// Store options. Defaults suit a cache of large values (docs/ssd-tier.md says why).
struct SsdOptions {
  std::string path;                       ///< directory of the database (created if missing)
  uint64_t capacity = 0;                  ///< live bytes allowed; 0 = unbounded
  bool enable_blob_files = true;          ///< integrated BlobDB for large values
  uint64_t min_blob_size = 4096;          ///< bytes; smaller values stay in the LSM tree
  std::string compression = "none";       ///< none, snappy, lz4, zstd (values and blobs)
  bool sync = false;                      ///< fsync the WAL at every write batch
  bool wal = true;                        ///< write-ahead log (off: a crash loses unflushed writes)
  /// With the WAL on, whether batches of demoted values alone go through it too. Off: such
  /// batches skip it (half the bytes written, two fewer copies and checksums of each value),
  /// so a crash loses the values demoted since the last memtable flush, as if they had never
  /// been demoted; a batch with any removal, deadline change or replaced record still goes
  /// through the WAL, so a crash never brings back a superseded value.
  bool wal_values = true;
  bool recover = true;                    ///< keep an existing database (false: wipe it)
  bool direct_reads = false;              ///< O_DIRECT reads of SST and blob files
  uint64_t write_buffer_size = 64 << 20;  ///< bytes of a memtable of the value family
  /// BlobDB's garbage collection: compactions rewrite the live values of the oldest blob files
  /// (enable_blob_garbage_collection). Off: a blob file is deleted once all its values are.
  bool blob_gc = false;
  /// The hash slot of a key: the first 2 bytes of its record key (see the top of this file).
  /// SsdTier::open passes its keyspace's (the server's is cluster::key_slot: CRC16 of the key
  /// or its hash tag, & 16383; tiering/ does not include cluster/). It is part of the on-disk format: every open of one store must
  /// pass the same function (open() checks a sample of records and refuses a store whose slots
  /// disagree). Called on any thread, sometimes under the store's write mutex: it must be
  /// pure and must not call the store. Null: every key is in slot 0 (tests that do not care).
  std::function<uint16_t(std::string_view key)> slot_of;
  /// Where open() says what it did to an existing store (a format conversion, its progress).
  /// Called on the opening thread; null: nothing is said.
  std::function<void(bool warning, std::string_view message)> log;
  /// The filesystem RocksDB does its file I/O through. Null (production): the default (POSIX)
  /// one. Set only by tests, to inject I/O errors (tests/fakes/faulty_fs.h); the store keeps a
  /// reference for its lifetime and uses it from RocksDB's threads, so it must be thread-safe.
  /// The store's own directory checks (statvfs, file sizes, markers) bypass it.
  std::shared_ptr<rocksdb::FileSystem> file_system;
};

/// What scan() reports for one record.
struct SsdRecordInfo {
  std::string_view key;   ///< the bare key (valid during the callback only)
  uint16_t slot = 0;      ///< its slot (SsdOptions::slot_of when it was written)
  int64_t expire_ms = 0;  ///< 0 = none
  uint64_t size = 0;      ///< bytes of the value
  uint64_t seq = 0;       ///< demotion order (higher = newer)
};

/// A batch of changes applied atomically and in order (a later op on a key wins).
class SsdBatch {
 public:
  /// Writes `key` with `bytes`, which must stay valid until SsdStore::write returns.
  void put(std::string_view key, int64_t expire_ms, std::span<const std::byte> bytes) {
    ops_.push_back({Op::kPut, std::string(key), expire_ms, bytes});
  }
  /// Removes `key` if present.
  void remove(std::string_view key) { ops_.push_back({Op::kRemove, std::string(key), 0, {}}); }
  /// Changes the deadline of `key` if present (0 = none).
  void set_expire(std::string_view key, int64_t expire_ms) {
    ops_.push_back({Op::kExpire, std::string(key), expire_ms, {}});
  }
  size_t size() const { return ops_.size(); }
  bool empty() const { return ops_.empty(); }
  void clear() { ops_.clear(); }

  struct Op {
    enum Kind { kPut, kRemove, kExpire } kind;
    std::string key;
    int64_t expire_ms;
    std::span<const std::byte> bytes;
  };
  const std::vector<Op>& ops() const { return ops_; }

 private:
  std::vector<Op> ops_;
};

/// What SsdStore::reclaim() aims for (docs/ssd-tier.md, "Disk space"). The disk may hold
/// `space_amp_percent` % of the live bytes, or of `capacity` if that is less, plus `slack`
/// bytes for what no reclaim can remove (the WAL, the newest files, indexes).
struct SsdReclaimOptions {
  uint32_t space_amp_percent = 150;  ///< of the live bytes; at least 100
  uint64_t slack = 0;                ///< bytes on top (SsdStore::reclaim_slack() by default)
};

/// What one reclaim() did. Sizes in bytes.
struct SsdReclaimResult {
  bool ran = false;             ///< the disk was over its target: a pass ran
  uint64_t disk_before = 0;     ///< disk_bytes() when it started
  uint64_t disk_after = 0;      ///< ... and when it ended
  uint64_t freed_bytes = 0;     ///< bytes of blob and table files deleted by the pass
  uint32_t rewritten_files = 0; ///< blob files whose live values were moved (0: no rewrite)
  uint64_t rewritten_bytes = 0; ///< live value bytes those moves wrote again
};

/// Memory RocksDB holds outside the memory region, in bytes (INFO; not counted for eviction).
struct SsdMemory {
  uint64_t memtables = 0;      ///< all memtables, including ones being flushed
  uint64_t block_cache = 0;    ///< blocks of `meta` and `order` cached
  uint64_t table_readers = 0;  ///< SST indexes and filters
  /// The WAL's and the open blob file's writers: each buffers up to
  /// DBOptions::writable_file_max_buffer_size once a large value went through it. A bound,
  /// not a measure (RocksDB reports no figure for them).
  uint64_t file_writers = 0;
  uint64_t total() const { return memtables + block_cache + table_readers + file_writers; }
};

class SsdHaltListener;

class SsdStore {
 public:
  /// The largest value RocksDB can hold (its lengths are 32-bit varints).
  static constexpr uint64_t kMaxValueSize = 0xFFFFFFFFull - 64;

  /// The format open() writes (docs/ssd-tier.md, "On-disk format").
  static constexpr int kFormat = 2;

  /// Opens the database under options.path: creates it when missing, wipes and creates it with
  /// recover == false, converts a store of format 1 in place (logged through options.log;
  /// resumable: an interrupted conversion continues at the next open, see ssd_store_format.cc).
  /// Null with the reason in `*status` on failure: kInvalid for a store of an unknown (newer)
  /// format or written with another slot function, which is left untouched and the message
  /// says what to do; kNoSpace when a conversion lacks disk space (rerun once there is).
  static std::unique_ptr<SsdStore> open(const SsdOptions& options, SsdStatus* status);
  /// Closes the database (memtables stay in the WAL unless flush() ran).
  ~SsdStore();
  SsdStore(const SsdStore&) = delete;
  SsdStore& operator=(const SsdStore&) = delete;

  /// Applies `batch` in one WriteBatch. On failure nothing of it is applied.
  SsdStatus write(const SsdBatch& batch);
  /// Removes one record (a batch of one).
  SsdStatus remove(std::string_view key);

  /// Reads the value of `key`: calls `alloc(size)` for a buffer of at least `size` bytes and
  /// copies the bytes there once (from RocksDB's pinned slice), then checks their checksum.
  /// kNotFound when absent; kNoMemory when `alloc` returns a shorter span; kCorruption when
  /// the bytes are not what was written. `*size` gets the value's size.
  SsdStatus read(std::string_view key, const std::function<std::span<std::byte>(size_t)>& alloc,
                 size_t* size);

  /// Calls `fn` for every record whose deadline is not past `now_ms` (0 = report all), in key
  /// order, reading only headers. `fn` returns false to stop. Records past their deadline are
  /// counted in `*expired` (if given) and left for sweep_expired().
  SsdStatus scan(int64_t now_ms, const std::function<bool(const SsdRecordInfo&)>& fn,
                 uint64_t* expired = nullptr);

  /// scan(), for the records of slots `first` to `last` (inclusive) only: one RocksDB range
  /// [first, last + 1) of the record keys, so it costs the records of those slots, not a walk
  /// of the store. In slot, then key order.
  SsdStatus scan_slots(uint16_t first, uint16_t last, int64_t now_ms,
                       const std::function<bool(const SsdRecordInfo&)>& fn,
                       uint64_t* expired = nullptr);
  /// scan_slots() of one slot.
  SsdStatus scan_slot(uint16_t slot, int64_t now_ms,
                      const std::function<bool(const SsdRecordInfo&)>& fn,
                      uint64_t* expired = nullptr) {
    return scan_slots(slot, slot, now_ms, fn, expired);
  }

  /// Removes records in demotion order, oldest first, until live_bytes() <= `target` or
  /// `max_records` were removed. A record goes only if `may_drop(key)` says so (called with no
  /// store lock held on the caller's side; it may take its own). `*dropped` (if given) gets
  /// the keys removed.
  SsdStatus drop_oldest(uint64_t target, size_t max_records,
                        const std::function<bool(std::string_view key)>& may_drop,
                        std::vector<std::string>* dropped = nullptr);

  /// Removes up to `budget` records past their deadline. `*removed` gets how many.
  SsdStatus sweep_expired(int64_t now_ms, size_t budget, size_t* removed = nullptr);

  /// Removes every record.
  SsdStatus clear();

  /// Gives back the disk space of removed and replaced records (ssd_store_reclaim.cc) when
  /// disk_bytes() is over its target (SsdReclaimOptions), in two steps: a compaction of the
  /// index families without moving any value (drops the dead indexes, so blob files whose
  /// values are all dead are deleted whole: cheap, no value bytes written), then, only if the
  /// disk is still over, a compaction that moves the live values out of the smallest set of
  /// oldest blob files whose dead bytes cover the excess (RocksDB's blob GC with an age cutoff,
  /// forced for that one compaction). Blocking (seconds for a large store): call on a thread
  /// of its own, never the writer's. Runs at compaction priority (nice 19); `*canceled` set
  /// from another thread stops it early (kBusy). `*moving`, when given, gets the live bytes the
  /// second step is about to write again added before it starts (the disk gate counts them:
  /// SsdReclaimer::over_bound). Thread-safe with every other call.
  SsdStatus reclaim(const SsdReclaimOptions& options, SsdReclaimResult* result,
                    std::atomic<bool>* canceled = nullptr,
                    std::atomic<uint64_t>* moving = nullptr);
  /// The disk bytes a reclaim cannot remove, on top of the live bytes: the WAL (4 write
  /// buffers, `max_total_wal_size`), a write buffer of newest files and 4 MiB of indexes and
  /// RocksDB's own files (MANIFEST, OPTIONS, LOG).
  uint64_t reclaim_slack() const { return 5 * options_.write_buffer_size + (4 << 20); }
  /// disk_bytes()'s target for reclaim(): min(live, capacity) * percent / 100 + slack.
  uint64_t reclaim_target(const SsdReclaimOptions& options) const;

  /// Writes the memtables to SST and blob files (and the WAL to disk).
  SsdStatus flush();
  /// After a background error (a full disk) left RocksDB read-only: tries to resume writes.
  /// Fails, with the error that stopped it, while halted().
  SsdStatus resume();
  /// Whether the store stopped every write until it is opened again (the server restarts):
  /// after a failed WAL append (any error, ENOSPC included), or any error RocksDB itself cannot
  /// resume from (its "fatal" background error: an I/O error writing, syncing or creating a
  /// blob or table file in a flush or compaction, or reading one back). write(), remove(),
  /// drop_oldest(), sweep_expired(), clear(), flush(), reclaim() and resume() then fail with
  /// halt_status() at once, without calling RocksDB (Debian's RocksDB 7.8 is built with
  /// assertions and aborts when a WAL writer that failed is synced again). Reads, scans and the
  /// figures keep working, memtables included. A no-space error in a flush does not halt: it is
  /// resumed (resume(), or RocksDB's own recovery). Sticky; thread-safe.
  bool halted() const { return halted_.load(std::memory_order_acquire); }
  /// Why the store halted, as a status of the call `what` ("write", ...): the code and message
  /// of the error that halted it. OK when not halted.
  SsdStatus halt_status(std::string_view what) const;

  /// Live bytes (keys + values) and records.
  uint64_t live_bytes() const { return live_bytes_.load(std::memory_order_relaxed); }
  uint64_t live_records() const { return live_records_.load(std::memory_order_relaxed); }
  /// Bytes RocksDB keeps on disk: SST files, blob files, WAL.
  uint64_t disk_bytes() const;
  /// Bytes of the memtables (every family, those being flushed included): values in the WAL
  /// that a flush writes again, into blob files. One property read.
  uint64_t unflushed_bytes() const;
  /// How many times a written value is on disk until its memtable's flush lets its WAL go:
  /// 2 with the WAL (the WAL, then a blob file), else 1. With `wal_values` off most batches
  /// of values skip the WAL, but those with a removal do not: 2 still (the disk gate errs
  /// towards closing).
  uint32_t value_copies() const { return options_.wal ? 2 : 1; }
  /// Bytes free on the store's filesystem (statvfs; UINT64_MAX when unknown). write() refuses
  /// new records (kNoSpace) when fewer than twice their bytes plus a reserve of three memtables
  /// and 4 MiB are free, so RocksDB itself never runs out of space mid-write.
  uint64_t free_bytes() const;
  /// RocksDB's own memory. Costs a few property reads (microseconds).
  SsdMemory memory() const;
  const SsdOptions& options() const { return options_; }

 private:
  explicit SsdStore(SsdOptions options);
  SsdStatus open_db(bool allow_wipe);
  // The store's format (ssd_store_format.cc): writes the marker of a new store, converts
  // format 1, refuses an unknown one, checks the slot function on a sample.
  SsdStatus settle_format(bool created);
  SsdStatus convert_v1();
  SsdStatus finish_v1();  // drops `meta`, compacts `default`: idempotent
  SsdStatus check_slots();
  SsdStatus scan_range(std::string_view lower, std::string_view upper, int64_t now_ms,
                       const std::function<bool(const SsdRecordInfo&)>& fn, uint64_t* expired);
  // The record key of `key` (see the top of this file).
  std::string record_key(std::string_view key) const;
  // The header of the record `rk` (a record key), if present.
  bool header_of(std::string_view rk, uint64_t* seq, int64_t* expire, uint64_t* size);
  SsdStatus load_counters();
  void say(bool warning, const std::string& message) const;

  SsdOptions options_;
  rocksdb::DB* db_ = nullptr;
  rocksdb::ColumnFamilyHandle* default_ = nullptr;  // empty in format 2
  rocksdb::ColumnFamilyHandle* values_ = nullptr;
  rocksdb::ColumnFamilyHandle* records_ = nullptr;
  rocksdb::ColumnFamilyHandle* order_ = nullptr;
  rocksdb::ColumnFamilyHandle* format_ = nullptr;
  rocksdb::ColumnFamilyHandle* v1_meta_ = nullptr;  // format 1's `meta`, until converted
  std::shared_ptr<rocksdb::Cache> cache_;
  uint64_t file_writer_buffer_ = 0;  ///< DBOptions::writable_file_max_buffer_size, at open
  std::unique_ptr<rocksdb::Env> env_;  // over options_.file_system (null: Env::Default())
  friend class SsdHaltListener;
  // Called by the listener (RocksDB's threads): halts the store with `error` (first one wins).
  void halt(const rocksdb::Status& error);
  std::shared_ptr<rocksdb::EventListener> listener_;  // calls halt()
  std::atomic<bool> halted_{false};
  mutable std::mutex halt_mu_;
  SsdStatus halt_error_;  // under halt_mu_, set once with halted_
  std::mutex write_mu_;
  uint64_t next_seq_ = 1;  // under write_mu_
  std::atomic<uint64_t> live_bytes_{0}, live_records_{0};
};

}  // namespace tiering
