// server/lua_sandbox.h - Redis 7.0.15's hardened scripting environment, applied to an
// interpreter that already has its libraries and its `redis` table: Redis's rand48 for
// math.random, read-only globals and library tables, and Redis's pcall. Used by
// script_engine.cc only; the environment it builds is described in script_engine.h.
//
// Not thread-safe: each interpreter is used by one thread (rand48's state is per thread).
#pragma once

#include <lua.hpp>

#include <span>
#include <string>

namespace server::lua {

/// Replaces math.random and math.randomseed by Redis's (rand.c's rand48, seeded as Redis's),
/// so a script draws the same sequence as on Redis.
void use_redis_random(lua_State* L);
/// Makes the globals read-only: the set of protected tables (in the registry, weak keys),
/// Redis's pcall, rawset/setmetatable/getmetatable guarded, read-only proxies of `libs`
/// (global tables), and pushes the scripts' environment: a proxy of the globals where an
/// undefined global is an error and an assignment is "Attempt to modify a readonly table".
/// The proxy is also the scripts' _G.
void push_readonly_globals(lua_State* L, std::span<const char* const> libs);
/// Sets global `name` to an array of `items` (KEYS, ARGV), bypassing the protection.
void set_global_array(lua_State* L, const char* name, std::span<const std::string> items);

}  // namespace server::lua
