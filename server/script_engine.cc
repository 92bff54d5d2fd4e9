// server/script_engine.cc - the Lua interpreter and Redis 7.0's scripting environment
// (script_engine.h): the `redis` table, the kill hook, loading and running scripts. The value
// conversions are in lua_values.cc, the read-only environment in lua_sandbox.cc. Functions called from Lua are plain C functions: a Lua error unwinds with
// longjmp, so none of them holds a C++ object with a destructor on its stack when it raises.
#include "server/script_engine.h"

#include <lua.hpp>

extern "C" {
int luaopen_cjson(lua_State* L);  // Debian's lua-cjson (lua-cjson.h)
int luaopen_bit(lua_State* L);    // Debian's lua-bitop (lua-bitop.h)
}

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <cstring>
#include <utility>

#include "resp/writer.h"
#include "server/errors.h"
#include "server/lua_sandbox.h"
#include "server/lua_values.h"
#include "server/sha1.h"
#include "server/version.h"

namespace server {

using lua::mark_counted;
using lua::push_error;
using lua::push_reply;
using lua::string_field;
using lua::to_int;
using lua::trim_crlf;
using lua::write_value;

namespace {

// The registry key of the engine (for the hook) and of the error handler.
char kEngineKey, kErrorHandlerKey;

// ---- the redis table ----

ScriptEngine* engine_of(lua_State* L) {
  lua_pushlightuserdata(L, &kEngineKey);
  lua_rawget(L, LUA_REGISTRYINDEX);
  auto* e = static_cast<ScriptEngine*>(lua_touserdata(L, -1));
  lua_pop(L, 1);
  return e;
}

// Raises the error table on the top (luaError).
int raise_table(lua_State* L) { return lua_error(L); }

}  // namespace

// The C functions of the `redis` table and the hook; a friend of ScriptEngine.
struct LuaApi {
  static int call(lua_State* L, bool raise_error);
  static int redis_call(lua_State* L) { return call(L, true); }
  static int redis_pcall(lua_State* L) { return call(L, false); }
  static void hook(lua_State* L, lua_Debug*);
  static int log(lua_State* L);
  static int setresp(lua_State* L);
};

int LuaApi::call(lua_State* L, bool raise_error) {
  ScriptEngine* e = engine_of(L);
  if (e->aborting_) {
    push_error(L, e->abort_error_);
    return raise_table(L);
  }
  if (e->host_ == nullptr) {  // a body's own top level, run as it is defined
    push_error(L, err::kLuaCallOutsideScript);
    return raise_table(L);
  }
  const int argc = lua_gettop(L);
  if (argc == 0) {
    push_error(L, err::kLuaNoArgs);
    return raise_error ? raise_table(L) : 1;
  }
  // Arguments: strings as they are, numbers as %.17g (luaArgsToRedisArgv).
  e->num_args_.resize(static_cast<size_t>(argc));
  e->args_.clear();
  bool bad = false;
  for (int j = 1; j <= argc; ++j) {
    const int t = lua_type(L, j);
    if (t == LUA_TNUMBER) {
      char buf[64];
      const int n = std::snprintf(buf, sizeof buf, "%.17g", static_cast<double>(lua_tonumber(L, j)));
      e->num_args_[j - 1].assign(buf, static_cast<size_t>(n));
      e->args_.emplace_back(e->num_args_[j - 1]);
    } else if (t == LUA_TSTRING) {
      size_t n = 0;
      const char* s = lua_tolstring(L, j, &n);
      e->args_.emplace_back(s, n);
    } else {
      bad = true;
      break;
    }
  }
  if (bad) {
    push_error(L, err::kLuaBadArgType);
    return raise_error ? raise_table(L) : 1;
  }
  e->reply_.clear();
  e->error_.clear();
  const ScriptHost::Status st =
      e->host_->call(e->args_, e->call_protocol_, &e->reply_, &e->error_);
  if (st == ScriptHost::Status::kAbort) {
    e->aborting_ = true;
    e->abort_error_ = e->error_;
    lua_sethook(L, &LuaApi::hook, LUA_MASKLINE, 0);
    push_error(L, e->error_);
    return raise_table(L);
  }
  if (st == ScriptHost::Status::kRefused) {
    push_error(L, e->error_);
    mark_counted(L);
    return raise_error ? raise_table(L) : 1;
  }
  const char* p = e->reply_.data();
  push_reply(L, p, p + e->reply_.size());
  if (raise_error && !e->reply_.empty() && e->reply_[0] == '-') return raise_table(L);
  return 1;
}

void LuaApi::hook(lua_State* L, lua_Debug*) {
  ScriptEngine* e = engine_of(L);
  if (!e->aborting_ && e->host_ != nullptr && e->host_->killed()) {
    e->aborting_ = true;
    e->abort_error_ = err::kLuaKilled;
    // Every line from now on raises again, so a pcall cannot keep the script alive.
    lua_sethook(L, &LuaApi::hook, LUA_MASKLINE, 0);
  }
  if (e->aborting_) {
    push_error(L, e->abort_error_);
    raise_table(L);
  }
}

namespace {

int redis_sha1hex(lua_State* L) {
  if (lua_gettop(L) != 1) {
    push_error(L, err::kLuaArity);
    return raise_table(L);
  }
  size_t n = 0;
  const char* s = lua_tolstring(L, 1, &n);
  char hex[41];
  {
    const std::string h = sha1_hex(std::string_view(s ? s : "", s ? n : 0));
    std::memcpy(hex, h.data(), 40);
  }
  lua_pushlstring(L, hex, 40);
  return 1;
}

// {field=<the one string argument>}, or the error table err::kLuaArityOrType.
int single_field(lua_State* L, const char* field) {
  if (lua_gettop(L) != 1 || lua_type(L, -1) != LUA_TSTRING) {
    push_error(L, err::kLuaArityOrType);
    return 1;
  }
  lua_newtable(L);
  lua_pushstring(L, field);
  lua_pushvalue(L, -3);
  lua_settable(L, -3);
  return 1;
}

int redis_error_reply(lua_State* L) {
  if (lua_gettop(L) != 1 || lua_type(L, -1) != LUA_TSTRING) {
    push_error(L, err::kLuaArityOrType);
    return 1;
  }
  size_t n = 0;
  const char* s = lua_tolstring(L, 1, &n);
  char small[256];
  if (n > 0 && s[0] == '-') {
    push_error(L, std::string_view(s, n));
  } else if (n + 1 < sizeof small) {
    small[0] = '-';
    std::memcpy(small + 1, s, n);
    push_error(L, std::string_view(small, n + 1));
  } else {
    push_error(L, "-" + std::string(s, n));
  }
  return 1;
}

int redis_status_reply(lua_State* L) { return single_field(L, "ok"); }

}  // namespace

int LuaApi::log(lua_State* L) {
  const int argc = lua_gettop(L);
  if (argc < 2) {
    push_error(L, err::kLuaLogArity);
    return raise_table(L);
  }
  if (!lua_isnumber(L, 1)) {
    push_error(L, err::kLuaLogLevelType);
    return raise_table(L);
  }
  const int level = to_int(lua_tonumber(L, 1));
  if (level < 0 || level > 3) {
    push_error(L, err::kLuaLogLevel);
    return raise_table(L);
  }
  // The message: the other arguments, space separated (non-strings skipped).
  luaL_Buffer b;
  luaL_buffinit(L, &b);
  for (int j = 2; j <= argc; ++j) {
    size_t n = 0;
    const char* s = lua_tolstring(L, j, &n);
    if (s == nullptr) continue;
    if (j != 2) luaL_addchar(&b, ' ');
    luaL_addlstring(&b, s, n);
  }
  luaL_pushresult(&b);
  size_t n = 0;
  const char* msg = lua_tolstring(L, -1, &n);
  ScriptEngine* e = engine_of(L);
  if (e->host_ != nullptr) e->host_->log(level, std::string_view(msg, n));
  return 0;
}

int LuaApi::setresp(lua_State* L) {
  if (lua_gettop(L) != 1) {
    push_error(L, err::kLuaSetrespArity);
    return raise_table(L);
  }
  const int v = to_int(lua_tonumber(L, -1));
  if (v != 2 && v != 3) {
    push_error(L, err::kLuaSetrespVersion);
    return raise_table(L);
  }
  engine_of(L)->call_protocol_ = v;
  return 0;
}

namespace {

int redis_set_repl(lua_State* L) {
  if (lua_gettop(L) != 1) {
    push_error(L, err::kLuaSetReplArity);
    return raise_table(L);
  }
  const int flags = to_int(lua_tonumber(L, -1));
  if ((flags & ~3) != 0) {
    push_error(L, err::kLuaSetReplFlags);
    return raise_table(L);
  }
  return 0;  // a script's effects always replicate (the write path's changes)
}

int redis_true(lua_State* L) {
  lua_pushboolean(L, 1);
  return 1;
}
int redis_false(lua_State* L) {
  lua_pushboolean(L, 0);
  return 1;
}
int redis_nothing(lua_State*) { return 0; }

void set_function(lua_State* L, const char* name, lua_CFunction fn) {
  lua_pushstring(L, name);
  lua_pushcfunction(L, fn);
  lua_settable(L, -3);
}
void set_number(lua_State* L, const char* name, lua_Number v) {
  lua_pushstring(L, name);
  lua_pushnumber(L, v);
  lua_settable(L, -3);
}

// Redis's redis_version as a number: 7.0.15 -> 0x07000f.
lua_Number version_num() {
  int a = 0, b = 0, c = 0;
  std::sscanf(STRATAKV_REDIS_VERSION, "%d.%d.%d", &a, &b, &c);
  return static_cast<lua_Number>((a << 16) | (b << 8) | c);
}

// Redis's error handler (eval.c): the error as a table, with the source and line of the Lua
// function that raised it (of the caller when a C function raised it).
const char kErrorHandler[] =
    "local dbg = debug\n"
    "local error_handler = function (err)\n"
    "  local i = dbg.getinfo(2,'nSl')\n"
    "  if i and i.what == 'C' then\n"
    "    i = dbg.getinfo(3,'nSl')\n"
    "  end\n"
    "  if type(err) ~= 'table' then\n"
    "    err = {err='ERR ' .. tostring(err)}\n"
    "  end\n"
    "  if i then\n"
    "    err['source'] = i.source\n"
    "    err['line'] = i.currentline\n"
    "  end\n"
    "  return err\n"
    "end\n"
    "return error_handler\n";

void open_lib(lua_State* L, const char* name, lua_CFunction fn) {
  lua_pushcfunction(L, fn);
  lua_pushstring(L, name);
  lua_call(L, 1, 0);
}

std::string function_name(std::string_view sha) { return "f_" + std::string(sha); }

char kEnvKey;  // registry: the scripts' environment (the globals' proxy)

}  // namespace

ScriptEngine::ScriptEngine() { open(); }

ScriptEngine::~ScriptEngine() {
  if (L_ != nullptr) lua_close(L_);
}

void ScriptEngine::open() {
  lua_State* L = luaL_newstate();
  L_ = L;
  lua_pushlightuserdata(L, &kEngineKey);
  lua_pushlightuserdata(L, this);
  lua_rawset(L, LUA_REGISTRYINDEX);
  // Libraries (luaLoadLibraries): base, table, string, math, and debug for our own set-up
  // (removed below).
  open_lib(L, "", luaopen_base);
  open_lib(L, LUA_TABLIBNAME, luaopen_table);
  open_lib(L, LUA_STRLIBNAME, luaopen_string);
  open_lib(L, LUA_MATHLIBNAME, luaopen_math);
  open_lib(L, LUA_DBLIBNAME, luaopen_debug);
  // cjson and bit, as Redis bundles them (global tables whatever the build's defaults).
  for (auto [name, fn] : {std::pair<const char*, lua_CFunction>{"cjson", luaopen_cjson},
                          {"bit", luaopen_bit}}) {
    lua_pushcfunction(L, fn);
    lua_pushstring(L, name);
    lua_call(L, 1, 1);
    lua_setglobal(L, name);
  }
  // luaRemoveUnsupportedFunctions.
  lua_pushnil(L);
  lua_setglobal(L, "loadfile");
  lua_pushnil(L);
  lua_setglobal(L, "dofile");
  // math.random, math.randomseed: Redis's.
  lua::use_redis_random(L);
  // The redis table.
  lua_newtable(L);
  set_function(L, "call", &LuaApi::redis_call);
  set_function(L, "pcall", &LuaApi::redis_pcall);
  set_function(L, "log", &LuaApi::log);
  set_number(L, "LOG_DEBUG", 0);
  set_number(L, "LOG_VERBOSE", 1);
  set_number(L, "LOG_NOTICE", 2);
  set_number(L, "LOG_WARNING", 3);
  set_function(L, "setresp", &LuaApi::setresp);
  set_function(L, "sha1hex", redis_sha1hex);
  set_function(L, "error_reply", redis_error_reply);
  set_function(L, "status_reply", redis_status_reply);
  set_function(L, "set_repl", redis_set_repl);
  set_number(L, "REPL_NONE", 0);
  set_number(L, "REPL_AOF", 1);
  set_number(L, "REPL_SLAVE", 2);
  set_number(L, "REPL_REPLICA", 2);
  set_number(L, "REPL_ALL", 3);
  set_function(L, "replicate_commands", redis_true);
  set_function(L, "breakpoint", redis_false);
  set_function(L, "debug", redis_nothing);
  lua_pushstring(L, "REDIS_VERSION");
  lua_pushstring(L, STRATAKV_REDIS_VERSION);
  lua_settable(L, -3);
  set_number(L, "REDIS_VERSION_NUM", version_num());
  lua_setglobal(L, "redis");
  // The error handler, kept in the registry (out of the scripts' reach).
  lua_pushlightuserdata(L, &kErrorHandlerKey);
  if (luaL_loadbuffer(L, kErrorHandler, sizeof kErrorHandler - 1, "@err_handler_def") == 0)
    lua_pcall(L, 0, 1, 0);
  lua_rawset(L, LUA_REGISTRYINDEX);
  // Not for scripts (Redis 7.0.15 has none of them).
  for (const char* name : {"debug", "print", "getfenv", "setfenv", "newproxy", "module",
                           "require", "loadfile", "dofile"}) {
    lua_pushstring(L, name);
    lua_pushnil(L);
    lua_rawset(L, LUA_GLOBALSINDEX);
  }
  // Read-only globals and library tables; the scripts' environment, kept in the registry.
  static constexpr const char* kLibs[] = {"redis", "string", "table", "math", "coroutine",
                                          "cjson", "bit"};
  lua_pushlightuserdata(L, &kEnvKey);
  lua::push_readonly_globals(L, kLibs);
  lua_rawset(L, LUA_REGISTRYINDEX);
  lua_settop(L, 0);
}

std::string ScriptEngine::load(std::string_view sha, std::string_view body) {
  if (has(sha)) return {};
  ScriptFlags flags;
  if (std::string err = parse_script_flags(body, &flags); !err.empty()) return err;
  // As Redis 7.0.15's luaCreateFunction: the body is the function (chunk "@user_script"), the
  // shebang line left out but its newline kept (line numbers stay the user's); it is kept in
  // the registry, out of the scripts' reach, and runs with the read-only globals.
  const std::string_view code = body.substr(flags.shebang_len);
  lua_State* L = L_;
  if (luaL_loadbuffer(L, code.data(), code.size(), "@user_script") != 0) {
    std::string text(err::kLuaCompileError);
    const char* m = lua_tostring(L, -1);
    text += m ? m : "";
    lua_pop(L, 1);
    return text;
  }
  lua_pushlightuserdata(L, &kEnvKey);
  lua_rawget(L, LUA_REGISTRYINDEX);
  lua_setfenv(L, -2);
  const std::string name = function_name(sha);
  lua_pushlstring(L, name.data(), name.size());
  lua_insert(L, -2);
  lua_rawset(L, LUA_REGISTRYINDEX);
  return {};
}

bool ScriptEngine::has(std::string_view sha) {
  const std::string name = function_name(sha);
  lua_pushlstring(L_, name.data(), name.size());
  lua_rawget(L_, LUA_REGISTRYINDEX);
  const bool found = lua_isfunction(L_, -1);
  lua_pop(L_, 1);
  return found;
}

ScriptEngine::Result ScriptEngine::run(std::string_view sha, std::span<const std::string> keys,
                                       std::span<const std::string> argv, int protocol,
                                       ScriptHost& host) {
  lua_State* L = L_;
  host_ = &host;
  call_protocol_ = 2;
  aborting_ = false;
  abort_error_.clear();
  lua::set_global_array(L, "KEYS", keys);
  lua::set_global_array(L, "ARGV", argv);
  lua_pushlightuserdata(L, &kErrorHandlerKey);
  lua_rawget(L, LUA_REGISTRYINDEX);
  const std::string name = function_name(sha);
  lua_pushlstring(L, name.data(), name.size());
  lua_rawget(L, LUA_REGISTRYINDEX);
  lua_sethook(L, &LuaApi::hook, LUA_MASKCOUNT, kHookInstructions);
  const int rc = lua_pcall(L, 0, 1, -2);
  lua_sethook(L, nullptr, 0, 0);
  Result out;
  resp::Writer w(protocol);
  if (rc != 0) {
    out.error = true;
    if (!lua_istable(L, -1)) {
      const char* msg = lua_isstring(L, -1) ? lua_tostring(L, -1) : "execution failure";
      out.reply = err::lua_run_error(name, msg);
    } else {
      std::string msg, source, line;
      if (string_field(L, "err")) {
        msg = lua_tostring(L, -1);
        lua_pop(L, 1);
      }
      if (string_field(L, "source")) {
        source = lua_tostring(L, -1);
        lua_pop(L, 1);
      }
      lua_pushstring(L, "line");
      lua_rawget(L, -2);
      if (lua_isstring(L, -1)) line = lua_tostring(L, -1);
      lua_pop(L, 1);
      out.reply = trim_crlf(msg);
      if (!line.empty() && !source.empty())
        out.reply += " script: " + std::string(sha) + ", on " + source + ":" + line + ".";
    }
    lua_pop(L, 1);
  } else {
    write_value(L, w, call_protocol_);  // pops the result
    std::vector<resp::OutBuffer> bufs;
    w.buffers(&bufs);
    for (const auto& b : bufs) out.reply.append(b.data, b.size);
    // A top-level error reply ({err=...} returned) is the error, not RESP bytes.
    if (!out.reply.empty() && out.reply[0] == '-') {
      out.error = true;
      out.reply = out.reply.substr(1, out.reply.size() - 3);
    }
  }
  lua_settop(L, 0);
  // Redis collects garbage a step at a time after each run (evalGenericCommand).
  lua_gc(L, LUA_GCSTEP, 1);
  host_ = nullptr;
  return out;
}

size_t ScriptEngine::memory() {
  return static_cast<size_t>(lua_gc(L_, LUA_GCCOUNT, 0)) * 1024 +
         static_cast<size_t>(lua_gc(L_, LUA_GCCOUNTB, 0));
}

std::string parse_script_flags(std::string_view body, ScriptFlags* flags) {
  *flags = ScriptFlags{};
  if (!body.starts_with("#!")) return {};
  const size_t nl = body.find('\n');
  if (nl == std::string_view::npos) return std::string(err::kShebangInvalid);
  flags->shebang = true;
  flags->shebang_len = nl;
  // Space separated parts (sdssplitargs, without quoting: flags have no spaces).
  std::vector<std::string_view> parts;
  std::string_view line = body.substr(0, nl);
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    const size_t start = i;
    while (i < line.size() && !std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    if (i > start) parts.push_back(line.substr(start, i - start));
  }
  if (parts.empty()) return std::string(err::kShebangNoEngine);
  if (parts[0] != "#!lua") return err::shebang_engine(parts[0]);
  for (size_t j = 1; j < parts.size(); ++j) {
    if (!parts[j].starts_with("flags=")) return err::shebang_option(parts[j]);
    std::string_view list = parts[j].substr(6);
    size_t at = 0;
    while (at <= list.size()) {
      const size_t comma = std::min(list.find(',', at), list.size());
      const std::string_view f = list.substr(at, comma - at);
      at = comma + 1;
      if (f.empty() && list.empty()) break;
      if (f == "no-writes") flags->no_writes = true;
      else if (f == "allow-oom") flags->allow_oom = true;
      else if (f == "allow-stale") flags->allow_stale = true;
      else if (f == "no-cluster") flags->no_cluster = true;
      else if (f == "allow-cross-slot-keys") flags->allow_cross_slot_keys = true;
      else return err::shebang_flag(f);
    }
  }
  return {};
}

}  // namespace server

