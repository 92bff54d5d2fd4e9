// server/commands/family.h - the command families and the helpers they share.
//
// One file per family registers its commands (`register_*_family`), each one table entry:
// cmd_string.cc (strings), cmd_keyspace.cc (generic key commands and expiry),
// cmd_connection.cc (PING, AUTH, HELLO, CLIENT, ...), cmd_server.cc (INFO, CONFIG,
// COMMAND, SLOWLOG, ...), cmd_memory.cc (MEMORY), cmd_kv.cc (the fast path, KV.*),
// cmd_cluster.cc (CLUSTER, ASKING, READONLY, READWRITE), cmd_transaction.cc (MULTI, EXEC, ...),
// cmd_pubsub.cc (SUBSCRIBE, PUBLISH, PUBSUB, ...), cmd_script.cc (EVAL, SCRIPT),
// cmd_introspection.cc (LATENCY, MONITOR), cmd_acl.cc (ACL).
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

#include "resp/keepalive.h"
#include "server/command.h"
#include "tiering/key_lock.h"
#include "tiering/value.h"

namespace server {

/// Where a command's keys are, as Redis 7's first/last/step (server/command.h): first 0 = no
/// keys, last -1 = the last argument.
struct KeyRange {
  int first = 0, last = 0, step = 0;
};
inline constexpr KeyRange kNoKeys{};
/// A key range of one key at `at`.
constexpr KeyRange key_at(int at) { return {at, at, 1}; }

/// A command's COMMAND DOCS text: one line, the version that introduced it (Redis's, or
/// stratakv's for its own commands) and its complexity.
struct Docs {
  std::string summary;
  std::string since;
  std::string complexity = "O(1)";
};

/// The one way a family declares its commands into the table: every command is one entry of
/// name, arity, flags, keys, handler and docs, in the family's COMMAND DOCS group. Containers
/// (CLIENT, CONFIG, OBJECT ...) are a spec() whose subcommands are spec()s, then add()ed; hooks
/// for keys a range cannot give (find_keys), SET ... GET's value reads and out-of-band write
/// bytes are set on the table by name after the entry.
class CommandBuilder {
 public:
  CommandBuilder(CommandTable& table, std::string group)
      : table_(table), group_(std::move(group)) {}
  /// One command's spec (for a container's subcommands, or to add()).
  CommandSpec spec(std::string name, int arity, uint32_t flags, KeyRange keys, Handler handler,
                   Docs docs) const;
  /// Registers a command.
  void add(std::string name, int arity, uint32_t flags, KeyRange keys, Handler handler,
           Docs docs) {
    table_.add(spec(std::move(name), arity, flags, keys, handler, std::move(docs)));
  }
  /// Registers a spec made with spec() (a container with its subcommands).
  void add(CommandSpec spec) { table_.add(std::move(spec)); }
  /// The table, for hooks (set_find_keys, set_reads_values, set_write_bytes).
  CommandTable& table() { return table_; }

 private:
  CommandTable& table_;
  std::string group_;
};

void register_string_family(CommandTable& table);
void register_keyspace_family(CommandTable& table);
void register_connection_family(CommandTable& table);
void register_server_family(CommandTable& table);
void register_memory_family(CommandTable& table);
void register_tier_family(CommandTable& table);
void register_kv_family(CommandTable& table);
void register_cluster_family(CommandTable& table);
void register_transaction_family(CommandTable& table);
void register_bit_family(CommandTable& table);
/// EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, SCRIPT (cmd_script.cc).
void register_script_family(CommandTable& table);
/// REPLICAOF, SLAVEOF, ROLE, WAIT, REPLCONF, PSYNC (cmd_replication.cc).
void register_replication_family(CommandTable& table);
/// SUBSCRIBE, PUBLISH, PUBSUB ... (cmd_pubsub.cc).
void register_pubsub_family(CommandTable& table);
/// LATENCY, MONITOR (cmd_introspection.cc), in the server group.
void register_introspection_family(CommandTable& table);
/// ACL (cmd_acl.cc), in the server group.
void register_acl_family(CommandTable& table);
/// Replaces every ACL user with the aclfile's at `path` (start-up, ACL LOAD): "" or the error
/// ("<path>:<line>: <reason>"), nothing changed then. Does file I/O: not on a connection thread.
std::string load_aclfile(Server& server, const std::string& path);
/// LCS (cmd_lcs.cc), in the string group.
void register_lcs_command(CommandTable& table);

/// For a batch that routes each key itself (kPerKeySlots): "" when this node serves `key`'s
/// slot, else the error entry to reply in the key's place: "MOVED <slot> <host:port>", or
/// "CLUSTERDOWN Hash slot not served" when no node serves it. One relaxed load while this node
/// serves every slot.
std::string key_elsewhere(CommandContext& ctx, std::string_view key);
/// key_elsewhere for a batch that only reads (KV.MGET, KV.PREFIX): a READONLY connection's
/// keys of the slots this node holds as a replica are served here too (as the slot stage does
/// for single-slot reads, Connection::replica_read).
std::string read_key_elsewhere(CommandContext& ctx, std::string_view key);

/// A container's HELP reply, as Redis's addReplyHelp: the header line, `lines`, then HELP.
void reply_help(CommandContext& ctx, std::string_view container,
                std::initializer_list<std::string_view> lines);

/// Replies a value as a bulk string: small ones copied, large ones referenced (no copy), the
/// reference held until the socket write completes.
void reply_value(resp::Writer& out, const tiering::ValueRef& value);

/// A keepalive holding one reference to `value` (no allocation), for the parser and writer.
resp::Keepalive value_keepalive(tiering::ValueRef value);

/// The value of argument `i` as a ValueRef: a large bulk read straight into its own value is
/// shared as is (no copy); a small one is copied into a new value (as make_value()).
tiering::ValueRef value_from_arg(const CommandContext& ctx, size_t i);

/// A new value holding `bytes` (as new_value()).
tiering::ValueRef make_value(const CommandContext& ctx, std::string_view bytes);

/// A new value of `size` bytes in use and room for `capacity` (uninitialised). When the region
/// cannot fit it: with a shard lock held (a KeyLock), throws tiering::NeedRoom without evicting
/// (the pipeline makes room with no lock held and runs the command again); else, after
/// eviction per maxmemory-policy failed, throws std::bad_alloc (the pipeline replies -OOM).
/// See Server::allocate_value.
tiering::ValueRef new_value(const CommandContext& ctx, size_t size, size_t capacity = 0);

/// Redis's sds growth (sdsMakeRoomFor): double below 1 MiB, then +1 MiB.
size_t grown_capacity(size_t size);

/// The bytes a command that changes a string in place writes into (APPEND, SETRANGE, SETBIT,
/// BITFIELD): the value of `item` itself when the entry holds the only reference and its block
/// has room for `size` bytes, else a grown copy of it (allocated under the lock: a full region
/// throws NeedRoom before anything changed, and the pipeline runs the command again once it
/// made room). The caller writes and resizes; publish() then makes the change one kSet.
struct Writable {
  tiering::Value* bytes;
  tiering::ValueRef grown;  ///< set when a copy was made

  /// The bytes to change `item`'s value through, with room for `size` bytes.
  static Writable of(CommandContext& ctx, tiering::KeyLock& lock,
                     const tiering::KeyLock::Item* item, size_t size);
  /// Announces the change (set_value of the copy, or modified() in place).
  void publish(tiering::KeyLock& lock, const tiering::KeyLock::Item* item);
};

/// OBJECT ENCODING of a string value: "int", "embstr" (<= 44 bytes) or "raw" (longer, or
/// changed in place by APPEND/SETRANGE), as Redis.
const char* string_encoding(const tiering::Value& value);

}  // namespace server
