// server/cmd_string.cc - string commands: GET, SET and friends, counters, ranges.
// Semantics and error texts follow Redis 7.0's t_string.c.
#include <cmath>
#include <cstring>

#include "server/arg_parser.h"
#include "server/config.h"
#include "server/errors.h"
#include "server/commands/family.h"
#include "server/server.h"
#include "tiering/key_lock.h"

namespace server {
namespace {

using tiering::KeyLock;
using tiering::ValueRef;

int64_t max_string(CommandContext& ctx) { return ctx.server.config().num(Key::kProtoMaxBulkLen); }

// ---- SET family ----

struct SetOptions {
  bool nx = false, xx = false, get = false;
  ExpireOption expire;
};

// Sets key to value under SetOptions; replies as SET does (OK / nil / old value with GET).
void set_generic(CommandContext& ctx, std::string_view key, ValueRef value,
                 const SetOptions& o) {
  ValueRef old;  // declared first: released after the lock
  bool done = false;
  {
    KeyLock lock(ctx.ks, key, ctx.now_ms);
    const KeyLock::Item* item = o.get ? lock.lookup(key) : lock.find(key);
    if (item && o.get) old = item->second.value;
    if ((o.nx && item) || (o.xx && !item)) {
      done = false;
    } else {
      int64_t expire = 0;
      if (o.expire.kind == ExpireOption::kAt) {
        expire = o.expire.at_ms;
        KeyspaceEvents::also_expire();  // "set", then "expire" (setGenericCommand)
      }
      else if (o.expire.kind == ExpireOption::kKeep && item) expire = item->second.expire_ms;
      lock.set(key, std::move(value), expire);
      done = true;
    }
  }
  if (o.get) {
    if (old) reply_value(ctx.out, old);
    else ctx.out.null();
  } else if (done) {
    ctx.out.ok();
  } else {
    ctx.out.null();
  }
}

void cmd_set(CommandContext& ctx) {
  SetOptions o;
  ArgParser p(ctx.args, 3);
  while (!p.done() && p.ok()) {
    if (parse_expire_option(p, true, false, &o.expire)) continue;
    if (p.eat("NX")) {
      if (o.xx) p.fail(err::kSyntax);
      o.nx = true;
    } else if (p.eat("XX")) {
      if (o.nx) p.fail(err::kSyntax);
      o.xx = true;
    } else if (p.eat("GET")) {
      o.get = true;
    } else {
      p.fail(err::kSyntax);
    }
  }
  if (!p.ok()) return ctx.out.error(p.error());
  if (auto error = resolve_expire(&o.expire, "set", ctx.now_ms)) return ctx.out.error(*error);
  set_generic(ctx, ctx.args[1], value_from_arg(ctx, 2), o);
}

void cmd_setnx(CommandContext& ctx) {
  ValueRef value = value_from_arg(ctx, 2);
  KeyLock lock(ctx.ks, ctx.args[1], ctx.now_ms);
  if (lock.find(ctx.args[1])) return ctx.out.integer(0);
  lock.set(ctx.args[1], std::move(value), 0);
  ctx.out.integer(1);
}

void setex_generic(CommandContext& ctx, bool seconds) {
  auto ttl = parse_int(ctx.args[2]);
  if (!ttl) return ctx.out.error(err::kNotInteger);
  auto at = deadline_ms(*ttl, seconds, false, ctx.now_ms);
  if (!at) return ctx.out.error(err::invalid_expire(seconds ? "setex" : "psetex"));
  SetOptions o;
  o.expire = {ExpireOption::kAt, *at};
  set_generic(ctx, ctx.args[1], value_from_arg(ctx, 3), o);
}
void cmd_setex(CommandContext& ctx) { setex_generic(ctx, true); }
void cmd_psetex(CommandContext& ctx) { setex_generic(ctx, false); }

void cmd_getset(CommandContext& ctx) {
  SetOptions o;
  o.get = true;
  set_generic(ctx, ctx.args[1], value_from_arg(ctx, 2), o);
}

// ---- reads ----

void cmd_get(CommandContext& ctx) {
  KeyLock lock(ctx.ks, ctx.args[1], ctx.now_ms);
  const KeyLock::Item* item = lock.lookup(ctx.args[1]);
  if (item == nullptr) return ctx.out.null();
  reply_value(ctx.out, item->second.value);
}

void cmd_getdel(CommandContext& ctx) {
  ValueRef old;
  {
    KeyLock lock(ctx.ks, ctx.args[1], ctx.now_ms);
    const KeyLock::Item* item = lock.lookup(ctx.args[1]);
    if (item == nullptr) return ctx.out.null();
    old = lock.remove(item);
  }
  reply_value(ctx.out, old);
}

// Redis 7.0's order (t_string.c getexCommand): the options' syntax, then the key (missing:
// nil, whatever the time says), then the time.
void cmd_getex(CommandContext& ctx) {
  ExpireOption e;
  ArgParser p(ctx.args, 2);
  while (!p.done() && p.ok())
    if (!parse_expire_option(p, false, true, &e)) p.fail(err::kSyntax);
  if (!p.ok()) return ctx.out.error(p.error());
  KeyLock lock(ctx.ks, ctx.args[1], ctx.now_ms);
  const KeyLock::Item* item = lock.lookup(ctx.args[1]);
  if (item == nullptr) return ctx.out.null();
  if (auto error = resolve_expire(&e, "getex", ctx.now_ms)) return ctx.out.error(*error);
  reply_value(ctx.out, item->second.value);
  if (e.kind == ExpireOption::kAt && e.at_ms <= ctx.now_ms) lock.remove(item);
  else if (e.kind == ExpireOption::kAt && e.at_ms != item->second.expire_ms)
    lock.set_expire(item, e.at_ms);
  else if (e.kind == ExpireOption::kAt)  // the same deadline: no change, Redis's event still
    ctx.server.keyspace_events().raise_unchanged("expire", kNotifyGeneric, ctx.args[1]);
  else if (e.kind == ExpireOption::kPersist) lock.set_expire(item, 0);
}

void cmd_mget(CommandContext& ctx) {
  ctx.out.array(ctx.args.size() - 1);
  for (size_t i = 1; i < ctx.args.size(); ++i) {
    KeyLock lock(ctx.ks, ctx.args[i], ctx.now_ms);
    const KeyLock::Item* item = lock.lookup(ctx.args[i]);
    if (item) reply_value(ctx.out, item->second.value);
    else ctx.out.null();
  }
}

void mset_generic(CommandContext& ctx, bool nx) {
  if (ctx.args.size() % 2 == 0) return ctx.out.error(err::wrong_arity(nx ? "msetnx" : "mset"));
  std::vector<std::string_view> keys;
  std::vector<ValueRef> values;
  for (size_t i = 1; i < ctx.args.size(); i += 2) {
    keys.push_back(ctx.args[i]);
    values.push_back(value_from_arg(ctx, i + 1));
  }
  KeyLock lock(ctx.ks, keys, ctx.now_ms);
  if (nx) {
    for (auto k : keys)
      if (lock.find(k)) return ctx.out.integer(0);
  }
  for (size_t i = 0; i < keys.size(); ++i) lock.set(keys[i], std::move(values[i]), 0);
  if (nx) ctx.out.integer(1);
  else ctx.out.ok();
}
void cmd_mset(CommandContext& ctx) { mset_generic(ctx, false); }
void cmd_msetnx(CommandContext& ctx) { mset_generic(ctx, true); }

void cmd_strlen(CommandContext& ctx) {
  KeyLock lock(ctx.ks, ctx.args[1], ctx.now_ms);
  const KeyLock::Item* item = lock.lookup(ctx.args[1]);
  ctx.out.integer(item ? static_cast<int64_t>(item->second.value->size()) : 0);
}

void cmd_getrange(CommandContext& ctx) {
  auto start = parse_int(ctx.args[2]), end = parse_int(ctx.args[3]);
  if (!start || !end) return ctx.out.error(err::kNotInteger);
  KeyLock lock(ctx.ks, ctx.args[1], ctx.now_ms);
  const KeyLock::Item* item = lock.lookup(ctx.args[1]);
  std::string_view v = item ? item->second.value->view() : std::string_view();
  int64_t s = *start, e = *end, len = static_cast<int64_t>(v.size());
  if (s < 0 && e < 0 && s > e) return ctx.out.bulk("");
  if (s < 0) s = len + s;
  if (e < 0) e = len + e;
  if (s < 0) s = 0;
  if (e < 0) e = 0;
  if (e >= len) e = len - 1;
  if (len == 0 || s > e) return ctx.out.bulk("");
  ctx.out.bulk(v.substr(s, e - s + 1));
}

// ---- in-place growth: APPEND, SETRANGE ----

void cmd_append(CommandContext& ctx) {
  std::string_view key = ctx.args[1], extra = ctx.args[2];
  KeyLock lock(ctx.ks, key, ctx.now_ms);
  const KeyLock::Item* item = lock.find(key);
  if (item == nullptr) {
    lock.set(key, value_from_arg(ctx, 2), 0);  // a large bulk's block as is: no copy
    return ctx.out.integer(static_cast<int64_t>(extra.size()));
  }
  const size_t old = item->second.value->size();
  // t_string.c checkStringLength(old + size), written so that it cannot overflow.
  if (static_cast<int64_t>(extra.size()) > max_string(ctx) - static_cast<int64_t>(old))
    return ctx.out.error(err::kStringTooLong);
  const size_t total = old + extra.size();
  Writable w = Writable::of(ctx, lock, item, total);
  std::memcpy(w.bytes->data() + old, extra.data(), extra.size());
  w.bytes->resize(total);
  w.publish(lock, item);
  ctx.out.integer(static_cast<int64_t>(total));
}

void cmd_setrange(CommandContext& ctx) {
  std::string_view key = ctx.args[1], part = ctx.args[3];
  auto offset = parse_int(ctx.args[2]);
  if (!offset) return ctx.out.error(err::kNotInteger);
  if (*offset < 0) return ctx.out.error(err::kOffsetRange);
  KeyLock lock(ctx.ks, key, ctx.now_ms);
  const KeyLock::Item* item = lock.find(key);
  const size_t old = item ? item->second.value->size() : 0;
  if (part.empty()) return ctx.out.integer(static_cast<int64_t>(old));
  // t_string.c checkStringLength(offset + size), written so that it cannot overflow.
  if (*offset > max_string(ctx) - static_cast<int64_t>(part.size()))
    return ctx.out.error(err::kStringTooLong);
  const size_t off = static_cast<size_t>(*offset), end = off + part.size();
  const size_t total = std::max(old, end);
  if (item == nullptr) {
    // Allocated before the key exists: on a full region nothing is created.
    ValueRef value = new_value(ctx, total);
    std::memset(value->data(), 0, off);
    std::memcpy(value->data() + off, part.data(), part.size());
    value->set_modified();
    lock.set(key, std::move(value), 0);
    return ctx.out.integer(static_cast<int64_t>(total));
  }
  Writable w = Writable::of(ctx, lock, item, total);
  if (off > old) std::memset(w.bytes->data() + old, 0, off - old);
  std::memcpy(w.bytes->data() + off, part.data(), part.size());
  w.bytes->resize(total);
  w.publish(lock, item);
  ctx.out.integer(static_cast<int64_t>(total));
}

// ---- counters ----

// Sets `key` to `text` (its new number), keeping its TTL when it exists (INCR, INCRBYFLOAT).
// The value is allocated under the lock (NeedRoom before any change: see Writable).
void set_number(CommandContext& ctx, KeyLock& lock, std::string_view key,
                const KeyLock::Item* item, std::string_view text) {
  ValueRef value = make_value(ctx, text);
  if (item) lock.set_value(item, std::move(value));
  else lock.set(key, std::move(value), 0);
}

void incr_generic(CommandContext& ctx, int64_t delta) {
  std::string_view key = ctx.args[1];
  KeyLock lock(ctx.ks, key, ctx.now_ms);
  const KeyLock::Item* item = lock.find(key);
  int64_t cur = 0;
  if (item) {
    auto v = parse_int(item->second.value->view());
    if (!v) return ctx.out.error(err::kNotInteger);
    cur = *v;
  }
  if ((delta < 0 && cur < 0 && delta < INT64_MIN - cur) ||
      (delta > 0 && cur > 0 && delta > INT64_MAX - cur))
    return ctx.out.error(err::kOverflow);
  const int64_t next = cur + delta;
  set_number(ctx, lock, key, item, std::to_string(next));
  ctx.out.integer(next);
}

void cmd_incr(CommandContext& ctx) { incr_generic(ctx, 1); }
void cmd_decr(CommandContext& ctx) { incr_generic(ctx, -1); }
void cmd_incrby(CommandContext& ctx) {
  auto d = parse_int(ctx.args[2]);
  if (!d) return ctx.out.error(err::kNotInteger);
  incr_generic(ctx, *d);
}
void cmd_decrby(CommandContext& ctx) {
  auto d = parse_int(ctx.args[2]);
  if (!d) return ctx.out.error(err::kNotInteger);
  if (*d == INT64_MIN) return ctx.out.error(err::kDecrementOverflow);
  incr_generic(ctx, -*d);
}

void cmd_incrbyfloat(CommandContext& ctx) {
  std::string_view key = ctx.args[1];
  auto incr = parse_long_double(ctx.args[2]);
  if (!incr) return ctx.out.error(err::kNotFloat);
  KeyLock lock(ctx.ks, key, ctx.now_ms);
  const KeyLock::Item* item = lock.find(key);
  long double cur = 0;
  if (item) {
    auto v = parse_long_double(item->second.value->view());
    if (!v) return ctx.out.error(err::kNotFloat);
    cur = *v;
  }
  long double next = cur + *incr;
  if (std::isnan(next) || std::isinf(next)) return ctx.out.error(err::kNanOrInf);
  const std::string text = format_long_double(next);
  set_number(ctx, lock, key, item, text);  // the result, not the increment, is what changed
  ctx.out.bulk(text);
}

}  // namespace

// SET reads the old value only with GET.
static bool set_reads_values(std::span<const std::string_view> args) {
  for (size_t i = 3; i < args.size(); ++i)
    if (iequals(args[i], "get")) return true;
  return false;
}

void register_string_family(CommandTable& t) {
  CommandBuilder b(t, "string");
  const uint32_t w = kWrite | kDenyOom, r = kReadonly, nv = kNoValue;
  b.add("get", 2, r | kFast, key_at(1), cmd_get, {"Get the value of a key", "1.0.0"});
  b.add("set", -3, w, key_at(1), cmd_set, {"Set the string value of a key", "1.0.0"});
  t.set_reads_values("set", set_reads_values);
  b.add("setnx", 3, w | nv | kFast, key_at(1), cmd_setnx, {"Set the value of a key, only if the key does not exist", "1.0.0"});
  b.add("setex", 4, w | nv, key_at(1), cmd_setex, {"Set the value and expiration of a key", "2.0.0"});
  b.add("psetex", 4, w | nv, key_at(1), cmd_psetex, {"Set the value and expiration in milliseconds of a key", "2.6.0"});
  b.add("getset", 3, w | kFast, key_at(1), cmd_getset, {"Set the string value of a key and return its old value", "1.0.0"});
  b.add("getdel", 2, kWrite | kFast, key_at(1), cmd_getdel, {"Get the value of a key and delete the key", "6.2.0"});
  b.add("getex", -2, kWrite | kFast, key_at(1), cmd_getex, {"Get the value of a key and optionally set its expiration", "6.2.0"});
  b.add("mget", -2, r | kFast, {1, -1, 1}, cmd_mget, {"Get the values of all the given keys", "1.0.0", "O(N) where N is the number of keys to retrieve."});
  b.add("mset", -3, w | nv, {1, -1, 2}, cmd_mset, {"Set multiple keys to multiple values", "1.0.1", "O(N) where N is the number of keys to set."});
  b.add("msetnx", -3, w | nv, {1, -1, 2}, cmd_msetnx, {"Set multiple keys to multiple values, only if none of the keys exist", "1.0.1", "O(N) where N is the number of keys to set."});
  b.add("append", 3, w | kFast, key_at(1), cmd_append, {"Append a value to a key", "2.0.0"});
  b.add("strlen", 2, r | kFast, key_at(1), cmd_strlen, {"Get the length of the value stored in a key", "2.2.0"});
  b.add("getrange", 4, r, key_at(1), cmd_getrange, {"Get a substring of the string stored at a key", "2.4.0", "O(N) where N is the length of the returned string."});
  b.add("substr", 4, r, key_at(1), cmd_getrange, {"Get a substring of the string stored at a key", "1.0.0", "O(N) where N is the length of the returned string."});
  b.add("setrange", 4, w, key_at(1), cmd_setrange, {"Overwrite part of a string at key starting at the specified offset", "2.2.0"});
  b.add("incr", 2, w | kFast, key_at(1), cmd_incr, {"Increment the integer value of a key by one", "1.0.0"});
  b.add("decr", 2, w | kFast, key_at(1), cmd_decr, {"Decrement the integer value of a key by one", "1.0.0"});
  b.add("incrby", 3, w | kFast, key_at(1), cmd_incrby, {"Increment the integer value of a key by the given amount", "1.0.0"});
  b.add("decrby", 3, w | kFast, key_at(1), cmd_decrby, {"Decrement the integer value of a key by the given number", "1.0.0"});
  b.add("incrbyfloat", 3, w | kFast, key_at(1), cmd_incrbyfloat, {"Increment the float value of a key by the given amount", "2.6.0"});
  // Keyspace notifications: the events t_string.c raises (the rest raise "set" / "del").
  t.set_events("append", {.set = "append"});
  t.set_events("setrange", {.set = "setrange"});
  for (const char* name : {"incr", "decr", "incrby", "decrby"}) t.set_events(name, {.set = "incrby"});
  t.set_events("incrbyfloat", {.set = "incrbyfloat"});
}

}  // namespace server
