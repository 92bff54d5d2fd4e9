// server/output_limit.h - client-output-buffer-limit: its config syntax and the check of one
// client's output against it (Redis 7.0's config.c setConfigClientOutputBufferLimitOption and
// networking.c checkClientOutputBufferLimits).
//
// The config value is groups of four words, `<class> <hard> <soft> <soft-seconds>`, class one
// of normal, replica (or slave) and pubsub, sizes with Redis's units; CONFIG SET changes only
// the classes it names, and CONFIG GET prints all three as Redis does:
// "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60" (the default). 0 means
// no limit. A client is over its limit when its output holds at least `hard` bytes, or at least
// `soft` bytes continuously for more than `soft-seconds`; it is then closed, as Redis closes
// it, with Redis's log line. stratakv has no replicas yet: their class is kept but not used.
#pragma once

#include <array>
#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace server {

/// Redis's client classes for output limits, in CONFIG GET's order.
enum class ClientClass : uint8_t { kNormal = 0, kReplica = 1, kPubSub = 2 };

/// One class's limits: bytes, bytes, seconds; 0 = none.
struct OutputLimit {
  int64_t hard = 0, soft = 0, soft_seconds = 0;
};

/// Limits for every class.
using OutputLimits = std::array<OutputLimit, 3>;

/// Redis's default, "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60".
inline constexpr std::string_view kDefaultOutputLimits =
    "normal 0 0 0 slave 268435456 67108864 60 pubsub 33554432 8388608 60";

/// Applies a config value to `limits` (only the classes it names change). On a bad value,
/// returns Redis's error text ("Wrong number of arguments in buffer limit configuration.",
/// "Invalid client class specified in buffer limit configuration.", "Error in hard, soft or
/// soft_seconds setting in buffer limit configuration.") and changes nothing.
std::optional<std::string> parse_output_limits(std::string_view value, OutputLimits* limits);

/// The value as CONFIG GET prints it.
std::string format_output_limits(const OutputLimits& limits);

/// One client's soft-limit clock and the check (checkClientOutputBufferLimits). Thread-safe:
/// publishers check a subscriber's output from their threads, its connection from its own.
class OutputLimiter {
 public:
  /// Whether output of `bytes` is past `limit` at `now_s` (Unix seconds): at least the hard
  /// limit, or at least the soft limit since more than soft_seconds ago (the clock starts the
  /// first time the soft limit is reached and stops when the output is back under it).
  bool over(const OutputLimit& limit, size_t bytes, int64_t now_s);

 private:
  std::atomic<int64_t> soft_since_{0};  // 0: under the soft limit
};

}  // namespace server
