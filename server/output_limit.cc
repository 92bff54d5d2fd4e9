// server/output_limit.cc - client-output-buffer-limit (output_limit.h).
#include "server/output_limit.h"

#include <cerrno>
#include <cstdlib>
#include <vector>

#include "server/command.h"
#include "server/config.h"

namespace server {

namespace {

// config.c getClientTypeByName: master is a class name, but has no limits of its own.
int class_by_name(std::string_view name) {
  if (iequals(name, "normal")) return static_cast<int>(ClientClass::kNormal);
  if (iequals(name, "slave") || iequals(name, "replica"))
    return static_cast<int>(ClientClass::kReplica);
  if (iequals(name, "pubsub")) return static_cast<int>(ClientClass::kPubSub);
  return -1;
}

// The words of a value (sdssplitargs for plain words: spaces and tabs separate).
std::vector<std::string_view> words(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0;
  while (i < s.size()) {
    while (i < s.size() && (s[i] == ' ' || s[i] == '\t')) ++i;
    size_t j = i;
    while (j < s.size() && s[j] != ' ' && s[j] != '\t') ++j;
    if (j > i) out.push_back(s.substr(i, j - i));
    i = j;
  }
  return out;
}

}  // namespace

std::optional<std::string> parse_output_limits(std::string_view value, OutputLimits* limits) {
  const std::vector<std::string_view> w = words(value);
  if (w.size() % 4 != 0) return "Wrong number of arguments in buffer limit configuration.";
  OutputLimits next = *limits;
  // Every group is checked before any applies: the whole value or nothing.
  for (size_t j = 0; j < w.size(); j += 4) {
    const int cls = class_by_name(w[j]);
    if (cls < 0) return "Invalid client class specified in buffer limit configuration.";
    const auto hard = Config::parse_size(w[j + 1]), soft = Config::parse_size(w[j + 2]);
    const std::string secs_text(w[j + 3]);
    char* end = nullptr;
    errno = 0;
    const long long secs = std::strtoll(secs_text.c_str(), &end, 10);
    if (!hard || !soft || secs < 0 || *end != '\0' || errno == ERANGE)
      return "Error in hard, soft or soft_seconds setting in buffer limit configuration.";
    next[static_cast<size_t>(cls)] = OutputLimit{*hard, *soft, secs};
  }
  *limits = next;
  return std::nullopt;
}

std::string format_output_limits(const OutputLimits& limits) {
  static constexpr const char* kNames[] = {"normal", "slave", "pubsub"};
  std::string out;
  for (size_t i = 0; i < limits.size(); ++i) {
    if (i) out += ' ';
    out += std::string(kNames[i]) + " " + std::to_string(limits[i].hard) + " " +
           std::to_string(limits[i].soft) + " " + std::to_string(limits[i].soft_seconds);
  }
  return out;
}

bool OutputLimiter::over(const OutputLimit& limit, size_t bytes, int64_t now_s) {
  const uint64_t used = bytes;
  const bool hard = limit.hard != 0 && used >= static_cast<uint64_t>(limit.hard);
  bool soft = limit.soft != 0 && used >= static_cast<uint64_t>(limit.soft);
  if (soft) {
    int64_t since = soft_since_.load(std::memory_order_relaxed);
    if (since == 0) {
      // The first time the soft limit is reached: the clock starts.
      soft_since_.compare_exchange_strong(since, now_s, std::memory_order_relaxed);
      soft = false;
    } else if (now_s - since <= limit.soft_seconds) {
      soft = false;  // not for long enough yet
    }
  } else {
    soft_since_.store(0, std::memory_order_relaxed);
  }
  return soft || hard;
}

}  // namespace server
