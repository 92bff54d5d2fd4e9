// server/acl.cc - ACL users and rules (acl.h). Rule semantics and texts follow Redis 7.0's
// acl.c (ACLSetSelector, ACLSetUser, ACLDescribeUser); pattern matching util.c stringmatchlen.
#include "server/acl.h"

#include <openssl/evp.h>

#include <algorithm>
#include <array>

#include "server/ascii.h"
#include "tiering/glob.h"

namespace server::acl {

namespace {

constexpr std::array<std::string_view, kCategoryCount> kCategoryNames = {
    "keyspace", "read",   "write",     "set",       "sortedset",  "list",        "hash",
    "string",   "bitmap", "hyperloglog", "geo",     "stream",     "pubsub",      "admin",
    "fast",     "slow",   "blocking",  "dangerous", "connection", "transaction", "scripting"};

// The reasons of ACL SETUSER's errors (ACLSetUserStringError).
constexpr std::string_view kSyntax = "Syntax error";
constexpr std::string_view kUnknown = "Unknown command or category name in ACL";
constexpr std::string_view kAfterAllKeys =
    "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have "
    "any effect. Try 'resetkeys' to start with an empty list of patterns";
constexpr std::string_view kAfterAllChannels =
    "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not "
    "have any effect. Try 'resetchannels' to start with an empty list of channels";
constexpr std::string_view kNoSuchPassword =
    "The password you are trying to remove from the user does not exist";
constexpr std::string_view kBadHash =
    "The password hash must be exactly 64 characters and contain only lowercase hexadecimal "
    "characters";
constexpr std::string_view kSubcommandFirstArg =
    "Allowing first-arg of a subcommand is not supported";


void set_bit(User& u, uint32_t id, bool on) {
  if (on) u.allowed[id >> 6] |= uint64_t{1} << (id & 63);
  else u.allowed[id >> 6] &= ~(uint64_t{1} << (id & 63));
}

bool get_bit(const User& u, uint32_t id) { return (u.allowed[id >> 6] >> (id & 63)) & 1; }

void drop_first_args(User& u, uint32_t id) {
  std::erase_if(u.first_args, [id](const auto& fa) { return fa.first == id; });
}

// ACLChangeSelectorPerm: a command, and a container's subcommands with it.
void change_perm(User& u, const Catalog& catalog, uint32_t id, bool allow) {
  set_bit(u, id, allow);
  drop_first_args(u, id);
  for (uint32_t sub : catalog[id].subs) set_bit(u, sub, allow);
}

void set_all(User& u, bool allow) {
  std::fill(u.allowed.begin(), u.allowed.end(), allow ? ~uint64_t{0} : 0);
  u.all_future = allow;
  u.first_args.clear();
}

void set_category(User& u, const Catalog& catalog, int cat, bool allow) {
  const uint32_t bit = uint32_t{1} << cat;
  for (uint32_t id = 0; id < catalog.size(); ++id) {
    if (catalog[id].categories & bit) {
      set_bit(u, id, allow);
      drop_first_args(u, id);
    }
  }
}

int find_command(const Catalog& catalog, std::string_view name) {
  for (uint32_t id = 0; id < catalog.size(); ++id)
    if (iequals(catalog[id].name, name)) return static_cast<int>(id);
  return -1;
}

bool valid_hash(std::string_view h) {
  if (h.size() != 64) return false;
  for (char c : h)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return true;
}

// The +cmd / -cmd rules (with cmd|sub or cmd|first-arg).
std::string command_rule(User& u, std::string_view op, const Catalog& catalog) {
  const bool allow = op[0] == '+';
  std::string_view name = op.substr(1);
  const int id = find_command(catalog, name);
  if (id >= 0) {
    change_perm(u, catalog, static_cast<uint32_t>(id), allow);
    return {};
  }
  const size_t bar = name.find('|');
  if (bar == std::string_view::npos) return std::string(kUnknown);
  const int parent = find_command(catalog, name.substr(0, bar));
  if (parent < 0) return std::string(kUnknown);
  std::string_view rest = name.substr(bar + 1);
  if (!catalog[parent].subs.empty()) {
    // "+client|list|x": a first-arg of a subcommand; "+client|bogus": unknown.
    const size_t bar2 = rest.find('|');
    const int sub = find_command(catalog, name.substr(0, bar2 == std::string_view::npos
                                                             ? name.size()
                                                             : bar + 1 + bar2));
    if (sub < 0) return std::string(kUnknown);
    if (bar2 != std::string_view::npos) return std::string(kSubcommandFirstArg);
    set_bit(u, static_cast<uint32_t>(sub), allow);
    return {};
  }
  // A first-arg of a command without subcommands: additive only (+select|0).
  if (!allow || rest.empty() || rest.find('|') != std::string_view::npos)
    return std::string(kUnknown);
  const uint32_t pid = static_cast<uint32_t>(parent);
  if (get_bit(u, pid)) return {};
  std::string arg = to_lower(rest);
  for (const auto& fa : u.first_args)
    if (fa.first == pid && fa.second == arg) return {};
  u.first_args.emplace_back(pid, std::move(arg));
  return {};
}

}  // namespace

std::span<const std::string_view> category_names() { return kCategoryNames; }

int category_index(std::string_view name) {
  for (size_t i = 0; i < kCategoryNames.size(); ++i)
    if (iequals(kCategoryNames[i], name)) return static_cast<int>(i);
  return -1;
}

std::string sha256_hex(std::string_view password) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(password.data(), password.size(), digest, &len, EVP_sha256(), nullptr);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(2 * len, '0');
  for (unsigned int i = 0; i < len; ++i) {
    out[2 * i] = kHex[digest[i] >> 4];
    out[2 * i + 1] = kHex[digest[i] & 15];
  }
  return out;
}

bool User::key_allowed(std::string_view key, uint8_t perms) const {
  if (all_keys) return true;
  for (const KeyPattern& k : keys)
    if ((k.perms & perms) == perms && tiering::glob_match(k.pattern, key)) return true;
  return false;
}

bool User::channel_allowed(std::string_view channel, bool is_pattern) const {
  if (all_channels) return true;
  for (const std::string& c : channels)
    if (is_pattern ? c == channel : tiering::glob_match(c, channel)) return true;
  return false;
}

bool User::password_ok(std::string_view password) const {
  if (!enabled) return false;
  if (nopass) return true;
  if (passwords.empty()) return false;
  const std::string h = sha256_hex(password);
  return std::find(passwords.begin(), passwords.end(), h) != passwords.end();
}

bool User::first_arg_allowed(uint32_t id, std::string_view arg1) const {
  if (arg1.empty()) return false;
  for (const auto& fa : first_args)
    if (fa.first == id && iequals(fa.second, arg1)) return true;
  return false;
}

User new_user(std::string name, const Catalog& catalog) {
  User u;
  u.name = std::move(name);
  u.allowed.assign((catalog.size() + 63) / 64, 0);
  return u;
}

std::string apply_rule(User& u, std::string_view op, const Catalog& catalog) {
  if (op.empty()) return std::string(kSyntax);
  if (iequals(op, "on")) {
    u.enabled = true;
  } else if (iequals(op, "off")) {
    u.enabled = false;
  } else if (iequals(op, "skip-sanitize-payload")) {
    u.sanitize = User::Sanitize::kSkip;
  } else if (iequals(op, "sanitize-payload")) {
    u.sanitize = User::Sanitize::kSanitize;
  } else if (iequals(op, "nopass")) {
    u.nopass = true;
    u.passwords.clear();
  } else if (iequals(op, "resetpass")) {
    u.nopass = false;
    u.passwords.clear();
  } else if (op[0] == '>' || op[0] == '#') {
    std::string h;
    if (op[0] == '>') {
      h = sha256_hex(op.substr(1));
    } else {
      if (!valid_hash(op.substr(1))) return std::string(kBadHash);
      h = std::string(op.substr(1));
    }
    if (std::find(u.passwords.begin(), u.passwords.end(), h) == u.passwords.end())
      u.passwords.push_back(std::move(h));
    u.nopass = false;
  } else if (op[0] == '<' || op[0] == '!') {
    std::string h;
    if (op[0] == '<') {
      h = sha256_hex(op.substr(1));
    } else {
      if (!valid_hash(op.substr(1))) return std::string(kBadHash);
      h = std::string(op.substr(1));
    }
    auto it = std::find(u.passwords.begin(), u.passwords.end(), h);
    if (it == u.passwords.end()) return std::string(kNoSuchPassword);
    u.passwords.erase(it);
  } else if (iequals(op, "allkeys") || op == "~*") {
    u.all_keys = true;
    u.keys.clear();
  } else if (iequals(op, "resetkeys")) {
    u.all_keys = false;
    u.keys.clear();
  } else if (op[0] == '~' || op[0] == '%') {
    if (u.all_keys) return std::string(kAfterAllKeys);
    uint8_t perms = 0;
    size_t at = 1;
    if (op[0] == '%') {
      for (;; ++at) {
        if (at >= op.size()) return std::string(kSyntax);
        const char c = static_cast<char>(fold(static_cast<unsigned char>(op[at])));
        if (c == 'r' && !(perms & kKeyRead)) perms |= kKeyRead;
        else if (c == 'w' && !(perms & kKeyWrite)) perms |= kKeyWrite;
        else if (op[at] == '~') {
          ++at;
          break;
        } else return std::string(kSyntax);
      }
    } else {
      perms = kKeyAll;
    }
    std::string_view pattern = op.substr(at);
    if (pattern == "*" && perms == kKeyAll) {
      u.all_keys = true;
      u.keys.clear();
      return {};
    }
    for (User::KeyPattern& k : u.keys) {
      if (k.pattern == pattern) {
        k.perms |= perms;
        return {};
      }
    }
    u.keys.push_back({std::string(pattern), perms});
  } else if (iequals(op, "allchannels") || op == "&*") {
    u.all_channels = true;
    u.channels.clear();
  } else if (iequals(op, "resetchannels")) {
    u.all_channels = false;
    u.channels.clear();
  } else if (op[0] == '&') {
    if (u.all_channels) return std::string(kAfterAllChannels);
    std::string_view pattern = op.substr(1);
    if (std::find(u.channels.begin(), u.channels.end(), pattern) == u.channels.end())
      u.channels.emplace_back(pattern);
  } else if (iequals(op, "allcommands") || iequals(op, "+@all")) {
    set_all(u, true);
  } else if (iequals(op, "nocommands") || iequals(op, "-@all")) {
    set_all(u, false);
  } else if (iequals(op, "reset")) {
    for (std::string_view r :
         {"resetpass", "resetkeys", "resetchannels", "off", "-@all", "sanitize-payload"})
      apply_rule(u, r, catalog);
  } else if ((op[0] == '+' || op[0] == '-') && op.size() > 1 && op[1] == '@') {
    const int cat = category_index(op.substr(2));
    if (cat < 0) return std::string(kUnknown);
    set_category(u, catalog, cat, op[0] == '+');
  } else if ((op[0] == '+' || op[0] == '-') && op.size() > 1) {
    return command_rule(u, op, catalog);
  } else {
    return std::string(kSyntax);
  }
  return {};
}

std::string describe_commands(const User& user, const Catalog& catalog) {
  // ACLDescribeUserCommandRules (Redis 6.2 / 7.0): start from +@all or -@all, add the category
  // that best fits what is left each round, then single commands to make the bitmap exact.
  const bool additive = !user.all_future;
  std::string rules = additive ? "-@all " : "+@all ";
  User fake = new_user("", catalog), temp = user;
  set_all(fake, !additive);
  bool applied[kCategoryCount] = {};
  for (;;) {
    int best = -1;
    uint64_t mindiff = UINT64_MAX, maxsame = 0;
    for (int c = 0; c < kCategoryCount; ++c) {
      if (applied[c]) continue;
      uint64_t on = 0, off = 0;
      for (uint32_t id = 0; id < catalog.size(); ++id) {
        if (!(catalog[id].categories & (uint32_t{1} << c))) continue;
        if (get_bit(temp, id)) ++on;
        else ++off;
      }
      const uint64_t diff = additive ? off : on, same = additive ? on : off;
      if (same > diff && (diff < mindiff || (diff == mindiff && same > maxsame))) {
        best = c;
        mindiff = diff;
        maxsame = same;
      }
    }
    if (best < 0) break;
    set_category(fake, catalog, best, additive);
    set_category(temp, catalog, best, !additive);
    rules += additive ? "+@" : "-@";
    rules += kCategoryNames[best];
    rules += ' ';
    applied[best] = true;
  }
  for (uint32_t id = 0; id < catalog.size(); ++id) {
    const bool want = get_bit(user, id);
    if (want == get_bit(fake, id)) continue;
    rules += want ? '+' : '-';
    rules += catalog[id].name;
    rules += ' ';
    change_perm(fake, catalog, id, want);
  }
  for (const auto& [id, arg] : user.first_args) {
    rules += '+';
    rules += catalog[id].name;
    rules += '|';
    rules += arg;
    rules += ' ';
  }
  rules.pop_back();
  return rules;
}

std::string describe_keys(const User& user) {
  if (user.all_keys) return "~*";
  std::string out;
  for (const User::KeyPattern& k : user.keys) {
    if (!out.empty()) out += ' ';
    out += k.perms == kKeyAll ? "~" : k.perms == kKeyRead ? "%R~" : "%W~";
    out += k.pattern;
  }
  return out;
}

std::string describe_channels(const User& user) {
  if (user.all_channels) return "&*";
  std::string out;
  for (const std::string& c : user.channels) {
    if (!out.empty()) out += ' ';
    out += '&';
    out += c;
  }
  return out;
}

std::string describe(const User& user, const Catalog& catalog) {
  std::string out = user.enabled ? "on " : "off ";
  if (user.nopass) out += "nopass ";
  if (user.sanitize == User::Sanitize::kSkip) out += "skip-sanitize-payload ";
  if (user.sanitize == User::Sanitize::kSanitize) out += "sanitize-payload ";
  for (const std::string& p : user.passwords) out += "#" + p + " ";
  if (std::string keys = describe_keys(user); !keys.empty()) out += keys + " ";
  if (!user.all_channels) out += "resetchannels ";
  if (std::string ch = describe_channels(user); !ch.empty()) out += ch + " ";
  out += describe_commands(user, catalog);
  return out;
}

// ---- Users ----

namespace {

void finish(User& u, const Catalog& catalog) {
  bool all = true;
  for (uint32_t id = 0; id < catalog.size() && all; ++id) all = get_bit(u, id);
  u.unrestricted = all && u.all_keys && u.all_channels;
}

}  // namespace

Users::Users(Catalog catalog) : catalog_(std::move(catalog)) {
  User d = new_user("default", catalog_);
  for (std::string_view r : {"on", "nopass", "~*", "&*", "+@all"}) apply_rule(d, r, catalog_);
  finish(d, catalog_);
  users_.emplace("default", std::make_shared<const User>(std::move(d)));
  publish_locked();
}

std::shared_ptr<const User> Users::find(std::string_view name) const {
  std::lock_guard lock(mu_);
  auto it = users_.find(name);
  return it == users_.end() ? nullptr : it->second;
}

std::shared_ptr<const User> Users::authenticate(std::string_view name,
                                                std::string_view password) const {
  std::shared_ptr<const User> u = find(name);
  return u != nullptr && u->password_ok(password) ? u : nullptr;
}

std::string Users::set_user(std::string_view name, std::span<const std::string_view> rules) {
  std::lock_guard lock(mu_);
  auto it = users_.find(name);
  User u = it != users_.end() ? *it->second : new_user(std::string(name), catalog_);
  for (std::string_view r : rules) {
    if (std::string e = apply_rule(u, r, catalog_); !e.empty())
      return "Error in ACL SETUSER modifier '" + std::string(r) + "': " + e;
  }
  finish(u, catalog_);
  users_[std::string(name)] = std::make_shared<const User>(std::move(u));
  publish_locked();
  return {};
}

bool Users::del_user(std::string_view name) {
  std::lock_guard lock(mu_);
  if (name == "default") return false;
  auto it = users_.find(name);
  if (it == users_.end()) return false;
  users_.erase(it);
  publish_locked();
  return true;
}

std::vector<std::shared_ptr<const User>> Users::all() const {
  std::lock_guard lock(mu_);
  std::vector<std::shared_ptr<const User>> out;
  for (const auto& [name, u] : users_) out.push_back(u);
  return out;
}

void Users::replace_all(std::vector<User> users) {
  std::lock_guard lock(mu_);
  std::shared_ptr<const User> old_default = users_["default"];
  users_.clear();
  for (User& u : users) {
    finish(u, catalog_);
    std::string name = u.name;
    users_[name] = std::make_shared<const User>(std::move(u));
  }
  if (users_.find("default") == users_.end()) users_["default"] = old_default;
  publish_locked();
}

void Users::set_requirepass(std::string_view password) {
  std::lock_guard lock(mu_);
  User u = *users_["default"];
  apply_rule(u, "resetpass", catalog_);
  if (password.empty()) apply_rule(u, "nopass", catalog_);
  else apply_rule(u, ">" + std::string(password), catalog_);
  finish(u, catalog_);
  users_["default"] = std::make_shared<const User>(std::move(u));
  publish_locked();
}

void Users::publish_locked() {
  const User& d = *users_["default"];
  default_needs_auth_.store(!d.nopass || !d.enabled, std::memory_order_relaxed);
  generation_.fetch_add(1, std::memory_order_acq_rel);
}

std::string parse_aclfile(std::string_view text, const Catalog& catalog, std::vector<User>* out) {
  out->clear();
  size_t line_no = 0;
  while (!text.empty()) {
    ++line_no;
    const size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ' || line.back() == '\t'))
      line.remove_suffix(1);
    while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
    if (line.empty() || line.front() == '#') continue;
    std::vector<std::string_view> words;
    for (size_t i = 0; i < line.size();) {
      while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
      const size_t start = i;
      while (i < line.size() && line[i] != ' ' && line[i] != '\t') ++i;
      if (i > start) words.push_back(line.substr(start, i - start));
    }
    const std::string where = std::to_string(line_no) + ": ";
    if (words.size() < 2 || words[0] != "user")
      return where + "should start with user keyword";
    for (const User& u : *out)
      if (u.name == words[1])
        return where + "Duplicate user '" + std::string(words[1]) + "' found";
    User u = new_user(std::string(words[1]), catalog);
    for (size_t i = 2; i < words.size(); ++i) {
      if (std::string e = apply_rule(u, words[i], catalog); !e.empty())
        return where + e + ". ";
    }
    out->push_back(std::move(u));
  }
  return {};
}

}  // namespace server::acl
