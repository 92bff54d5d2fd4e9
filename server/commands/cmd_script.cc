// server/commands/cmd_script.cc - EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT
// LOAD|EXISTS|FLUSH|KILL|HELP (Redis 7.0's eval.c; docs/scripting.md).
//
// EVAL checks its arguments and finds the script here, on the I/O thread; the script itself
// runs on a script thread (server/script_runner.h) while the connection waits
// (Connection::defer_script, then the pipeline's finish_script). Inside MULTI/EXEC it runs
// here, under the transaction's locks.

#include "server/arg_parser.h"
#include "server/commands/family.h"
#include "server/connection.h"
#include "server/errors.h"
#include "server/script_runner.h"
#include "server/server.h"
#include "server/sha1.h"
#include "tiering/need_room.h"

namespace server {
namespace {

// EVAL's key finder (evalGetKeys): numkeys at 2, then the keys. False when numkeys is not a
// count of the arguments that follow (the handler replies the error).
bool eval_keys(std::span<const std::string_view> args, std::vector<size_t>& out) {
  if (args.size() < 3) return false;
  const std::optional<int64_t> n = parse_int(args[2]);
  if (!n || *n < 0 || static_cast<uint64_t>(*n) > args.size() - 3) return false;
  for (int64_t i = 0; i < *n; ++i) out.push_back(static_cast<size_t>(3 + i));
  return true;
}

// EVAL and friends (evalGenericCommand). `by_sha`: EVALSHA; `read_only`: the _RO forms.
void eval_generic(CommandContext& ctx, bool by_sha, bool read_only) {
  // MONITOR shows the call before the commands its script runs, whatever becomes of it (eval.c
  // feeds the monitors first; the command is flagged skip_monitor for the pipeline's feed).
  if (ctx.server.monitors().active()) ctx.conn.feed_monitors(ctx.args);
  const std::optional<int64_t> numkeys = parse_int(ctx.args[2]);
  if (!numkeys) return ctx.out.error(err::kNotInteger);
  if (*numkeys > static_cast<int64_t>(ctx.args.size() - 3)) return ctx.out.error(err::kNumkeysTooBig);
  if (*numkeys < 0) return ctx.out.error(err::kNumkeysNegative);

  ScriptRunner& scripts = ctx.server.scripts();
  ScriptCall call;
  if (by_sha) {
    call.sha = to_lower(ctx.args[1]);
    call.body = call.sha.size() == 40 ? scripts.cache().find(call.sha) : nullptr;
    if (call.body == nullptr) return ctx.out.error(err::kNoScript);
  } else {
    call.sha = sha1_hex(ctx.args[1]);
    call.body = scripts.cache().find(call.sha);
    if (call.body == nullptr) call.body = std::make_shared<const std::string>(ctx.args[1]);
  }
  if (std::string e = parse_script_flags(*call.body, &call.flags); !e.empty())
    return ctx.out.error(e);
  // scriptPrepareForRun's checks of a script with a shebang.
  // Redis's pre_command_oom_state: past maxmemory after eviction had its chance (the pipeline
  // makes room for no script: EVAL is no denyoom command). Inside EXEC, under its locks, no
  // room is made (eviction locks shards).
  const bool in_exec = tiering::ShardMutex::held_by_this_thread() != 0;
  call.pre_oom = ctx.server.used_memory_now() > ctx.server.memory_limit() &&
                 (in_exec || !ctx.server.make_room_for_write(ctx.now_ms));
  if (call.flags.shebang) {
    if (call.flags.no_cluster && ctx.server.slot_owner().cluster_enabled())
      return ctx.out.error(err::kScriptNoCluster);
    if (!call.flags.no_writes && read_only) return ctx.out.error(err::kScriptWriteFlagRo);
    if (call.pre_oom && !call.flags.allow_oom && !call.flags.no_writes)
      return ctx.out.error(err::kScriptOomFlag);
  }
  const size_t n = static_cast<size_t>(*numkeys);
  call.keys.assign(ctx.args.begin() + 3, ctx.args.begin() + 3 + n);
  call.argv.assign(ctx.args.begin() + 3 + n, ctx.args.end());
  call.read_only = read_only;
  call.protocol = ctx.out.protocol();
  call.now_ms = ctx.now_ms;
  call.conn = &ctx.conn;
  if (tiering::ShardMutex::reentrant() == nullptr) return ctx.conn.defer_script(std::move(call));
  // Inside EXEC: here, under the transaction's locks.
  ScriptOutcome out = scripts.run_here(call);
  if (out.need_room != 0) throw tiering::NeedRoom(out.need_room);  // EXEC runs again
  if (out.error) ctx.out.error(out.reply);
  else ctx.out.raw(out.reply);
}

void cmd_eval(CommandContext& ctx) { eval_generic(ctx, false, false); }
void cmd_evalsha(CommandContext& ctx) { eval_generic(ctx, true, false); }
void cmd_eval_ro(CommandContext& ctx) { eval_generic(ctx, false, true); }
void cmd_evalsha_ro(CommandContext& ctx) { eval_generic(ctx, true, true); }

void cmd_script_load(CommandContext& ctx) {
  ScriptRunner& scripts = ctx.server.scripts();
  const std::string sha = sha1_hex(ctx.args[2]);
  if (scripts.cache().find(sha) == nullptr) {
    if (std::string e = scripts.compile(sha, ctx.args[2]); !e.empty()) return ctx.out.error(e);
    scripts.cache().add(sha, std::make_shared<const std::string>(ctx.args[2]));
  }
  ctx.out.bulk(sha);
}

void cmd_script_exists(CommandContext& ctx) {
  ScriptCache& cache = ctx.server.scripts().cache();
  ctx.out.array(ctx.args.size() - 2);
  for (size_t i = 2; i < ctx.args.size(); ++i) ctx.out.integer(cache.find(ctx.args[i]) ? 1 : 0);
}

void cmd_script_flush(CommandContext& ctx) {
  if (ctx.args.size() > 3 ||
      (ctx.args.size() == 3 && !iequals(ctx.args[2], "sync") && !iequals(ctx.args[2], "async")))
    return ctx.out.error(err::kScriptFlushOption);
  ctx.server.scripts().cache().flush();
  ctx.out.ok();
}

void cmd_script_kill(CommandContext& ctx) {
  const std::string_view e = ctx.server.scripts().kill(tiering::now_ms());
  if (!e.empty()) return ctx.out.error(e);
  ctx.out.ok();
}

void cmd_script_debug(CommandContext& ctx) {
  if (iequals(ctx.args[2], "no")) return ctx.out.ok();  // debugging is always off
  if (iequals(ctx.args[2], "yes") || iequals(ctx.args[2], "sync"))
    return ctx.out.error(err::kScriptDebugUnsupported);
  ctx.out.error(err::kScriptDebugUsage);
}

void cmd_script_help(CommandContext& ctx) {
  reply_help(ctx, "SCRIPT",
             {"DEBUG (YES|SYNC|NO)",
              "    Set the debug mode for subsequent scripts executed.",
              "EXISTS <sha1> [<sha1> ...]",
              "    Return information about the existence of the scripts in the script cache.",
              "FLUSH [ASYNC|SYNC]",
              "    Flush the Lua scripts cache. Very dangerous on replicas.",
              "    When called without the optional mode argument, the behavior is determined by the",
              "    lazyfree-lazy-user-flush configuration directive. Valid modes are:",
              "    * ASYNC: Asynchronously flush the scripts cache.",
              "    * SYNC: Synchronously flush the scripts cache.",
              "KILL",
              "    Kill the currently executing Lua script.",
              "LOAD <script>",
              "    Load a script into the scripts cache without executing it."});
}

}  // namespace

void register_script_family(CommandTable& t) {
  CommandBuilder b(t, "scripting");
  const char* n = "Depends on the script that is executed.";
  const uint32_t eval = kNoScript | kStale | kSkipMonitor;
  b.add("eval", -3, eval, kNoKeys, cmd_eval, {"Execute a Lua script server side", "2.6.0", n});
  t.set_find_keys("eval", eval_keys);
  b.add("evalsha", -3, eval, kNoKeys, cmd_evalsha, {"Execute a Lua script server side", "2.6.0", n});
  t.set_find_keys("evalsha", eval_keys);
  b.add("eval_ro", -3, eval | kReadonly, kNoKeys, cmd_eval_ro, {"Execute a read-only Lua script server side", "7.0.0", n});
  t.set_find_keys("eval_ro", eval_keys);
  b.add("evalsha_ro", -3, eval | kReadonly, kNoKeys, cmd_evalsha_ro, {"Execute a read-only Lua script server side", "7.0.0", n});
  t.set_find_keys("evalsha_ro", eval_keys);

  CommandSpec script = b.spec("script", -2, 0, kNoKeys, nullptr, {"A container for Lua scripts management commands", "2.6.0", "Depends on subcommand."});
  script.subcommands = {
      b.spec("debug", 3, kNoScript, kNoKeys, cmd_script_debug, {"Set the debug mode for executed scripts.", "3.2.0"}),
      b.spec("exists", -3, kNoScript, kNoKeys, cmd_script_exists, {"Check existence of scripts in the script cache.", "2.6.0", "O(N) with N being the number of scripts to check (so checking a single script is an O(1) operation)."}),
      b.spec("flush", -2, kNoScript, kNoKeys, cmd_script_flush, {"Remove all the scripts from the script cache.", "2.6.0", "O(N) with N being the number of scripts in cache"}),
      b.spec("help", 2, kLoading | kStale, kNoKeys, cmd_script_help, {"Show helpful text about the different subcommands", "5.0.0"}),
      b.spec("kill", 2, kNoScript | kAllowBusy, kNoKeys, cmd_script_kill, {"Kill the script currently in execution.", "2.6.0"}),
      b.spec("load", 3, kNoScript | kStale, kNoKeys, cmd_script_load, {"Load the specified Lua script into the script cache.", "2.6.0", "O(N) with N being the length in bytes of the script body."}),
  };
  b.add(std::move(script));
}

}  // namespace server
