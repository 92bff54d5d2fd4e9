#include "server/commands/family.h"

#include <algorithm>
#include <cstring>
#include <new>

#include "cluster/slot.h"
#include "server/arg_parser.h"
#include "server/errors.h"
#include "server/connection.h"
#include "server/server.h"
#include "tiering/keyspace.h"
#include "tiering/need_room.h"

namespace server {

void register_all_commands(CommandTable& table) {
  register_connection_family(table);
  register_string_family(table);
  register_keyspace_family(table);
  register_server_family(table);
  register_memory_family(table);
  register_tier_family(table);
  register_kv_family(table);
  register_cluster_family(table);
  register_transaction_family(table);
  register_bit_family(table);
  register_replication_family(table);
  register_pubsub_family(table);
  register_lcs_command(table);
  register_script_family(table);
  register_introspection_family(table);
  register_acl_family(table);
}

std::string key_elsewhere(CommandContext& ctx, std::string_view key) {
  const SlotOwner& owner = ctx.server.slot_owner();
  if (owner.owns_all()) return {};
  const uint16_t slot = cluster::key_slot(key);
  if (owner.owns(slot)) return {};
  std::string address = owner.address(slot, ctx.conn.is_tls());
  if (address.empty()) return std::string(err::kClusterDownUnbound);
  return err::moved(slot, address);
}

std::string read_key_elsewhere(CommandContext& ctx, std::string_view key) {
  std::string elsewhere = key_elsewhere(ctx, key);
  if (!elsewhere.empty() && ctx.conn.readonly_reads &&
      ctx.server.slot_owner().holds_as_replica(cluster::key_slot(key)))
    return {};
  return elsewhere;
}

CommandSpec CommandBuilder::spec(std::string name, int arity, uint32_t flags, KeyRange keys,
                                 Handler handler, Docs docs) const {
  return CommandSpec{.name = std::move(name), .arity = arity, .flags = flags,
                     .first_key = keys.first, .last_key = keys.last, .key_step = keys.step,
                     .handler = handler, .group = group_, .summary = std::move(docs.summary),
                     .since = std::move(docs.since), .complexity = std::move(docs.complexity)};
}

void reply_help(CommandContext& ctx, std::string_view container,
                std::initializer_list<std::string_view> lines) {
  ctx.out.array(lines.size() + 3);
  ctx.out.simple(std::string(container) +
                 " <subcommand> [<arg> [value] [opt] ...]. Subcommands are:");
  for (auto line : lines) ctx.out.simple(line);
  ctx.out.simple("HELP");
  ctx.out.simple("    Prints this help.");
}

resp::Keepalive value_keepalive(tiering::ValueRef value) {
  return resp::Keepalive(value.detach(), &tiering::ValueRef::release_detached);
}

void reply_value(resp::Writer& out, const tiering::ValueRef& value) {
  if (value->size() < resp::Writer::kRefThreshold) out.bulk(value->view());
  else out.bulk_ref(value->view(), value_keepalive(value));
}

tiering::ValueRef value_from_arg(const CommandContext& ctx, size_t i) {
  // Large bulks were allocated as values by Connection::allocate_bulk, whose keepalives
  // release ValueRefs: share that value.
  const resp::Keepalive& owner = ctx.req.owner(i);
  if (owner && owner.releaser() == &tiering::ValueRef::release_detached)
    return tiering::ValueRef::share(static_cast<tiering::Value*>(owner.get()));
  return make_value(ctx, ctx.args[i]);
}

tiering::ValueRef new_value(const CommandContext& ctx, size_t size, size_t capacity) {
  tiering::ValueRef v = ctx.server.allocate_value(size, capacity);
  if (v) return v;
  // Under a shard lock the allocation did not evict (Server::allocate_value): ask the
  // pipeline to make room with no lock held and run the command again.
  if (tiering::ShardMutex::held_by_this_thread() != 0) {
    const size_t cap = std::max(size, capacity);
    throw tiering::NeedRoom(cap + tiering::Value::region_overhead(cap));
  }
  throw std::bad_alloc();
}

tiering::ValueRef make_value(const CommandContext& ctx, std::string_view bytes) {
  tiering::ValueRef v = new_value(ctx, bytes.size());
  if (!bytes.empty()) std::memcpy(v->data(), bytes.data(), bytes.size());
  return v;
}

const char* string_encoding(const tiering::Value& value) {
  // Redis's tryObjectEncoding: integers that fit a long are "int", short strings "embstr";
  // a string changed in place is "raw".
  if (value.modified()) return "raw";
  std::string_view v = value.view();
  if (v.size() <= 20 && parse_int(v)) return "int";
  return v.size() <= 44 ? "embstr" : "raw";
}

size_t grown_capacity(size_t size) {
  return size < (1u << 20) ? size * 2 : size + (1u << 20);
}

Writable Writable::of(CommandContext& ctx, tiering::KeyLock& lock,
                      const tiering::KeyLock::Item* item, size_t size) {
  if (tiering::Value* v = lock.writable_in_place(item, size)) return {v, {}};
  const tiering::ValueRef& old = item->second.value;
  tiering::ValueRef grown = new_value(ctx, old->size(), grown_capacity(size));
  std::memcpy(grown->data(), old->data(), old->size());
  tiering::Value* bytes = grown.get();
  return {bytes, std::move(grown)};
}

void Writable::publish(tiering::KeyLock& lock, const tiering::KeyLock::Item* item) {
  bytes->set_modified();
  if (grown) lock.set_value(item, std::move(grown));
  else lock.modified(item);
}

}  // namespace server
