// server/acl_catalog.h - the command table as the ACL rules see it (server/acl.h's Catalog).
#pragma once

#include "server/acl.h"
#include "server/command.h"

namespace server {

/// A command's ACL categories (bitmask of 1 << acl::Category): Redis 7.0's for the commands
/// Redis has (COMMAND INFO's seventh field), else derived from its flags (write -> @write,
/// readonly -> @read, admin -> @admin @dangerous, fast -> @fast else @slow, pubsub -> @pubsub)
/// and its COMMAND DOCS group (string -> @string, generic -> @keyspace ...).
uint32_t acl_category_mask(const CommandSpec& spec);

/// The catalog of `table`: entry i describes the command or subcommand of id i.
acl::Catalog build_acl_catalog(const CommandTable& table);

}  // namespace server
