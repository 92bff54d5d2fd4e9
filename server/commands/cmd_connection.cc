// server/cmd_connection.cc - connection commands: PING, ECHO, HELLO, AUTH, SELECT, QUIT,
// RESET and CLIENT. Semantics and error texts follow Redis 7.0 (networking.c, acl.c,
// server.c helloCommand) and 7.2 for CLIENT SETINFO, which redis-py sends on every connection.
#include <algorithm>
#include <optional>
#include <string>

#include "server/arg_parser.h"
#include "server/connection.h"
#include "server/errors.h"
#include "server/commands/family.h"
#include "server/replication.h"
#include "server/server.h"
#include "server/version.h"

namespace server {
namespace {

// AUTH's and HELLO AUTH's check (acl.c ACLAuthenticateUser): the connection runs as `user`
// from now on if `pass` authenticates it; else an "auth" entry goes to ACL LOG.
bool authenticate(CommandContext& ctx, std::string_view user, std::string_view pass) {
  if (auto u = ctx.server.acl().authenticate(user, pass)) {
    ctx.conn.set_user(std::move(u));
    return true;
  }
  ctx.conn.log_acl_denial("auth", "AUTH", user, ctx.now_ms);
  return false;
}

void cmd_ping(CommandContext& ctx) {
  if (ctx.args.size() > 2) return ctx.out.error(err::wrong_arity("ping"));
  if (ctx.conn.subscribed_resp2()) {
    // In RESP2's subscribed mode a reply is an array like a message's (pingCommand).
    ctx.out.array(2);
    ctx.out.bulk("pong");
    ctx.out.bulk(ctx.args.size() == 2 ? ctx.args[1] : std::string_view());
    return;
  }
  if (ctx.args.size() == 2) ctx.out.bulk(ctx.args[1]);
  else ctx.out.simple("PONG");
}

void cmd_echo(CommandContext& ctx) { ctx.out.bulk(ctx.args[1]); }

void cmd_auth(CommandContext& ctx) {
  if (ctx.args.size() > 3) return ctx.out.error(err::kSyntax);
  std::string_view user = ctx.args.size() == 3 ? ctx.args[1] : "default";
  std::string_view pass = ctx.args.back();
  if (ctx.args.size() == 2 && ctx.server.acl().default_user()->nopass)
    return ctx.out.error(err::kAuthNoPassword);
  if (!authenticate(ctx, user, pass)) return ctx.out.error(err::kWrongPass);
  ctx.out.ok();
}

void cmd_hello(CommandContext& ctx) {
  int proto = ctx.conn.protocol();
  ArgParser p(ctx.args, 1);
  if (!p.done()) {
    auto v = parse_int(p.next());
    if (!v) return ctx.out.error(err::kProtocolVersion);
    if (*v < 2 || *v > 3) return ctx.out.error(err::kNoProto);
    proto = static_cast<int>(*v);
  }
  std::string_view user, pass, name;
  bool auth = false, setname = false;
  while (!p.done()) {
    std::string_view opt = p.next();
    if (iequals(opt, "AUTH") && p.remaining() >= 2) {
      user = p.next();
      pass = p.next();
      auth = true;
    } else if (iequals(opt, "SETNAME") && p.remaining() >= 1) {
      name = p.next();
      setname = true;
    } else {
      return ctx.out.error(err::hello_syntax(opt));
    }
  }
  if (auth && !authenticate(ctx, user, pass)) return ctx.out.error(err::kWrongPass);
  if (!ctx.conn.authenticated && ctx.server.acl().default_needs_auth())
    return ctx.out.error(err::kHelloNoAuth);
  if (setname) {
    for (char c : name)
      if (c < '!' || c > '~') return ctx.out.error(err::kClientNameChars);
    ctx.conn.set_name(std::string(name));
  }
  ctx.conn.set_protocol(proto);
  resp::Writer& out = ctx.out;
  out.map(7);
  out.bulk("server");
  out.bulk("redis");
  out.bulk("version");
  out.bulk(STRATAKV_REDIS_VERSION);
  out.bulk("proto");
  out.integer(proto);
  out.bulk("id");
  out.integer(static_cast<int64_t>(ctx.conn.id()));
  out.bulk("mode");
  out.bulk(ctx.server.cluster().enabled() ? "cluster" : "standalone");
  out.bulk("role");
  out.bulk(ctx.server.replication().is_replica() ? "replica" : "master");
  out.bulk("modules");
  out.array(0);
}

void cmd_select(CommandContext& ctx) {
  auto db = parse_int(ctx.args[1]);
  if (!db) return ctx.out.error(err::kNotInteger);
  if (*db != 0) return ctx.out.error(err::kDbIndexRange);
  ctx.out.ok();
}

void cmd_quit(CommandContext& ctx) {
  ctx.out.ok();
  ctx.conn.close_after_reply();
}

void cmd_reset(CommandContext& ctx) {
  ctx.conn.set_protocol(2);
  ctx.conn.set_name("");
  ctx.conn.no_evict = false;
  ctx.conn.txn.end();  // RESET discards MULTI and unwatches (resetCommand)
  ctx.conn.pubsub().unsubscribe_all();  // and drops every subscription, with no reply
  ctx.conn.stop_monitor();              // and ends MONITOR
  // Back to the default user, authenticated only if it needs no password (clearClientConnectionState).
  ctx.conn.set_user(ctx.server.acl().default_user());
  ctx.conn.authenticated = !ctx.server.acl().default_needs_auth();
  ctx.out.simple("RESET");
}

// ---- CLIENT ----

bool valid_client_text(std::string_view s) {
  for (char c : s)
    if (c < '!' || c > '~') return false;
  return true;
}

void cmd_client_id(CommandContext& ctx) { ctx.out.integer(static_cast<int64_t>(ctx.conn.id())); }

void cmd_client_setname(CommandContext& ctx) {
  if (!valid_client_text(ctx.args[2]))
    return ctx.out.error(err::kClientNameChars);
  ctx.conn.set_name(std::string(ctx.args[2]));
  ctx.out.ok();
}

void cmd_client_getname(CommandContext& ctx) {
  std::string name = ctx.conn.name();
  if (name.empty()) ctx.out.null();
  else ctx.out.bulk(name);
}

void cmd_client_list(CommandContext& ctx) {
  std::vector<uint64_t> ids;
  // TYPE: a client with a subscription is of type pubsub, any other normal (getClientType);
  // there are no master or replica clients.
  enum { kTypeAny, kTypeNormal, kTypePubSub, kTypeNone } type_filter = kTypeAny;
  ArgParser p(ctx.args, 2);
  while (!p.done() && p.ok()) {
    if (p.eat("TYPE")) {
      std::string_view type = p.next();
      if (iequals(type, "normal")) type_filter = kTypeNormal;
      else if (iequals(type, "pubsub")) type_filter = kTypePubSub;
      else if (iequals(type, "master") || iequals(type, "replica") || iequals(type, "slave"))
        type_filter = kTypeNone;
      else return ctx.out.error(err::unknown_client_type(type));
    } else if (p.eat("ID")) {
      if (p.done()) p.fail(err::kSyntax);
      while (!p.done() && p.ok()) {
        // As Redis: an integer that is no client's id (0, negative) just matches none.
        auto id = parse_int(p.next());
        if (!id) return ctx.out.error(err::kInvalidClientId);
        ids.push_back(*id > 0 ? static_cast<uint64_t>(*id) : 0);  // ids start at 1
      }
    } else {
      p.fail(err::kSyntax);
    }
  }
  if (!p.ok()) return ctx.out.error(p.error());
  std::string text;
  ctx.server.clients().for_each([&](Connection& c) {
    if (!ids.empty() && std::find(ids.begin(), ids.end(), c.id()) == ids.end()) return;
    if (type_filter == kTypeNone || (type_filter == kTypeNormal && c.pubsub().active()) ||
        (type_filter == kTypePubSub && !c.pubsub().active()))
      return;
    text += c.describe(ctx.now_ms);
    text += '\n';
  });
  ctx.out.verbatim("txt", text);
}

void cmd_client_info(CommandContext& ctx) {
  ctx.out.verbatim("txt", ctx.conn.describe(ctx.now_ms) + "\n");
}

void cmd_client_setinfo(CommandContext& ctx) {
  std::string_view attr = ctx.args[2], value = ctx.args[3];
  std::string lower;
  to_lower(attr, &lower);
  if (lower != "lib-name" && lower != "lib-ver")
    return ctx.out.error(err::unrecognized_option(attr));
  if (!valid_client_text(value))
    return ctx.out.error(err::client_attr_chars(lower));
  ctx.conn.set_lib(lower, std::string(value));
  ctx.out.ok();
}

// CLIENT KILL ip:port | CLIENT KILL [ID id] [ADDR ip:port] [LADDR ip:port] [SKIPME yes|no]
void cmd_client_kill(CommandContext& ctx) {
  bool legacy = ctx.args.size() == 3;
  std::optional<uint64_t> id;
  std::string_view addr = legacy ? ctx.args[2] : std::string_view(), laddr, type, user;
  bool skipme = true;
  // TYPE: pubsub clients are those with a subscription (getClientType); none is a master or
  // a replica.
  enum { kTypeAny, kTypeNormal, kTypePubSub, kTypeNone } type_filter = kTypeAny;
  if (!legacy) {
    ArgParser p(ctx.args, 2);
    while (!p.done() && p.ok()) {
      if (p.eat("ID")) {
        auto v = parse_int(p.next());
        if (!v || *v <= 0) return ctx.out.error(err::kClientIdPositive);
        id = static_cast<uint64_t>(*v);
      } else if (p.eat("ADDR")) {
        addr = p.next();
      } else if (p.eat("LADDR")) {
        laddr = p.next();
      } else if (p.eat("SKIPME")) {
        std::string_view v = p.next();
        if (iequals(v, "yes")) skipme = true;
        else if (iequals(v, "no")) skipme = false;
        else p.fail(err::kSyntax);
      } else if (p.eat("TYPE")) {
        type = p.next();
        if (iequals(type, "normal")) type_filter = kTypeNormal;
        else if (iequals(type, "pubsub")) type_filter = kTypePubSub;
        else if (iequals(type, "master") || iequals(type, "replica") || iequals(type, "slave"))
          type_filter = kTypeNone;
        else if (p.ok()) return ctx.out.error(err::unknown_client_type(type));
      } else if (p.eat("USER")) {
        user = p.next();
      } else {
        p.fail(err::kSyntax);
      }
    }
    if (!p.ok()) return ctx.out.error(p.error());
    if (!user.empty() && ctx.server.acl().find(user) == nullptr)
      return ctx.out.error(err::no_such_user(user));
  }
  // The replication links are clients of type master (this node's link to its primary) and
  // replica (the feeds of its replicas), as in Redis; the registry holds the normal ones.
  if (iequals(type, "master"))
    return ctx.out.integer(ctx.server.replication().drop_primary_link() ? 1 : 0);
  if (iequals(type, "replica") || iequals(type, "slave"))
    return ctx.out.integer(ctx.server.replication().drop_replicas());
  int64_t killed = 0;
  ctx.server.clients().for_each([&](Connection& c) {
    if (id && c.id() != *id) return;
    if (type_filter == kTypeNone || (type_filter == kTypeNormal && c.pubsub().active()) ||
        (type_filter == kTypePubSub && !c.pubsub().active()))
      return;
    if (!addr.empty() && c.peer() != addr) return;
    if (!laddr.empty() && c.local() != laddr) return;
    if (!user.empty() && c.user_name() != user) return;
    if (&c == &ctx.conn) {
      if (!legacy && skipme) return;
      c.close_after_reply();
    } else {
      c.close();
    }
    ++killed;
  });
  if (legacy) {
    if (killed == 0) return ctx.out.error(err::kNoSuchClient);
    return ctx.out.ok();
  }
  ctx.out.integer(killed);
}

void cmd_client_no_evict(CommandContext& ctx) {
  if (iequals(ctx.args[2], "on")) ctx.conn.no_evict = true;
  else if (iequals(ctx.args[2], "off")) ctx.conn.no_evict = false;
  else return ctx.out.error(err::kSyntax);
  ctx.out.ok();
}

void cmd_client_help(CommandContext& ctx) {
  static const char* lines[] = {
      "CLIENT <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
      "GETNAME", "    Return the name of the current connection.",
      "ID", "    Return the ID of the current connection.",
      "INFO", "    Return information about the current client connection.",
      "KILL <ip:port>", "    Kill connection made from <ip:port>.",
      "KILL <option> <value> [<option> <value> [...]]",
      "    Kill connections. Options are: ID <client-id>, ADDR <ip:port>, LADDR <ip:port>,",
      "    SKIPME (YES|NO).",
      "LIST [options ...]", "    Return information about client connections. Options:",
      "    * TYPE (NORMAL|MASTER|REPLICA|PUBSUB)", "    * ID id [id ...]",
      "NO-EVICT (ON|OFF)", "    Protect current client connection from eviction.",
      "SETNAME <name>", "    Assign the name <name> to the current connection.",
      "SETINFO <option> <value>", "    Set client meta attr. Options are: LIB-NAME, LIB-VER.",
      "HELP", "    Print this help."};
  ctx.out.array(std::size(lines));
  for (const char* l : lines) ctx.out.simple(l);
}

}  // namespace

void register_connection_family(CommandTable& t) {
  CommandBuilder b(t, "connection");
  const uint32_t conn = kNoScript | kLoading | kStale | kFast;
  b.add(b.spec("ping", -1, kFast | kStale, kNoKeys, cmd_ping, {"Ping the server", "1.0.0"}));
  b.add(b.spec("echo", 2, kFast, kNoKeys, cmd_echo, {"Echo the given string", "1.0.0"}));
  b.add(b.spec("auth", -2, conn | kNoAuth | kAllowBusy, kNoKeys, cmd_auth, {"Authenticate to the server", "1.0.0"}));
  b.add(b.spec("hello", -1, conn | kNoAuth | kAllowBusy, kNoKeys, cmd_hello, {"Handshake with Redis", "6.0.0"}));
  b.add(b.spec("select", 2, kLoading | kStale | kFast, kNoKeys, cmd_select, {"Change the selected database for the current connection", "1.0.0"}));
  b.add(b.spec("quit", -1, conn | kNoAuth | kAllowBusy, kNoKeys, cmd_quit, {"Close the connection", "1.0.0"}));
  b.add(b.spec("reset", 1, conn | kNoAuth | kAllowBusy, kNoKeys, cmd_reset, {"Reset the connection", "6.2.0"}));

  CommandSpec client = b.spec("client", -2, 0, kNoKeys, nullptr, {"A container for client connection commands", "2.4.0"});
  client.complexity = "Depends on subcommand.";
  client.subcommands = {
      b.spec("id", 2, conn, kNoKeys, cmd_client_id, {"Returns the client ID for the current connection", "5.0.0"}),
      b.spec("setname", 3, conn, kNoKeys, cmd_client_setname, {"Set the current connection name", "2.6.9"}),
      b.spec("getname", 2, conn, kNoKeys, cmd_client_getname, {"Get the current connection name", "2.6.9"}),
      b.spec("list", -2, kAdmin | kNoScript | kLoading | kStale, kNoKeys, cmd_client_list, {"Get the list of client connections", "2.4.0"}),
      b.spec("info", 2, conn, kNoKeys, cmd_client_info, {"Returns information about the current client connection.", "6.2.0"}),
      b.spec("setinfo", 4, conn, kNoKeys, cmd_client_setinfo, {"Set client or connection specific info", "7.2.0"}),
      b.spec("kill", -3, kAdmin | kNoScript | kLoading | kStale, kNoKeys, cmd_client_kill, {"Kill the connection of a client", "2.4.0"}),
      b.spec("no-evict", 3, kAdmin | kNoScript | kLoading | kStale, kNoKeys, cmd_client_no_evict, {"Set client eviction mode for the current connection", "7.0.0"}),
      b.spec("help", 2, kLoading | kStale, kNoKeys, cmd_client_help, {"Show helpful text about the different subcommands", "5.0.0"}),
  };
  b.add(std::move(client));
}

}  // namespace server
