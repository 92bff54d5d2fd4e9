// server/script_engine.h - one Lua 5.1 interpreter with Redis 7.0's scripting environment
// (eval.c, script_lua.c): the sandbox, the `redis` table, and the conversions between Lua
// values and RESP replies. It knows no server: redis.call goes through a ScriptHost, so the
// conversions are unit-tested with a fake one (tests/unit/script_engine_test.cc).
//
// The environment, as Redis 7.0.15's (Debian's redis-server, which the tests compare with):
//   - libraries: base (without print, loadfile, dofile, getfenv, setfenv, newproxy), table,
//     string, math (random and randomseed are Redis's rand48), cjson and bit (Debian's
//     lua-cjson and lua-bitop); no os, io, package, debug; cmsgpack and struct are not loaded
//     (docs/scripting.md).
//   - read-only globals: assigning a global or a field of a library table is "Attempt to
//     modify a readonly table"; reading an undefined global is an error.
//   - redis.call, redis.pcall, redis.error_reply, redis.status_reply, redis.sha1hex, redis.log
//     with LOG_DEBUG..LOG_WARNING, redis.setresp, redis.set_repl with REPL_*, redis.
//     replicate_commands, redis.breakpoint, redis.debug, REDIS_VERSION, REDIS_VERSION_NUM.
//   - pcall returns the message of an error table ({err=...}, what redis.call raises) as a
//     string, as Redis 7.0's luaRedisPcall.
//   - a script's body is compiled as the chunk "@user_script", so error texts
//     ("user_script:1: ...") and line numbers are Redis's.
//
// Conversions (Redis's "Conversion between Lua and Redis data types"):
//   RESP -> Lua (what redis.call returns): integer -> number; bulk -> string; nil bulk and nil
//   array -> false; array -> table; status -> {ok=s}; error -> {err=s}; RESP3 (after
//   redis.setresp(3)): null -> nil, boolean -> boolean, double -> {double=n}, map -> table,
//   set -> {elem=true}, big number -> {big_number=s}.
//   Lua -> RESP (the script's return value): number -> integer (truncated); string -> bulk;
//   true -> 1 (after redis.setresp(3): a boolean); false and nil -> nil; table -> array up to its first nil;
//   {ok=s} -> status; {err=s} -> error; {double=n}, {map=t}, {set=t}, {big_number=s}.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

struct lua_State;

namespace server {

/// The server's side of one running script: what redis.call asks for. Called on the thread
/// running the script.
class ScriptHost {
 public:
  enum class Status {
    kRan,      ///< the command ran: its reply (maybe an error reply) is in *reply
    kRefused,  ///< refused before it ran: *error says why ("ERR ..." or a bare message)
    kAbort,    ///< the script must stop now (*error: why); it is raised until the script ends
  };
  virtual ~ScriptHost() = default;
  /// Runs one command (args[0] its name) and appends its reply, in RESP `protocol` (2 or 3,
  /// redis.setresp), to *reply.
  virtual Status call(std::span<const std::string_view> args, int protocol, std::string* reply,
                      std::string* error) = 0;
  /// Asked every ScriptEngine::kHookInstructions Lua instructions: true stops the script with
  /// "Script killed by user with SCRIPT KILL..." (SCRIPT KILL, shutdown).
  virtual bool killed() = 0;
  /// redis.log: `level` 0..3 (LOG_DEBUG, LOG_VERBOSE, LOG_NOTICE, LOG_WARNING).
  virtual void log(int level, std::string_view message) = 0;
};

/// The flags of a script's shebang line (`#!lua flags=no-writes,allow-oom`), Redis 7.0's.
struct ScriptFlags {
  bool shebang = false;  ///< false: EVAL's compatibility mode (no shebang)
  bool no_writes = false, allow_oom = false, allow_stale = false, no_cluster = false,
       allow_cross_slot_keys = false;
  size_t shebang_len = 0;  ///< bytes of the shebang line, its newline excluded
};

/// Parses the shebang line of `body`, if any. Returns "" or Redis's error text ("ERR Unexpected
/// flag in script shebang: x", ...).
std::string parse_script_flags(std::string_view body, ScriptFlags* flags);

/// One interpreter. Not thread-safe: one thread uses it (each script thread has its own).
class ScriptEngine {
 public:
  /// Instructions between two checks of ScriptHost::killed() (Redis's count hook).
  static constexpr int kHookInstructions = 100000;

  ScriptEngine();
  ~ScriptEngine();
  ScriptEngine(const ScriptEngine&) = delete;
  ScriptEngine& operator=(const ScriptEngine&) = delete;

  /// Compiles `body` as the script `sha` (40 lower-case hex digits) unless this interpreter
  /// has it already. Returns "" or the error reply's text ("ERR Error compiling script (new
  /// function): user_script:1: ...").
  std::string load(std::string_view sha, std::string_view body);
  /// Whether the script `sha` is compiled here.
  bool has(std::string_view sha);

  /// The result of a run: RESP bytes of the reply, or an error reply's text (without '-').
  struct Result {
    std::string reply;
    bool error = false;
  };
  /// Runs the compiled script `sha` with KEYS and ARGV and converts its return value to RESP
  /// `protocol` (the client's). redis.call goes through `host`. Errors the script raised or
  /// returned become the error reply, with Redis's " script: <sha>, on @user_script:<line>."
  Result run(std::string_view sha, std::span<const std::string> keys,
             std::span<const std::string> argv, int protocol, ScriptHost& host);

  /// Bytes the interpreter uses (INFO's used_memory_lua).
  size_t memory();

 private:
  friend struct LuaApi;
  void open();
  lua_State* L_ = nullptr;
  ScriptHost* host_ = nullptr;  // during run()
  int call_protocol_ = 2;       // redis.setresp
  bool aborting_ = false;       // a kAbort or a kill: raise again on every line
  std::string abort_error_;
  // redis.call's scratch (members, not locals: a Lua error unwinds with longjmp).
  std::vector<std::string> num_args_;
  std::vector<std::string_view> args_;
  std::string reply_, error_;
};

}  // namespace server
