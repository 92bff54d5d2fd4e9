#include "server/family.h"

#include <new>

#include "server/arg_parser.h"
#include "server/server.h"

namespace server {

void register_all_commands(CommandTable& table) {
  register_connection_family(table);
  register_string_family(table);
  register_keyspace_family(table);
  register_server_family(table);
}

void reply_value(resp::Writer& out, const tiering::ValueRef& value) {
  if (value->size() < resp::Writer::kRefThreshold) out.bulk(value->view());
  else out.bulk_ref(value->view(), value);
}

tiering::ValueRef value_from_arg(const CommandContext& ctx, size_t i) {
  if (const auto& owner = ctx.req.owner(i))
    return std::static_pointer_cast<tiering::ValueBuffer>(owner);
  return make_value(ctx.args[i]);
}

tiering::ValueRef make_value(std::string_view bytes) {
  auto v = tiering::ValueBuffer::copy_of(bytes);
  if (!v) throw std::bad_alloc();
  return v;
}

const char* string_encoding(const tiering::ValueBuffer& value) {
  // Redis's tryObjectEncoding: integers that fit a long are "int", short strings "embstr";
  // a string changed in place is "raw".
  if (value.modified()) return "raw";
  std::string_view v = value.view();
  if (v.size() <= 20 && parse_int(v)) return "int";
  return v.size() <= 44 ? "embstr" : "raw";
}

}  // namespace server
