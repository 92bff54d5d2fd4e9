// server/lua_sandbox.cc - Redis 7.0.15's hardened scripting environment (lua_sandbox.h).
// Functions called from Lua are plain C functions: a Lua error unwinds with longjmp, so none
// of them holds a C++ object with a destructor on its stack when it raises.
#include "server/lua_sandbox.h"

#include <climits>
#include <cmath>
#include <string_view>

#include "server/errors.h"

namespace server::lua {

namespace {

// ---- Redis's rand48 (rand.c): math.random gives the same sequence as Redis's ----

// Per thread: each interpreter lives on one thread.
thread_local uint64_t t_rand48 = 0x1234ABCD330Eull;

void rand48_seed(int32_t seed) {
  t_rand48 = (static_cast<uint64_t>(static_cast<uint32_t>(seed)) << 16) | 0x330E;
}
int32_t rand48_next() {
  t_rand48 = (t_rand48 * 0x5DEECE66Dull + 0xB) & ((1ull << 48) - 1);
  return static_cast<int32_t>(t_rand48 >> 17);
}

int math_random(lua_State* L) {
  constexpr int32_t kMax = INT32_MAX;
  const lua_Number r = static_cast<lua_Number>(rand48_next() % kMax) / static_cast<lua_Number>(kMax);
  switch (lua_gettop(L)) {
    case 0:
      lua_pushnumber(L, r);
      break;
    case 1: {
      const int u = luaL_checkint(L, 1);
      luaL_argcheck(L, 1 <= u, 1, "interval is empty");
      lua_pushnumber(L, std::floor(r * u) + 1);
      break;
    }
    case 2: {
      const int l = luaL_checkint(L, 1);
      const int u = luaL_checkint(L, 2);
      luaL_argcheck(L, l <= u, 2, "interval is empty");
      lua_pushnumber(L, std::floor(r * (u - l + 1)) + l);
      break;
    }
    default:
      return luaL_error(L, "%s", err::kLuaArity.data());
  }
  return 1;
}

int math_randomseed(lua_State* L) {
  rand48_seed(luaL_checkint(L, 1));
  return 0;
}

// ---- read-only globals (Redis 7.0.15's hardened scripting) ----
//
// A script's environment is a proxy of the globals: reading a global goes to the real table
// (an undefined one is an error), writing one is an error; the library tables the scripts see
// are proxies too, and rawset/setmetatable refuse them. The metamethods are C functions, so an
// error's position is the script's line (luaL_where(L, 1): the function the VM ran them for).

char kProtectedKey;  // registry: weak-keyed set of the read-only tables

bool is_protected(lua_State* L, int idx) {
  if (!lua_istable(L, idx)) return false;
  lua_pushlightuserdata(L, &kProtectedKey);
  lua_rawget(L, LUA_REGISTRYINDEX);
  lua_pushvalue(L, idx < 0 ? idx - 1 : idx);
  lua_rawget(L, -2);
  const bool found = lua_toboolean(L, -1) != 0;
  lua_pop(L, 2);
  return found;
}

void protect(lua_State* L, int idx) {
  lua_pushlightuserdata(L, &kProtectedKey);
  lua_rawget(L, LUA_REGISTRYINDEX);
  lua_pushvalue(L, idx < 0 ? idx - 1 : idx);
  lua_pushboolean(L, 1);
  lua_rawset(L, -3);
  lua_pop(L, 1);
}

// Raises "<chunk>:<line>: <msg>" at the script's line.
int error_at_caller(lua_State* L, std::string_view msg) {
  luaL_where(L, 1);
  lua_pushlstring(L, msg.data(), msg.size());
  lua_concat(L, 2);
  return lua_error(L);
}

int readonly_newindex(lua_State* L) { return error_at_caller(L, err::kLuaReadonlyTable); }

// __index of the globals' proxy: (proxy, name); upvalue 1 is the real globals table.
int globals_index(lua_State* L) {
  lua_pushvalue(L, 2);
  lua_rawget(L, lua_upvalueindex(1));
  if (!lua_isnil(L, -1)) return 1;
  lua_pop(L, 1);
  luaL_where(L, 1);
  lua_pushlstring(L, err::kLuaNoGlobalPrefix.data(), err::kLuaNoGlobalPrefix.size());
  if (lua_type(L, 2) == LUA_TSTRING || lua_type(L, 2) == LUA_TNUMBER) lua_pushvalue(L, 2);
  else lua_pushstring(L, luaL_typename(L, 2));
  lua_tostring(L, -1);
  lua_pushstring(L, "'");
  lua_concat(L, 4);
  return lua_error(L);
}

// rawset and setmetatable refuse a read-only table (an error without position, as Redis's);
// getmetatable does not show its metatable. Upvalue 1: the original function.
int guarded_call(lua_State* L) {
  const int n = lua_gettop(L);
  lua_pushvalue(L, lua_upvalueindex(1));
  lua_insert(L, 1);
  lua_call(L, n, LUA_MULTRET);
  return lua_gettop(L);
}
int guarded_rawset(lua_State* L) {
  if (is_protected(L, 1)) {
    lua_pushlstring(L, err::kLuaReadonlyTable.data(), err::kLuaReadonlyTable.size());
    return lua_error(L);
  }
  return guarded_call(L);
}
int guarded_setmetatable(lua_State* L) { return guarded_rawset(L); }
int guarded_getmetatable(lua_State* L) {
  if (is_protected(L, 1)) {
    lua_pushnil(L);
    return 1;
  }
  return guarded_call(L);
}

// Redis 7.0's pcall (script_lua.c luaRedisPcall): an error that is a table with an `err`
// field (what redis.call raises) is returned as that string.
int redis_style_pcall(lua_State* L) {
  luaL_checkany(L, 1);
  const int argc = lua_gettop(L);
  lua_pushboolean(L, 1);
  lua_insert(L, 1);
  if (lua_pcall(L, argc - 1, LUA_MULTRET, 0) != 0) {
    lua_remove(L, 1);
    if (lua_istable(L, -1)) {
      lua_getfield(L, -1, "err");
      if (lua_isstring(L, -1)) lua_replace(L, -2);
      else lua_pop(L, 1);
    }
    lua_pushboolean(L, 0);
    lua_insert(L, 1);
  }
  return lua_gettop(L);
}

// Replaces global `name` (a function) by `fn` with the original as its upvalue.
void guard(lua_State* L, const char* name, lua_CFunction fn) {
  lua_pushstring(L, name);
  lua_pushstring(L, name);
  lua_rawget(L, LUA_GLOBALSINDEX);
  lua_pushcclosure(L, fn, 1);
  lua_rawset(L, LUA_GLOBALSINDEX);
}

// Pushes a read-only proxy of the table at the top (which it pops).
void push_readonly_proxy(lua_State* L) {
  lua_newtable(L);         // t, proxy
  lua_newtable(L);         // t, proxy, mt
  lua_pushstring(L, "__index");
  lua_pushvalue(L, -4);
  lua_rawset(L, -3);
  lua_pushstring(L, "__newindex");
  lua_pushcfunction(L, readonly_newindex);
  lua_rawset(L, -3);
  protect(L, -1);
  lua_setmetatable(L, -2);  // t, proxy
  protect(L, -1);
  lua_remove(L, -2);        // proxy
}

}  // namespace

void use_redis_random(lua_State* L) {
  lua_getglobal(L, "math");
  lua_pushcfunction(L, math_random);
  lua_setfield(L, -2, "random");
  lua_pushcfunction(L, math_randomseed);
  lua_setfield(L, -2, "randomseed");
  lua_pop(L, 1);
}

void push_readonly_globals(lua_State* L, std::span<const char* const> libs) {
  lua_pushlightuserdata(L, &kProtectedKey);
  lua_newtable(L);
  lua_newtable(L);
  lua_pushstring(L, "__mode");
  lua_pushstring(L, "k");
  lua_rawset(L, -3);
  lua_setmetatable(L, -2);
  lua_rawset(L, LUA_REGISTRYINDEX);
  lua_pushstring(L, "pcall");
  lua_pushcfunction(L, redis_style_pcall);
  lua_rawset(L, LUA_GLOBALSINDEX);
  guard(L, "rawset", guarded_rawset);
  guard(L, "setmetatable", guarded_setmetatable);
  guard(L, "getmetatable", guarded_getmetatable);
  for (const char* lib : libs) {
    lua_pushstring(L, lib);
    lua_pushstring(L, lib);
    lua_rawget(L, LUA_GLOBALSINDEX);
    push_readonly_proxy(L);
    lua_rawset(L, LUA_GLOBALSINDEX);
  }
  lua_newtable(L);  // the proxy
  lua_newtable(L);  // its metatable
  lua_pushstring(L, "__index");
  lua_pushvalue(L, LUA_GLOBALSINDEX);
  lua_pushcclosure(L, globals_index, 1);
  lua_rawset(L, -3);
  lua_pushstring(L, "__newindex");
  lua_pushcfunction(L, readonly_newindex);
  lua_rawset(L, -3);
  protect(L, -1);
  lua_setmetatable(L, -2);
  protect(L, -1);
  lua_pushstring(L, "_G");  // a script's _G is the proxy
  lua_pushvalue(L, -2);
  lua_rawset(L, LUA_GLOBALSINDEX);
}

void set_global_array(lua_State* L, const char* name, std::span<const std::string> items) {
  lua_pushstring(L, name);
  lua_createtable(L, static_cast<int>(items.size()), 0);
  for (size_t j = 0; j < items.size(); ++j) {
    lua_pushlstring(L, items[j].data(), items[j].size());
    lua_rawseti(L, -2, static_cast<int>(j + 1));
  }
  lua_rawset(L, LUA_GLOBALSINDEX);
}

}  // namespace server::lua
