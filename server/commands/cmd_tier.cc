// server/cmd_tier.cc - TIER key: where a key's value lives (docs/ssd-tier.md).
//
//   TIER key  ->  "memory" | "ssd" | "memory+ssd", or nil when the key does not exist.
// "memory": in memory only (a demotion may be queued); "ssd": on SSD only (a read loads it);
// "memory+ssd": in memory with a written SSD copy (after a promotion, or a demotion that found
// the value in use), so it leaves memory again without a write. Does not load or touch the key.
#include "server/commands/family.h"
#include "server/server.h"
#include "tiering/key_lock.h"

namespace server {
namespace {

void cmd_tier(CommandContext& ctx) {
  tiering::KeyLock lock(ctx.ks, ctx.args[1], ctx.now_ms);
  const tiering::KeyLock::Item* item = lock.peek(ctx.args[1]);
  if (item == nullptr) return ctx.out.null();
  const tiering::Entry& e = item->second;
  if (!e.value) return ctx.out.bulk("ssd");
  const bool copy = (e.flags & tiering::kEntrySsd) && !(e.flags & tiering::kEntryDemoting);
  ctx.out.bulk(copy ? "memory+ssd" : "memory");
}

}  // namespace

void register_tier_family(CommandTable& t) {
  CommandBuilder b(t, "generic");
  b.add("tier", 2, kReadonly | kFast | kNoValue, key_at(1), cmd_tier,
        {"Tell where a key's value lives: memory, ssd or memory+ssd", "0.1.0"});
}

}  // namespace server
