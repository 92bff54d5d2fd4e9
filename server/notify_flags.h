// server/notify_flags.h - notify-keyspace-events' classes and letters (Redis 7.0's notify.c,
// server.h NOTIFY_*). A leaf: the config parser reads them without the notifier
// (keyspace_events.h).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace server {

/// notify-keyspace-events classes, with Redis's bit values (server.h NOTIFY_*), plus stratakv's
/// own class T (tiering: demoted, promoted, and with them evicted and expired).
enum NotifyFlag : uint32_t {
  kNotifyKeyspace = 1 << 0,   ///< K: __keyspace@0__:<key>
  kNotifyKeyevent = 1 << 1,   ///< E: __keyevent@0__:<event>
  kNotifyGeneric = 1 << 2,    ///< g: del, expire, rename_from, rename_to, copy_to, persist
  kNotifyString = 1 << 3,     ///< $: set, setrange, append, incrby, incrbyfloat, setbit
  kNotifyList = 1 << 4,       ///< l (no lists in stratakv: accepted, never raised)
  kNotifySet = 1 << 5,        ///< s (idem)
  kNotifyHash = 1 << 6,       ///< h (idem)
  kNotifyZset = 1 << 7,       ///< z (idem)
  kNotifyExpired = 1 << 8,    ///< x: expired
  kNotifyEvicted = 1 << 9,    ///< e: evicted
  kNotifyStream = 1 << 10,    ///< t (idem)
  kNotifyKeyMiss = 1 << 11,   ///< m: keymiss (a command's read of a missing key; not in A)
  kNotifyModule = 1 << 13,    ///< d (no modules: accepted, never raised)
  kNotifyNew = 1 << 14,       ///< n: new
  kNotifyTier = 1 << 20,      ///< T, stratakv's: demoted, promoted, evicted, expired
  /// A: every class but m, n and T, as Redis's NOTIFY_ALL.
  kNotifyAll = kNotifyGeneric | kNotifyString | kNotifyList | kNotifySet | kNotifyHash |
               kNotifyZset | kNotifyExpired | kNotifyEvicted | kNotifyStream | kNotifyModule,
};

/// Parses notify-keyspace-events' letters (keyspaceEventsStringToFlags, plus T); null on a
/// letter it does not know.
std::optional<uint32_t> parse_notify_flags(std::string_view letters);
/// The letters as Redis prints them (keyspaceEventsFlagsToString: "A" for all of NOTIFY_ALL,
/// else the classes in Redis's order; T after them; then K, E, m).
std::string format_notify_flags(uint32_t flags);
/// CONFIG SET's error for a bad letter (Redis's text, which lists Redis's letters).
inline constexpr std::string_view kNotifyFlagsError =
    "Invalid event class character. Use 'Ag$lshzxeKEtmdn'.";

}  // namespace server
