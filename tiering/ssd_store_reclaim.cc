// tiering/ssd_store_reclaim.cc - SsdStore::reclaim(): gives back the disk space of removed and
// replaced records while the store runs (docs/ssd-tier.md, "Disk space").
//
// Why space does not come back by itself: values live in blob files (integrated BlobDB); the
// LSM tree holds an index per value. A removal or a replacement writes a tombstone (or a newer
// index); the old index, and so its blob, counts as garbage only once a compaction merges the
// two, and a blob file is deleted only when all its blobs are garbage. The LSM tree of a store
// of large values is tiny (an index is ~40 bytes), so its automatic compactions are rare, and
// one live value keeps a whole blob file (a memtable's worth of values) on disk. BlobDB's own
// garbage collection (enable_blob_garbage_collection) moves the live values of the oldest
// quarter of blob files at every compaction, dead or not: for a cache of distinct keys that is
// pure write amplification (docs: 1 MiB stores 525 -> 310 MB/s).
//
// So reclaim() runs only when the disk is over its target, and then in two steps:
//  1. A manual compaction of every family without blob GC: it merges the tombstones with the
//     indexes, counts the dead blobs, and deletes the blob files whose values are all dead. It
//     rewrites only indexes (and values under min_blob_size): no blob byte is written.
//  2. Only if the disk is still over: RocksDB's blob GC forced for one compaction, with an age
//     cutoff that takes the smallest set of oldest blob files whose dead bytes cover the excess
//     (RocksDB moves the live values of files older than the cutoff, blob_files[cutoff*n]), but
//     never more live bytes than dead ones (past the first file): at most one byte written per
//     byte freed, and a pass's moves cannot overshoot the disk by more than they free. The
//     oldest files are the most dead in a cache (capacity drops go oldest first; an overwritten
//     key's old value is older than its new one), so a rewrite moves little per byte it frees.
#include <rocksdb/db.h>
#include <rocksdb/metadata.h>
#include <rocksdb/options.h>

#include <algorithm>
#include <unordered_map>

#include "tiering/ssd_store.h"

namespace tiering {
namespace {

// Every file of a family: blob file number or SST name -> bytes.
struct Files {
  std::unordered_map<uint64_t, uint64_t> blobs;
  std::unordered_map<std::string, uint64_t> tables;
  uint64_t table_bytes = 0;
};

void add_files(rocksdb::DB* db, rocksdb::ColumnFamilyHandle* cf, Files* out) {
  rocksdb::ColumnFamilyMetaData md;
  db->GetColumnFamilyMetaData(cf, &md);
  for (const auto& b : md.blob_files) out->blobs[b.blob_file_number] = b.blob_file_size;
  for (const auto& level : md.levels)
    for (const auto& f : level.files) {
      out->tables[f.name] = f.size;
      out->table_bytes += f.size;
    }
}

// Bytes of the files in `before` that are gone in `after`, less the table bytes the pass added.
uint64_t freed(const Files& before, const Files& after) {
  uint64_t gone = 0;
  for (const auto& [number, size] : before.blobs)
    if (!after.blobs.count(number)) gone += size;
  if (before.table_bytes > after.table_bytes) gone += before.table_bytes - after.table_bytes;
  return gone;
}

}  // namespace

uint64_t SsdStore::reclaim_target(const SsdReclaimOptions& o) const {
  const uint64_t pct = std::max<uint32_t>(o.space_amp_percent, 100);
  const uint64_t live = live_bytes();
  uint64_t base = live > UINT64_MAX / pct ? UINT64_MAX : live * pct / 100;
  if (options_.capacity != 0) base = std::min(base, options_.capacity);
  const uint64_t slack = o.slack != 0 ? o.slack : reclaim_slack();
  return base > UINT64_MAX - slack ? UINT64_MAX : base + slack;
}

SsdStatus SsdStore::reclaim(const SsdReclaimOptions& o, SsdReclaimResult* result,
                            std::atomic<bool>* canceled, std::atomic<uint64_t>* moving) {
  if (halted()) return halt_status("reclaim");
  SsdReclaimResult r;
  r.disk_before = r.disk_after = disk_bytes();
  const uint64_t target = reclaim_target(o);
  if (r.disk_before <= target) {
    if (result != nullptr) *result = r;
    return {};
  }
  r.ran = true;
  Files before;
  for (auto* cf : {values_, records_, order_}) add_files(db_, cf, &before);

  rocksdb::CompactRangeOptions cro;
  cro.exclusive_manual_compaction = false;  // automatic compactions go on
  cro.bottommost_level_compaction = rocksdb::BottommostLevelCompaction::kForceOptimized;
  cro.allow_write_stall = true;             // never wait behind the writers' stalls
  cro.canceled = canceled;
  cro.blob_garbage_collection_policy = rocksdb::BlobGarbageCollectionPolicy::kDisable;
  rocksdb::Status s;
  // Step 1: dead indexes out, all-dead blob files deleted; no value moves. (The small
  // families' tombstones take little room: RocksDB's own compactions see to them.)
  s = db_->CompactRange(cro, values_, nullptr, nullptr);
  uint64_t disk = disk_bytes();
  if (s.ok() && disk > target) {
    // Step 2: the smallest prefix of the oldest blob files whose dead bytes cover the excess
    // (down to half the slack under the target, so the next pass is not due at once).
    rocksdb::ColumnFamilyMetaData md;
    db_->GetColumnFamilyMetaData(values_, &md);
    auto& blobs = md.blob_files;
    std::sort(blobs.begin(), blobs.end(), [](const auto& a, const auto& b) {
      return a.blob_file_number < b.blob_file_number;
    });
    const uint64_t slack = o.slack != 0 ? o.slack : reclaim_slack();
    const uint64_t excess = disk - (target - std::min(target, slack / 2));
    uint64_t garbage = 0, live = 0;
    size_t k = 0, last_dead = 0;
    for (size_t i = 0; i < blobs.size(); ++i)
      if (blobs[i].garbage_blob_bytes > 0) last_dead = i + 1;
    for (; k < last_dead && garbage < excess; ++k) {
      const uint64_t g = blobs[k].garbage_blob_bytes;
      const uint64_t l = blobs[k].total_blob_bytes - std::min(blobs[k].total_blob_bytes, g);
      // No more live bytes moved than dead ones freed (a move writes before it deletes, and
      // a file mostly alive is better left to age): the next pass takes the rest.
      if (k > 0 && live + l > garbage + g) break;
      garbage += g;
      live += l;
    }
    // The moves need room before the old files go: on a nearly full disk they could meet
    // ENOSPC inside a compaction (RocksDB then stops writing): the same reserve as write().
    const uint64_t reserve = 2 * live + 3 * options_.write_buffer_size + (4 << 20);
    if (k > 0 && garbage > 0 && free_bytes() >= reserve) {
      if (moving != nullptr) moving->fetch_add(live, std::memory_order_relaxed);
      cro.blob_garbage_collection_policy = rocksdb::BlobGarbageCollectionPolicy::kForce;
      cro.blob_garbage_collection_age_cutoff =
          std::min(1.0, (static_cast<double>(k) + 0.5) / static_cast<double>(blobs.size()));
      s = db_->CompactRange(cro, values_, nullptr, nullptr);
      if (s.ok()) {
        r.rewritten_files = static_cast<uint32_t>(k);
        r.rewritten_bytes = live;
      }
    }
    disk = disk_bytes();
  }
  Files after;
  for (auto* cf : {values_, records_, order_}) add_files(db_, cf, &after);
  r.freed_bytes = freed(before, after);
  r.disk_after = disk;
  if (result != nullptr) *result = r;
  return SsdStatus::from(s, "reclaim");
}

}  // namespace tiering
