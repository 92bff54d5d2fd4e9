// server/arg_parser.h - small helpers to read command arguments with Redis's rules and error
// texts (in the spirit of Dragonfly's CmdArgParser): strict integers (util.c string2ll), floats
// (string2ld), case-insensitive option tokens, and the shared expiry options of SET/GETEX.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "server/command.h"

namespace server {

/// Strict int64 as Redis's string2ll: optional '-', digits, no spaces, no '+', no leading zeros.
std::optional<int64_t> parse_int(std::string_view s);
/// A long double as Redis's string2ld: no spaces, not NaN. Infinity is accepted.
std::optional<long double> parse_long_double(std::string_view s);
/// A double as Redis's string2d (strtod, no spaces, not NaN).
std::optional<double> parse_double(std::string_view s);
/// Formats like Redis's ld2string(LD_STR_HUMAN): "%.17Lf" without trailing zeros, e.g. "10.5".
std::string format_long_double(long double v);

/// Reads options left to right. Errors are remembered (first one wins) for the caller to reply.
class ArgParser {
 public:
  ArgParser(std::span<const std::string_view> args, size_t start) : args_(args), pos_(start) {}

  bool done() const { return pos_ >= args_.size(); }
  size_t remaining() const { return done() ? 0 : args_.size() - pos_; }
  /// The next argument, consumed. Sets a syntax error when none is left.
  std::string_view next();
  /// Consumes the next argument when it equals `token` (ASCII case-insensitive).
  bool eat(std::string_view token);
  /// The next argument as a strict int64, consumed; sets `err::kNotInteger` on failure.
  int64_t next_int();

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  void fail(std::string_view text) {
    if (error_.empty()) error_ = text;
  }

 private:
  std::span<const std::string_view> args_;
  size_t pos_;
  std::string error_;
};

/// Expiry options shared by SET and GETEX: EX s | PX ms | EXAT s | PXAT ms | KEEPTTL | PERSIST.
struct ExpireOption {
  enum Kind { kNone, kAt, kKeep, kPersist } kind = kNone;
  int64_t at_ms = 0;       ///< kAt: the absolute deadline, once resolve_expire() has run
  std::string_view value;  ///< kAt: the time as given, checked by resolve_expire()
  bool seconds = false;    ///< kAt: EX or EXAT
  bool absolute = false;   ///< kAt: EXAT or PXAT
};

/// Tries to read one expiry option at the parser's position into `opt`: its syntax only, as
/// Redis 7.0's parseExtendedStringArgumentsOrReply does. Returns false when the next argument is
/// not an expiry option. The same option again replaces the earlier one (Redis: the last wins);
/// a different one, or EX/PX/EXAT/PXAT as the last argument, sets a syntax error. The time is
/// checked later by resolve_expire(): GETEX looks the key up in between (a missing key: nil).
/// `allow_keep`/`allow_persist` say which of KEEPTTL (SET) and PERSIST (GETEX) are valid.
bool parse_expire_option(ArgParser& p, bool allow_keep, bool allow_persist, ExpireOption* opt);

/// Checks the time of a kAt option read by parse_expire_option() and sets its at_ms (Redis's
/// getExpireMillisecondsOrReply). Returns the error to reply: not an integer, or Redis's
/// "invalid expire time in '<command>' command" for a time <= 0 or one that overflows. Other
/// kinds are left as they are.
std::optional<std::string> resolve_expire(ExpireOption* opt, std::string_view command,
                                          int64_t now_ms);

/// Converts a relative or absolute time in seconds or ms to an absolute Unix-ms deadline, with
/// Redis's checks: `value` <= 0 is invalid, overflow is invalid. Null when invalid.
std::optional<int64_t> deadline_ms(int64_t value, bool seconds, bool absolute, int64_t now_ms);

}  // namespace server
