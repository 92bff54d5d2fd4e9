// server/acl.h - ACL users and their rules (Redis 7.0's acl.c, without selectors): the rule
// parser of ACL SETUSER, key and channel patterns (globs: tiering/glob.h, as Redis's
// stringmatchlen), the per-user command bitmap
// and the user registry. A leaf: it knows commands only as a Catalog (ids, names, categories),
// which the server builds from its command table (server/acl_catalog.cc), so it is unit-tested
// alone (tests/unit/acl_test.cc). docs/acl.md describes the behaviour.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace server::acl {

/// Redis 7.0's ACL categories, in ACL CAT's order; a command's categories are a bitmask of
/// 1 << Category.
enum Category : uint8_t {
  kKeyspace, kRead, kWrite, kSet, kSortedSet, kList, kHash, kString, kBitmap, kHyperLogLog,
  kGeo, kStream, kPubSub, kAdmin, kFast, kSlow, kBlocking, kDangerous, kConnection,
  kTransaction, kScripting, kCategoryCount
};
/// The category names ("keyspace" ... "scripting"), indexed by Category.
std::span<const std::string_view> category_names();
/// The category named `name` (case-insensitive, without '@'), or -1.
int category_index(std::string_view name);

/// Where a command's Pub/Sub channels are (Redis's getChannelsFromCommand), for '&' rules.
enum class Channels : uint8_t {
  kNone,
  kFirst,        ///< PUBLISH, SPUBLISH: args[1]
  kAll,          ///< SUBSCRIBE, SSUBSCRIBE: args[1..]
  kAllPatterns,  ///< PSUBSCRIBE: args[1..], matched literally against the user's patterns
};

/// One command or subcommand as the ACL rules see it. Catalog[i] is the command of id i.
struct CatalogEntry {
  std::string name;          ///< full name, lower case: "get", "client|list"
  uint32_t categories = 0;   ///< bitmask of 1 << Category
  int32_t parent = -1;       ///< a subcommand: its container's id
  std::vector<uint32_t> subs;  ///< a container: its subcommands' ids
  Channels channels = Channels::kNone;
};
using Catalog = std::vector<CatalogEntry>;

/// Key pattern permissions (Redis's ACL_READ_PERMISSION / ACL_WRITE_PERMISSION).
enum KeyPerm : uint8_t { kKeyRead = 1, kKeyWrite = 2, kKeyAll = 3 };

/// Lower-case hex SHA-256 of `password` (64 characters), as ACL stores '>' passwords.
std::string sha256_hex(std::string_view password);

/// One user. Immutable once in the registry (Users replaces the whole object on a change), so a
/// connection reads its user with no lock.
struct User {
  struct KeyPattern {
    std::string pattern;
    uint8_t perms = kKeyAll;  ///< KeyPerm bits
  };

  std::string name;
  bool enabled = false;   ///< on / off
  bool nopass = false;    ///< any password authenticates
  /// RESTORE payload flags (sanitize-payload / skip-sanitize-payload): shown and saved as
  /// Redis does; stratakv has no RESTORE to apply them to.
  enum class Sanitize : uint8_t { kDefault, kSanitize, kSkip } sanitize = Sanitize::kDefault;
  std::vector<std::string> passwords;  ///< SHA-256 hex, in the order added, no duplicates
  std::vector<uint64_t> allowed;       ///< bit per command id (Catalog index)
  /// +@all / allcommands: also the commands the catalog will have (Redis's reserved bit).
  bool all_future = false;
  /// +cmd|arg for a command without subcommands (Redis's first-args, e.g. +select|0).
  std::vector<std::pair<uint32_t, std::string>> first_args;
  bool all_keys = false;  ///< allkeys / ~*
  std::vector<KeyPattern> keys;
  bool all_channels = false;  ///< allchannels / &*
  std::vector<std::string> channels;
  /// Every command, every key, every channel: the pipeline checks nothing more (set by
  /// Users after each change).
  bool unrestricted = false;

  /// Whether the user may run command `id` with first argument `arg1` (for first-args rules;
  /// empty when the call has none).
  bool can_run(uint32_t id, std::string_view arg1 = {}) const {
    if (id < allowed.size() * 64 && ((allowed[id >> 6] >> (id & 63)) & 1)) return true;
    return !first_args.empty() && first_arg_allowed(id, arg1);
  }
  /// Whether some key pattern with at least the `perms` (KeyPerm bits) matches `key`
  /// (ACLSelectorCheckKey). perms 0: any pattern will do.
  bool key_allowed(std::string_view key, uint8_t perms) const;
  /// Whether `channel` may be used (ACLCheckChannelAgainstList): a pattern (PSUBSCRIBE) must be
  /// one of the user's patterns literally, a channel must match one of them.
  bool channel_allowed(std::string_view channel, bool is_pattern) const;
  /// Whether the password authenticates this user (enabled, and nopass or its SHA-256 listed).
  bool password_ok(std::string_view password) const;

 private:
  bool first_arg_allowed(uint32_t id, std::string_view arg1) const;
};

/// A new user as Redis's ACLCreateUser: off, no password, no command, no key, no channel
/// (acl-pubsub-default resetchannels).
User new_user(std::string name, const Catalog& catalog);

/// Applies one ACL SETUSER rule to `user` (ACLSetUser). "" on success, else Redis's reason
/// ("Syntax error", "Unknown command or category name in ACL", ...), `user` then partly
/// changed (Users applies rules to a copy). Case-insensitive keywords, as Redis.
std::string apply_rule(User& user, std::string_view op, const Catalog& catalog);

/// The command rules of `user` as ACL LIST / GETUSER print them (ACLDescribeUserCommandRules):
/// +@all or -@all, the categories that best fit the bitmap, then single commands (catalog
/// order) and first-args.
std::string describe_commands(const User& user, const Catalog& catalog);
/// The key patterns ("~*", or "~a* %R~b* %W~c*"; "" for none).
std::string describe_keys(const User& user);
/// The channel patterns ("&*", or "&a* &b"; "" for none).
std::string describe_channels(const User& user);
/// The whole user as ACL LIST prints it after "user <name> " (ACLDescribeUser), and as the
/// aclfile holds it.
std::string describe(const User& user, const Catalog& catalog);

/// All users: the default user always exists. Copy-on-write: a change builds a new User and
/// swaps it in, bumping generation(); readers keep the shared_ptr they hold. Thread-safe.
class Users {
 public:
  /// The default user: on, nopass, ~*, &*, +@all (Redis's ACLInitDefaultUser).
  explicit Users(Catalog catalog);

  const Catalog& catalog() const { return catalog_; }
  /// Bumped by every change; a connection re-reads its user when it moved. Any thread.
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }
  /// Whether a new connection must authenticate (Redis's authRequired: the default user has a
  /// password, or is off). One relaxed load.
  bool default_needs_auth() const { return default_needs_auth_.load(std::memory_order_relaxed); }

  /// The user named `name`, or null.
  std::shared_ptr<const User> find(std::string_view name) const;
  std::shared_ptr<const User> default_user() const { return find("default"); }
  /// The user `name` if `password` authenticates it (enabled; nopass or a listed password),
  /// else null (Redis's ACLCheckUserCredentials).
  std::shared_ptr<const User> authenticate(std::string_view name,
                                           std::string_view password) const;
  /// ACL SETUSER: creates `name` if new, then applies `rules` left to right to a copy; on the
  /// first failing rule nothing changes and the error text (without "ERR ") is returned.
  std::string set_user(std::string_view name, std::span<const std::string_view> rules);
  /// ACL DELUSER of one user (not "default"): whether it existed.
  bool del_user(std::string_view name);
  /// Every user, by name (Redis's rax order).
  std::vector<std::shared_ptr<const User>> all() const;
  /// Replaces every user at once (ACL LOAD): the default user is added if missing.
  void replace_all(std::vector<User> users);
  /// requirepass (config): the default user's passwords become `password` (resetpass then
  /// >password), or nopass when it is empty, as Redis's CONFIG SET requirepass.
  void set_requirepass(std::string_view password);

 private:
  void publish_locked();  // recomputes flags, bumps the generation

  Catalog catalog_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<const User>, std::less<>> users_;
  std::atomic<uint64_t> generation_{1};
  std::atomic<bool> default_needs_auth_{false};
};

/// Parses the aclfile's lines ("user <name> <rule>..."; blank lines and '#' comments skipped)
/// into users. "" on success, else the first error as Redis's ACLLoadFromFile words it
/// ("/path:3: Syntax error" style, without the path).
std::string parse_aclfile(std::string_view text, const Catalog& catalog, std::vector<User>* out);

}  // namespace server::acl
