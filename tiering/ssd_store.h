// tiering/ssd_store.h - the SSD tier's storage: a RocksDB database of demoted values.
//
// DESIGN.md, "The SSD tier". The store knows nothing of the keyspace: it keeps records
// (key -> expiry + bytes) and says how many bytes they take. The tier above it (ssd_tier.h)
// decides what to demote, when, and what a record means for the keyspace.
//
// Layout: three column families in one database under `path`.
//   default  key -> the value's XXH3-64 checksum (8 bytes), then its bytes. Values of at
//            least `min_blob_size` bytes go to blob files (RocksDB's integrated BlobDB): the
//            LSM tree holds a small blob index, so compactions never rewrite tensor payloads.
//            read() checks the checksum on the bytes it copied (RocksDB's own CRC32c is
//            software in Debian's build, several times slower).
//   meta     key -> 24-byte header {seq u64, expire_ms i64, size u64} (little endian). Small,
//            never blobs: recovery (scan()) reads only these, never a value.
//   order    seq (8 bytes, big endian) -> key: demotion order, oldest first, for capacity
//            drops. An entry whose seq no longer matches the key's header is stale (the key
//            was rewritten or removed) and is skipped and deleted lazily.
// One WriteBatch spans the three families, so a record is written or removed atomically; with
// the WAL off, atomic_flush keeps the families consistent with each other after a crash.
//
// Capacity: `capacity` bounds the live bytes (key + value of every record). drop_oldest()
// removes records in demotion order (FIFO) until the store is under a target; the caller
// decides per key whether it may go. RocksDB's own overhead (WAL, obsolete blob files awaiting
// garbage collection, SST indexes) comes on top of the live bytes.
//
// Expiry: scan() skips and sweep_expired() removes records past their deadline. There is no
// compaction filter: the expiry lives in `meta`, and a filter on the value family would have to
// read every blob to decide.
//
// Errors: every call returns an SsdStatus; nothing throws out of the store (a full disk, an I/O
// error or corruption is a status with RocksDB's message). Thread-safety: read(), scan() and the
// figures may run on any threads at once; the mutating calls (write, remove, drop_oldest,
// sweep_expired, clear) are serialised by the store's write mutex.
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
};

/// What scan() reports for one record.
struct SsdRecordInfo {
  std::string_view key;
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

/// Memory RocksDB holds outside the memory region, in bytes (INFO; not counted for eviction).
struct SsdMemory {
  uint64_t memtables = 0;      ///< all memtables, including ones being flushed
  uint64_t block_cache = 0;    ///< blocks of `meta` and `order` cached
  uint64_t table_readers = 0;  ///< SST indexes and filters
  uint64_t total() const { return memtables + block_cache + table_readers; }
};

class SsdStore {
 public:
  /// The largest value RocksDB can hold (its lengths are 32-bit varints).
  static constexpr uint64_t kMaxValueSize = 0xFFFFFFFFull - 64;

  /// Opens (or, with recover == false or a database that cannot be opened as ours, wipes and
  /// creates) the database. Null with the reason in `*status` on failure.
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

  /// Writes the memtables to SST and blob files (and the WAL to disk).
  SsdStatus flush();
  /// After a background error (a full disk) left RocksDB read-only: tries to resume writes.
  SsdStatus resume();

  /// Live bytes (keys + values) and records.
  uint64_t live_bytes() const { return live_bytes_.load(std::memory_order_relaxed); }
  uint64_t live_records() const { return live_records_.load(std::memory_order_relaxed); }
  /// Bytes RocksDB keeps on disk: SST files, blob files, WAL.
  uint64_t disk_bytes() const;
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
  // The header of `key`, if present: from `pending` (this batch's earlier ops) or the database.
  bool header_of(std::string_view key, uint64_t* seq, int64_t* expire, uint64_t* size);
  SsdStatus load_counters();

  SsdOptions options_;
  rocksdb::DB* db_ = nullptr;
  rocksdb::ColumnFamilyHandle* data_ = nullptr;   // the default family
  rocksdb::ColumnFamilyHandle* meta_ = nullptr;
  rocksdb::ColumnFamilyHandle* order_ = nullptr;
  std::shared_ptr<rocksdb::Cache> cache_;
  std::mutex write_mu_;
  uint64_t next_seq_ = 1;  // under write_mu_
  std::atomic<uint64_t> live_bytes_{0}, live_records_{0};
};

}  // namespace tiering
