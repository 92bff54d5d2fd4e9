// server/monitor.h - MONITOR: every command other clients run, streamed to the connections that
// asked, in Redis 7.0's format (replicationFeedMonitors):
//
//   +1700000000.123456 [0 127.0.0.1:5555] "SET" "k" "v"
//
// arguments quoted as sdscatrepr does, AUTH's and HELLO's credentials shown as "(redacted)",
// a script's commands from "[0 lua]", and a Unix socket client's from "[0 unix:<path>]".
//
// A line is built once per command and delivered through each monitor's Pub/Sub mailbox
// (server/pubsub.h): delivery only enqueues and wakes the monitor's own thread, so the thread
// that ran the command never writes to a monitor's socket nor waits for it, and
// client-output-buffer-limit (normal class, as in Redis) applies to what a slow monitor holds.
// While nobody monitors, a command pays one relaxed load (Monitors::active).
#pragma once

#include <atomic>
#include <cstddef>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "server/pubsub.h"

namespace server {

/// The monitors. Thread-safe: the list is immutable and replaced on change (as Pub/Sub's
/// patterns), so feed() takes no lock.
class Monitors {
 public:
  Monitors();
  Monitors(const Monitors&) = delete;
  Monitors& operator=(const Monitors&) = delete;

  /// Whether anyone monitors: the one relaxed load a command pays.
  bool active() const { return count_.load(std::memory_order_relaxed) != 0; }
  /// Number of monitors.
  size_t count() const { return count_.load(std::memory_order_relaxed); }
  /// Starts streaming to `mailbox` (MONITOR). False when it was streamed to already.
  bool add(const std::shared_ptr<Subscriber>& mailbox);
  /// Stops streaming to `mailbox` (RESET, the connection closing). False when it was not.
  bool remove(const Subscriber* mailbox);
  /// Delivers the line of the command `args` run by `origin` ("127.0.0.1:5555", "lua",
  /// "unix:/path") to every monitor. Call only when active().
  void feed(std::string_view origin, std::span<const std::string_view> args);

 private:
  using List = std::vector<std::shared_ptr<Subscriber>>;
  std::mutex mu_;  // writers of list_
  std::atomic<std::shared_ptr<const List>> list_;
  std::atomic<size_t> count_{0};
};

/// The monitor line of a command, without the leading '+' (its type byte) and with its CRLF:
/// `<sec>.<usec> [0 <origin>] "arg" ...`, at `now_us` (Unix microseconds).
std::string monitor_line(int64_t now_us, std::string_view origin,
                         std::span<const std::string_view> args);

/// Appends `s` quoted as Redis's sdscatrepr: in double quotes, with \\ \" \n \r \t \a \b
/// escaped and other bytes outside 0x20-0x7e as \xHH.
void append_repr(std::string& out, std::string_view s);

}  // namespace server
