// server/monitor.cc - MONITOR's registry and line format (monitor.h).
#include "server/monitor.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <cstdio>

#include "server/command.h"

namespace server {

namespace {

constexpr std::string_view kRedacted = "(redacted)";

// Which arguments of `args` Redis 7.0 shows as "(redacted)": AUTH's password (and user), as
// authCommand redacts them before it checks anything but the argument count; HELLO's
// AUTH <user> <pass>, as helloCommand redacts them while it parses its options, after the
// protocol version was accepted. `out[i]` is set for each.
void redactions(std::span<const std::string_view> args, std::vector<bool>& out) {
  out.assign(args.size(), false);
  if (iequals(args[0], "auth")) {
    if (args.size() > 3) return;  // syntax error first
    for (size_t i = 1; i < args.size(); ++i) out[i] = true;
    return;
  }
  if (!iequals(args[0], "hello") || args.size() < 2) return;
  int64_t ver = 0;
  const std::string_view v = args[1];
  auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), ver);
  if (ec != std::errc() || p != v.data() + v.size() || ver < 2 || ver > 3) return;
  for (size_t j = 2; j < args.size(); ++j) {
    const size_t more = args.size() - 1 - j;
    if (iequals(args[j], "auth") && more >= 2) {
      out[j + 1] = out[j + 2] = true;
      j += 2;
    } else if (iequals(args[j], "setname") && more >= 1) {
      ++j;
    } else {
      return;  // a syntax error ends the parse
    }
  }
}

}  // namespace

void append_repr(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (const char ch : s) {
    switch (ch) {
      case '\\': out += "\\\\"; break;
      case '"': out += "\\\""; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\a': out += "\\a"; break;
      case '\b': out += "\\b"; break;
      default: {
        const auto c = static_cast<unsigned char>(ch);
        if (c >= 0x20 && c <= 0x7e) {
          out += ch;
        } else {
          out += "\\x";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        }
      }
    }
  }
  out += '"';
}

std::string monitor_line(int64_t now_us, std::string_view origin,
                         std::span<const std::string_view> args) {
  std::vector<bool> redact;
  redactions(args, redact);
  size_t reserve = 48 + origin.size();
  for (std::string_view a : args) reserve += a.size() + 3;
  std::string line;
  line.reserve(reserve);
  char head[64];
  const int n = std::snprintf(head, sizeof head, "%lld.%06lld [0 ",
                              static_cast<long long>(now_us / 1000000),
                              static_cast<long long>(now_us % 1000000));
  line.append(head, static_cast<size_t>(n));
  line += origin;
  line += "] ";
  for (size_t i = 0; i < args.size(); ++i) {
    if (i != 0) line += ' ';
    append_repr(line, redact[i] ? kRedacted : args[i]);
  }
  line += "\r\n";
  return line;
}

Monitors::Monitors() { list_.store(std::make_shared<const List>()); }

bool Monitors::add(const std::shared_ptr<Subscriber>& mailbox) {
  std::lock_guard lock(mu_);
  const std::shared_ptr<const List> cur = list_.load();
  if (std::find(cur->begin(), cur->end(), mailbox) != cur->end()) return false;
  auto next = std::make_shared<List>(*cur);
  next->push_back(mailbox);
  count_.store(next->size(), std::memory_order_relaxed);
  list_.store(std::move(next));
  return true;
}

bool Monitors::remove(const Subscriber* mailbox) {
  std::shared_ptr<const List> old;  // released after the lock
  std::lock_guard lock(mu_);
  old = list_.load();
  auto it = std::find_if(old->begin(), old->end(), [&](auto& p) { return p.get() == mailbox; });
  if (it == old->end()) return false;
  auto next = std::make_shared<List>(*old);
  next->erase(next->begin() + (it - old->begin()));
  count_.store(next->size(), std::memory_order_relaxed);
  list_.store(std::move(next));
  return true;
}

void Monitors::feed(std::string_view origin, std::span<const std::string_view> args) {
  if (args.empty()) return;
  const std::shared_ptr<const List> list = list_.load();
  if (list->empty()) return;
  const int64_t now_us = std::chrono::duration_cast<std::chrono::microseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  const MessageRef msg = Message::make_line('+', monitor_line(now_us, origin, args));
  for (const auto& box : *list) box->deliver(msg);
}

}  // namespace server
