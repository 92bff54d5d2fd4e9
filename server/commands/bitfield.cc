// server/commands/bitfield.cc - bit arithmetic of the bit commands (bitfield.h), after Redis
// 7.0's bitops.c.
#include "server/commands/bitfield.h"

#include <bit>
#include <cstring>

#include "server/arg_parser.h"
#include "server/config.h"
#include "server/errors.h"
#include "server/server.h"

namespace server {

std::optional<uint64_t> bit_offset(CommandContext& ctx, std::string_view arg, bool hash,
                                   int bits) {
  const bool use_hash = hash && !arg.empty() && arg[0] == '#' && bits > 0;
  auto n = parse_int(use_hash ? arg.substr(1) : arg);
  if (!n) return std::nullopt;
  int64_t off = *n;
  if (use_hash && __builtin_mul_overflow(off, static_cast<int64_t>(bits), &off))
    return std::nullopt;
  if (off < 0 || (off >> 3) >= ctx.server.config().num(Key::kProtoMaxBulkLen)) return std::nullopt;
  return static_cast<uint64_t>(off);
}

namespace {
uint8_t byte_at(std::string_view v, int64_t i) { return static_cast<uint8_t>(v[i]); }
bool bit_at(std::string_view v, int64_t pos) {
  return (byte_at(v, pos >> 3) >> (7 - (pos & 7))) & 1;
}
}  // namespace

int64_t count_bits(std::string_view v, int64_t first, int64_t last) {
  int64_t n = 0, pos = first;
  for (; pos <= last && (pos & 7) != 0; ++pos) n += bit_at(v, pos);
  for (; pos + 7 <= last; pos += 8) n += std::popcount(byte_at(v, pos >> 3));
  for (; pos <= last; ++pos) n += bit_at(v, pos);
  return n;
}

int64_t find_bit(std::string_view v, int64_t first, int64_t last, bool bit) {
  const uint8_t skip = bit ? 0x00 : 0xff;  // a byte with no bit sought
  int64_t pos = first;
  for (; pos <= last && (pos & 7) != 0; ++pos)
    if (bit_at(v, pos) == bit) return pos;
  for (; pos + 7 <= last && byte_at(v, pos >> 3) == skip; pos += 8) {
  }
  for (; pos <= last; ++pos)
    if (bit_at(v, pos) == bit) return pos;
  return -1;
}

BitTarget BitTarget::grow(CommandContext& ctx, tiering::KeyLock& lock, std::string_view key,
                          uint64_t byte) {
  BitTarget t;
  const size_t need = static_cast<size_t>(byte) + 1;
  t.item_ = lock.find(key);
  if (t.item_ == nullptr) {
    t.fresh_ = new_value(ctx, need);
    std::memset(t.fresh_->data(), 0, need);
    t.created_ = true;
    return t;
  }
  const size_t old = t.item_->second.value->size();
  const size_t size = std::max(old, need);
  t.w_ = Writable::of(ctx, lock, t.item_, size);
  if (size > old) {
    std::memset(t.w_.bytes->data() + old, 0, size - old);
    t.w_.bytes->resize(size);
    t.created_ = true;
  }
  return t;
}

void BitTarget::publish(tiering::KeyLock& lock, std::string_view key) {
  if (fresh_) {
    fresh_->set_modified();
    lock.set(key, std::move(fresh_), 0);
  } else {
    w_.publish(lock, item_);
  }
}

// ---- BITFIELD ----

namespace {

constexpr std::string_view kBadType =
    "ERR Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but "
    "i64 is.";

bool parse_type(std::string_view arg, BitfieldOp& op) {
  if (arg.empty() || (arg[0] != 'i' && arg[0] != 'u')) return false;
  op.sign = arg[0] == 'i';
  auto bits = parse_int(arg.substr(1));
  if (!bits || *bits < 1 || (op.sign && *bits > 64) || (!op.sign && *bits > 63)) return false;
  op.bits = static_cast<int>(*bits);
  return true;
}

uint64_t get_unsigned(const uint8_t* p, uint64_t offset, int bits) {
  uint64_t value = 0;
  for (int j = 0; j < bits; ++j, ++offset)
    value = (value << 1) | ((p[offset >> 3] >> (7 - (offset & 7))) & 1);
  return value;
}

int64_t get_signed(const uint8_t* p, uint64_t offset, int bits) {
  uint64_t value = get_unsigned(p, offset, bits);
  if (bits < 64 && (value & (uint64_t{1} << (bits - 1)))) value |= ~uint64_t{0} << bits;
  return static_cast<int64_t>(value);
}

void set_bits(uint8_t* p, uint64_t offset, int bits, uint64_t value) {
  for (int j = 0; j < bits; ++j, ++offset) {
    const uint64_t bitval = (value >> (bits - 1 - j)) & 1;
    const uint8_t mask = static_cast<uint8_t>(1u << (7 - (offset & 7)));
    p[offset >> 3] = static_cast<uint8_t>(bitval ? (p[offset >> 3] | mask) : (p[offset >> 3] & ~mask));
  }
}

// checkSignedBitfieldOverflow: 0 when value + incr fits `bits`, else 1/-1 with *limit the
// wrapped or saturated result. Arithmetic wraps as Redis's does in practice (two's complement).
int signed_overflow(int64_t value, int64_t incr, int bits, BitfieldOp::Overflow ow,
                    int64_t* limit) {
  const int64_t max = bits == 64 ? INT64_MAX : (int64_t{1} << (bits - 1)) - 1;
  const int64_t min = -max - 1;
  const int64_t maxincr = static_cast<int64_t>(static_cast<uint64_t>(max) - static_cast<uint64_t>(value));
  const int64_t minincr = static_cast<int64_t>(static_cast<uint64_t>(min) - static_cast<uint64_t>(value));
  int result = 0;
  if (value > max || (bits != 64 && incr > maxincr) || (value >= 0 && incr > 0 && incr > maxincr)) {
    result = 1;
    if (ow == BitfieldOp::kSat) *limit = max;
  } else if (value < min || (bits != 64 && incr < minincr) ||
             (value < 0 && incr < 0 && incr < minincr)) {
    result = -1;
    if (ow == BitfieldOp::kSat) *limit = min;
  }
  if (result != 0 && ow == BitfieldOp::kWrap) {
    uint64_t c = static_cast<uint64_t>(value) + static_cast<uint64_t>(incr);
    if (bits < 64) {
      const uint64_t mask = ~uint64_t{0} << bits;
      if (c & (uint64_t{1} << (bits - 1))) c |= mask;
      else c &= ~mask;
    }
    *limit = static_cast<int64_t>(c);
  }
  return result;
}

// checkUnsignedBitfieldOverflow (bits <= 63).
int unsigned_overflow(uint64_t value, int64_t incr, int bits, BitfieldOp::Overflow ow,
                      uint64_t* limit) {
  const uint64_t max = (uint64_t{1} << bits) - 1;
  const int64_t maxincr = static_cast<int64_t>(max - value);
  const int64_t minincr = static_cast<int64_t>(uint64_t{0} - value);
  int result = 0;
  if (value > max || (incr > 0 && incr > maxincr)) {
    result = 1;
    if (ow == BitfieldOp::kSat) *limit = max;
  } else if (incr < 0 && incr < minincr) {
    result = -1;
    if (ow == BitfieldOp::kSat) *limit = 0;
  }
  if (result != 0 && ow == BitfieldOp::kWrap)
    *limit = (value + static_cast<uint64_t>(incr)) & ~(~uint64_t{0} << bits);
  return result;
}

}  // namespace

bool parse_bitfield(CommandContext& ctx, std::vector<BitfieldOp>& ops, std::string& error) {
  const auto& a = ctx.args;
  BitfieldOp::Overflow ow = BitfieldOp::kWrap;
  for (size_t j = 2; j < a.size(); ++j) {
    const size_t rem = a.size() - j - 1;
    BitfieldOp op;
    if (iequals(a[j], "get") && rem >= 2) {
      op.kind = BitfieldOp::kGet;
    } else if (iequals(a[j], "set") && rem >= 3) {
      op.kind = BitfieldOp::kSet;
    } else if (iequals(a[j], "incrby") && rem >= 3) {
      op.kind = BitfieldOp::kIncrBy;
    } else if (iequals(a[j], "overflow") && rem >= 1) {
      const std::string_view t = a[++j];
      if (iequals(t, "wrap")) ow = BitfieldOp::kWrap;
      else if (iequals(t, "sat")) ow = BitfieldOp::kSat;
      else if (iequals(t, "fail")) ow = BitfieldOp::kFail;
      else return error = "ERR Invalid OVERFLOW type specified", false;
      continue;
    } else {
      return error = err::kSyntax, false;
    }
    if (!parse_type(a[j + 1], op)) return error = kBadType, false;
    auto off = bit_offset(ctx, a[j + 2], true, op.bits);
    if (!off) return error = err::kBitOffset, false;
    op.offset = *off;
    if (op.kind != BitfieldOp::kGet) {
      auto v = parse_int(a[j + 3]);
      if (!v) return error = err::kNotInteger, false;
      op.value = *v;
    }
    op.overflow = ow;
    ops.push_back(op);
    j += op.kind == BitfieldOp::kGet ? 2 : 3;
  }
  return true;
}

int64_t bitfield_get(std::string_view v, const BitfieldOp& op) {
  // As Redis: up to 9 bytes copied into a zero-padded buffer.
  uint8_t buf[9] = {};
  const uint64_t byte = op.offset >> 3;
  for (uint64_t i = 0; i < 9 && byte + i < v.size(); ++i) buf[i] = static_cast<uint8_t>(v[byte + i]);
  const uint64_t off = op.offset - byte * 8;
  if (op.sign) return get_signed(buf, off, op.bits);
  return static_cast<int64_t>(get_unsigned(buf, off, op.bits));
}

std::optional<int64_t> bitfield_write(uint8_t* p, const BitfieldOp& op) {
  const bool incr = op.kind == BitfieldOp::kIncrBy;
  if (op.sign) {
    const int64_t old = get_signed(p, op.offset, op.bits);
    int64_t wrapped = 0, next;
    int overflow;
    if (incr) {
      overflow = signed_overflow(old, op.value, op.bits, op.overflow, &wrapped);
      next = overflow ? wrapped
                      : static_cast<int64_t>(static_cast<uint64_t>(old) + static_cast<uint64_t>(op.value));
    } else {
      next = op.value;
      overflow = signed_overflow(next, 0, op.bits, op.overflow, &wrapped);
      if (overflow) next = wrapped;
    }
    if (overflow && op.overflow == BitfieldOp::kFail) return std::nullopt;
    set_bits(p, op.offset, op.bits, static_cast<uint64_t>(next));
    return incr ? next : old;
  }
  const uint64_t old = get_unsigned(p, op.offset, op.bits);
  uint64_t wrapped = 0, next;
  int overflow;
  if (incr) {
    next = old + static_cast<uint64_t>(op.value);
    overflow = unsigned_overflow(old, op.value, op.bits, op.overflow, &wrapped);
  } else {
    next = static_cast<uint64_t>(op.value);
    overflow = unsigned_overflow(next, 0, op.bits, op.overflow, &wrapped);
  }
  if (overflow) next = wrapped;
  if (overflow && op.overflow == BitfieldOp::kFail) return std::nullopt;
  set_bits(p, op.offset, op.bits, next);
  return static_cast<int64_t>(incr ? next : old);
}

}  // namespace server
