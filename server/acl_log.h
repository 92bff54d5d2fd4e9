// server/acl_log.h - ACL LOG: the recent denials (Redis 7.0's addACLLogEntry). Entries alike
// (reason, context, object, username) within 60 s are one entry whose count grows; the newest
// first; at most acllog-max-len of them.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <vector>

namespace server {

class AclLog {
 public:
  struct Entry {
    uint64_t count = 1;
    std::string reason;   ///< "command", "key", "channel" or "auth"
    std::string context;  ///< "toplevel", "multi" or "lua"
    std::string object;   ///< the command's full name, the key, the channel, or "AUTH"
    std::string username;
    int64_t ms = 0;           ///< Unix ms of the last occurrence
    std::string client_info;  ///< CLIENT LIST's line of the client, at the last occurrence
  };

  /// Adds a denial at `now_ms`, keeping at most `max_len` entries. Thread-safe.
  void add(Entry e, int64_t now_ms, size_t max_len);
  /// The newest `count` entries, newest first. Thread-safe.
  std::vector<Entry> newest(size_t count) const;
  /// ACL LOG RESET. Thread-safe.
  void reset();

 private:
  mutable std::mutex mu_;
  std::deque<Entry> entries_;  // newest first
};

}  // namespace server
