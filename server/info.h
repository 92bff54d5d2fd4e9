// server/info.h - what the server tells about itself: the INFO text, and the COMMAND INFO /
// COMMAND DOCS replies built from the command table (commands/cmd_server.cc registers the commands).
//
// Formats follow Redis 7.0: INFO is "# Section\r\nfield:value\r\n..." with sections separated by
// an empty line (server.c genRedisInfoString); COMMAND INFO/DOCS shapes are those of
// server.c addReplyCommandInfo / addReplyCommandDocs.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "resp/writer.h"
#include "server/command.h"

namespace server {

class Server;

/// The INFO text for `sections` (names are case-insensitive; none = "default": every section
/// but commandstats; "all" and "everything" = every section; unknown names add nothing).
/// Sections come in Redis's order whatever the order asked.
std::string info_text(Server& server, std::span<const std::string_view> sections, int64_t now_ms);

/// ACL categories of a command, e.g. {"@read", "@string", "@fast"}: the ACL's own
/// (acl_category_mask, server/acl_catalog.h), Redis 7.0's for the commands Redis has.
std::vector<std::string_view> acl_categories(const CommandSpec& spec);

/// Key-spec flags of a command's keys, e.g. {"RO", "access"} (COMMAND INFO key_specs and
/// COMMAND GETKEYSANDFLAGS).
std::vector<std::string_view> key_spec_flags(const CommandSpec& spec);

/// Looks a command up by its full name: "get", or "config|get" for a subcommand. Null when
/// unknown.
const CommandSpec* lookup_full_name(const CommandTable& table, std::string_view name);

/// One COMMAND INFO entry: [name, arity, flags, first, last, step, acl categories, tips,
/// key specs, subcommands]; null for an unknown command (`spec` == nullptr).
void reply_command_info(resp::Writer& out, const CommandSpec* spec);

/// One COMMAND DOCS value: a map {summary, since, group, complexity[, subcommands]}.
void reply_command_docs(resp::Writer& out, const CommandSpec& spec);

}  // namespace server
