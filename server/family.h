// server/family.h - the command families and the helpers they share.
//
// One file per family registers its commands (`register_*_family`), each one table entry:
// string_family.cc (strings), keyspace_family.cc (generic key commands and expiry),
// connection_family.cc (PING, AUTH, HELLO, CLIENT, ...), server_family.cc (INFO, CONFIG,
// COMMAND, SLOWLOG, ...).
#pragma once

#include "server/command.h"
#include "tiering/value.h"

namespace server {

void register_string_family(CommandTable& table);
void register_keyspace_family(CommandTable& table);
void register_connection_family(CommandTable& table);
void register_server_family(CommandTable& table);

/// Replies a value as a bulk string: small ones copied, large ones referenced (no copy), the
/// reference held until the socket write completes.
void reply_value(resp::Writer& out, const tiering::ValueRef& value);

/// The value of argument `i` as a ValueRef: a large bulk read straight into its own buffer is
/// adopted as is (no copy); a small one is copied. Throws std::bad_alloc when memory cannot
/// be had (dispatch replies OOM).
tiering::ValueRef value_from_arg(const CommandContext& ctx, size_t i);

/// A new value holding `bytes`; throws std::bad_alloc when memory cannot be had (dispatch
/// replies OOM).
tiering::ValueRef make_value(std::string_view bytes);

/// OBJECT ENCODING of a string value: "int", "embstr" (<= 44 bytes) or "raw" (longer, or
/// changed in place by APPEND/SETRANGE), as Redis.
const char* string_encoding(const tiering::ValueBuffer& value);

}  // namespace server
