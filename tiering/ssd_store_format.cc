// tiering/ssd_store_format.cc - the SsdStore's on-disk format at open: the marker of a new
// store, the in-place conversion of format 1 (records keyed by the bare key) to format 2
// (records keyed by [slot][key]), the refusal of a format this code does not know, and the
// check that the slot function is the one the records were written with. docs/ssd-tier.md,
// "On-disk format".
#include <rocksdb/db.h>
#include <rocksdb/write_batch.h>

#include <chrono>
#include <memory>
#include <new>
#include <string>

#include "tiering/ssd_store.h"
#include "tiering/ssd_store_codec.h"

namespace tiering {
namespace {

// A conversion batch ends past this many records (4 RocksDB ops each) or bytes of values (a
// larger value is a batch of its own).
constexpr size_t kConvertRecords = 1024;
constexpr uint64_t kConvertBytes = 64 << 20;
// Every this many bytes converted, format 1's converted range is compacted away, so a large
// store does not need twice its size on disk while it converts; and progress is logged.
constexpr uint64_t kConvertCompactEvery = uint64_t{1} << 30;
// Records open() samples to check the slot function (spread over the slots in use).
constexpr int kSlotSamples = 16;

rocksdb::Slice slice(std::string_view s) { return {s.data(), s.size()}; }

const char* const kMoveAway =
    "move the directory away to start with an empty SSD tier (tiering.ssd.recover no wipes it)";

}  // namespace

SsdStatus SsdStore::settle_format(bool created) {
  const std::string where = "open " + options_.path;
  std::string version;
  rocksdb::Status s =
      db_->Get(rocksdb::ReadOptions(), format_, slice(ssd_codec::kFormatKey), &version);
  if (s.ok()) {
    if (version != std::to_string(kFormat))
      return {SsdStatus::Code::kInvalid,
              where + ": the store has format '" + version + "' and this stratakv reads format " +
                  std::to_string(kFormat) + " (and converts format 1): it was written by a " +
                  "newer version. Run that version, or " + kMoveAway};
    // A conversion that stopped after its marker may have format 1's family to drop or files
    // of `default` to compact away (nothing to do otherwise).
    if (SsdStatus st = finish_v1(); !st.ok()) return st;
    return check_slots();
  }
  if (!s.IsNotFound()) return SsdStatus::from(s, where + ": read the format");
  if (v1_meta_ != nullptr) return convert_v1();

  // No marker and no format-1 family: a store created here (now, or by an open that stopped
  // before its marker was written), which is then empty. Anything else is not one of ours.
  if (!created) {
    for (rocksdb::ColumnFamilyHandle* cf : {default_, values_, records_, order_}) {
      std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions(), cf));
      it->SeekToFirst();
      if (!it->status().ok()) return SsdStatus::from(it->status(), where);
      if (it->Valid())
        return {SsdStatus::Code::kInvalid,
                where + ": a RocksDB database without stratakv's format marker (family '" +
                    cf->GetName() + "' holds data): not an SSD store of stratakv; " + kMoveAway};
    }
  }
  rocksdb::WriteOptions wo;
  wo.sync = true;
  s = db_->Put(wo, format_, slice(ssd_codec::kFormatKey), std::to_string(kFormat));
  return SsdStatus::from(s, where + ": write the format");
}

// Format 1 keeps a record in `default` (bare key -> value) and `meta` (bare key -> header);
// format 2 in `values` and `records` ([slot][key] -> the same bytes). `order` (seq -> bare key)
// and the headers (with their seq) are the same in both and are not touched.
//
// Crash safety. Each batch *moves* records: it puts their format-2 entries and deletes their
// format-1 entries in one WriteBatch (with the WAL), which RocksDB applies whole or not at all,
// also across a crash. The two formats live in different families, so a record is in exactly
// one of them at any time and a rerun never has to tell a bare key from a [slot][key] (a bare
// key can look like any record key): whatever `meta` still holds is exactly what is left to
// convert. The format marker is written last, in one batch with a range deletion of whatever
// `default` still holds (values without a header, which format 1 never read), so a store with
// the marker has nothing left to convert. Dropping `meta` and compacting `default` come after
// (finish_v1(), rerun at the next open if a crash comes first). Nothing of format 1 is deleted
// before its format-2 copy is in the same atomic batch, so an interrupted conversion (a crash,
// a full disk, an I/O error) loses no record; the next open continues where it stopped.
SsdStatus SsdStore::convert_v1() {
  const auto start = std::chrono::steady_clock::now();
  const std::string where = "convert " + options_.path + " from format 1";
  say(false, "ssd store " + options_.path + ": format 1 (records keyed without their slot): " +
                 "converting to format " + std::to_string(kFormat) + " in place");
  uint64_t converted = 0, bytes = 0, dropped = 0, since_compact = 0, since_log = 0;
  try {
    rocksdb::ReadOptions ro;
    ro.fill_cache = false;
    // The iterator reads `meta` as of its creation (an implicit snapshot): the batches' deletes
    // do not disturb it.
    std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, v1_meta_));
    rocksdb::WriteBatch wb;
    uint64_t batch_bytes = 0;
    size_t batch_records = 0;
    std::string last;  // the largest format-1 key moved so far
    rocksdb::WriteOptions wo;  // WAL on, whatever the store's options: a batch is whole or absent
    wo.sync = options_.sync;

    auto compact_moved = [&]() {
      // Tombstones of the moved range go, and blob files whose values all moved are deleted.
      const rocksdb::Slice end = slice(last);
      rocksdb::CompactRangeOptions co;
      db_->CompactRange(co, default_, nullptr, &end).PermitUncheckedError();
      db_->CompactRange(co, v1_meta_, nullptr, &end).PermitUncheckedError();
    };
    auto commit = [&]() -> SsdStatus {
      if (wb.Count() == 0) return {};
      // The new copies take room before the old ones are compacted away (see write()).
      const uint64_t reserve = 3 * options_.write_buffer_size + (4 << 20);
      const uint64_t free = free_bytes();
      if (free < 2 * batch_bytes + reserve)
        return {SsdStatus::Code::kNoSpace,
                where + ": no space left on " + options_.path + " (" + std::to_string(free) +
                    " bytes free, " + std::to_string(2 * batch_bytes + reserve) +
                    " needed for the next batch) after " + std::to_string(converted) +
                    " records. Free some space and restart: the conversion continues where it "
                    "stopped, nothing is lost"};
      rocksdb::Status s = db_->Write(wo, &wb);
      if (!s.ok()) {
        SsdStatus st = SsdStatus::from(s, where);
        st.message += " (after " + std::to_string(converted) +
                      " records; restart to continue: nothing is lost)";
        // Not kCorruption: the caller would wipe the store, and format 1's records are intact.
        if (st.code == SsdStatus::Code::kCorruption) st.code = SsdStatus::Code::kIoError;
        return st;
      }
      wb.Clear();
      converted += batch_records;
      since_compact += batch_bytes;
      since_log += batch_bytes;
      batch_bytes = 0;
      batch_records = 0;
      if (since_compact >= kConvertCompactEvery) {
        compact_moved();
        since_compact = 0;
      }
      if (since_log >= kConvertCompactEvery) {
        say(false, "ssd store " + options_.path + ": converting: records=" +
                       std::to_string(converted) + " bytes=" + std::to_string(bytes));
        since_log = 0;
      }
      return {};
    };

    rocksdb::PinnableSlice value;
    for (it->SeekToFirst(); it->Valid(); it->Next()) {
      const rocksdb::Slice k = it->key();
      const std::string_view key(k.data(), k.size());
      wb.Delete(v1_meta_, k);
      wb.Delete(default_, k);
      last.assign(key);
      ssd_codec::Header h;
      if (!ssd_codec::decode(it->value(), &h)) {
        ++dropped;  // not a header: format 1's scan skipped it too
        continue;
      }
      value.Reset();
      rocksdb::Status s = db_->Get(ro, default_, k, &value);
      if (s.IsNotFound() || s.IsCorruption()) {
        // A header without a readable value: format 1 answered a read of it with an error and
        // dropped the key. Dropped here too, and counted in the log line.
        ++dropped;
        continue;
      }
      if (!s.ok()) {
        SsdStatus st = SsdStatus::from(s, where + ": read a value");
        st.code = SsdStatus::Code::kIoError;
        st.message += " (restart to continue: nothing is lost)";
        return st;
      }
      const std::string rk = record_key(key);
      wb.Put(values_, slice(rk), value);
      wb.Put(records_, slice(rk), it->value());
      const uint64_t size = value.size();
      batch_bytes += k.size() + size;
      bytes += k.size() + h.size;
      ++batch_records;
      if (wb.Count() >= 4 * kConvertRecords || batch_bytes >= kConvertBytes) {
        if (SsdStatus st = commit(); !st.ok()) return st;
      }
    }
    if (!it->status().ok()) {
      SsdStatus st = SsdStatus::from(it->status(), where + ": iterate");
      if (st.code == SsdStatus::Code::kCorruption) return st;  // unreadable: as a corrupt store
      st.message += " (restart to continue: nothing is lost)";
      return st;
    }
    if (SsdStatus st = commit(); !st.ok()) return st;

    // The marker, with a range deletion of what `default` still holds: from here the store is
    // of format 2.
    wb.Put(format_, slice(ssd_codec::kFormatKey), std::to_string(kFormat));
    {
      std::unique_ptr<rocksdb::Iterator> d(db_->NewIterator(ro, default_));
      d->SeekToFirst();
      if (d->Valid()) {
        const std::string first = d->key().ToString();
        d->SeekToLast();
        if (d->Valid()) {
          std::string end = d->key().ToString();
          end.push_back('\0');  // just past the last key
          wb.DeleteRange(default_, first, end);
        }
      }
      if (!d->status().ok()) return SsdStatus::from(d->status(), where + ": iterate default");
    }
    wo.sync = true;
    if (rocksdb::Status s = db_->Write(wo, &wb); !s.ok())
      return SsdStatus::from(s, where + ": write the format");
  } catch (const std::bad_alloc&) {
    return {SsdStatus::Code::kNoMemory,
            where + ": out of memory (restart to continue: nothing is lost)"};
  }
  if (SsdStatus st = finish_v1(); !st.ok()) return st;
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                      std::chrono::steady_clock::now() - start).count();
  say(dropped != 0,
      "ssd store " + options_.path + ": converted format 1 to format " +
          std::to_string(kFormat) + ": records=" + std::to_string(converted) +
          " bytes=" + std::to_string(bytes) + " ms=" + std::to_string(ms) +
          (dropped == 0 ? std::string()
                        : " dropped=" + std::to_string(dropped) +
                              " (headers without a readable value: format 1 could not read them "
                              "either)"));
  return check_slots();
}

SsdStatus SsdStore::finish_v1() {
  const std::string where = "convert " + options_.path + " from format 1";
  if (v1_meta_ != nullptr) {
    // The moved records in files (the WAL may be off later), then format 1's family goes.
    if (SsdStatus st = flush(); !st.ok()) return st;
    rocksdb::Status s = db_->DropColumnFamily(v1_meta_);
    if (!s.ok()) return SsdStatus::from(s, where + ": drop family meta");
    db_->DestroyColumnFamilyHandle(v1_meta_).PermitUncheckedError();
    v1_meta_ = nullptr;
  }
  // `default` holds only deletions in format 2 (none once compacted): compacting it deletes
  // format 1's SST and blob files. A store that never was of format 1 has no files there.
  uint64_t sst = 0, blob = 0;
  db_->GetIntProperty(default_, rocksdb::DB::Properties::kTotalSstFilesSize, &sst);
  db_->GetIntProperty(default_, rocksdb::DB::Properties::kTotalBlobFileSize, &blob);
  if (sst == 0 && blob == 0) return {};
  rocksdb::CompactRangeOptions co;
  co.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForce;
  rocksdb::Status s = db_->CompactRange(co, default_, nullptr, nullptr);
  if (!s.ok())
    say(true, where + ": compact default: " + s.ToString() + " (space comes back later)");
  return {};
}

SsdStatus SsdStore::check_slots() {
  // A record key's slot is what slot_of said when it was written: a different function now
  // would look every key up under another slot, and miss. Up to 16 records are checked, spread
  // from the first record's slot to the last one's (16 seeks).
  const std::string where = "open " + options_.path;
  rocksdb::ReadOptions ro;
  ro.fill_cache = false;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro, records_));
  uint16_t first = 0, last = 0;
  std::string_view key;
  it->SeekToLast();
  if (it->Valid() && ssd_codec::decode_record_key(it->key(), &last, &key)) {
    it->SeekToFirst();
    if (it->Valid() && ssd_codec::decode_record_key(it->key(), &first, &key)) {
      for (int i = 0; i < kSlotSamples; ++i) {
        const uint32_t at = first + (uint32_t{last} - first) * i / (kSlotSamples - 1);
        it->Seek(ssd_codec::encode_slot(at));
        uint16_t slot = 0;
        if (!it->Valid() || !ssd_codec::decode_record_key(it->key(), &slot, &key)) continue;
        const uint16_t now = options_.slot_of ? options_.slot_of(key) : 0;
        if (now != slot)
          return {SsdStatus::Code::kInvalid,
                  where + ": its records were written with another key-to-slot function (a " +
                      "key of slot " + std::to_string(slot) + " maps to slot " +
                      std::to_string(now) + " now): it cannot be read. Open it with the " +
                      "function that wrote it, or " + kMoveAway};
      }
    }
  }
  return SsdStatus::from(it->status(), where + ": check slots");
}

}  // namespace tiering
