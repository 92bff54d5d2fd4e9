// server/cmd_memory.cc - the MEMORY container: USAGE, STATS, PURGE, HELP. Reply shapes and
// error texts follow Redis 7.0's object.c (memoryCommand); the figures come from the memory
// tier (tiering/memory_tier.h): value blocks in the region plus the heap.
#include <malloc.h>

#include <algorithm>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "server/arg_parser.h"
#include "server/errors.h"
#include "server/commands/family.h"
#include "server/replication.h"
#include "server/server.h"
#include "tiering/key_lock.h"
#include "tiering/allocator.h"
#include "tiering/memory_tier.h"

namespace server {
namespace {


// Bytes of one entry of a shard's expiry index (a std::set node: three links, a colour word,
// the deadline and the node pointer).
constexpr size_t kExpiryEntryBytes = 4 * sizeof(void*) + sizeof(int64_t) + sizeof(void*);

// MEMORY USAGE key [SAMPLES count]: what the key really takes: its value's block in the region
// (header included), its hash node (key bytes inline) and the node's bucket slot. SAMPLES is
// checked and ignored (a string has nothing to sample).
void cmd_memory_usage(CommandContext& ctx) {
  for (size_t i = 3; i < ctx.args.size(); ++i) {
    if (!iequals(ctx.args[i], "samples") || i + 1 == ctx.args.size())
      return ctx.out.error(err::kSyntax);
    auto samples = parse_int(ctx.args[++i]);
    if (!samples) return ctx.out.error(err::kNotInteger);
    if (*samples < 0) return ctx.out.error(err::kSyntax);
  }
  std::string_view key = ctx.args[2];
  tiering::KeyLock lock(ctx.ks, key, ctx.now_ms);
  const tiering::KeyLock::Item* item = lock.find(key);
  if (item == nullptr) return ctx.out.null();
  // A value on SSD only takes no memory: the entry alone counts.
  const tiering::ValueRef& value = item->second.value;
  const size_t bytes =
      (value ? value->allocated() : 0) + malloc_usable_size(const_cast<tiering::KeyLock::Item*>(item)) + sizeof(void*);
  ctx.out.integer(static_cast<int64_t>(bytes));
}

// MEMORY STATS: Redis 7.0's map (object.c getMemoryOverheadData), in its order, with the fields
// stratakv has no use for at 0, then the memory region's figures. total.allocated is
// used_memory: the heap plus the value blocks in the region. The overhead is what is not
// the data set: the memory in use at start-up, client buffers and the tables' bookkeeping.
void cmd_memory_stats(CommandContext& ctx) {
  Server& srv = ctx.server;
  const tiering::MemoryFigures mem = srv.refresh_memory();
  const tiering::RegionStats& region = mem.region;
  const tiering::AllocatorStats heap = tiering::allocator_stats();
  const uint64_t total = mem.used();
  const uint64_t peak = std::max<uint64_t>(total, srv.stats().used_memory_peak.load());
  const uint64_t startup = srv.stats().used_memory_startup.load();
  const uint64_t rss = tiering::process_rss();
  const tiering::Keyspace::TableFigures t = ctx.ks.table_figures();
  const size_t expires_bytes = t.volatile_keys * kExpiryEntryBytes;
  // Each client's read buffer (16 KiB) and the large bulks being received.
  const uint64_t clients =
      srv.clients().count() * 16 * 1024 + srv.stats().reserved_bulk_bytes.load();
  const uint64_t overhead = startup + clients + t.node_bytes + expires_bytes;
  const uint64_t net = total > startup ? total - startup : 1;
  const uint64_t dataset = total > overhead ? total - overhead : 0;
  // The allocators' view: jemalloc's active pages (the region's arena included) plus the
  // region's page-rounded blocks; without jemalloc as the process allocator, the heap plus the
  // region's active pages.
#ifdef STRATAKV_JEMALLOC
  const uint64_t active = heap.active + region.direct_allocated;
#else
  const uint64_t active = heap.active + region.arena_active + region.direct_allocated;
#endif
  const uint64_t resident = std::max<uint64_t>(rss, active);
  auto ratio = [](uint64_t a, uint64_t b) { return b ? double(a) / double(b) : 0.0; };
  auto diff = [](uint64_t a, uint64_t b) { return static_cast<int64_t>(a - b); };

  using Field = std::pair<const char*, std::variant<int64_t, double>>;
  auto i64 = [](uint64_t v) { return static_cast<int64_t>(v); };
  const std::vector<Field> fields = {
      {"peak.allocated", i64(peak)}, {"total.allocated", i64(total)},
      {"startup.allocated", i64(startup)}, {"replication.backlog", i64(ctx.server.replication().backlog_bytes())},
      {"clients.slaves", int64_t{0}}, {"clients.normal", i64(clients)},
      {"cluster.links", int64_t{0}}, {"aof.buffer", int64_t{0}}, {"lua.caches", int64_t{0}},
      {"functions.caches", int64_t{0}},
      {"db.0", int64_t{0}},  // a map of its own, written below
      {"overhead.total", i64(overhead)}, {"keys.count", i64(t.keys)},
      {"keys.bytes-per-key", i64(t.keys ? net / t.keys : 0)},
      {"dataset.bytes", i64(dataset)},
      {"dataset.percentage", 100.0 * ratio(dataset, net)},
      {"peak.percentage", 100.0 * ratio(total, peak)},
      {"allocator.allocated", i64(total)}, {"allocator.active", i64(active)},
      {"allocator.resident", i64(resident)},
      {"allocator-fragmentation.ratio", ratio(active, total)},
      {"allocator-fragmentation.bytes", diff(active, total)},
      {"allocator-rss.ratio", ratio(resident, active)},
      {"allocator-rss.bytes", diff(resident, active)},
      {"rss-overhead.ratio", ratio(rss, resident)}, {"rss-overhead.bytes", diff(rss, resident)},
      {"fragmentation", ratio(rss, total)}, {"fragmentation.bytes", diff(rss, total)},
      // stratakv's own: the heap part of total.allocated and the memory region (as in INFO).
      {"heap.allocated", i64(mem.heap)}, {"region.capacity", i64(region.capacity)},
      {"region.allocated", i64(region.allocated())},
      {"region.active", i64(region.arena_active + region.direct_allocated)},
      {"region.dirty", i64(region.dirty)}};
  ctx.out.map(fields.size());
  for (const auto& [name, value] : fields) {
    ctx.out.bulk(name);
    if (std::string_view(name) == "db.0") {
      ctx.out.map(3);
      ctx.out.bulk("overhead.hashtable.main");
      ctx.out.integer(i64(t.node_bytes));
      ctx.out.bulk("overhead.hashtable.expires");
      ctx.out.integer(i64(expires_bytes));
      ctx.out.bulk("overhead.hashtable.slot-to-keys");
      ctx.out.integer(0);
    } else if (const int64_t* n = std::get_if<int64_t>(&value)) {
      ctx.out.integer(*n);
    } else {
      ctx.out.dbl(std::get<double>(value));
    }
  }
}

// MEMORY PURGE: returns the region's free pages (and jemalloc's cached ones) to the OS now.
void cmd_memory_purge(CommandContext& ctx) {
  tiering::MemoryTier::region().purge();
  ctx.out.ok();
}

void cmd_memory_help(CommandContext& ctx) {
  reply_help(ctx, "MEMORY",
             {"PURGE",
              "    Attempt to purge dirty pages for reclamation by the allocator.",
              "STATS",
              "    Return information about the memory usage of the server.",
              "USAGE <key> [SAMPLES <count>]",
              "    Return memory in bytes used by <key> and its value. Nested values are",
              "    sampled up to <count> times (default: 5, 0 means sample all)."});
}

}  // namespace

void register_memory_family(CommandTable& t) {
  CommandBuilder b(t, "server");
  CommandSpec memory = b.spec("memory", -2, 0, kNoKeys, nullptr, {"A container for memory diagnostics commands", "4.0.0", "Depends on subcommand."});
  memory.subcommands = {
      b.spec("usage", -3, kReadonly | kNoValue, key_at(2), cmd_memory_usage, {"Estimate the memory usage of a key", "4.0.0", "O(N) where N is the number of samples."}),
      b.spec("stats", 2, 0, kNoKeys, cmd_memory_stats, {"Show memory usage details", "4.0.0"}),
      b.spec("purge", 2, 0, kNoKeys, cmd_memory_purge, {"Ask the allocator to release memory", "4.0.0", "Depends on how much memory is allocated, could be slow"}),
      b.spec("help", 2, kLoading | kStale, kNoKeys, cmd_memory_help, {"Show helpful text about the different subcommands", "4.0.0"})};
  b.add(std::move(memory));
}

}  // namespace server
