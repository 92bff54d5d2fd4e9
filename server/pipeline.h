// server/pipeline.h - the request pipeline: a request resolved once into a PreparedCommand, and
// the stages every request passes, in this order (docs/design.md, "A request, end to end"):
//
//   1. lookup and arity        prepare()                        (pipeline.cc)
//   2. auth and ACL            prepare(): NOAUTH, then the user's command bitmap, key
//                              patterns (read/write per the command's flags) and channels
//                              (server/acl.h; -NOPERM)
//   3. slot ownership          prepare(); for a large bulk still being received,
//                              unowned_slot_before(), which Connection::allocate_bulk asks
//                              before it takes a block of the region (connection.cc)
//   3a. subscribed mode      Connection::subscribed_stage (pipeline.cc): in RESP2 with a
//                              subscription only (P|S)SUBSCRIBE, (P|S)UNSUBSCRIBE, PING, QUIT
//                              and RESET run (Redis's Pub/Sub context check)
//   3b. transaction queueing  Connection::queue_stage (pipeline.cc): inside MULTI the command
//                              is queued, not run; a refused one flags the transaction.
//                              EXEC runs the queue: Connection::exec (exec.cc)
//   4. loads from the SSD tier Connection::ssd_pin / ssd_load   (connection_ssd.cc)
//   5. room and -OOM           Connection::room_for_write (pipeline.cc); with the SSD tier,
//                              first the back-pressure wait, Connection::ssd_throttle; no
//                              room while copies in flight or values queued for the disk hold
//                              memory: wait for it and run again (wait_for_room)
//   6. the handler             Connection::call (pipeline.cc): tiering::NeedRoom -> make room
//                              with no lock held, run it again; WaitForRoom -> as in 5;
//                              std::bad_alloc -> -OOM.
//                              EVAL's script runs on a script thread (finish_script), a large
//                              fast-path copy on the transfer pool (finish_transfer), this
//                              connection waiting on its coroutine
//   7. write events            the keyspace tells its observers itself (tiering/); keyspace
//                              notifications are published when the handler returned
//                              (KeyspaceEvents::CommandScope in call()); the reply
//                              waits until SSD records it superseded are gone
//                              (Connection::ssd_release / ssd_wait)
//   8. stats and the slowlog   Connection::record (pipeline.cc)
//
// Connection::process runs them all for one request, synchronously, without the SSD tier;
// Connection::process_tiered (a coroutine: loads and waits) with it. Both are in pipeline.cc.
// The checks follow Redis 7.0's processCommand (server.c): unknown command, arity, NOAUTH,
// cluster redirection (getNodeByQuery), OOM, then MULTI's queueing.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "resp/parser.h"
#include "resp/writer.h"
#include "server/acl.h"
#include "server/command.h"

namespace server {

class Server;

/// A request resolved once: what stages 1-3 decided, and what the later stages need. One per
/// connection, reused from request to request (its vectors keep their capacity: no allocation
/// per request once they have grown). Valid while the request's arguments are.
struct PreparedCommand {
  /// The outcome of stages 1-3.
  enum class Verdict : uint8_t {
    kRun,                ///< every check passed: the command runs
    kUnknownCommand,     ///< ERR unknown command '...', with args beginning with: ...
    kUnknownSubcommand,  ///< ERR unknown subcommand '...'. Try X HELP.
    kWrongArity,         ///< ERR wrong number of arguments for '...' command
    kNoAuth,             ///< NOAUTH Authentication required.
    kNoPermCommand,      ///< NOPERM ... to run the '...' command (ACL)
    kNoPermKey,          ///< NOPERM ... one of the keys used as arguments (ACL)
    kNoPermChannel,      ///< NOPERM ... one of the channels used as arguments (ACL)
    kMoved,              ///< MOVED <slot> <host:port>: a key in a slot another node serves
    kCrossSlot,          ///< CROSSSLOT Keys in request don't hash to the same slot
    kClusterDownUnbound, ///< CLUSTERDOWN Hash slot not served (cluster mode)
    kClusterDownState,   ///< CLUSTERDOWN The cluster is down (cluster mode)
    kReadOnlyReplica,    ///< READONLY You can't write against a read only replica.
    kFenced,             ///< CLUSTERDOWN ... fenced: a primary whose lease may have expired
    kRefused,            ///< the error text in `refusal` (a bulk too large to ever store)
  };

  Verdict verdict = Verdict::kUnknownCommand;
  /// kNoPermKey / kNoPermChannel: the index of the argument refused (ACL LOG's object).
  uint32_t denied_arg = 0;
  /// The command or subcommand; null only for kUnknownCommand / kUnknownSubcommand.
  const CommandSpec* spec = nullptr;
  /// Indexes of the key arguments (CommandTable::keys, the one key extractor), in order,
  /// found when a later stage asks for them: the slot stage (cluster mode, or while another
  /// node serves some slot) or the SSD tier's. Empty otherwise.
  std::vector<size_t> keys;
  /// slots[i] is the hash slot of the argument keys[i] (cluster::key_slot), computed when the
  /// slot stage asks: in cluster mode, or while another node serves some slot. Empty
  /// otherwise (Redis too computes slots only in cluster mode).
  std::vector<uint16_t> slots;
  /// kMoved: the slot redirected, and the "host:port" serving it.
  uint16_t moved_slot = 0;
  std::string moved_to;
  /// kRefused: the error reply.
  std::string refusal;
  /// A denyoom command (Redis's CMD_DENYOOM): waits for room, gets -OOM past maxmemory.
  bool writes = false;
  /// With the SSD tier (whose stages alone use it): for a write, the bytes of values it brings
  /// that are not in the memory region yet (its arguments, less large bulks read straight into
  /// region blocks; KV.PUT/KV.MPUT: the lengths their descriptors name). 0 otherwise.
  uint64_t write_bytes = 0;
  /// With the SSD tier: whether the call reads its keys' values (CommandTable::reads_values),
  /// so their values on SSD only are loaded before it runs. False otherwise.
  bool reads_values = false;

  bool runs() const { return verdict == Verdict::kRun; }
};

/// Stages 1-3 for `req` (req[0] the command name) into `out`: lookup of the command (one table
/// lookup, subcommand included) and its arity, authentication (`authenticated`, or a default
/// user without password, or a no_auth command), the ACL of `user` (null: none checked; an
/// unrestricted user costs one branch), then every key's slot against the server's SlotOwner
/// (and, in cluster mode, that they share one slot). The keys, slots, write bytes and
/// reads_values are filled (as their comments say) only when the verdict is kRun, kMoved or
/// kCrossSlot. Allocates nothing once `out`'s vectors have grown, but for a redirect. Thread-safe (reads the
/// read-only table and the slot map).
void prepare(Server& server, const resp::Request& req, bool authenticated,
             const acl::User* user, PreparedCommand& out);

/// The ACL check of stage 2 alone, for a call already looked up (`spec`, args[0] its name):
/// kRun, kNoPermCommand, kNoPermKey or kNoPermChannel, the argument refused in `*denied_arg`.
/// `keys` is scratch space (its capacity kept). Also what scripts' redis.call and EXEC ask.
PreparedCommand::Verdict acl_check(const Server& server, const acl::User& user,
                                   const CommandSpec& spec, std::span<const std::string_view> args,
                                   std::vector<size_t>& keys, uint32_t* denied_arg);

/// Stage 3 for a request still being received, when a large bulk at `index` of a request of
/// `argc` arguments is about to be allocated: the slot of a key before it (among `known`, the
/// arguments received so far) that this node does not serve, else -1. Also -1 when stages 1-2
/// would refuse the request (they reply first) or when its keys depend on arguments not
/// received yet (a command with a key finder): the pipeline checks it once it is whole.
/// Cheap (one relaxed load) while this node serves every slot. Thread-safe.
int unowned_slot_before(Server& server, std::span<const std::string_view> known, size_t argc,
                        bool authenticated, const acl::User* user);

/// Replies the error of a request prepare() refused (verdict != kRun), as Redis 7.0 does.
void reply_refusal(const PreparedCommand& cmd, std::span<const std::string_view> args,
                   resp::Writer& out);

}  // namespace server
