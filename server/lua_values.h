// server/lua_values.h - Lua values to and from RESP replies, and Redis's error tables: the
// conversions of Redis 7.0's scripting (script_lua.c: redisProtocolToLuaType,
// luaReplyToRedisReply, luaPushErrorBuff), as "Conversion between Lua and Redis data types"
// documents them (the table is in script_engine.h). Used by script_engine.cc only.
//
// Every function works on the Lua stack of the calling thread's interpreter; none is
// thread-safe beyond that. A Lua error raised inside one unwinds with longjmp, so they keep no
// C++ object with a destructor alive across a Lua call that may raise.
#pragma once

#include <lua.hpp>

#include <cstdint>
#include <string>
#include <string_view>

#include "resp/writer.h"

namespace server::lua {

/// A Lua number truncated to an integer as Redis's `(long long)` cast does on x86-64, without
/// its undefined behaviour: NaN and values out of range give INT64_MIN (cvttsd2si's answer).
int64_t to_integer(lua_Number d);
/// The same truncated to int: out of int's range gives INT32_MIN.
int to_int(lua_Number d);

/// Pushes Redis's error table {err="CODE msg"} for `text` (luaPushErrorBuff): "-CODE msg"
/// keeps its code, a bare "msg" gets ERR; leading and trailing CR/LF go.
void push_error(lua_State* L, std::string_view text);
/// Marks the error table on the top as already counted in the error statistics (Redis's
/// `ignore_error_stats_update` field).
void mark_counted(lua_State* L);

/// Pushes the RESP2/RESP3 reply at [p, end) as a Lua value (redisProtocolToLuaType) and
/// returns the position after it. The bytes must come from the server's own writer (well
/// formed); raises "reached lua stack limit" when the stack cannot grow.
const char* push_reply(lua_State* L, const char* p, const char* end);

/// Pushes the table's (on the top) string field `name` and returns true when it is a string,
/// leaving it on the stack; otherwise pushes nothing.
bool string_field(lua_State* L, const char* name);
/// `s` without its leading and trailing CR/LF (luaExtractErrorInformation's error text).
std::string trim_crlf(std::string s);
/// Pops the value on the top and writes it to `w` in w's protocol (luaReplyToRedisReply);
/// booleans follow `script_resp`, the script's redis.setresp (2 or 3).
void write_value(lua_State* L, resp::Writer& w, int script_resp);

}  // namespace server::lua
