// server/errors.h - every error text the server replies, in one place.
//
// Byte-identical to Redis 7.0's (server.c shared objects, t_string.c, networking.c, acl.c) where
// Redis has the error. Each is the text after the leading '-'.
#pragma once

#include <cctype>
#include <cstdint>
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
inline constexpr std::string_view kDbIndexRange = "ERR DB index is out of range";
inline constexpr std::string_view kOffsetRange = "ERR offset is out of range";
inline constexpr std::string_view kStringTooLong =
    "ERR string exceeds maximum allowed size (proto-max-bulk-len)";
inline constexpr std::string_view kOom =
    "OOM command not allowed when used memory > 'maxmemory'.";
inline constexpr std::string_view kCrossSlot =
    "CROSSSLOT Keys in request don't hash to the same slot";
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

/// "ERR wrong number of arguments for 'get' command"
inline std::string wrong_arity(std::string_view command) {
  return "ERR wrong number of arguments for '" + std::string(command) + "' command";
}

/// "MOVED 3999 127.0.0.1:6381" (cluster.c clusterRedirectClient)
inline std::string moved(uint16_t slot, std::string_view address) {
  return "MOVED " + std::to_string(slot) + " " + std::string(address);
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
