// tiering/ssd_store.cc - SsdStore: open (RocksDB options, the families), writes, reads, flush
// and figures. Walks of a family are in ssd_store_scan.cc; the format (marker, conversion of
// format 1, checks) in ssd_store_format.cc.
#include "tiering/ssd_store.h"

#include <rocksdb/cache.h>
#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/file_system.h>
#include <rocksdb/filter_policy.h>
#include <rocksdb/listener.h>
#include <rocksdb/options.h>
#include <rocksdb/table.h>
#include <rocksdb/write_batch.h>

#include <sys/statvfs.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <new>
#include <optional>
#include <unordered_map>

#include "tiering/ssd_store_codec.h"

namespace tiering {

SsdStatus SsdStatus::from(const rocksdb::Status& s, std::string_view what) {
  if (s.ok()) return {};
  SsdStatus r;
  if (s.IsNotFound()) r.code = Code::kNotFound;
  else if (s.IsNoSpace()) r.code = Code::kNoSpace;
  else if (s.IsCorruption()) r.code = Code::kCorruption;
  else if (s.IsBusy() || s.IsTryAgain() || s.IsIncomplete()) r.code = Code::kBusy;
  else if (s.IsInvalidArgument() || s.IsNotSupported()) r.code = Code::kInvalid;
  else r.code = Code::kIoError;
  r.message = std::string(what) + ": " + s.ToString();
  return r;
}

namespace {

using ssd_codec::Header;

std::optional<rocksdb::CompressionType> compression_of(std::string_view name) {
  if (name == "none" || name.empty()) return rocksdb::kNoCompression;
  if (name == "snappy") return rocksdb::kSnappyCompression;
  if (name == "lz4") return rocksdb::kLZ4Compression;
  if (name == "zstd") return rocksdb::kZSTD;
  return std::nullopt;
}

rocksdb::Slice slice(std::string_view s) { return {s.data(), s.size()}; }

// The families of format 2, and format 1's `meta` (ssd_store.h).
constexpr std::string_view kValues = "values", kRecords = "records", kOrder = "order",
                           kFormatFamily = "format", kV1Meta = "meta";

bool known_family(std::string_view name) {
  return name == rocksdb::kDefaultColumnFamilyName || name == kValues || name == kRecords ||
         name == kOrder || name == kFormatFamily || name == kV1Meta;
}

}  // namespace

// Halts the store (SsdStore::halted()) on a failed WAL append or an error RocksDB cannot resume
// from. Called by RocksDB with its mutex held: records the error, nothing more.
class SsdHaltListener : public rocksdb::EventListener {
 public:
  explicit SsdHaltListener(SsdStore* store) : store_(store) {}
  void OnBackgroundError(rocksdb::BackgroundErrorReason reason, rocksdb::Status* error) override {
    if (error == nullptr || error->ok()) return;
    const bool wal = reason == rocksdb::BackgroundErrorReason::kWriteCallback ||
                     reason == rocksdb::BackgroundErrorReason::kMemTable;
    if (wal || error->severity() >= rocksdb::Status::Severity::kFatalError) store_->halt(*error);
  }

 private:
  SsdStore* store_;  // outlives the database (closed in ~SsdStore)
};

void SsdStore::halt(const rocksdb::Status& error) {
  std::lock_guard lock(halt_mu_);
  if (halted_.load(std::memory_order_relaxed)) return;
  halt_error_ = SsdStatus::from(error, "RocksDB stopped writes until a restart after");
  halted_.store(true, std::memory_order_release);
}

SsdStatus SsdStore::halt_status(std::string_view what) const {
  if (!halted()) return {};
  std::lock_guard lock(halt_mu_);
  return {halt_error_.code, std::string(what) + ": " + halt_error_.message};
}

SsdStore::SsdStore(SsdOptions options) : options_(std::move(options)) {}

SsdStore::~SsdStore() {
  if (db_ == nullptr) return;
  for (auto* h : {default_, values_, records_, order_, format_, v1_meta_})
    if (h != nullptr) db_->DestroyColumnFamilyHandle(h);
  db_->Close();
  delete db_;
}

void SsdStore::say(bool warning, const std::string& message) const {
  if (options_.log) options_.log(warning, message);
}

std::string SsdStore::record_key(std::string_view key) const {
  return ssd_codec::record_key(options_.slot_of ? options_.slot_of(key) : 0, key);
}

std::unique_ptr<SsdStore> SsdStore::open(const SsdOptions& options, SsdStatus* status) {
  std::unique_ptr<SsdStore> store(new SsdStore(options));
  SsdStatus st = store->open_db(!options.recover);
  if (st.ok()) st = store->load_counters();
  if (status != nullptr) *status = st;
  if (!st.ok()) return nullptr;
  return store;
}

SsdStatus SsdStore::open_db(bool wipe) {
  const auto compression = compression_of(options_.compression);
  if (!compression)
    return {SsdStatus::Code::kInvalid,
            "unknown compression '" + options_.compression + "' (none, snappy, lz4, zstd)"};
  if (options_.path.empty()) return {SsdStatus::Code::kInvalid, "empty path"};

  rocksdb::DBOptions db;
  db.create_if_missing = true;
  db.create_missing_column_families = true;
  db.atomic_flush = true;           // the three families flush together: consistent without WAL
  db.max_background_jobs = 2;       // one flush, one compaction: the server owns the cores
  db.bytes_per_sync = 1 << 20;      // smooth write-back instead of bursts at file close
  db.wal_bytes_per_sync = 1 << 20;
  db.max_total_wal_size = 4 * options_.write_buffer_size;
  db.use_direct_reads = options_.direct_reads;
  db.keep_log_file_num = 2;         // RocksDB's own LOG files
  db.max_log_file_size = 8 << 20;
  db.info_log_level = rocksdb::InfoLogLevel::WARN_LEVEL;
  db.avoid_unnecessary_blocking_io = true;
  file_writer_buffer_ = db.writable_file_max_buffer_size;
  if (!listener_) listener_ = std::make_shared<SsdHaltListener>(this);
  db.listeners.push_back(listener_);
  if (options_.file_system) {
    // Shares Env::Default()'s threads and clock; only the file I/O goes through the given one.
    if (!env_) env_ = rocksdb::NewCompositeEnv(options_.file_system);
    db.env = env_.get();
  }

  cache_ = rocksdb::NewLRUCache(32 << 20);
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = cache_;
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  table.cache_index_and_filter_blocks = false;

  rocksdb::ColumnFamilyOptions data;
  data.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  data.compression = *compression;
  data.write_buffer_size = options_.write_buffer_size;
  data.max_write_buffer_number = 3;
  data.level_compaction_dynamic_level_bytes = true;
  data.enable_blob_files = options_.enable_blob_files;
  data.min_blob_size = options_.min_blob_size;
  data.blob_file_size = 256 << 20;
  data.blob_compression_type = *compression;
  data.enable_blob_garbage_collection = options_.blob_gc;
  data.blob_garbage_collection_age_cutoff = 0.25;

  rocksdb::ColumnFamilyOptions small;
  small.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  small.compression = rocksdb::kNoCompression;
  small.write_buffer_size = 8 << 20;
  small.level_compaction_dynamic_level_bytes = true;

  rocksdb::Options all(db, data);
  if (wipe) {
    rocksdb::Status s = rocksdb::DestroyDB(options_.path, all);
    if (!s.ok()) return SsdStatus::from(s, "wipe " + options_.path);
  }
  std::error_code ec;
  std::filesystem::create_directories(options_.path, ec);
  if (ec)
    return {SsdStatus::Code::kIoError, "create " + options_.path + ": " + ec.message()};

  // What the directory holds: nothing yet; format 1's families (default, meta, order); format
  // 2's (a conversion in progress has both). A family this code does not know, or a format
  // family without the rest of format 2, was written by another version: refused before
  // RocksDB opens (and changes) anything.
  const std::string refuse_tail =
      ": written by another (newer?) version of stratakv, which this one cannot read. Run that "
      "version, or move the directory away to start with an empty SSD tier "
      "(tiering.ssd.recover no wipes it)";
  const bool created = !std::filesystem::exists(options_.path + "/CURRENT", ec);
  std::vector<std::string> existing;
  if (!created) {
    rocksdb::Status s = rocksdb::DB::ListColumnFamilies(db, options_.path, &existing);
    if (!s.ok()) return SsdStatus::from(s, "open " + options_.path);
  }
  auto has = [&](std::string_view name) {
    return std::find(existing.begin(), existing.end(), name) != existing.end();
  };
  for (const std::string& name : existing)
    if (!known_family(name))
      return {SsdStatus::Code::kInvalid, "open " + options_.path + ": unknown column family '" +
                                             name + "'" + refuse_tail};
  if (has(kFormatFamily))
    for (std::string_view name : {kValues, kRecords, kOrder})
      if (!has(name))
        return {SsdStatus::Code::kInvalid, "open " + options_.path +
                                               ": no column family '" + std::string(name) + "'" +
                                               refuse_tail};
  // Missing families are created for a new store and for one of format 1 (and a crash while
  // either was being set up), never for one that has its format family.
  db.create_missing_column_families = !has(kFormatFamily);

  // `default` keeps format 1's value options: a store being converted reads its blobs there.
  std::vector<rocksdb::ColumnFamilyDescriptor> families = {
      {rocksdb::kDefaultColumnFamilyName, data},
      {std::string(kValues), data},
      {std::string(kRecords), small},
      {std::string(kOrder), small},
      {std::string(kFormatFamily), small}};
  if (has(kV1Meta)) families.push_back({std::string(kV1Meta), small});
  std::vector<rocksdb::ColumnFamilyHandle*> handles;
  rocksdb::Status s = rocksdb::DB::Open(db, options_.path, families, &handles, &db_);
  if (!s.ok()) {
    db_ = nullptr;
    return SsdStatus::from(s, "open " + options_.path);
  }
  default_ = handles[0];
  values_ = handles[1];
  records_ = handles[2];
  order_ = handles[3];
  format_ = handles[4];
  if (handles.size() > 5) v1_meta_ = handles[5];
  // Compactions yield the cores to the clients' threads (nice 19): background work must not
  // show in the latency of memory hits. Flushes keep normal priority: with writes waiting for
  // demotion (back-pressure), a starved flush stalls every writer (measured with two busy
  // processes beside the server: p99 of 1 MiB SETs 2.5-4 s at nice 19, 0.56 s at nice 0).
  for (auto pool : {rocksdb::Env::Priority::LOW})
    rocksdb::Env::Default()->LowerThreadPoolCPUPriority(pool, rocksdb::CpuPriority::kLow)
        .PermitUncheckedError();
  return settle_format(created);
}

SsdStatus SsdStore::load_counters() {
  uint64_t bytes = 0, records = 0, max_seq = 0;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), records_));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    Header h;
    if (!ssd_codec::decode(it->value(), &h) || it->key().size() < ssd_codec::kSlotBytes)
      continue;
    bytes += it->key().size() - ssd_codec::kSlotBytes + h.size;
    ++records;
    max_seq = std::max(max_seq, h.seq);
  }
  if (!it->status().ok()) return SsdStatus::from(it->status(), "scan records");
  it.reset(db_->NewIterator(rocksdb::ReadOptions(), order_));
  it->SeekToLast();
  if (it->Valid() && it->key().size() == 8)
    max_seq = std::max(max_seq, ssd_codec::decode_seq(it->key()));
  std::lock_guard lock(write_mu_);
  next_seq_ = max_seq + 1;
  live_bytes_ = bytes;
  live_records_ = records;
  return {};
}

bool SsdStore::header_of(std::string_view rk, uint64_t* seq, int64_t* expire, uint64_t* size) {
  rocksdb::PinnableSlice v;
  if (!db_->Get(rocksdb::ReadOptions(), records_, slice(rk), &v).ok()) return false;
  Header h;
  if (!ssd_codec::decode(v, &h)) return false;
  *seq = h.seq;
  *expire = h.expire_ms;
  *size = h.size;
  return true;
}

uint64_t SsdStore::free_bytes() const {
  struct statvfs fs {};
  if (::statvfs(options_.path.c_str(), &fs) != 0) return UINT64_MAX;  // unknown: let RocksDB say
  return static_cast<uint64_t>(fs.f_bavail) * fs.f_frsize;
}

SsdStatus SsdStore::write(const SsdBatch& batch) {
  if (batch.empty()) return {};
  if (halted()) return halt_status("write");
  // A full disk is refused here, before RocksDB meets ENOSPC halfway through a WAL record or a
  // flush (which leaves it read-only until resumed). New bytes take room twice (WAL, then a
  // blob or SST file at flush), and the memtables being flushed need their room too.
  uint64_t put_bytes = 0;
  for (const SsdBatch::Op& op : batch.ops())
    if (op.kind == SsdBatch::Op::kPut) put_bytes += op.key.size() + op.bytes.size();
  if (put_bytes != 0) {
    const uint64_t reserve = 3 * options_.write_buffer_size + (4 << 20);
    const uint64_t free = free_bytes();
    if (free < 2 * put_bytes + reserve)
      return {SsdStatus::Code::kNoSpace,
              "write: no space left on " + options_.path + ": " + std::to_string(free) +
                  " bytes free, " + std::to_string(2 * put_bytes + reserve) +
                  " needed (a reserve of " + std::to_string(reserve) + " kept for RocksDB)"};
  }
  try {
    // The record keys (slot_of runs here, outside the write mutex).
    std::vector<std::string> rks;
    rks.reserve(batch.size());
    for (const SsdBatch::Op& op : batch.ops()) rks.push_back(record_key(op.key));
    std::lock_guard lock(write_mu_);
    // What each touched record holds as the batch proceeds (nullopt: absent).
    std::unordered_map<std::string_view, std::optional<Header>> state;
    auto current = [&](const std::string& rk) -> std::optional<Header>& {
      auto [it, inserted] = state.try_emplace(rk);
      if (inserted) {
        Header h;
        if (header_of(rk, &h.seq, &h.expire_ms, &h.size)) it->second = h;
      }
      return it->second;
    };
    // The batch's buffer at its final size: no doubling (a 32 MiB value would be copied again
    // and take up to twice its size).
    size_t reserve = 64;
    for (const SsdBatch::Op& op : batch.ops()) reserve += 3 * op.key.size() + op.bytes.size() + 96;
    rocksdb::WriteBatch wb(reserve);
    bool needs_wal = options_.wal_values;  // see SsdOptions::wal_values
    int64_t bytes = 0, records = 0;
    uint64_t seq = next_seq_;
    for (size_t i = 0; i < batch.ops().size(); ++i) {
      const SsdBatch::Op& op = batch.ops()[i];
      const std::string& rk = rks[i];
      std::optional<Header>& cur = current(rk);
      switch (op.kind) {
        case SsdBatch::Op::kPut: {
          if (op.bytes.size() > SsdStore::kMaxValueSize)
            return {SsdStatus::Code::kInvalid, "write: value of " +
                                                   std::to_string(op.bytes.size()) +
                                                   " bytes is too large for RocksDB"};
          if (cur) {
            needs_wal = true;  // replaces a record: must not come back after a crash
            wb.Delete(order_, slice(ssd_codec::encode_seq(cur->seq)));
            bytes -= static_cast<int64_t>(op.key.size() + cur->size);
            --records;
          }
          Header h{seq++, op.expire_ms, op.bytes.size()};
          // The value's own checksum in front of its bytes (see read()).
          char sum[8];
          ssd_codec::put_le(sum, ssd_codec::checksum(op.bytes.data(), op.bytes.size()));
          const rocksdb::Slice parts[2] = {
              {sum, sizeof sum},
              {reinterpret_cast<const char*>(op.bytes.data()), op.bytes.size()}};
          const rocksdb::Slice key_part = slice(rk);
          wb.Put(values_, rocksdb::SliceParts(&key_part, 1), rocksdb::SliceParts(parts, 2));
          wb.Put(records_, slice(rk), slice(ssd_codec::encode(h)));
          wb.Put(order_, slice(ssd_codec::encode_seq(h.seq)), slice(op.key));
          bytes += static_cast<int64_t>(op.key.size() + h.size);
          ++records;
          cur = h;
          break;
        }
        case SsdBatch::Op::kRemove:
          needs_wal = true;
          if (!cur) break;
          wb.Delete(values_, slice(rk));
          wb.Delete(records_, slice(rk));
          wb.Delete(order_, slice(ssd_codec::encode_seq(cur->seq)));
          bytes -= static_cast<int64_t>(op.key.size() + cur->size);
          --records;
          cur.reset();
          break;
        case SsdBatch::Op::kExpire:
          needs_wal = true;
          if (!cur) break;
          cur->expire_ms = op.expire_ms;
          wb.Put(records_, slice(rk), slice(ssd_codec::encode(*cur)));
          break;
      }
    }
    if (wb.Count() == 0) return {};
    rocksdb::WriteOptions wo;
    wo.sync = options_.sync && needs_wal;
    wo.disableWAL = !options_.wal || !needs_wal;
    rocksdb::Status s = db_->Write(wo, &wb);
    if (!s.ok()) return SsdStatus::from(s, "write");
    next_seq_ = seq;
    live_bytes_.fetch_add(static_cast<uint64_t>(bytes), std::memory_order_relaxed);
    live_records_.fetch_add(static_cast<uint64_t>(records), std::memory_order_relaxed);
    return {};
  } catch (const std::bad_alloc&) {
    return {SsdStatus::Code::kNoMemory, "write: out of memory building the batch"};
  }
}

SsdStatus SsdStore::remove(std::string_view key) {
  SsdBatch b;
  b.remove(key);
  return write(b);
}

SsdStatus SsdStore::read(std::string_view key,
                         const std::function<std::span<std::byte>(size_t)>& alloc, size_t* size) {
  // RocksDB's checksums of the blob are not verified here: Debian's build computes CRC32c in
  // software (about 1.5 GB/s, most of a read's CPU). The value's own XXH3 (ten times faster)
  // is checked instead, on the bytes as copied: a value is right or it is an error.
  rocksdb::ReadOptions ro;
  ro.verify_checksums = false;
  ro.fill_cache = false;
  rocksdb::PinnableSlice v;
  rocksdb::Status s = db_->Get(ro, values_, slice(record_key(key)), &v);
  if (!s.ok()) return SsdStatus::from(s, "read");
  if (v.size() < 8)
    return {SsdStatus::Code::kCorruption, "read: a record shorter than its checksum"};
  const size_t n = v.size() - 8;
  *size = n;
  std::span<std::byte> out = alloc(n);
  if (out.size() < n || (out.data() == nullptr && n != 0))
    return {SsdStatus::Code::kNoMemory,
            "read: no memory for a value of " + std::to_string(n) + " bytes"};
  if (n != 0) std::memcpy(out.data(), v.data() + 8, n);
  if (ssd_codec::checksum(out.data(), n) != ssd_codec::get_le(v.data()))
    return {SsdStatus::Code::kCorruption, "read: checksum mismatch in the value of a record"};
  return {};
}

SsdStatus SsdStore::flush() {
  if (halted()) return halt_status("flush");
  rocksdb::FlushOptions fo;
  fo.wait = true;
  rocksdb::Status s = db_->Flush(fo, {values_, records_, order_, format_});
  if (s.ok() && options_.wal) s = db_->FlushWAL(true);
  return SsdStatus::from(s, "flush");
}

SsdStatus SsdStore::resume() {
  if (halted()) return halt_status("resume");
  return SsdStatus::from(db_->Resume(), "resume");
}

uint64_t SsdStore::disk_bytes() const {
  uint64_t total = 0;
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(options_.path, ec)) {
    std::error_code fe;
    if (e.is_regular_file(fe)) total += e.file_size(fe);
  }
  return total;
}

uint64_t SsdStore::unflushed_bytes() const {
  uint64_t v = 0;
  return db_->GetAggregatedIntProperty(rocksdb::DB::Properties::kCurSizeAllMemTables, &v) ? v : 0;
}

SsdMemory SsdStore::memory() const {
  SsdMemory m;
  uint64_t v = 0;
  m.memtables = unflushed_bytes();
  if (db_->GetAggregatedIntProperty(rocksdb::DB::Properties::kEstimateTableReadersMem, &v))
    m.table_readers = v;
  if (cache_) m.block_cache = cache_->GetUsage();
  m.file_writers = 2 * file_writer_buffer_;
  return m;
}

}  // namespace tiering
