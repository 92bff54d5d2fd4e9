// tiering/ssd_store_scan.cc - the SsdStore calls that walk a family: recovery scan (all records
// or a range of slots), capacity drops (demotion order), expiry sweep, clear.
#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>

#include <memory>
#include <new>

#include "tiering/ssd_store.h"
#include "tiering/ssd_store_codec.h"

namespace tiering {
namespace {

// Deletes are written in chunks of this many records: a drop or sweep of a million records
// is not one huge batch, and callers see progress.
constexpr int kChunk = 512;

rocksdb::Slice slice(std::string_view s) { return {s.data(), s.size()}; }

}  // namespace

SsdStatus SsdStore::scan(int64_t now_ms, const std::function<bool(const SsdRecordInfo&)>& fn,
                         uint64_t* expired) {
  return scan_range({}, {}, now_ms, fn, expired);
}

SsdStatus SsdStore::scan_slots(uint16_t first, uint16_t last, int64_t now_ms,
                               const std::function<bool(const SsdRecordInfo&)>& fn,
                               uint64_t* expired) {
  if (expired != nullptr) *expired = 0;
  if (first > last) return {};
  // Record keys start with the slot, big endian: slots first..last are the keys from
  // [first] (inclusive) to [last + 1] (exclusive); past the largest slot, no upper bound.
  const std::string lower = ssd_codec::encode_slot(first);
  const std::string upper = last == UINT16_MAX ? std::string() : ssd_codec::encode_slot(last + 1u);
  return scan_range(lower, upper, now_ms, fn, expired);
}

SsdStatus SsdStore::scan_range(std::string_view lower, std::string_view upper, int64_t now_ms,
                               const std::function<bool(const SsdRecordInfo&)>& fn,
                               uint64_t* expired) {
  uint64_t past = 0;
  rocksdb::ReadOptions ro;
  ro.fill_cache = false;  // a one-off walk: do not push hot blocks out
  // The bounds stop the iterator itself at the range's end (no key past it is read), and let
  // it skip SST files outside the range.
  const rocksdb::Slice lo = slice(lower), hi = slice(upper);
  if (!lower.empty()) ro.iterate_lower_bound = &lo;
  if (!upper.empty()) ro.iterate_upper_bound = &hi;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, records_));
  for (lower.empty() ? it->SeekToFirst() : it->Seek(lo); it->Valid(); it->Next()) {
    ssd_codec::Header h;
    uint16_t slot = 0;
    std::string_view key;
    if (!ssd_codec::decode(it->value(), &h) ||
        !ssd_codec::decode_record_key(it->key(), &slot, &key))
      continue;
    if (now_ms != 0 && h.expire_ms != 0 && h.expire_ms <= now_ms) {
      ++past;
      continue;
    }
    if (!fn(SsdRecordInfo{key, slot, h.expire_ms, h.size, h.seq})) break;
  }
  if (expired != nullptr) *expired = past;
  return SsdStatus::from(it->status(), "scan");
}

SsdStatus SsdStore::drop_oldest(uint64_t target, size_t max_records,
                                const std::function<bool(std::string_view key)>& may_drop,
                                std::vector<std::string>* dropped) {
  if (halted()) return halt_status("drop oldest");
  std::lock_guard lock(write_mu_);
  try {
    rocksdb::WriteOptions wo;
    wo.sync = options_.sync;
    wo.disableWAL = !options_.wal;
    rocksdb::WriteBatch wb;
    uint64_t bytes = 0, records = 0;  // of the chunk in `wb`
    auto commit = [&]() -> SsdStatus {
      if (wb.Count() == 0) return {};
      rocksdb::Status s = db_->Write(wo, &wb);
      wb.Clear();
      if (!s.ok()) return SsdStatus::from(s, "drop");
      live_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
      live_records_.fetch_sub(records, std::memory_order_relaxed);
      bytes = records = 0;
      return {};
    };
    size_t n = 0;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), order_));
    for (it->SeekToFirst(); it->Valid() && n < max_records; it->Next()) {
      if (live_bytes() - bytes <= target) break;
      const uint64_t seq = ssd_codec::decode_seq(it->key());
      const std::string key = it->value().ToString();  // `order` holds the bare key
      const std::string rk = record_key(key);
      uint64_t cur_seq = 0, size = 0;
      int64_t expire = 0;
      if (!header_of(rk, &cur_seq, &expire, &size) || cur_seq != seq) {
        wb.Delete(order_, it->key());  // stale: the key was rewritten or removed
      } else if (may_drop(key)) {
        wb.Delete(values_, slice(rk));
        wb.Delete(records_, slice(rk));
        wb.Delete(order_, it->key());
        bytes += key.size() + size;
        ++records;
        ++n;
        if (dropped != nullptr) dropped->push_back(key);
      }
      if (wb.Count() >= 3 * kChunk) {
        if (SsdStatus st = commit(); !st.ok()) return st;
      }
    }
    if (!it->status().ok()) return SsdStatus::from(it->status(), "drop: iterate");
    return commit();
  } catch (const std::bad_alloc&) {
    return {SsdStatus::Code::kNoMemory, "drop: out of memory"};
  }
}

SsdStatus SsdStore::sweep_expired(int64_t now_ms, size_t budget, size_t* removed) {
  if (halted()) return halt_status("sweep expired");
  std::lock_guard lock(write_mu_);
  size_t n = 0;
  if (removed != nullptr) *removed = 0;
  try {
    rocksdb::WriteOptions wo;
    wo.sync = options_.sync;
    wo.disableWAL = !options_.wal;
    rocksdb::WriteBatch wb;
    uint64_t bytes = 0, records = 0;
    rocksdb::ReadOptions ro;
    ro.fill_cache = false;
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, records_));
    for (it->SeekToFirst(); it->Valid() && n < budget; it->Next()) {
      ssd_codec::Header h;
      if (!ssd_codec::decode(it->value(), &h) || it->key().size() < ssd_codec::kSlotBytes)
        continue;
      if (h.expire_ms == 0 || h.expire_ms > now_ms) continue;
      wb.Delete(values_, it->key());
      wb.Delete(records_, it->key());
      wb.Delete(order_, slice(ssd_codec::encode_seq(h.seq)));
      bytes += it->key().size() - ssd_codec::kSlotBytes + h.size;
      ++records;
      ++n;
    }
    if (!it->status().ok()) return SsdStatus::from(it->status(), "sweep: iterate");
    if (wb.Count() != 0) {
      rocksdb::Status s = db_->Write(wo, &wb);
      if (!s.ok()) return SsdStatus::from(s, "sweep");
      live_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
      live_records_.fetch_sub(records, std::memory_order_relaxed);
    }
    if (removed != nullptr) *removed = n;
    return {};
  } catch (const std::bad_alloc&) {
    return {SsdStatus::Code::kNoMemory, "sweep: out of memory"};
  }
}

SsdStatus SsdStore::clear() {
  if (halted()) return halt_status("clear");
  std::lock_guard lock(write_mu_);
  rocksdb::WriteOptions wo;
  wo.sync = options_.sync;
  wo.disableWAL = !options_.wal;
  // One range tombstone per family, from its first key to just past its last.
  for (rocksdb::ColumnFamilyHandle* cf : {values_, records_, order_}) {
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), cf));
    it->SeekToFirst();
    if (!it->Valid()) {
      if (!it->status().ok()) return SsdStatus::from(it->status(), "clear: iterate");
      continue;
    }
    const std::string first = it->key().ToString();
    it->SeekToLast();
    if (!it->Valid()) return SsdStatus::from(it->status(), "clear: iterate");
    std::string end = it->key().ToString();
    end.push_back('\0');  // the smallest key after the last one
    rocksdb::Status s = db_->DeleteRange(wo, cf, first, end);
    if (!s.ok()) return SsdStatus::from(s, "clear");
  }
  live_bytes_ = 0;
  live_records_ = 0;
  return {};
}

}  // namespace tiering
