// server/commands/bitfield.h - the bit arithmetic of the bit commands (cmd_bits.cc), as Redis
// 7.0's bitops.c: offsets, ranges, BITFIELD's typed fields and its overflow rules, and the
// string a write grows into.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "server/commands/family.h"

namespace server {

/// A bit offset argument (getBitOffsetFromArgument): a non-negative integer whose byte is below
/// proto-max-bulk-len; with `hash`, "#N" means N * `bits`. Null: "ERR bit offset is not an
/// integer or out of range".
std::optional<uint64_t> bit_offset(CommandContext& ctx, std::string_view arg, bool hash,
                                   int bits);

/// The set bits of `v` in the bit range [first, last] (0 <= first <= last < 8 * size).
int64_t count_bits(std::string_view v, int64_t first, int64_t last);
/// The first bit equal to `bit` in [first, last] of `v`, or -1.
int64_t find_bit(std::string_view v, int64_t first, int64_t last, bool bit);

/// The string a bit write changes, grown with zero bytes to hold byte `byte` (Redis's
/// lookupStringForBitCommand): a new value for a missing key, else Writable. Allocates under
/// the lock before anything changes (NeedRoom). The caller writes through data(), then
/// publish()es when it changed a bit or created() is true.
class BitTarget {
 public:
  static BitTarget grow(CommandContext& ctx, tiering::KeyLock& lock, std::string_view key,
                        uint64_t byte);
  char* data() { return fresh_ ? fresh_->data() : w_.bytes->data(); }
  size_t size() const { return fresh_ ? fresh_->size() : w_.bytes->size(); }
  /// The key was created or its string grew (Redis's `dirty`): a change even with no bit set.
  bool created() const { return created_; }
  /// Makes the change one kSet of the key.
  void publish(tiering::KeyLock& lock, std::string_view key);

 private:
  const tiering::KeyLock::Item* item_ = nullptr;
  tiering::ValueRef fresh_;
  Writable w_{nullptr, {}};
  bool created_ = false;
};

/// One BITFIELD operation.
struct BitfieldOp {
  enum Kind : uint8_t { kGet, kSet, kIncrBy } kind = kGet;
  enum Overflow : uint8_t { kWrap, kSat, kFail } overflow = kWrap;
  bool sign = false;
  int bits = 0;
  uint64_t offset = 0;
  int64_t value = 0;  ///< SET's value, INCRBY's increment
};

/// Parses BITFIELD's arguments after the key into `ops`; false with Redis's error in `error`.
bool parse_bitfield(CommandContext& ctx, std::vector<BitfieldOp>& ops, std::string& error);
/// GET of `op` over `v` (zero past its end).
int64_t bitfield_get(std::string_view v, const BitfieldOp& op);
/// SET or INCRBY of `op` on `p` (which holds its bits): the reply (SET: the old value; INCRBY:
/// the new one), or null when OVERFLOW FAIL refused it (nothing written).
std::optional<int64_t> bitfield_write(uint8_t* p, const BitfieldOp& op);

}  // namespace server
