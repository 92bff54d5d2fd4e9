// server/command_docs.cc - the COMMAND INFO and COMMAND DOCS replies (declared in info.h), built
// from the one command table in the shapes of Redis 7.0's server.c addReplyCommandInfo /
// addReplyCommandDocs.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "server/acl_catalog.h"
#include "server/info.h"

namespace server {

std::vector<std::string_view> acl_categories(const CommandSpec& spec) {
  // One source for COMMAND INFO, COMMAND LIST FILTERBY ACLCAT and the ACL rules
  // (server/acl_catalog.h), in ACL CAT's order, each with its '@'.
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> v;
    for (std::string_view n : acl::category_names()) v.push_back("@" + std::string(n));
    return v;
  }();
  const uint32_t cats = acl_category_mask(spec);
  std::vector<std::string_view> out;
  for (size_t i = 0; i < kNames.size(); ++i)
    if (cats & (uint32_t{1} << i)) out.push_back(kNames[i]);
  return out;
}

std::vector<std::string_view> key_spec_flags(const CommandSpec& spec) {
  // Redis's flags where they differ from the default for the command's flags (for commands
  // with two key specs, such as RENAME, those of the first).
  static const std::unordered_map<std::string_view, std::vector<std::string_view>> kSpecial = {
      {"set", {"RW", "access", "update", "variable_flags"}},
      {"setnx", {"OW", "insert"}}, {"msetnx", {"OW", "insert"}},
      {"setex", {"OW", "update"}}, {"psetex", {"OW", "update"}}, {"mset", {"OW", "update"}},
      {"restore", {"OW", "update"}}, {"getset", {"RW", "access", "update"}},
      {"getex", {"RW", "access", "update"}}, {"incr", {"RW", "access", "update"}},
      {"decr", {"RW", "access", "update"}}, {"incrby", {"RW", "access", "update"}},
      {"decrby", {"RW", "access", "update"}}, {"incrbyfloat", {"RW", "access", "update"}},
      {"getdel", {"RW", "access", "delete"}}, {"rename", {"RW", "access", "delete"}},
      {"renamenx", {"RW", "access", "delete"}}, {"append", {"RW", "insert"}},
      {"del", {"RM", "delete"}}, {"unlink", {"RM", "delete"}}, {"strlen", {"RO"}},
      {"exists", {"RO"}}, {"touch", {"RO"}}, {"type", {"RO"}}, {"copy", {"RO", "access"}},
      {"memory|usage", {"RO"}}, {"object|encoding", {"RO"}}, {"object|freq", {"RO"}},
      {"object|idletime", {"RO"}}, {"object|refcount", {"RO"}},
      {"setbit", {"RW", "access", "update"}}, {"bitop", {"OW", "update"}},
      {"bitfield", {"RW", "access", "update", "variable_flags"}}, {"watch", {"RO"}},
  };
  if (auto it = kSpecial.find(spec.full_name); it != kSpecial.end()) return it->second;
  if (spec.flags & kReadonly) return {"RO", "access"};
  if (spec.flags & kWrite) return {"RW", "update"};
  return {"RO"};
}

const CommandSpec* lookup_full_name(const CommandTable& table, std::string_view name) {
  const size_t bar = name.find('|');
  const CommandSpec* spec = table.find(name.substr(0, bar));
  if (spec == nullptr || bar == std::string_view::npos) return spec;
  std::string_view sub = name.substr(bar + 1);
  if (sub.find('|') != std::string_view::npos) return nullptr;
  return CommandTable::find_sub(*spec, sub);
}

namespace {

// `movable`: the command's keys are found by its finder (Redis's "movablekeys", last).
void reply_flags(resp::Writer& out, uint32_t flags, bool movable) {
  // Redis's order (server.c addReplyCommandFlags).
  static constexpr std::pair<uint32_t, std::string_view> kNames[] = {
      {kWrite, "write"}, {kReadonly, "readonly"}, {kDenyOom, "denyoom"},
      {kAdmin, "admin"}, {kPubSub, "pubsub"}, {kNoScript, "noscript"}, {kLoading, "loading"},
      {kStale, "stale"}, {kSkipMonitor, "skip_monitor"}, {kSkipSlowlog, "skip_slowlog"},
      {kFast, "fast"}, {kNoAuth, "no_auth"}, {kAllowBusy, "allow_busy"},
  };
  size_t n = movable ? 1 : 0;
  for (const auto& [bit, name] : kNames) n += (flags & bit) ? 1 : 0;
  out.set(n);
  for (const auto& [bit, name] : kNames)
    if (flags & bit) out.simple(name);
  if (movable) out.simple("movablekeys");
}

// The one key spec equivalent to (first, last, step): begin at index `first`, then a range. A
// command whose keys its finder reads from its other arguments (KV.MPUT's batch layout) has a
// spec of type "unknown" for both, as Redis's KSPEC_BS_UNKNOWN / KSPEC_FK_UNKNOWN.
void reply_key_specs(resp::Writer& out, const CommandSpec& spec) {
  if (!CommandTable::has_keys(spec)) return out.set(0);
  auto type = [&](std::string_view t, size_t spec_fields) {
    out.map(2);
    out.bulk("type");
    out.bulk(t);
    out.bulk("spec");
    out.map(spec_fields);
  };
  auto num = [&](std::string_view name, int64_t v) {
    out.bulk(name);
    out.integer(v);
  };
  out.set(1);
  out.map(3);
  out.bulk("flags");
  auto flags = key_spec_flags(spec);
  out.set(flags.size());
  for (auto f : flags) out.simple(f);
  out.bulk("begin_search");
  if (spec.find_keys != nullptr) {
    type("unknown", 0);
    out.bulk("find_keys");
    type("unknown", 0);
    return;
  }
  type("index", 1);
  num("index", spec.first_key);
  out.bulk("find_keys");
  type("range", 3);
  num("lastkey", spec.last_key < 0 ? spec.last_key : spec.last_key - spec.first_key);
  num("keystep", spec.key_step > 0 ? spec.key_step : 1);
  num("limit", 0);
}

}  // namespace

void reply_command_info(resp::Writer& out, const CommandSpec* spec) {
  if (spec == nullptr) return out.null();
  out.array(10);
  out.bulk(spec->full_name);
  out.integer(spec->arity);
  reply_flags(out, spec->flags, spec->find_keys != nullptr);
  out.integer(spec->first_key);
  out.integer(spec->last_key);
  out.integer(spec->key_step);
  auto cats = acl_categories(*spec);
  out.set(cats.size());
  for (auto c : cats) out.simple(c);
  out.set(0);  // tips
  reply_key_specs(out, *spec);
  if (spec->subcommands.empty()) return out.set(0);  // as Redis: an empty set, else an array
  out.array(spec->subcommands.size());
  for (const auto& sub : spec->subcommands) reply_command_info(out, &sub);
}

void reply_command_docs(resp::Writer& out, const CommandSpec& spec) {
  const std::pair<std::string_view, const std::string*> fields[] = {
      {"summary", &spec.summary}, {"since", &spec.since},
      {"group", &spec.group}, {"complexity", &spec.complexity}};
  size_t n = spec.subcommands.empty() ? 0 : 1;
  for (const auto& [name, value] : fields) n += value->empty() ? 0 : 1;
  out.map(n);
  for (const auto& [name, value] : fields) {
    if (value->empty()) continue;
    out.bulk(name);
    out.bulk(*value);
  }
  if (spec.subcommands.empty()) return;
  out.bulk("subcommands");
  out.map(spec.subcommands.size());
  for (const auto& sub : spec.subcommands) {
    out.bulk(sub.full_name);
    reply_command_docs(out, sub);
  }
}

}  // namespace server
