// server/sha1.h - SHA-1 (FIPS 180-4), for the script cache's keys (EVALSHA, SCRIPT LOAD,
// redis.sha1hex): Redis names a script by the SHA-1 of its body in lower-case hex.
#pragma once

#include <string>
#include <string_view>

namespace server {

/// The SHA-1 of `bytes` as 40 lower-case hex digits (Redis's sha1hex). Thread-safe.
std::string sha1_hex(std::string_view bytes);

}  // namespace server
