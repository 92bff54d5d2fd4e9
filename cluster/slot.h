// cluster/slot.h - Redis Cluster's key-to-slot map: CRC16 (XMODEM) of the key, or of its first
// non-empty {hash tag}, modulo 16384 (Redis Cluster specification, "Keys distribution model"
// and "Hash tags"; Redis's cluster.c keyHashSlot).
//
// A leaf: it depends on nothing of ours, so the server, the keyspace (through the function the
// server hands it) and the client SDKs all use the same map. Pure functions, thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace cluster {

/// Number of hash slots of a Redis Cluster.
inline constexpr uint16_t kSlots = 16384;

/// CRC16-CCITT (XMODEM: polynomial 0x1021, initial value 0, no reflection), as Redis's
/// crc16.c. crc16("123456789") == 0x31C3.
uint16_t crc16(std::string_view bytes) noexcept;

/// The part of `key` that is hashed: the bytes between the first '{' and the first '}' after
/// it when that is non-empty, else the whole key ("{user1000}.following" -> "user1000";
/// "foo{}{bar}" -> the whole key; "foo{{bar}}zap" -> "{bar").
std::string_view hash_tag(std::string_view key) noexcept;

/// The slot of `key`, in [0, 16384): crc16(hash_tag(key)) & 16383, in one pass over a key
/// without '{' (the CRC runs while each 8-byte word is checked for the brace).
uint16_t key_slot(std::string_view key) noexcept;

}  // namespace cluster
