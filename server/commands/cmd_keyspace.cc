// server/cmd_keyspace.cc - generic key commands: DEL, EXISTS, TYPE, RENAME, COPY, KEYS, SCAN,
// RANDOMKEY, DBSIZE, FLUSHDB/FLUSHALL, the expiry commands (EXPIRE..., TTL..., PERSIST), and the
// OBJECT introspection commands (MEMORY is in cmd_memory.cc). Semantics and error texts
// follow Redis 7.0's db.c, expire.c and object.c.
//
// Reads that Redis does with LOOKUP_NOTOUCH (EXISTS, TYPE, TTL, OBJECT) use Shard::peek (counts
// a hit or miss, leaves access stats alone); reads that touch (TOUCH, COPY's source) use lookup;
// writes use find. Every command holds its keys' shards through one tiering::KeyLock, so a
// multi-key command is atomic as in Redis, and every change goes through the keyspace's write
// path. Values unlinked by a command are released after its locks drop.
#include <algorithm>
#include <cctype>
#include <cerrno>
#include <climits>
#include <cstdlib>
#include <initializer_list>
#include <string>
#include <vector>

#include "server/arg_parser.h"
#include "server/config.h"
#include "server/errors.h"
#include "server/commands/family.h"
#include "server/server.h"
#include "tiering/eviction.h"
#include "tiering/glob.h"
#include "tiering/key_lock.h"

namespace server {
namespace {

using tiering::Entry;
using tiering::KeyLock;
using tiering::ValueRef;

std::span<const std::string_view> keys_of(const CommandContext& ctx) {
  return ctx.args.subspan(1);
}

// ---- DEL, UNLINK, EXISTS, TOUCH, TYPE ----

// DEL and UNLINK alike: keys unlink at once, bytes go when the last reference drops.
void cmd_del(CommandContext& ctx) {
  int64_t removed = 0;
  KeyLock lock(ctx.ks, keys_of(ctx), ctx.now_ms);  // values freed once the shards are released
  for (auto key : keys_of(ctx)) {
    if (const KeyLock::Item* item = lock.find(key)) {
      lock.remove(item);
      ++removed;
    }
  }
  ctx.out.integer(removed);
}

// EXISTS counts without touching access stats; TOUCH refreshes them. Duplicates count twice.
void count_present(CommandContext& ctx, bool touch) {
  int64_t n = 0;
  KeyLock lock(ctx.ks, keys_of(ctx), ctx.now_ms);
  for (auto key : keys_of(ctx))
    if (touch ? lock.lookup(key) : lock.peek(key)) ++n;
  ctx.out.integer(n);
}
void cmd_exists(CommandContext& ctx) { count_present(ctx, false); }
void cmd_touch(CommandContext& ctx) { count_present(ctx, true); }

void cmd_type(CommandContext& ctx) {
  KeyLock lock(ctx.ks, ctx.args[1], ctx.now_ms);
  ctx.out.simple(lock.peek(ctx.args[1]) ? "string" : "none");
}

// ---- RENAME, RENAMENX, COPY ----

void rename_generic(CommandContext& ctx, bool nx) {
  std::string_view src = ctx.args[1], dst = ctx.args[2];
  KeyLock lock(ctx.ks, ctx.args.subspan(1, 2), ctx.now_ms);
  const KeyLock::Item* item = lock.find(src);
  if (item == nullptr) return ctx.out.error(err::kNoSuchKey);
  if (src == dst) return nx ? ctx.out.integer(0) : ctx.out.ok();
  if (nx && lock.find(dst)) return ctx.out.integer(0);
  lock.rename(item, dst);  // the value keeps its TTL and access stats
  if (nx) ctx.out.integer(1);
  else ctx.out.ok();
}
void cmd_rename(CommandContext& ctx) { rename_generic(ctx, false); }
void cmd_renamenx(CommandContext& ctx) { rename_generic(ctx, true); }

// COPY src dst [DB 0] [REPLACE]. A published value is immutable (APPEND and SETRANGE copy a
// shared one before writing), so the copy shares the source's bytes.
void cmd_copy(CommandContext& ctx) {
  bool replace = false;
  for (size_t i = 3; i < ctx.args.size(); ++i) {
    if (iequals(ctx.args[i], "replace")) {
      replace = true;
    } else if (iequals(ctx.args[i], "db") && i + 1 < ctx.args.size()) {
      auto db = parse_int(ctx.args[++i]);
      if (!db) return ctx.out.error(err::kNotInteger);
      if (*db < INT_MIN || *db > INT_MAX) return ctx.out.error(err::kIntRange);
      if (*db != 0) return ctx.out.error(err::kDbIndexRange);  // one database only
    } else {
      return ctx.out.error(err::kSyntax);
    }
  }
  std::string_view src = ctx.args[1], dst = ctx.args[2];
  if (src == dst) return ctx.out.error(err::kSameObject);
  KeyLock lock(ctx.ks, ctx.args.subspan(1, 2), ctx.now_ms);
  const KeyLock::Item* item = lock.lookup(src);
  if (item == nullptr) return ctx.out.integer(0);
  if (!replace && lock.find(dst)) return ctx.out.integer(0);
  lock.set(dst, item->second.value, item->second.expire_ms);
  ctx.out.integer(1);
}

// ---- KEYS, SCAN, RANDOMKEY, DBSIZE, FLUSHDB, FLUSHALL ----

void reply_keys(CommandContext& ctx, const std::vector<std::string>& keys) {
  ctx.out.array(keys.size());
  for (const auto& k : keys) ctx.out.bulk(k);
}

void cmd_keys(CommandContext& ctx) {
  std::string_view pattern = ctx.args[1];
  const bool all = pattern == "*";
  std::vector<std::string> keys;
  ctx.ks.for_each_live(ctx.now_ms, [&](std::string_view key, const Entry&) {
    if (all || tiering::glob_match(pattern, key)) keys.emplace_back(key);
  });
  reply_keys(ctx, keys);
}

// A SCAN cursor as Redis's parseScanCursorOrReply reads it (strtoul): no leading space, "" is 0,
// a sign is allowed, overflow is invalid.
std::optional<uint64_t> parse_cursor(std::string_view s) {
  if (!s.empty() && std::isspace(static_cast<unsigned char>(s[0]))) return std::nullopt;
  std::string buf(s);
  char* end = nullptr;
  errno = 0;
  unsigned long long v = std::strtoull(buf.c_str(), &end, 10);
  if (*end != '\0' || errno == ERANGE) return std::nullopt;
  return v;
}

// SCAN cursor [MATCH pattern] [COUNT count] [TYPE type]
void cmd_scan(CommandContext& ctx) {
  auto cursor = parse_cursor(ctx.args[1]);
  if (!cursor) return ctx.out.error(err::kInvalidCursor);
  size_t count = 10;
  std::string_view pattern, type;
  bool use_pattern = false, use_type = false;
  for (size_t i = 2; i < ctx.args.size(); i += 2) {
    const bool has_value = i + 1 < ctx.args.size();
    if (iequals(ctx.args[i], "count") && has_value) {
      auto n = parse_int(ctx.args[i + 1]);
      if (!n) return ctx.out.error(err::kNotInteger);
      if (*n < 1) return ctx.out.error(err::kSyntax);
      count = static_cast<size_t>(*n);
    } else if (iequals(ctx.args[i], "match") && has_value) {
      pattern = ctx.args[i + 1];
      use_pattern = pattern != "*";
    } else if (iequals(ctx.args[i], "type") && has_value) {
      type = ctx.args[i + 1];
      use_type = true;
    } else {
      return ctx.out.error(err::kSyntax);
    }
  }
  const bool want_type = !use_type || iequals(type, "string");  // every value is a string
  std::vector<std::string> keys;
  auto emit = [&](const std::string& key, const Entry&) {
    if (want_type && (!use_pattern || tiering::glob_match(pattern, key))) keys.push_back(key);
  };
  const uint64_t next = ctx.ks.scan(*cursor, count, ctx.now_ms, emit);
  ctx.out.array(2);
  ctx.out.bulk(std::to_string(next));
  reply_keys(ctx, keys);
}

void cmd_randomkey(CommandContext& ctx) {
  auto key = ctx.ks.random_key(ctx.now_ms);
  if (key) ctx.out.bulk(*key);
  else ctx.out.null();
}

void cmd_dbsize(CommandContext& ctx) { ctx.out.integer(static_cast<int64_t>(ctx.ks.size())); }

// FLUSHDB / FLUSHALL [SYNC|ASYNC]; without an option, sync (lazyfree-lazy-user-flush no).
void cmd_flush(CommandContext& ctx) {
  bool async = false;
  if (ctx.args.size() == 2 && iequals(ctx.args[1], "async")) async = true;
  else if (ctx.args.size() != 1 && !(ctx.args.size() == 2 && iequals(ctx.args[1], "sync")))
    return ctx.out.error(err::kSyntax);
  ctx.ks.flush(async);
  ctx.out.ok();
}

// ---- EXPIRE, PEXPIRE, EXPIREAT, PEXPIREAT ----

enum ExpireFlag { kNx = 1, kXx = 2, kGt = 4, kLt = 8 };

// expire.c expireGenericCommand: options first, then the time; a deadline not in the future
// deletes the key. GT treats "no TTL" as infinite; LT treats it as satisfied.
void expire_generic(CommandContext& ctx, std::string_view name, bool seconds, bool absolute) {
  int flags = 0;
  for (size_t i = 3; i < ctx.args.size(); ++i) {
    std::string_view o = ctx.args[i];
    if (iequals(o, "nx")) flags |= kNx;
    else if (iequals(o, "xx")) flags |= kXx;
    else if (iequals(o, "gt")) flags |= kGt;
    else if (iequals(o, "lt")) flags |= kLt;
    else return ctx.out.error(err::unsupported_option(o));
  }
  if ((flags & kNx) && (flags & (kXx | kGt | kLt))) return ctx.out.error(err::kExpireFlags);
  if ((flags & kGt) && (flags & kLt)) return ctx.out.error(err::kExpireGtLt);
  auto value = parse_int(ctx.args[2]);
  if (!value) return ctx.out.error(err::kNotInteger);
  int64_t when = *value;
  if (seconds) {
    if (when > INT64_MAX / 1000 || when < INT64_MIN / 1000)
      return ctx.out.error(err::invalid_expire(name));
    when *= 1000;
  }
  const int64_t base = absolute ? 0 : ctx.now_ms;
  if (when > INT64_MAX - base) return ctx.out.error(err::invalid_expire(name));
  when += base;

  std::string_view key = ctx.args[1];
  KeyLock lock(ctx.ks, key, ctx.now_ms);
  const KeyLock::Item* item = lock.find(key);
  if (item == nullptr) return ctx.out.integer(0);
  const int64_t cur = item->second.expire_ms;  // 0 = no TTL
  if (((flags & kNx) && cur != 0) || ((flags & kXx) && cur == 0) ||
      ((flags & kGt) && (cur == 0 || when <= cur)) || ((flags & kLt) && cur != 0 && when >= cur))
    return ctx.out.integer(0);
  if (when <= ctx.now_ms) lock.remove(item);  // as Redis: a deadline in the past deletes
  else if (when != cur) lock.set_expire(item, when);
  else ctx.server.keyspace_events().raise_unchanged("expire", kNotifyGeneric, key);
  ctx.out.integer(1);
}
void cmd_expire(CommandContext& ctx) { expire_generic(ctx, "expire", true, false); }
void cmd_pexpire(CommandContext& ctx) { expire_generic(ctx, "pexpire", false, false); }
void cmd_expireat(CommandContext& ctx) { expire_generic(ctx, "expireat", true, true); }
void cmd_pexpireat(CommandContext& ctx) { expire_generic(ctx, "pexpireat", false, true); }

// ---- TTL, PTTL, EXPIRETIME, PEXPIRETIME, PERSIST ----

// -2 missing, -1 no TTL; seconds round to nearest as Redis: (ms + 500) / 1000.
void ttl_generic(CommandContext& ctx, bool ms, bool absolute) {
  KeyLock lock(ctx.ks, ctx.args[1], ctx.now_ms);
  const KeyLock::Item* item = lock.peek(ctx.args[1]);
  if (item == nullptr) return ctx.out.integer(-2);
  const int64_t at = item->second.expire_ms;
  if (at == 0) return ctx.out.integer(-1);
  const int64_t t = std::max<int64_t>(absolute ? at : at - ctx.now_ms, 0);
  ctx.out.integer(ms ? t : t / 1000 + (t % 1000 >= 500));  // (t + 500) / 1000, no overflow
}
void cmd_ttl(CommandContext& ctx) { ttl_generic(ctx, false, false); }
void cmd_pttl(CommandContext& ctx) { ttl_generic(ctx, true, false); }
void cmd_expiretime(CommandContext& ctx) { ttl_generic(ctx, false, true); }
void cmd_pexpiretime(CommandContext& ctx) { ttl_generic(ctx, true, true); }

void cmd_persist(CommandContext& ctx) {
  KeyLock lock(ctx.ks, ctx.args[1], ctx.now_ms);
  const KeyLock::Item* item = lock.find(ctx.args[1]);
  if (item == nullptr || item->second.expire_ms == 0) return ctx.out.integer(0);
  lock.set_expire(item, 0);
  ctx.out.integer(1);
}

// ---- OBJECT ----

// Runs `fn(entry)` on the key of an OBJECT subcommand under its shard lock; nil when missing.
template <class Fn>
void with_object(CommandContext& ctx, Fn fn) {
  KeyLock lock(ctx.ks, ctx.args[2], ctx.now_ms);
  const KeyLock::Item* item = lock.peek(ctx.args[2]);
  if (item == nullptr) return ctx.out.null();
  fn(item->second);
}

// Whether maxmemory-policy is volatile-lfu or allkeys-lfu.
bool lfu_policy(CommandContext& ctx) {
  auto p = tiering::parse_eviction_policy(ctx.server.config().choice(Key::kMaxMemoryPolicy));
  return p && tiering::lfu_policy(*p);
}

void cmd_object_encoding(CommandContext& ctx) {
  with_object(ctx, [&](const Entry& e) { ctx.out.bulk(string_encoding(*e.value)); });
}

void cmd_object_freq(CommandContext& ctx) {
  with_object(ctx, [&](const Entry& e) {
    if (!lfu_policy(ctx)) return ctx.out.error(err::kLfuNotSelected);
    ctx.out.integer(tiering::lfu_decay(e.lfu, e.lfu_minutes, ctx.now_ms,
                                      tiering::lfu_params.decay_minutes.load()));
  });
}

void cmd_object_idletime(CommandContext& ctx) {
  with_object(ctx, [&](const Entry& e) {
    if (lfu_policy(ctx)) return ctx.out.error(err::kLfuSelected);
    ctx.out.integer(static_cast<int64_t>(tiering::lru_idle_ms(e.access, ctx.now_ms) / 1000));
  });
}

void cmd_object_refcount(CommandContext& ctx) {
  // A value on SSD only has no reference in memory: Redis's answer for a key is 1.
  with_object(ctx, [&](const Entry& e) {
    ctx.out.integer(std::max<int64_t>(1, e.value.use_count()));
  });
}

void cmd_object_help(CommandContext& ctx) {
  reply_help(ctx, "OBJECT",
             {"ENCODING <key>",
              "    Return the kind of internal representation used in order to store the value",
              "    associated with a <key>.",
              "FREQ <key>",
              "    Return the access frequency index of the <key>. The returned integer is",
              "    proportional to the logarithm of the recent access frequency of the key.",
              "IDLETIME <key>",
              "    Return the idle time of the <key>, that is the approximated number of",
              "    seconds elapsed since the last access to the key.",
              "REFCOUNT <key>",
              "    Return the number of references of the value associated with the specified",
              "    <key>."});
}

}  // namespace

void register_keyspace_family(CommandTable& t) {
  CommandBuilder b(t, "generic");
  CommandBuilder srv(t, "server");  // DBSIZE, FLUSHDB, FLUSHALL: Redis's "server" group
  const uint32_t w = kWrite, r = kReadonly;
  b.add("del", -2, w | kNoValue, {1, -1, 1}, cmd_del, {"Delete a key", "1.0.0", "O(N) where N is the number of keys that will be removed. When a key to remove holds a value other than a string, the individual complexity for this key is O(M) where M is the number of elements in the list, set, sorted set or hash. Removing a single key that holds a string value is O(1)."});
  b.add("unlink", -2, w | kNoValue | kFast, {1, -1, 1}, cmd_del, {"Delete a key asynchronously in another thread. Otherwise it is just as DEL, but non blocking.", "4.0.0", "O(1) for each key removed regardless of its size. Then the command does O(N) work in a different thread in order to reclaim memory, where N is the number of allocations the deleted objects where composed of."});
  b.add("exists", -2, r | kNoValue | kFast, {1, -1, 1}, cmd_exists, {"Determine if a key exists", "1.0.0", "O(N) where N is the number of keys to check."});
  b.add("touch", -2, r | kNoValue | kFast, {1, -1, 1}, cmd_touch, {"Alters the last access time of a key(s). Returns the number of existing keys specified.", "3.2.1", "O(N) where N is the number of keys that will be touched."});
  b.add("type", 2, r | kNoValue | kFast, key_at(1), cmd_type, {"Determine the type stored at key", "1.0.0"});
  b.add("rename", 3, w, {1, 2, 1}, cmd_rename, {"Rename a key", "1.0.0"});
  b.add("renamenx", 3, w | kFast, {1, 2, 1}, cmd_renamenx, {"Rename a key, only if the new key does not exist", "1.0.0"});
  b.add("copy", -3, w | kDenyOom, {1, 2, 1}, cmd_copy, {"Copy a key", "6.2.0", "O(N) worst case for collections, where N is the number of nested items. O(1) for string values."});
  b.add("keys", 2, r, kNoKeys, cmd_keys, {"Find all keys matching the given pattern", "1.0.0", "O(N) with N being the number of keys in the database, under the assumption that the key names in the database and the given pattern have limited length."});
  b.add("scan", -2, r, kNoKeys, cmd_scan, {"Incrementally iterate the keys space", "2.8.0", "O(1) for every call. O(N) for a complete iteration, including enough command calls for the cursor to return back to 0. N is the number of elements inside the collection."});
  b.add("randomkey", 1, r, kNoKeys, cmd_randomkey, {"Return a random key from the keyspace", "1.0.0"});
  srv.add("dbsize", 1, r | kFast, kNoKeys, cmd_dbsize, {"Return the number of keys in the selected database", "1.0.0"});
  srv.add("flushdb", -1, w, kNoKeys, cmd_flush, {"Remove all keys from the current database", "1.0.0", "O(N) where N is the number of keys in the selected database"});
  srv.add("flushall", -1, w, kNoKeys, cmd_flush, {"Remove all keys from all databases", "1.0.0", "O(N) where N is the total number of keys in all databases"});
  b.add("expire", -3, w | kNoValue | kFast, key_at(1), cmd_expire, {"Set a key's time to live in seconds", "1.0.0"});
  b.add("pexpire", -3, w | kNoValue | kFast, key_at(1), cmd_pexpire, {"Set a key's time to live in milliseconds", "2.6.0"});
  b.add("expireat", -3, w | kNoValue | kFast, key_at(1), cmd_expireat, {"Set the expiration for a key as a UNIX timestamp", "1.2.0"});
  b.add("pexpireat", -3, w | kNoValue | kFast, key_at(1), cmd_pexpireat, {"Set the expiration for a key as a UNIX timestamp specified in milliseconds", "2.6.0"});
  b.add("ttl", 2, r | kNoValue | kFast, key_at(1), cmd_ttl, {"Get the time to live for a key in seconds", "1.0.0"});
  b.add("pttl", 2, r | kNoValue | kFast, key_at(1), cmd_pttl, {"Get the time to live for a key in milliseconds", "2.6.0"});
  b.add("expiretime", 2, r | kNoValue | kFast, key_at(1), cmd_expiretime, {"Get the expiration Unix timestamp for a key", "7.0.0"});
  b.add("pexpiretime", 2, r | kNoValue | kFast, key_at(1), cmd_pexpiretime, {"Get the expiration Unix timestamp for a key in milliseconds", "7.0.0"});
  b.add("persist", 2, w | kNoValue | kFast, key_at(1), cmd_persist, {"Remove the expiration from a key", "2.2.0"});
  // Keyspace notifications: db.c's names for what a rename and a copy change (the rest raise
  // "del", "expire" or "persist" by what changed).
  for (const char* name : {"rename", "renamenx"})
    t.set_events(name, {.set = "rename_to", .set_generic = true, .del = "rename_from"});
  t.set_events("copy", {.set = "copy_to", .set_generic = true});

  // Containers: dispatch picks the subcommand, so the container itself has no handler.
  const uint32_t help = kLoading | kStale;
  CommandSpec object = b.spec("object", -2, 0, kNoKeys, nullptr, {"A container for object introspection commands", "2.2.3", "Depends on subcommand."});
  object.subcommands = {
      b.spec("encoding", 3, r, key_at(2), cmd_object_encoding, {"Inspect the internal encoding of a Redis object", "2.2.3"}),
      b.spec("freq", 3, r | kNoValue, key_at(2), cmd_object_freq, {"Get the logarithmic access frequency counter of a Redis object", "4.0.0"}),
      b.spec("idletime", 3, r | kNoValue, key_at(2), cmd_object_idletime, {"Get the time since a Redis object was last accessed", "2.2.3"}),
      b.spec("refcount", 3, r | kNoValue, key_at(2), cmd_object_refcount, {"Get the number of references to the value of the key", "2.2.3"}),
      b.spec("help", 2, help, kNoKeys, cmd_object_help, {"Show helpful text about the different subcommands", "6.2.0"})};
  // OBJECT's reads raise no keymiss (object.c: LOOKUP_NONOTIFY).
  for (CommandSpec& sub : object.subcommands) sub.events.keymiss = false;
  b.add(std::move(object));
}

}  // namespace server
