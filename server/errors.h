// server/errors.h - every error text the server replies, in one place.
//
// Byte-identical to Redis 7.0's (server.c shared objects, t_string.c, networking.c, acl.c) where
// Redis has the error. Each is the text after the leading '-'.
#pragma once

#include <cctype>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace server::err {

inline constexpr std::string_view kSyntax = "ERR syntax error";
inline constexpr std::string_view kNotInteger = "ERR value is not an integer or out of range";
inline constexpr std::string_view kNotFloat = "ERR value is not a valid float";
inline constexpr std::string_view kOverflow = "ERR increment or decrement would overflow";
inline constexpr std::string_view kNanOrInf = "ERR increment would produce NaN or Infinity";
inline constexpr std::string_view kNoSuchKey = "ERR no such key";
inline constexpr std::string_view kWrongType =
    "WRONGTYPE Operation against a key holding the wrong kind of value";
inline constexpr std::string_view kNoAuth = "NOAUTH Authentication required.";
inline constexpr std::string_view kWrongPass =
    "WRONGPASS invalid username-password pair or user is disabled.";
inline constexpr std::string_view kAuthNoPassword =
    "ERR AUTH <password> called without any password configured for the default user. Are you "
    "sure your configuration is correct?";
// ACL (acl.c, server.c processCommand).
inline std::string noperm_command(std::string_view full_name) {
  return "NOPERM this user has no permissions to run the '" + std::string(full_name) +
         "' command";
}
inline constexpr std::string_view kNoPermKey =
    "NOPERM this user has no permissions to access one of the keys used as arguments";
inline constexpr std::string_view kNoPermChannel =
    "NOPERM this user has no permissions to access one of the channels used as arguments";
// EXEC of a queued command the user's rules no longer allow (multi.c execCommand, Redis 7.0):
// the prefix, then one of the three reasons.
inline constexpr std::string_view kExecNoPermCommand =
    "no permission to execute the command or subcommand";
inline constexpr std::string_view kExecNoPermKey = "no permission to touch the specified keys";
inline constexpr std::string_view kExecNoPermChannel =
    "no permission to access one of the channels used as arguments";
inline std::string noperm_at_exec(std::string_view reason) {
  return "NOPERM ACLs rules changed between the moment the transaction was accumulated and the "
         "EXEC call. This command is no longer allowed for the following reason: " +
         std::string(reason);
}
// A script's redis.call of a command its user may not run (script.c scriptVerifyACL); the
// script's location follows, as for any error raised in a script.
// (Without "ERR ": the script engine words a refused call's error as for any other.)
inline constexpr std::string_view kScriptNoPermCommand =
    "The user executing the script can't run this command or subcommand";
inline constexpr std::string_view kScriptNoPermKey =
    "The user executing the script can't access at least one of the keys mentioned in the "
    "command";
inline constexpr std::string_view kScriptNoPermChannel =
    "The user executing the script can't publish to the channel mentioned in the command";
inline std::string no_such_user(std::string_view name) {
  return "ERR No such user '" + std::string(name) + "'";
}
inline constexpr std::string_view kAclUserSpaces =
    "ERR Usernames can't contain spaces or null characters";
inline constexpr std::string_view kAclDelDefault = "ERR The 'default' user cannot be removed";
inline constexpr std::string_view kAclNoFile =
    "ERR This Redis instance is not configured to use an ACL file. You may want to specify "
    "users via the ACL SETUSER command and then issue a CONFIG REWRITE (assuming you have a "
    "Redis configuration file set) in order to store users in the Redis configuration.";
inline constexpr std::string_view kAclGenpassBits =
    "ERR ACL GENPASS argument must be the number of bits for the output password, a positive "
    "number up to 4096";
inline std::string acl_unknown_category(std::string_view name) {
  return "ERR Unknown category '" + std::string(name) + "'";
}
inline std::string acl_user_not_found(std::string_view name) {
  return "ERR User '" + std::string(name) + "' not found";
}
inline std::string acl_dryrun_command(std::string_view full_name) {
  return "This user has no permissions to run the '" + std::string(full_name) + "' command";
}
inline std::string acl_dryrun_key(std::string_view key) {
  return "This user has no permissions to access the '" + std::string(key) + "' key";
}
inline std::string acl_dryrun_channel(std::string_view channel) {
  return "This user has no permissions to access the '" + std::string(channel) + "' channel";
}
inline constexpr std::string_view kDbIndexRange = "ERR DB index is out of range";
inline constexpr std::string_view kOffsetRange = "ERR offset is out of range";
inline constexpr std::string_view kStringTooLong =
    "ERR string exceeds maximum allowed size (proto-max-bulk-len)";
inline constexpr std::string_view kOom =
    "OOM command not allowed when used memory > 'maxmemory'.";
inline constexpr std::string_view kCrossSlot =
    "CROSSSLOT Keys in request don't hash to the same slot";
// cluster.c clusterRedirectClient: a key's slot served by no node, and the cluster down as a
// whole (cluster_state:fail).
inline constexpr std::string_view kClusterDownUnbound = "CLUSTERDOWN Hash slot not served";
inline constexpr std::string_view kClusterDownState = "CLUSTERDOWN The cluster is down";
// cluster.c clusterCommand and the commands only a cluster takes (ASKING, READONLY, READWRITE).
inline constexpr std::string_view kClusterDisabled =
    "ERR This instance has cluster support disabled";
inline constexpr std::string_view kInvalidSlotOrCount = "ERR Invalid slot or number of keys";
inline constexpr std::string_view kInvalidSlotArg = "ERR Invalid slot";
inline constexpr std::string_view kNotAMaster = "ERR The specified node is not a master";
/// "ERR Unknown node <id>" (cluster.c CLUSTER REPLICAS).
inline std::string unknown_node(std::string_view id) {
  return "ERR Unknown node " + std::string(id);
}
/// stratakv's own: a gossip cluster's subcommand (MEET, ADDSLOTS, ...; `name` upper case).
inline std::string gossip_only(std::string_view name) {
  return "ERR CLUSTER " + std::string(name) +
         " is not supported: the cluster's topology is kept in etcd; change it with "
         "stratakv-admin (docs/cluster.md)";
}
inline constexpr std::string_view kMaxClients = "ERR max number of clients reached";
inline constexpr std::string_view kExpireFlags =
    "ERR NX and XX, GT or LT options at the same time are not compatible";
inline constexpr std::string_view kLfuNotSelected =
    "ERR An LFU maxmemory policy is not selected, access frequency not tracked. Please note that "
    "when switching between policies at runtime LRU and LFU data will take some time to adjust.";
inline constexpr std::string_view kNoSuchClient = "ERR No such client";
inline constexpr std::string_view kProtectedMode =
    "DENIED Redis is running in protected mode because protected mode is enabled and no password "
    "is set for the default user. In this mode connections are only accepted from the loopback "
    "interface. If you want to connect from external computers to Redis you may adopt one of the "
    "following solutions: 1) Just disable protected mode sending the command 'CONFIG SET "
    "protected-mode no' from the loopback interface by connecting to Redis from the same host the "
    "server is running, however MAKE SURE Redis is not publicly accessible from internet if you do "
    "so. Use CONFIG REWRITE to make this change permanent. 2) Alternatively you can just disable "
    "the protected mode by editing the Redis configuration file, and setting the protected mode "
    "option to 'no', and then restarting the server. 3) If you started the server manually just "
    "for testing, restart it with the '--protected-mode no' option. 4) Set up an authentication "
    "password for the default user. NOTE: You only need to do one of the above things in order "
    "for the server to start accepting connections from the outside.";

// ---- Redis's texts, by where Redis replies them ----

// db.c, expire.c, object.c (generic key commands).
inline constexpr std::string_view kSameObject = "ERR source and destination objects are the same";
inline constexpr std::string_view kInvalidCursor = "ERR invalid cursor";
/// object.c getRangeLongFromObjectOrReply for an int (COPY's DB).
inline constexpr std::string_view kIntRange =
    "ERR value is out of range, value must between -2147483648 and 2147483647";
inline constexpr std::string_view kExpireGtLt =
    "ERR GT and LT options at the same time are not compatible";
inline constexpr std::string_view kLfuSelected =
    "ERR An LFU maxmemory policy is selected, idle time not tracked. Please note that when "
    "switching between policies at runtime LRU and LFU data will take some time to adjust.";

// t_string.c.
inline constexpr std::string_view kDecrementOverflow = "ERR decrement would overflow";

// networking.c (HELLO, CLIENT).
inline constexpr std::string_view kProtocolVersion =
    "ERR Protocol version is not an integer or out of range";
inline constexpr std::string_view kNoProto = "NOPROTO unsupported protocol version";
inline constexpr std::string_view kHelloNoAuth =
    "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO "
    "AUTH <user> <pass> option can be used to authenticate the client and select the RESP "
    "protocol version at the same time";
inline constexpr std::string_view kClientNameChars =
    "ERR Client names cannot contain spaces, newlines or special characters.";
inline constexpr std::string_view kInvalidClientId = "ERR Invalid client ID";
inline constexpr std::string_view kClientIdPositive = "ERR client-id should be greater than 0";

// server.c (COMMAND GETKEYS, SHUTDOWN), slowlog.c.
inline constexpr std::string_view kInvalidCommand = "ERR Invalid command specified";
inline constexpr std::string_view kNoKeyArguments = "ERR The command has no key arguments";
inline constexpr std::string_view kInvalidArgCount =
    "ERR Invalid number of arguments specified for command";
inline constexpr std::string_view kInvalidArguments = "ERR Invalid arguments specified for command";
inline constexpr std::string_view kNoShutdown = "ERR No shutdown in progress.";
inline constexpr std::string_view kSlowlogCount = "ERR count should be greater than or equal to -1";

// latency.c, replication.c (MONITOR).
inline std::string latency_no_samples(std::string_view event) {
  return "ERR No samples available for event '" + std::string(event) + "'";
}
inline constexpr std::string_view kMonitorDenyBlocking =
    "ERR MONITOR isn't allowed for DENY BLOCKING client";

// ---- stratakv's own texts (no Redis counterpart) ----

// The fast path (docs/fast-path.md): KV.REGISTER, KV.CONNECT, KV.MPUT/KV.MGET.
inline constexpr std::string_view kNoRdma = "ERR RDMA is not available on this server";
inline constexpr std::string_view kShmNeedsFd =
    "ERR KV.REGISTER SHM needs a file descriptor passed over the Unix socket";
inline constexpr std::string_view kVerbsNeedsConnect =
    "ERR KV.REGISTER VERBS needs KV.CONNECT VERBS first";
inline constexpr std::string_view kInvalidGid = "ERR invalid GID: 32 hex digits expected";
inline constexpr std::string_view kInvalidQpAddress =
    "ERR invalid queue pair address (qpn and psn: 24 bits; mtu: 256..4096)";
inline constexpr std::string_view kCountNotPositive = "ERR count must be positive";
/// Redis's cluster.c getSlotOrReply (here: DEBUG SET-SLOT-OWNER).
inline constexpr std::string_view kInvalidSlot = "ERR Invalid or out of range slot";

// ---- bit commands (bitops.c) ----
inline constexpr std::string_view kBitOffset = "ERR bit offset is not an integer or out of range";
inline constexpr std::string_view kBitValue = "ERR bit is not an integer or out of range";
inline constexpr std::string_view kBitArgument = "ERR The bit argument must be 1 or 0.";
inline constexpr std::string_view kBitopNot = "ERR BITOP NOT must be called with a single source key.";
inline constexpr std::string_view kBitfieldRo = "ERR BITFIELD_RO only supports the GET subcommand";

// ---- LCS (t_string.c) ----
inline constexpr std::string_view kLcsLenAndIdx =
    "ERR If you want both the length and indexes, please just use IDX.";
inline constexpr std::string_view kLcsTooLong = "ERR String too long for LCS";
inline constexpr std::string_view kLcsTooBig =
    "ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len";

// ---- transactions (multi.c) ----
// replication.c and server.c: a write on a read-only replica, REPLICAOF in cluster mode,
// WAIT's timeout, PSYNC from a replica without the frames of this server.
inline constexpr std::string_view kReadOnlyReplica =
    "READONLY You can't write against a read only replica.";
inline constexpr std::string_view kReplicaOfCluster = "ERR REPLICAOF not allowed in cluster mode.";
inline constexpr std::string_view kTimeoutNegative = "ERR timeout is negative";
inline constexpr std::string_view kWaitInReplica =
    "ERR WAIT cannot be used with replica instances. Please also note that since Redis 4.0 if a "
    "replica is configured to be writable (which is not the default) writes to replicas are just "
    "local and are not propagated.";
inline constexpr std::string_view kTlsReconfigure =
    "Unable to update TLS configuration. Check server logs.";
inline constexpr std::string_view kPsyncNotStratakv =
    "ERR PSYNC: this primary streams stratakv frames, not an RDB; replicas must be stratakv "
    "nodes (REPLCONF capa stratakv)";
// stratakv's fencing (docs/replication.md): a primary whose lease in etcd may have expired.
// CLUSTERDOWN, so that cluster clients refresh their slot map and retry.
inline constexpr std::string_view kFenced =
    "CLUSTERDOWN Writes are refused: this primary is fenced (its lease in etcd lapsed, or a "
    "manual failover is in progress)";
inline constexpr std::string_view kFailoverNotReplica =
    "ERR You should send CLUSTER FAILOVER to a replica";
inline constexpr std::string_view kFailoverNoEtcd =
    "ERR CLUSTER FAILOVER needs the topology in etcd (cluster.etcd.endpoints)";
inline constexpr std::string_view kAlreadyConnected = "OK Already connected to specified master";

inline constexpr std::string_view kMultiNested = "ERR MULTI calls can not be nested";
inline constexpr std::string_view kExecWithoutMulti = "ERR EXEC without MULTI";
inline constexpr std::string_view kDiscardWithoutMulti = "ERR DISCARD without MULTI";
inline constexpr std::string_view kWatchInMulti = "ERR WATCH inside MULTI is not allowed";
inline constexpr std::string_view kExecAbort =
    "EXECABORT Transaction discarded because of previous errors.";
/// EXEC itself refused inside MULTI (execCommandAbort): "EXECABORT Transaction discarded
/// because of: wrong number of ..." (the error's "ERR " prefix dropped).
inline std::string exec_abort_because(std::string_view error) {
  if (error.starts_with("ERR ")) error.remove_prefix(4);
  return "EXECABORT Transaction discarded because of: " + std::string(error);
}

// ---- scripts (eval.c, script.c, script_lua.c) ----
inline constexpr std::string_view kNoScript = "NOSCRIPT No matching script. Please use EVAL.";
inline constexpr std::string_view kBusy =
    "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE.";
inline constexpr std::string_view kNotBusy = "NOTBUSY No scripts in execution right now.";
inline constexpr std::string_view kUnkillable =
    "UNKILLABLE Sorry the script already executed write commands against the dataset. You can "
    "either wait the script termination or kill the server in a hard way using the SHUTDOWN "
    "NOSAVE command.";
inline constexpr std::string_view kNumkeysTooBig =
    "ERR Number of keys can't be greater than number of args";
inline constexpr std::string_view kNumkeysNegative = "ERR Number of keys can't be negative";
inline constexpr std::string_view kScriptFlushOption =
    "ERR SCRIPT FLUSH only support SYNC|ASYNC option";
inline constexpr std::string_view kScriptWriteFlagRo =
    "ERR Can not execute a script with write flag using *_ro command.";
inline constexpr std::string_view kScriptOomFlag =
    "OOM allow-oom flag is not set on the script, can not run it when used memory > 'maxmemory'";
inline constexpr std::string_view kScriptNoCluster =
    "ERR Can not run script on cluster, 'no-cluster' flag is set.";
inline constexpr std::string_view kScriptDebugUsage = "ERR Use SCRIPT DEBUG YES/SYNC/NO";
/// stratakv's own: the Lua debugger (SCRIPT DEBUG YES|SYNC, redis-cli --ldb) is not served.
inline constexpr std::string_view kScriptDebugUnsupported =
    "ERR SCRIPT DEBUG YES|SYNC is not supported: stratakv has no Lua debugger (docs/scripting.md)";
// script_lua.c: what the `redis` API and the interpreter raise inside a script, as bare
// messages (a script sees {err="ERR <message>"}; uncaught, the reply adds " script: ...").
inline constexpr std::string_view kLuaNoArgs =
    "Please specify at least one argument for this redis lib call";
inline constexpr std::string_view kLuaBadArgType =
    "Lua redis lib command arguments must be strings or integers";
inline constexpr std::string_view kLuaLogArity =
    "redis.log() requires two arguments or more.";
inline constexpr std::string_view kLuaLogLevelType =
    "First argument must be a number (log level).";
inline constexpr std::string_view kLuaLogLevel =
    "Invalid debug level.";
inline constexpr std::string_view kLuaSetrespArity =
    "redis.setresp() requires one argument.";
inline constexpr std::string_view kLuaSetrespVersion =
    "RESP version must be 2 or 3.";
inline constexpr std::string_view kLuaSetReplArity =
    "redis.set_repl() requires one argument.";
inline constexpr std::string_view kLuaSetReplFlags =
    "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.";
inline constexpr std::string_view kLuaArity =
    "wrong number of arguments";
inline constexpr std::string_view kLuaArityOrType =
    "wrong number or type of arguments";
inline constexpr std::string_view kLuaKilled =
    "Script killed by user with SCRIPT KILL...";
inline constexpr std::string_view kLuaReadonlyTable =
    "Attempt to modify a readonly table";
/// stratakv's own: redis.call at a body's top level while it is compiled (never in Redis).
inline constexpr std::string_view kLuaCallOutsideScript =
    "redis.call is only available while a script runs";
/// "Script attempted to access nonexistent global variable '<name>'" (the name appended).
inline constexpr std::string_view kLuaNoGlobalPrefix =
    "Script attempted to access nonexistent global variable '";
inline constexpr std::string_view kLuaCompileError = "ERR Error compiling script (new function): ";
inline constexpr std::string_view kLuaStackLimit = "ERR reached lua stack limit";
// eval.c evalExtractShebangFlags.
inline constexpr std::string_view kShebangInvalid = "ERR Invalid script shebang";
inline constexpr std::string_view kShebangNoEngine = "ERR Invalid engine in script shebang";
inline std::string shebang_engine(std::string_view e) {
  return "ERR Unexpected engine in script shebang: " + std::string(e);
}
inline std::string shebang_option(std::string_view o) {
  return "ERR Unknown lua shebang option: " + std::string(o);
}
inline std::string shebang_flag(std::string_view f) {
  return "ERR Unexpected flag in script shebang: " + std::string(f);
}
/// "ERR Error running script <name>, <message>" (an error that is no error table).
inline std::string lua_run_error(std::string_view name, std::string_view msg) {
  return "ERR Error running script " + std::string(name) + ", " + std::string(msg.substr(0, 100));
}
// What redis.call refuses before running a command: bare messages, which the script sees as
// {err="ERR <message>"} (script_lua.c luaPushError).
inline constexpr std::string_view kScriptUnknownCommand = "Unknown Redis command called from script";
inline constexpr std::string_view kScriptWrongArity =
    "Wrong number of args calling Redis command from script";
inline constexpr std::string_view kScriptNotAllowed = "This Redis command is not allowed from script";
inline constexpr std::string_view kScriptWriteReadOnly =
    "Write commands are not allowed from read-only scripts.";
/// stratakv's own: a script runs atomically over the shards of its declared keys, so a key it
/// did not declare in KEYS is refused (docs/scripting.md).
inline std::string script_undeclared_key(std::string_view key) {
  return "Script attempted to access key '" + std::string(key.substr(0, 128)) +
         "' that is not in KEYS: a script may only touch the keys it declares (docs/scripting.md)";
}
/// stratakv's own: a command that reads or changes keys it names no key of (KEYS, SCAN,
/// DBSIZE, FLUSHALL, INFO ...) or that needs the connection (KV.*) cannot run in a script.
inline std::string script_keyless_command(std::string_view name) {
  return "Script attempted to run '" + std::string(name) +
         "', which touches keys a script cannot declare: a script may only touch the keys it "
         "declares (docs/scripting.md)";
}

/// "ERR scatter-gather list is 10 bytes, total_length is 12" (KV.PUT/KV.MPUT).
inline std::string sgl_length_mismatch(uint64_t sgl_bytes, uint64_t total_length) {
  return "ERR scatter-gather list is " + std::to_string(sgl_bytes) + " bytes, total_length is " +
         std::to_string(total_length);
}

/// "ERR window of 10 bytes is smaller than the value (12 bytes)" (KV.GET/KV.MGET).
inline std::string window_too_small(uint64_t window, uint64_t value_bytes) {
  return "ERR window of " + std::to_string(window) + " bytes is smaller than the value (" +
         std::to_string(value_bytes) + " bytes)";
}

/// "ERR SSD tier read failed: <why>" (a key on SSD could not be loaded for a command).
inline std::string ssd_read_failed(std::string_view why) {
  return "ERR SSD tier read failed: " + std::string(why);
}

// ---- Redis's texts with parameters ----

/// "ERR unknown command 'foo', with args beginning with: 'a' 'b' " (server.c processCommand):
/// the name cut at 128 bytes, then the arguments quoted while less than 128 bytes are shown.
inline std::string unknown_command(std::span<const std::string_view> argv) {
  std::string args;
  for (size_t i = 1; i < argv.size() && args.size() < 128; ++i) {
    const size_t room = 128 - args.size();
    args.append("'").append(argv[i].substr(0, room)).append("' ");
  }
  std::string text = "ERR unknown command '";
  text.append(argv.empty() ? std::string_view() : argv[0].substr(0, 128))
      .append("', with args beginning with: ")
      .append(args);
  return text;
}

/// "ERR unknown subcommand or wrong number of arguments for 'get'. Try SLOWLOG HELP."
/// (networking.c addReplySubcommandSyntaxError; `container` is upper-cased).
inline std::string subcommand_syntax(std::string_view sub, std::string_view container) {
  std::string upper(container);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return "ERR unknown subcommand or wrong number of arguments for '" +
         std::string(sub.substr(0, 128)) + "'. Try " + upper + " HELP.";
}

/// "ERR Unknown option or number of arguments for CONFIG SET - 'foo'" (config.c).
inline std::string config_set_unknown(std::string_view names) {
  return "ERR Unknown option or number of arguments for CONFIG SET - '" + std::string(names) +
         "'";
}

/// "ERR CONFIG SET failed (possibly related to argument 'maxmemory') - <why>" (config.c).
inline std::string config_set_failed(std::string_view name, std::string_view why) {
  return "ERR CONFIG SET failed (possibly related to argument '" + std::string(name) + "') - " +
         std::string(why);
}

/// "ERR Unsupported option foo" (expire.c, EXPIRE's NX/XX/GT/LT).
inline std::string unsupported_option(std::string_view option) {
  return "ERR Unsupported option " + std::string(option);
}

/// "ERR Syntax error in HELLO option 'foo'" (networking.c helloCommand).
inline std::string hello_syntax(std::string_view option) {
  return "ERR Syntax error in HELLO option '" + std::string(option) + "'";
}

/// "ERR Unknown client type 'foo'" (networking.c, CLIENT LIST TYPE).
inline std::string unknown_client_type(std::string_view type) {
  return "ERR Unknown client type '" + std::string(type) + "'";
}

/// "ERR Unrecognized option 'foo'" (networking.c, CLIENT SETINFO; Redis 7.2).
inline std::string unrecognized_option(std::string_view option) {
  return "ERR Unrecognized option '" + std::string(option) + "'";
}

/// "ERR lib-name cannot contain spaces, newlines or special characters." (CLIENT SETINFO).
inline std::string client_attr_chars(std::string_view attr) {
  return "ERR " + std::string(attr) + " cannot contain spaces, newlines or special characters.";
}

/// The Pub/Sub context check of processCommand (server.c): a command a RESP2 client with a
/// subscription may not run; `command` is its full name ("get", "config|get").
inline std::string subscribed_context(std::string_view command) {
  return "ERR Can't execute '" + std::string(command) +
         "': only (P|S)SUBSCRIBE / (P|S)UNSUBSCRIBE / PING / QUIT / RESET are allowed in this "
         "context";
}
/// "ERR wrong number of arguments for 'get' command"
inline std::string wrong_arity(std::string_view command) {
  return "ERR wrong number of arguments for '" + std::string(command) + "' command";
}

/// "MOVED 3999 127.0.0.1:6381" (cluster.c clusterRedirectClient)
inline std::string moved(uint16_t slot, std::string_view address) {
  return "MOVED " + std::to_string(slot) + " " + std::string(address);
}

/// A value that can never be stored, refused at its bulk header (no Redis equivalent: Redis
/// reads it whole, then answers kOom): "OOM value of <bytes> bytes is larger than <limit name>
/// (<limit> bytes)". `limit_name`: "maxmemory" or "memory.capacity" (when maxmemory is 0).
inline std::string value_too_large(uint64_t bytes, std::string_view limit_name, uint64_t limit) {
  return "OOM value of " + std::to_string(bytes) + " bytes is larger than " +
         std::string(limit_name) + " (" + std::to_string(limit) + " bytes)";
}

/// "ERR invalid expire time in 'set' command"
inline std::string invalid_expire(std::string_view command) {
  return "ERR invalid expire time in '" + std::string(command) + "' command";
}

/// "ERR unknown subcommand 'x'. Try CLIENT HELP."
inline std::string unknown_subcommand(std::string_view sub, std::string_view container) {
  std::string upper(container);
  for (char& c : upper) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return "ERR unknown subcommand '" + std::string(sub.substr(0, 128)) + "'. Try " + upper +
         " HELP.";
}

}  // namespace server::err
