// server/commands/cmd_bits.cc - bit commands: SETBIT, GETBIT, BITCOUNT, BITPOS, BITOP,
// BITFIELD, BITFIELD_RO. Semantics and error texts follow Redis 7.0's bitops.c; a value grows
// through the write path as SETRANGE's does (Writable), never past proto-max-bulk-len.
#include <algorithm>
#include <cstring>
#include <optional>

#include "server/arg_parser.h"
#include "server/commands/bitfield.h"
#include "server/commands/family.h"
#include "server/config.h"
#include "server/errors.h"
#include "server/server.h"
#include "tiering/key_lock.h"

namespace server {
namespace {

using tiering::KeyLock;
using tiering::ValueRef;

std::string_view bytes_of(const KeyLock::Item* item) {
  return item ? item->second.value->view() : std::string_view();
}

void cmd_setbit(CommandContext& ctx) {
  auto offset = bit_offset(ctx, ctx.args[2], false, 0);
  if (!offset) return ctx.out.error(err::kBitOffset);
  auto on = parse_int(ctx.args[3]);
  if (!on || (*on & ~1)) return ctx.out.error(err::kBitValue);
  const std::string_view key = ctx.args[1];
  KeyLock lock(ctx.ks, key, ctx.now_ms);
  BitTarget t = BitTarget::grow(ctx, lock, key, *offset >> 3);
  const uint8_t mask = static_cast<uint8_t>(1u << (7 - (*offset & 7)));
  uint8_t& byte = reinterpret_cast<uint8_t&>(t.data()[*offset >> 3]);
  const bool was = byte & mask;
  if (t.created() || was != (*on == 1)) {
    byte = static_cast<uint8_t>(*on ? (byte | mask) : (byte & ~mask));
    t.publish(lock, key);
  }
  ctx.out.integer(was ? 1 : 0);
}

void cmd_getbit(CommandContext& ctx) {
  auto offset = bit_offset(ctx, ctx.args[2], false, 0);
  if (!offset) return ctx.out.error(err::kBitOffset);
  KeyLock lock(ctx.ks, ctx.args[1], ctx.now_ms);
  const std::string_view v = bytes_of(lock.lookup(ctx.args[1]));
  const uint64_t byte = *offset >> 3;
  if (byte >= v.size()) return ctx.out.integer(0);
  ctx.out.integer((static_cast<uint8_t>(v[byte]) >> (7 - (*offset & 7))) & 1);
}

// A BITCOUNT/BITPOS range as Redis normalizes it, in bits: [first, last]; empty when
// first > last. `len` is the string's length in bytes.
struct BitRange {
  int64_t first = 0, last = -1;
  bool empty() const { return first > last; }
};
BitRange normalize(int64_t start, int64_t end, bool bit_units, int64_t len) {
  const int64_t total = bit_units ? len * 8 : len;
  if (start < 0) start += total;
  if (end < 0) end += total;
  if (start < 0) start = 0;
  if (end < 0) end = 0;
  if (end >= total) end = total - 1;
  if (start > end) return {0, -1};
  if (bit_units) return {start, end};
  return {start * 8, end * 8 + 7};
}

// "BYTE" / "BIT"; null: a syntax error.
std::optional<bool> parse_unit(std::string_view arg) {
  if (iequals(arg, "bit")) return true;
  if (iequals(arg, "byte")) return false;
  return std::nullopt;
}

void cmd_bitcount(CommandContext& ctx) {
  const size_t argc = ctx.args.size();
  KeyLock lock(ctx.ks, ctx.args[1], ctx.now_ms);
  const KeyLock::Item* item = lock.lookup(ctx.args[1]);
  // Redis 7.0 looks the key up first: a missing key answers 0 whatever follows.
  if (item == nullptr) return ctx.out.integer(0);
  const std::string_view v = bytes_of(item);
  BitRange range{0, static_cast<int64_t>(v.size()) * 8 - 1};
  if (argc == 4 || argc == 5) {
    auto start = parse_int(ctx.args[2]), end = parse_int(ctx.args[3]);
    if (!start || !end) return ctx.out.error(err::kNotInteger);
    bool bits = false;
    if (argc == 5) {
      auto unit = parse_unit(ctx.args[4]);
      if (!unit) return ctx.out.error(err::kSyntax);
      bits = *unit;
    }
    range = normalize(*start, *end, bits, static_cast<int64_t>(v.size()));
  } else if (argc != 2) {
    return ctx.out.error(err::kSyntax);
  }
  ctx.out.integer(range.empty() ? 0 : count_bits(v, range.first, range.last));
}

void cmd_bitpos(CommandContext& ctx) {
  const size_t argc = ctx.args.size();
  auto bit = parse_int(ctx.args[2]);
  if (!bit) return ctx.out.error(err::kNotInteger);
  if (*bit != 0 && *bit != 1) return ctx.out.error(err::kBitArgument);
  KeyLock lock(ctx.ks, ctx.args[1], ctx.now_ms);
  const KeyLock::Item* item = lock.lookup(ctx.args[1]);
  // A missing key is an endless run of zero bits.
  if (item == nullptr) return ctx.out.integer(*bit ? -1 : 0);
  const std::string_view v = bytes_of(item);
  const int64_t len = static_cast<int64_t>(v.size());
  BitRange range{0, len * 8 - 1};
  bool end_given = false;
  if (argc >= 4 && argc <= 6) {
    auto start = parse_int(ctx.args[3]);
    if (!start) return ctx.out.error(err::kNotInteger);
    bool bits = false;
    if (argc == 6) {
      auto unit = parse_unit(ctx.args[5]);
      if (!unit) return ctx.out.error(err::kSyntax);
      bits = *unit;
    }
    int64_t end = (bits ? len * 8 : len) - 1;
    if (argc >= 5) {
      auto e = parse_int(ctx.args[4]);
      if (!e) return ctx.out.error(err::kNotInteger);
      end = *e;
      end_given = true;
    }
    range = normalize(*start, end, bits, len);
  } else if (argc != 3) {
    return ctx.out.error(err::kSyntax);
  }
  if (range.empty()) return ctx.out.integer(-1);
  const int64_t pos = find_bit(v, range.first, range.last, *bit == 1);
  if (pos >= 0) return ctx.out.integer(pos);
  // No such bit in the range: looking for a 0 past the string's end without an explicit end,
  // the zero padding after it holds one (Redis answers the first bit after the range).
  if (*bit == 0 && !end_given) return ctx.out.integer(range.last + 1);
  ctx.out.integer(-1);
}

void cmd_bitop(CommandContext& ctx) {
  const std::string_view op = ctx.args[1];
  enum { kAnd, kOr, kXor, kNot } kind;
  if (iequals(op, "and")) kind = kAnd;
  else if (iequals(op, "or")) kind = kOr;
  else if (iequals(op, "xor")) kind = kXor;
  else if (iequals(op, "not")) kind = kNot;
  else return ctx.out.error(err::kSyntax);
  if (kind == kNot && ctx.args.size() != 4) return ctx.out.error(err::kBitopNot);
  const std::span<const std::string_view> keys = ctx.args.subspan(2);
  KeyLock lock(ctx.ks, keys, ctx.now_ms);
  std::vector<std::string_view> src;
  size_t max_len = 0;
  for (size_t i = 1; i < keys.size(); ++i) {
    src.push_back(bytes_of(lock.lookup(keys[i])));
    max_len = std::max(max_len, src.back().size());
  }
  const std::string_view dst = keys[0];
  if (max_len == 0) {
    if (const KeyLock::Item* old = lock.find(dst)) lock.remove(old);
    return ctx.out.integer(0);
  }
  ValueRef out = new_value(ctx, max_len);  // before any change (NeedRoom)
  uint8_t* o = reinterpret_cast<uint8_t*>(out->data());
  for (size_t j = 0; j < max_len; ++j) {
    auto at = [&](size_t k) -> uint8_t {
      return j < src[k].size() ? static_cast<uint8_t>(src[k][j]) : 0;
    };
    uint8_t acc = at(0);
    if (kind == kNot) acc = static_cast<uint8_t>(~acc);
    for (size_t k = 1; k < src.size(); ++k) {
      if (kind == kAnd) acc &= at(k);
      else if (kind == kOr) acc |= at(k);
      else acc ^= at(k);
    }
    o[j] = acc;
  }
  out->set_modified();
  lock.set(dst, std::move(out), 0);
  ctx.out.integer(static_cast<int64_t>(max_len));
}

void bitfield_generic(CommandContext& ctx, bool read_only) {
  std::vector<BitfieldOp> ops;
  std::string error;
  if (!parse_bitfield(ctx, ops, error)) return ctx.out.error(error);
  const bool writes = std::any_of(ops.begin(), ops.end(), [](const BitfieldOp& op) {
    return op.kind != BitfieldOp::kGet;
  });
  if (writes && read_only) return ctx.out.error(err::kBitfieldRo);
  const std::string_view key = ctx.args[1];
  KeyLock lock(ctx.ks, key, ctx.now_ms);
  if (!writes) {
    const std::string_view v = bytes_of(lock.lookup(key));
    ctx.out.array(ops.size());
    for (const BitfieldOp& op : ops) ctx.out.integer(bitfield_get(v, op));
    return;
  }
  uint64_t highest = 0;
  for (const BitfieldOp& op : ops)
    if (op.kind != BitfieldOp::kGet) highest = std::max(highest, op.offset + op.bits - 1);
  BitTarget t = BitTarget::grow(ctx, lock, key, highest >> 3);
  ctx.out.array(ops.size());
  std::string_view now(t.data(), t.size());
  for (const BitfieldOp& op : ops) {
    if (op.kind == BitfieldOp::kGet) {
      ctx.out.integer(bitfield_get(now, op));
      continue;
    }
    auto reply = bitfield_write(reinterpret_cast<uint8_t*>(t.data()), op);
    if (reply) ctx.out.integer(*reply);
    else ctx.out.null();
  }
  t.publish(lock, key);  // Redis signals the key whenever a write op ran, even on FAIL
}

void cmd_bitfield(CommandContext& ctx) { bitfield_generic(ctx, false); }
void cmd_bitfield_ro(CommandContext& ctx) { bitfield_generic(ctx, true); }

}  // namespace

void register_bit_family(CommandTable& t) {
  CommandBuilder b(t, "bitmap");
  const uint32_t w = kWrite | kDenyOom, r = kReadonly;
  b.add("setbit", 4, w, key_at(1), cmd_setbit, {"Sets or clears the bit at offset in the string value stored at key", "2.2.0"});
  b.add("getbit", 3, r | kFast, key_at(1), cmd_getbit, {"Returns the bit value at offset in the string value stored at key", "2.2.0"});
  b.add("bitcount", -2, r, key_at(1), cmd_bitcount, {"Count set bits in a string", "2.6.0", "O(N)"});
  b.add("bitpos", -3, r, key_at(1), cmd_bitpos, {"Find first bit set or clear in a string", "2.8.7", "O(N)"});
  b.add("bitop", -4, w, {2, -1, 1}, cmd_bitop, {"Perform bitwise operations between strings", "2.6.0", "O(N)"});
  b.add("bitfield", -2, w, key_at(1), cmd_bitfield, {"Perform arbitrary bitfield integer operations on strings", "3.2.0", "O(1) for each subcommand specified"});
  // Keyspace notifications: bitops.c raises "setbit" for both (BITOP: "set" or "del").
  t.set_events("setbit", {.set = "setbit"});
  t.set_events("bitfield", {.set = "setbit"});
  b.add("bitfield_ro", -2, r | kFast, key_at(1), cmd_bitfield_ro, {"Perform arbitrary bitfield integer operations on strings. Read-only variant of BITFIELD", "6.0.0", "O(1) for each subcommand specified"});
}

}  // namespace server
