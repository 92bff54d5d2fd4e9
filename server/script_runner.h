// server/script_runner.h - where scripts run (docs/scripting.md): the script cache (SHA-1 ->
// body), the script threads, the atomic run of one script over its declared keys, and the
// state that -BUSY and SCRIPT KILL read.
//
// A script never runs on an I/O thread (but inside MULTI/EXEC, under EXEC's locks): EVAL's
// connection hands it to a script thread and waits (its coroutine, not its thread), so the
// other clients of that I/O thread are served meanwhile. On the script thread:
//   1. its ScriptEngine (one Lua interpreter per thread) compiles the body unless it has it;
//   2. one tiering::ExecLock takes the shards of the declared KEYS in the one lock order,
//      marked as held for long (the cron and the evictor skip them, the pipeline makes other
//      clients wait on their coroutine and, past busy-reply-threshold, answers -BUSY);
//   3. redis.call runs each command's handler with the shards held (re-entrant KeyLocks); a
//      key not in KEYS is refused;
//   4. an allocation that finds no room throws NeedRoom under the locks: while the script has
//      written nothing, the locks go, room is made with none held and the script runs again
//      (at most 8 runs); once it wrote, the command gets -OOM (nothing applied twice).
// The SSD tier's loads of KEYS happened before (the pipeline's stage 4), never under a lock.
#pragma once

#include <asio/thread_pool.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "server/script_engine.h"

namespace server {

class Connection;
class Server;
class ScriptEngine;

/// What EVAL hands to the runner: one script call, its arguments owned.
struct ScriptCall {
  std::string sha;                          ///< 40 lower-case hex digits
  std::shared_ptr<const std::string> body;  ///< the script's source
  std::vector<std::string> keys, argv;
  ScriptFlags flags;       ///< the shebang's
  bool read_only = false;  ///< EVAL_RO / EVALSHA_RO
  bool pre_oom = false;    ///< used memory was past maxmemory when EVAL came (Redis's
                           ///< pre_command_oom_state)
  int protocol = 2;        ///< the caller's RESP version, for the reply
  int64_t now_ms = 0;      ///< the caller's clock at dispatch
  Connection* conn = nullptr;  ///< the caller (suspended while the script runs)
};

/// One command a script ran (redis.call), for INFO commandstats: counted by the caller's I/O
/// thread when the script is done, as Redis counts the commands a script calls.
struct ScriptCommandStat {
  uint32_t id;  ///< CommandSpec::id
  uint64_t us;
  bool failed;  ///< it replied an error
};

/// How a call ended.
struct ScriptOutcome {
  std::vector<ScriptCommandStat> calls;  ///< the commands it ran (in its last run)
  std::string reply;       ///< RESP bytes, or the error reply's text (without '-')
  bool error = false;
  uint64_t us = 0;         ///< run time, microseconds
  uint64_t need_room = 0;  ///< run_here only: bytes to make room for, then run EXEC again
  /// With the SSD tier: the ticket of the SSD ops the script's writes queued for records they
  /// superseded; the reply waits until they are written (SsdTier::take_barrier). 0: none.
  uint64_t ssd_ticket = 0;
};

/// SHA-1 -> body of every script EVAL ran or SCRIPT LOAD loaded. Thread-safe.
class ScriptCache {
 public:
  /// The body of `sha` (any case), or null.
  std::shared_ptr<const std::string> find(std::string_view sha) const;
  void add(const std::string& sha, std::shared_ptr<const std::string> body);
  /// SCRIPT FLUSH: forgets every script; interpreters start afresh at their next run.
  void flush();
  /// Bumped by flush(): an interpreter older than this is replaced.
  uint64_t generation() const { return generation_.load(std::memory_order_acquire); }
  size_t size() const;

 private:
  mutable std::mutex mu_;
  std::unordered_map<std::string, std::shared_ptr<const std::string>> scripts_;
  std::atomic<uint64_t> generation_{0};
};

/// The script threads and the running scripts. Thread-safe.
class ScriptRunner {
 public:
  explicit ScriptRunner(Server& server);
  ~ScriptRunner();

  /// Starts `threads` script threads (each with its own interpreter, made on first use).
  void start(size_t threads);
  /// Stops every running script (written or not: the server is going away) and joins the
  /// threads. Done callbacks of the stopped scripts have run when it returns.
  void stop();

  ScriptCache& cache() { return cache_; }

  /// Runs `call` on a script thread; `done` is called there with the outcome.
  void submit(ScriptCall call, std::function<void(ScriptOutcome)> done);
  /// Runs `call` on the calling thread, which holds a transaction's shards (EXEC): no locks
  /// of its own. A NeedRoom before any write sets need_room instead of running again.
  ScriptOutcome run_here(ScriptCall& call);
  /// Compiles `body` as `sha` in the calling thread's interpreter (SCRIPT LOAD): "" or the
  /// error reply's text.
  std::string compile(const std::string& sha, std::string_view body);

  /// Whether some script is running: the pipeline's one relaxed load per request.
  bool any_running() const { return running_count_.load(std::memory_order_relaxed) != 0; }
  /// For a command that would lock `shards` (every shard: `all`): how long the longest
  /// running script holding one of them has held its locks, ms (0 while it waits for them),
  /// or -1 when none holds one.
  int64_t holding_ms(std::span<const size_t> shards, bool all, int64_t now_ms) const;
  /// SCRIPT KILL: stops the scripts running for busy-reply-threshold or more. "" (killed),
  /// or the error: kNotBusy (none), kUnkillable (one of them wrote).
  std::string_view kill(int64_t now_ms);

  /// One running script, as -BUSY and SCRIPT KILL see it (script_runner.cc).
  struct Running;

 private:
  ScriptOutcome execute(ScriptCall& call, bool own_locks);
  ScriptEngine& engine();
  void enter(Running* r);
  void leave(Running* r);

  Server& server_;
  ScriptCache cache_;
  std::unique_ptr<asio::thread_pool> pool_;
  std::atomic<bool> stopping_{false};
  std::atomic<int> running_count_{0};
  mutable std::mutex mu_;             // running_
  std::vector<Running*> running_;
};

}  // namespace server
