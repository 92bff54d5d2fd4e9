// server/acl_catalog.cc - the command table as the ACL rules see it (acl::Catalog): each
// command's categories are Redis 7.0's for the commands Redis has (acl_categories.inc, generated
// from redis-server's COMMAND by scripts/gen_acl_categories.py), else derived from its flags
// and group as Redis's setImplicitACLCategories does.
#include "server/acl_catalog.h"

#include <string_view>
#include <unordered_map>

namespace server {

namespace {

struct RedisCategories {
  std::string_view name, categories;
};

constexpr RedisCategories kRedisCategories[] = {
#include "server/acl_categories.inc"
};

uint32_t parse_categories(std::string_view list) {
  uint32_t mask = 0;
  while (!list.empty()) {
    const size_t sp = list.find(' ');
    const int c = acl::category_index(list.substr(0, sp));
    if (c >= 0) mask |= uint32_t{1} << c;
    list = sp == std::string_view::npos ? std::string_view() : list.substr(sp + 1);
  }
  return mask;
}

// A command Redis lacks (KV.*, TIER ...): setImplicitACLCategories, plus its group's category.
uint32_t derived_categories(const CommandSpec& spec) {
  namespace a = acl;
  uint32_t m = 0;
  auto add = [&](a::Category c) { m |= uint32_t{1} << c; };
  if (spec.flags & CommandFlag::kWrite) add(a::kWrite);
  if (spec.flags & CommandFlag::kReadonly) add(a::kRead);
  if (spec.flags & CommandFlag::kAdmin) {
    add(a::kAdmin);
    add(a::kDangerous);
  }
  if (spec.flags & CommandFlag::kPubSub) add(a::kPubSub);
  if (spec.flags & CommandFlag::kFast) add(a::kFast);
  else add(a::kSlow);
  const std::string& g = spec.group;
  if (g == "string") add(a::kString);
  else if (g == "generic") add(a::kKeyspace);
  else if (g == "connection") add(a::kConnection);
  else if (g == "bitmap") add(a::kBitmap);
  else if (g == "transactions") add(a::kTransaction);
  else if (g == "scripting") add(a::kScripting);
  else if (g == "pubsub") add(a::kPubSub);
  return m;
}

acl::Channels channels_of(std::string_view name) {
  if (name == "publish" || name == "spublish") return acl::Channels::kFirst;
  if (name == "subscribe" || name == "ssubscribe") return acl::Channels::kAll;
  if (name == "psubscribe") return acl::Channels::kAllPatterns;
  return acl::Channels::kNone;
}

}  // namespace

uint32_t acl_category_mask(const CommandSpec& spec) {
  static const std::unordered_map<std::string_view, uint32_t> redis = [] {
    std::unordered_map<std::string_view, uint32_t> m;
    for (const RedisCategories& r : kRedisCategories) m.emplace(r.name, parse_categories(r.categories));
    return m;
  }();
  if (auto it = redis.find(spec.full_name); it != redis.end()) return it->second;
  return derived_categories(spec);
}

acl::Catalog build_acl_catalog(const CommandTable& table) {
  acl::Catalog catalog(table.size());
  for (const CommandSpec* spec : table.all()) {
    acl::CatalogEntry& e = catalog[spec->id];
    e.name = spec->full_name;
    e.categories = acl_category_mask(*spec);
    e.channels = channels_of(spec->full_name);
    for (const CommandSpec& sub : spec->subcommands) {
      acl::CatalogEntry& s = catalog[sub.id];
      s.name = sub.full_name;
      s.categories = acl_category_mask(sub);
      s.parent = static_cast<int32_t>(spec->id);
      e.subs.push_back(sub.id);
    }
  }
  return catalog;
}

}  // namespace server
