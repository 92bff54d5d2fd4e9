// server/command.h - the command table: one entry per command, the single source for the
// request pipeline (arity, flags, auth, keys; server/pipeline.h), COMMAND INFO/DOCS/GETKEYS, the
// SSD tier's loads and the slot ownership stage.
//
// Entries follow Redis 7's command model (src/commands/*.json): arity counts the command name
// (negative = at least), key positions are first/last/step (last -1 = the last argument), or,
// for commands whose keys move with their other arguments (Redis's "movablekeys"), a finder.
// CommandTable::keys is the one key extractor every caller uses.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "resp/parser.h"
#include "resp/writer.h"
#include "server/ascii.h"
#include "server/keyspace_events.h"
#include "tiering/keyspace.h"

namespace server {

class Server;
class Connection;

/// Command flags, named as in Redis's COMMAND INFO.
enum CommandFlag : uint32_t {
  kWrite = 1 << 0,     ///< may modify the keyspace
  kReadonly = 1 << 1,  ///< only reads
  kDenyOom = 1 << 2,   ///< refused when used memory > maxmemory
  kAdmin = 1 << 3,     ///< administrative
  kFast = 1 << 4,      ///< O(1) or O(log N)
  kNoAuth = 1 << 5,    ///< allowed before authentication
  kLoading = 1 << 6,   ///< allowed while loading
  kStale = 1 << 7,     ///< allowed on a stale replica
  kAllowBusy = 1 << 8,
  kNoScript = 1 << 9,
  /// stratakv's own: reads no key's value, only its entry (existence, deadline, stats), so a
  /// key on SSD only is not loaded before it (docs/ssd-tier.md).
  kNoValue = 1 << 10,
  /// stratakv's own: a batch whose reply carries a result per key (KV.MPUT, KV.MGET,
  /// KV.PREFIX, KV.UNPIN). Keys of any slots go together (no -CROSSSLOT, no -MOVED for the request); the
  /// handler answers a -MOVED (or -CLUSTERDOWN) entry for each key another node serves
  /// (docs/cluster.md).
  kPerKeySlots = 1 << 11,
  /// Not logged in the slowlog (EXEC: the commands it runs are, each).
  kSkipSlowlog = 1 << 12,
  /// A Pub/Sub command (Redis's CMD_PUBSUB).
  kPubSub = 1 << 13,
  /// Not shown to MONITOR (Redis's CMD_SKIP_MONITOR); admin commands never are either.
  kSkipMonitor = 1 << 14,
};

/// Everything a handler needs for one call. Valid only during the call.
struct CommandContext {
  Server& server;
  Connection& conn;
  resp::Writer& out;
  const resp::Request& req;
  std::span<const std::string_view> args;  ///< args[0] is the command name as sent
  int64_t now_ms;                          ///< Unix ms at dispatch
  tiering::Keyspace& ks;
  /// Whether the handler may hand work over and let the connection wait for it (the pipeline's
  /// own call: Connection::defer_transfer). False inside EXEC and scripts, which must not
  /// suspend: they run everything inline.
  bool may_suspend = false;
};

using Handler = void (*)(CommandContext&);

/// One command or subcommand.
struct CommandSpec {
  std::string name;   ///< lower case, e.g. "set" or, for a subcommand, "kill"
  int arity = 0;      ///< number of arguments including the name; negative = at least -arity
  uint32_t flags = 0;
  int first_key = 0;  ///< 0 = no keys
  int last_key = 0;   ///< -1 = last argument
  int key_step = 0;
  Handler handler = nullptr;
  std::string group;       ///< COMMAND DOCS group: "string", "generic", "connection", "server"
  std::string summary;     ///< one line, for COMMAND DOCS
  std::string since;       ///< Redis version that introduced the command
  std::string complexity;  ///< for COMMAND DOCS
  std::vector<CommandSpec> subcommands;  ///< for containers such as CLIENT or CONFIG
  /// For commands whose keys sit where first/last/step cannot say (KV.MGET, KV.MPUT,
  /// KV.PREFIX): appends the indexes of the key arguments of `args` to `out`, in order. False
  /// when the arguments do not fit the command's layout (the handler replies the error); `out`
  /// may then hold some indexes. Must not allocate beyond `out`'s growth.
  bool (*find_keys)(std::span<const std::string_view> args, std::vector<size_t>& out) = nullptr;
  /// For commands that read values only with some arguments (SET ... GET): whether this call
  /// does. Null: every call does, unless flags has kNoValue.
  bool (*reads_values)(std::span<const std::string_view> args) = nullptr;
  /// For commands whose values arrive out of band (KV.PUT, KV.MPUT): the bytes of values this
  /// call writes, 0 when its arguments are malformed (the handler replies the error). Null:
  /// the bytes of its arguments. Used to wait for room before a write (docs/ssd-tier.md).
  uint64_t (*write_bytes)(std::span<const std::string_view> args) = nullptr;
  /// The keyspace events its changes raise (keyspace notifications, server/keyspace_events.h):
  /// "set" and "del" unless its family says otherwise (CommandTable::set_events).
  KeyEvents events;

  /// "client|kill" for subcommands, "get" otherwise (set by CommandTable::add).
  std::string full_name;
  /// Dense index of this command or subcommand in [0, CommandTable::size()), assigned by
  /// CommandTable::add in registration order: the slot of its per-worker counters.
  uint32_t id = 0;
};

/// All commands. Filled once at start-up, then read-only (so thread-safe to read).
class CommandTable {
 public:
  CommandTable() = default;
  // Not copyable: the lookup index and all() point into the table's own nodes (a move keeps
  // them, a copy would not).
  CommandTable(const CommandTable&) = delete;
  CommandTable& operator=(const CommandTable&) = delete;
  CommandTable(CommandTable&&) = default;
  CommandTable& operator=(CommandTable&&) = default;

  /// Registers a command (and its subcommands), giving each an id.
  void add(CommandSpec spec);
  /// Number of commands and subcommands registered (ids are below it).
  size_t size() const { return count_; }
  /// Sets the find_keys / reads_values hooks of a registered top-level command.
  void set_find_keys(std::string_view name, decltype(CommandSpec::find_keys) fn);
  void set_reads_values(std::string_view name, decltype(CommandSpec::reads_values) fn);
  void set_write_bytes(std::string_view name, decltype(CommandSpec::write_bytes) fn);
  void set_events(std::string_view name, KeyEvents events);
  /// Case-insensitive (ASCII) lookup of a top-level command; null when unknown. One hash of
  /// the name folded to lower case as it is read, and one probe of an open-addressing index
  /// most of the time: no copy, no libc call (it runs for every request).
  const CommandSpec* find(std::string_view name) const;
  /// Case-insensitive lookup of a subcommand of `container`; null when unknown.
  static const CommandSpec* find_sub(const CommandSpec& container, std::string_view name);
  /// Every top-level command, in registration order.
  const std::vector<const CommandSpec*>& all() const { return order_; }
  /// The command or subcommand `args` names; null when unknown (the pipeline replies the error).
  const CommandSpec* resolve(std::span<const std::string_view> args) const;
  /// Whether calls of `spec` take keys (a key range or a finder): Redis's doesCommandHaveKeys.
  static bool has_keys(const CommandSpec& spec) {
    return spec.first_key > 0 || spec.find_keys != nullptr;
  }
  /// The one key extractor (COMMAND GETKEYS, the SSD tier's loads and prefetch, the slot
  /// stage): appends the indexes of the key arguments of the call `args` (args[0] the command
  /// name) to `out`, in argument order: first/last/step as Redis's getKeysUsingKeySpecs (range
  /// positions past the arguments are skipped), or the spec's find_keys. False when the
  /// arguments do not fit a finder's layout. Allocates only to grow `out`.
  static bool keys(const CommandSpec& spec, std::span<const std::string_view> args,
                   std::vector<size_t>& out) {
    if (spec.find_keys != nullptr) return spec.find_keys(args, out);
    if (spec.first_key > 0 && spec.first_key == spec.last_key) {  // one key: most commands
      if (static_cast<size_t>(spec.first_key) < args.size()) out.push_back(spec.first_key);
      return true;
    }
    return range_keys(spec, args.size(), out);
  }
  /// For a call of `argc` arguments whose content is not all known yet (a request still being
  /// received): appends the key indexes a first/last/step range gives. False for a command with
  /// a finder (its keys depend on the content).
  static bool range_keys(const CommandSpec& spec, size_t argc, std::vector<size_t>& out);
  /// Whether a call reads its keys' values (kNoValue, reads_values).
  static bool reads_values(const CommandSpec& spec, std::span<const std::string_view> args) {
    if (spec.reads_values != nullptr) return spec.reads_values(args);
    return !(spec.flags & kNoValue);
  }
  /// Whether `argc` satisfies the spec's arity.
  static bool arity_ok(const CommandSpec& spec, size_t argc) {
    return spec.arity >= 0 ? argc == static_cast<size_t>(spec.arity)
                           : argc >= static_cast<size_t>(-spec.arity);
  }

 private:
  struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  // Rebuilds index_ over by_name_ (add() calls it: registration happens once, at start-up).
  void rebuild_index();

  std::unordered_map<std::string, CommandSpec, NameHash, std::equal_to<>> by_name_;
  std::vector<const CommandSpec*> order_;
  // find()'s index: a power-of-two number of slots (at least 4 per command), linear probing;
  // each slot holds a command and its name's folded hash, or null.
  struct IndexSlot {
    uint64_t hash = 0;
    const CommandSpec* spec = nullptr;
  };
  std::vector<IndexSlot> index_;
  size_t count_ = 0;
};


}  // namespace server
