// server/command_stats.cc - INFO commandstats and errorstats. See command_stats.h.
#include "server/command_stats.h"

#include <algorithm>
#include <cstdio>

#include "server/server.h"

namespace server {

void ErrorCounts::add(std::string_view text) {
  // Redis looks for the space ending the code in the first 32 bytes of "-CODE ...".
  const size_t space = text.substr(0, 31).find(' ');
  const std::string_view code = space == std::string_view::npos ? "ERR" : text.substr(0, space);
  std::lock_guard lock(mu_);
  for (auto& [name, count] : codes_) {
    if (name == code) {
      ++count;
      return;
    }
  }
  if (codes_.size() < kMaxCodes) codes_.emplace_back(code, 1);
}

void ErrorCounts::sum_into(std::map<std::string, uint64_t>& into) const {
  std::lock_guard lock(mu_);
  for (const auto& [name, count] : codes_) into[name] += count;
}

void ErrorCounts::reset() {
  std::lock_guard lock(mu_);
  codes_.clear();
}

namespace {

// One cmdstat line for `spec` when it has any count.
void command_line(Server& server, const CommandSpec& spec, std::string* out) {
  uint64_t calls = 0, usec = 0, rejected = 0, failed = 0;
  for (const auto& w : server.workers()) {
    const CommandCounters& c = w->stats.command(spec.id);
    calls += c.calls.load(std::memory_order_relaxed);
    usec += c.usec.load(std::memory_order_relaxed);
    rejected += c.rejected.load(std::memory_order_relaxed);
    failed += c.failed.load(std::memory_order_relaxed);
  }
  if (calls == 0 && rejected == 0 && failed == 0) return;
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "cmdstat_%s:calls=%llu,usec=%llu,usec_per_call=%.2f,rejected_calls=%llu,"
                "failed_calls=%llu\r\n",
                spec.full_name.c_str(), static_cast<unsigned long long>(calls),
                static_cast<unsigned long long>(usec),
                calls == 0 ? 0.0 : static_cast<double>(usec) / static_cast<double>(calls),
                static_cast<unsigned long long>(rejected), static_cast<unsigned long long>(failed));
  out->append(buf);
}

}  // namespace

void section_commandstats(Server& server, int64_t, std::string* out) {
  for (const CommandSpec* spec : server.commands().all()) {
    command_line(server, *spec, out);
    for (const CommandSpec& sub : spec->subcommands) command_line(server, sub, out);
  }
}

void section_errorstats(Server& server, int64_t, std::string* out) {
  std::map<std::string, uint64_t> codes;
  for (const auto& w : server.workers()) w->stats.error_codes.sum_into(codes);
  for (const auto& [code, count] : codes)
    out->append("errorstat_").append(code).append(":count=").append(std::to_string(count))
        .append("\r\n");
}

}  // namespace server
