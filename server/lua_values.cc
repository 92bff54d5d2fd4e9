// server/lua_values.cc - Lua values to and from RESP replies (lua_values.h).
#include "server/lua_values.h"

#include <algorithm>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "server/errors.h"

namespace server::lua {

int64_t to_integer(lua_Number d) {
  if (!(d >= -0x1p63 && d < 0x1p63)) return INT64_MIN;
  return static_cast<int64_t>(d);
}
int to_int(lua_Number d) {
  const int64_t v = to_integer(d);
  return v >= INT32_MIN && v <= INT32_MAX ? static_cast<int>(v) : INT32_MIN;
}

// ---- errors as Redis's tables ----

namespace {

// Pushes the table {field = s}.
void push_string_table(lua_State* L, const char* field, std::string_view s) {
  lua_newtable(L);
  lua_pushstring(L, field);
  lua_pushlstring(L, s.data(), s.size());
  lua_settable(L, -3);
}

}  // namespace

void push_error(lua_State* L, std::string_view text) {
  std::string code = "ERR", msg;
  if (!text.empty() && text[0] == '-') {
    const size_t sp = text.find(' ');
    if (sp == std::string_view::npos) {
      msg = std::string(text.substr(1));
    } else {
      code = std::string(text.substr(1, sp - 1));
      msg = std::string(text.substr(sp + 1));
    }
  } else {
    msg = std::string(text);
  }
  push_string_table(L, "err", code + " " + trim_crlf(std::move(msg)));
}

void mark_counted(lua_State* L) {
  lua_pushstring(L, "ignore_error_stats_update");
  lua_pushboolean(L, 1);
  lua_settable(L, -3);
}

// ---- RESP -> Lua (redisProtocolToLuaType) ----

namespace {

// The line after the type byte at p (up to CRLF); advances p past the CRLF.

std::string_view line(const char*& p, const char* end) {
  const char* start = p + 1;
  const char* cr = static_cast<const char*>(std::memchr(start, '\r', end - start));
  if (cr == nullptr) cr = end;
  p = cr + 2 <= end ? cr + 2 : end;
  return {start, static_cast<size_t>(cr - start)};
}

long long to_ll(std::string_view s) {
  char buf[32];
  const size_t n = std::min(s.size(), sizeof buf - 1);
  std::memcpy(buf, s.data(), n);
  buf[n] = 0;
  return std::strtoll(buf, nullptr, 10);
}

}  // namespace

// Pushes the reply at p as a Lua value; returns the position after it. The bytes come from
// the server's own writer, so they are well formed.
const char* push_reply(lua_State* L, const char* p, const char* end) {
  if (p >= end) {
    lua_pushboolean(L, 0);
    return end;
  }
  if (!lua_checkstack(L, 5)) luaL_error(L, "reached lua stack limit");
  const char type = *p;
  switch (type) {
    case ':': {
      lua_pushnumber(L, static_cast<lua_Number>(to_ll(line(p, end))));
      return p;
    }
    case '$': {
      const long long n = to_ll(line(p, end));
      if (n < 0) {
        lua_pushboolean(L, 0);
        return p;
      }
      lua_pushlstring(L, p, static_cast<size_t>(n));
      return p + n + 2;
    }
    case '+':
      push_string_table(L, "ok", line(p, end));
      return p;
    case '-': {
      const std::string_view s = line(p, end);
      push_error(L, "-" + std::string(s));
      mark_counted(L);
      return p;
    }
    case '*':
    case '~':
    case '%': {
      const long long n = to_ll(line(p, end));
      if (n < 0) {
        lua_pushboolean(L, 0);
        return p;
      }
      lua_newtable(L);
      for (long long i = 0; i < n; ++i) {
        if (type == '*') {
          p = push_reply(L, p, end);
          lua_rawseti(L, -2, static_cast<int>(i + 1));
        } else if (type == '~') {
          p = push_reply(L, p, end);
          lua_pushboolean(L, 1);
          lua_settable(L, -3);
        } else {
          p = push_reply(L, p, end);
          p = push_reply(L, p, end);
          lua_settable(L, -3);
        }
      }
      return p;
    }
    case '_':
      line(p, end);
      lua_pushnil(L);
      return p;
    case '#': {
      const std::string_view s = line(p, end);
      lua_pushboolean(L, s == "t");
      return p;
    }
    case ',': {
      const std::string s(line(p, end));
      lua_newtable(L);
      lua_pushstring(L, "double");
      lua_pushnumber(L, std::strtod(s.c_str(), nullptr));
      lua_settable(L, -3);
      return p;
    }
    case '(':
      push_string_table(L, "big_number", line(p, end));
      return p;
    case '=': {
      const long long n = to_ll(line(p, end));
      const std::string_view text(p, static_cast<size_t>(std::max(0ll, n)));
      lua_newtable(L);
      lua_pushstring(L, "verbatim_string");
      lua_newtable(L);
      lua_pushstring(L, "format");
      lua_pushlstring(L, text.data(), std::min<size_t>(3, text.size()));
      lua_settable(L, -3);
      lua_pushstring(L, "string");
      lua_pushlstring(L, text.data() + std::min<size_t>(4, text.size()),
                      text.size() - std::min<size_t>(4, text.size()));
      lua_settable(L, -3);
      lua_settable(L, -3);
      return p + n + 2;
    }
    default:
      line(p, end);
      lua_pushboolean(L, 0);
      return p;
  }
}

// ---- Lua -> RESP (luaReplyToRedisReply) ----

// A table's string field `name`, pushed; true when it is a string (left on the stack).
bool string_field(lua_State* L, const char* name) {
  lua_pushstring(L, name);
  lua_rawget(L, -2);
  if (lua_type(L, -1) == LUA_TSTRING) return true;
  lua_pop(L, 1);
  return false;
}

// Error text of an error table's fields (luaExtractErrorInformation), for the reply.
std::string trim_crlf(std::string s) {
  while (!s.empty() && (s.back() == '\r' || s.back() == '\n')) s.pop_back();
  size_t lead = 0;
  while (lead < s.size() && (s[lead] == '\r' || s[lead] == '\n')) ++lead;
  return s.substr(lead);
}

namespace {

// The number of entries of the table on the top (of every key, not only 1..n).
size_t table_size(lua_State* L) {
  size_t n = 0;
  lua_pushnil(L);
  while (lua_next(L, -2)) {
    lua_pop(L, 1);
    ++n;
  }
  return n;
}

}  // namespace

// Writes the value on the top of the stack (and pops it) in the caller's protocol; booleans
// follow the script's (redis.setresp), as Redis 7.0's luaReplyToRedisReply.
void write_value(lua_State* L, resp::Writer& w, int script_resp) {
  if (!lua_checkstack(L, 4)) {
    lua_pop(L, 1);
    w.error(err::kLuaStackLimit);
    return;
  }
  switch (lua_type(L, -1)) {
    case LUA_TSTRING: {
      size_t n = 0;
      const char* s = lua_tolstring(L, -1, &n);
      w.bulk({s, n});
      break;
    }
    case LUA_TBOOLEAN:
      if (script_resp == 2) {
        if (lua_toboolean(L, -1)) w.integer(1);
        else w.null();
      } else {
        w.boolean(lua_toboolean(L, -1) != 0);
      }
      break;
    case LUA_TNUMBER:
      w.integer(to_integer(lua_tonumber(L, -1)));
      break;
    case LUA_TTABLE: {
      if (string_field(L, "err")) {
        w.error(trim_crlf(lua_tostring(L, -1)));
        lua_pop(L, 1);
        break;
      }
      if (string_field(L, "ok")) {
        w.simple(lua_tostring(L, -1));
        lua_pop(L, 1);
        break;
      }
      lua_pushstring(L, "double");
      lua_rawget(L, -2);
      if (lua_type(L, -1) == LUA_TNUMBER) {
        w.dbl(lua_tonumber(L, -1));
        lua_pop(L, 1);
        break;
      }
      lua_pop(L, 1);
      if (string_field(L, "big_number")) {
        size_t n = 0;
        const char* s = lua_tolstring(L, -1, &n);
        if (w.protocol() == 2) w.bulk({s, n});
        else w.raw("(" + std::string(s, n) + "\r\n");
        lua_pop(L, 1);
        break;
      }
      lua_pushstring(L, "map");
      lua_rawget(L, -2);
      if (lua_type(L, -1) == LUA_TTABLE) {
        w.map(table_size(L));
        lua_pushnil(L);
        while (lua_next(L, -2)) {
          lua_pushvalue(L, -2);  // the key, to write (the original stays for lua_next)
          write_value(L, w, script_resp);
          write_value(L, w, script_resp);  // the value
        }
        lua_pop(L, 1);
        break;
      }
      lua_pop(L, 1);
      lua_pushstring(L, "set");
      lua_rawget(L, -2);
      if (lua_type(L, -1) == LUA_TTABLE) {
        w.set(table_size(L));
        lua_pushnil(L);
        while (lua_next(L, -2)) {
          lua_pop(L, 1);
          lua_pushvalue(L, -1);
          write_value(L, w, script_resp);
        }
        lua_pop(L, 1);
        break;
      }
      lua_pop(L, 1);
      // An array, up to the first nil.
      size_t n = 0;
      for (;; ++n) {
        lua_rawgeti(L, -1, static_cast<int>(n + 1));
        const bool nil = lua_isnil(L, -1);
        lua_pop(L, 1);
        if (nil) break;
      }
      w.array(n);
      for (size_t j = 1; j <= n; ++j) {
        lua_rawgeti(L, -1, static_cast<int>(j));
        write_value(L, w, script_resp);
      }
      break;
    }
    default:
      w.null();
      break;
  }
  lua_pop(L, 1);
}

}  // namespace server::lua
