// server/notify_flags.cc - notify-keyspace-events' letters (notify_flags.h).
#include "server/notify_flags.h"

namespace server {

namespace {

struct Letter {
  char c;
  uint32_t flag;
};
// keyspaceEventsStringToFlags's letters (A is handled apart), and T.
constexpr Letter kLetters[] = {
    {'g', kNotifyGeneric}, {'$', kNotifyString}, {'l', kNotifyList},    {'s', kNotifySet},
    {'h', kNotifyHash},    {'z', kNotifyZset},   {'x', kNotifyExpired}, {'e', kNotifyEvicted},
    {'K', kNotifyKeyspace}, {'E', kNotifyKeyevent}, {'t', kNotifyStream}, {'m', kNotifyKeyMiss},
    {'d', kNotifyModule},  {'n', kNotifyNew},    {'T', kNotifyTier},
};

}  // namespace

std::optional<uint32_t> parse_notify_flags(std::string_view letters) {
  uint32_t flags = 0;
  for (char c : letters) {
    if (c == 'A') {
      flags |= kNotifyAll;
      continue;
    }
    bool known = false;
    for (const Letter& l : kLetters) {
      if (l.c == c) {
        flags |= l.flag;
        known = true;
      }
    }
    if (!known) return std::nullopt;
  }
  return flags;
}

std::string format_notify_flags(uint32_t flags) {
  std::string s;
  if ((flags & kNotifyAll) == kNotifyAll) {
    s += 'A';  // and no n, even when set: Redis 7.0 prints "AKE" for "AKEn"
  } else {
    // keyspaceEventsFlagsToString's order.
    static constexpr Letter kOrder[] = {
        {'g', kNotifyGeneric}, {'$', kNotifyString}, {'l', kNotifyList},
        {'s', kNotifySet},     {'h', kNotifyHash},   {'z', kNotifyZset},
        {'x', kNotifyExpired}, {'e', kNotifyEvicted}, {'t', kNotifyStream},
        {'d', kNotifyModule},  {'n', kNotifyNew},
    };
    for (const Letter& l : kOrder)
      if (flags & l.flag) s += l.c;
  }
  if (flags & kNotifyTier) s += 'T';
  if (flags & kNotifyKeyspace) s += 'K';
  if (flags & kNotifyKeyevent) s += 'E';
  if (flags & kNotifyKeyMiss) s += 'm';
  return s;
}

}  // namespace server
