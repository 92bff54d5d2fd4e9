// server/commands/cmd_acl.cc - ACL: SETUSER, GETUSER, DELUSER, LIST, USERS, WHOAMI, CAT, LOG,
// GENPASS, DRYRUN, SAVE, LOAD, HELP. Replies and error texts follow Redis 7.0's aclCommand
// (acl.c); the users and rules are server/acl.h's, the checks the pipeline's (pipeline.h).
#include <openssl/rand.h>

#include <unistd.h>

#include <cstdio>
#include <functional>
#include <fstream>
#include <sstream>

#include "server/acl.h"
#include "server/arg_parser.h"
#include "server/commands/family.h"
#include "server/connection.h"
#include "server/errors.h"
#include "server/pipeline.h"
#include "server/server.h"

namespace server {
namespace {

void cmd_acl_setuser(CommandContext& ctx) {
  const std::string_view name = ctx.args[2];
  if (name.find(' ') != std::string_view::npos || name.find('\0') != std::string_view::npos)
    return ctx.out.error(err::kAclUserSpaces);
  if (std::string e = ctx.server.acl().set_user(name, ctx.args.subspan(3)); !e.empty())
    return ctx.out.error("ERR " + e);
  // Subscribers whose channels the change took away go (ACLKillPubsubClientsIfNeeded), each
  // checked on its own thread; this client after its reply.
  ctx.server.clients().for_each([&](Connection& c) {
    if (!c.pubsub().active() || c.user_name() != name) return;
    if (&c != &ctx.conn) c.recheck_subscriptions();
    else if (!c.subscriptions_allowed()) c.close_after_reply();
  });
  ctx.out.ok();
}

void cmd_acl_getuser(CommandContext& ctx) {
  const acl::Users& users = ctx.server.acl();
  std::shared_ptr<const acl::User> u = users.find(ctx.args[2]);
  if (u == nullptr) return ctx.out.null();
  resp::Writer& out = ctx.out;
  out.map(6);
  out.bulk("flags");
  const bool sanitize = u->sanitize != acl::User::Sanitize::kDefault;
  out.set(1 + (u->nopass ? 1 : 0) + (sanitize ? 1 : 0));
  out.bulk(u->enabled ? "on" : "off");
  if (u->nopass) out.bulk("nopass");
  if (sanitize)
    out.bulk(u->sanitize == acl::User::Sanitize::kSkip ? "skip-sanitize-payload"
                                                       : "sanitize-payload");
  out.bulk("passwords");
  out.array(u->passwords.size());
  for (const std::string& p : u->passwords) out.bulk(p);
  out.bulk("commands");
  out.bulk(acl::describe_commands(*u, users.catalog()));
  out.bulk("keys");
  out.bulk(acl::describe_keys(*u));
  out.bulk("channels");
  out.bulk(acl::describe_channels(*u));
  out.bulk("selectors");
  out.array(0);
}

void cmd_acl_deluser(CommandContext& ctx) {
  int64_t deleted = 0;
  for (size_t i = 2; i < ctx.args.size(); ++i) {
    const std::string_view name = ctx.args[i];
    if (name == "default") return ctx.out.error(err::kAclDelDefault);
    if (!ctx.server.acl().del_user(name)) continue;
    ++deleted;
    // The clients authenticated as the user go (ACLFreeUserAndKillClients).
    ctx.server.clients().for_each([&](Connection& c) {
      if (c.user_name() != name) return;
      if (&c == &ctx.conn) c.close_after_reply();
      else c.close();
    });
  }
  ctx.out.integer(deleted);
}

void cmd_acl_list(CommandContext& ctx) {
  const acl::Users& users = ctx.server.acl();
  auto all = users.all();
  ctx.out.array(all.size());
  for (const auto& u : all) ctx.out.bulk("user " + u->name + " " + acl::describe(*u, users.catalog()));
}

void cmd_acl_users(CommandContext& ctx) {
  auto all = ctx.server.acl().all();
  ctx.out.array(all.size());
  for (const auto& u : all) ctx.out.bulk(u->name);
}

void cmd_acl_whoami(CommandContext& ctx) { ctx.out.bulk(ctx.conn.acl_user()->name); }

void cmd_acl_cat(CommandContext& ctx) {
  if (ctx.args.size() == 2) {
    const auto names = acl::category_names();
    ctx.out.array(names.size());
    for (std::string_view n : names) ctx.out.bulk(n);
    return;
  }
  const int cat = acl::category_index(ctx.args[2]);
  if (cat < 0) return ctx.out.error(err::acl_unknown_category(ctx.args[2]));
  std::vector<std::string_view> names;
  for (const acl::CatalogEntry& e : ctx.server.acl().catalog())
    if (e.categories & (uint32_t{1} << cat)) names.push_back(e.name);
  ctx.out.array(names.size());
  for (std::string_view n : names) ctx.out.bulk(n);
}

void cmd_acl_genpass(CommandContext& ctx) {
  int64_t bits = 256;
  if (ctx.args.size() > 3) return ctx.out.error(err::wrong_arity("acl|genpass"));
  if (ctx.args.size() == 3) {
    auto v = parse_int(ctx.args[2]);
    if (!v) return ctx.out.error(err::kNotInteger);
    if (*v <= 0 || *v > 4096) return ctx.out.error(err::kAclGenpassBits);
    bits = *v;
  }
  const size_t chars = static_cast<size_t>((bits + 3) / 4);
  std::vector<unsigned char> bytes((chars + 1) / 2);
  RAND_bytes(bytes.data(), static_cast<int>(bytes.size()));
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  out.resize(chars);
  ctx.out.bulk(out);
}

void cmd_acl_log(CommandContext& ctx) {
  if (ctx.args.size() > 3) return ctx.out.error(err::wrong_arity("acl|log"));
  int64_t count = 10;
  if (ctx.args.size() == 3) {
    if (iequals(ctx.args[2], "reset")) {
      ctx.server.acl_log().reset();
      return ctx.out.ok();
    }
    auto v = parse_int(ctx.args[2]);
    if (!v) return ctx.out.error(err::kNotInteger);
    count = *v < 0 ? 0 : *v;  // as Redis: a negative count shows nothing
  }
  const auto entries = ctx.server.acl_log().newest(static_cast<size_t>(count));
  ctx.out.array(entries.size());
  for (const AclLog::Entry& e : entries) {
    ctx.out.map(7);
    ctx.out.bulk("count");
    ctx.out.integer(static_cast<int64_t>(e.count));
    ctx.out.bulk("reason");
    ctx.out.bulk(e.reason);
    ctx.out.bulk("context");
    ctx.out.bulk(e.context);
    ctx.out.bulk("object");
    ctx.out.bulk(e.object);
    ctx.out.bulk("username");
    ctx.out.bulk(e.username);
    ctx.out.bulk("age-seconds");
    ctx.out.dbl(static_cast<double>(ctx.now_ms - e.ms) / 1000.0);
    ctx.out.bulk("client-info");
    ctx.out.bulk(e.client_info);
  }
}

// ACL SAVE's file work (ACLSaveToFile): every user as ACL LIST prints it, written to a
// temporary file then renamed over the aclfile. "" or the error text.
std::string save_aclfile(Server& server, const std::string& path) {
  const acl::Users& users = server.acl();
  std::string text;
  for (const auto& u : users.all())
    text += "user " + u->name + " " + acl::describe(*u, users.catalog()) + "\n";
  const std::string tmp = path + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << text;
    f.flush();
    if (!f) {
      std::remove(tmp.c_str());
      return "ERR There was an error trying to save the ACLs. Please check the server logs for "
             "more information";
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    return "ERR There was an error trying to save the ACLs. Please check the server logs for "
           "more information";
  }
  return {};
}

}  // namespace

std::string load_aclfile(Server& server, const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return "Error loading ACLs, opening file '" + path + "': No such file or directory";
  std::stringstream ss;
  ss << f.rdbuf();
  std::vector<acl::User> users;
  if (std::string e = acl::parse_aclfile(ss.str(), server.acl().catalog(), &users); !e.empty())
    return path + ":" + e;
  server.acl().replace_all(std::move(users));
  return {};
}

namespace {

// SAVE and LOAD touch the disk: off the connection's thread (Connection::defer_io), but
// inside EXEC, which cannot wait, at once.
void run_file_job(CommandContext& ctx, std::function<std::string()> job) {
  if (ctx.conn.txn.active()) {
    std::string e = job();
    return e.empty() ? ctx.out.ok() : ctx.out.error(e);
  }
  ctx.conn.defer_io(std::move(job));
}

void cmd_acl_save(CommandContext& ctx) {
  const std::string path = ctx.server.config().str(Key::kAclFile);
  if (path.empty()) return ctx.out.error(err::kAclNoFile);
  Server* server = &ctx.server;
  run_file_job(ctx, [server, path] { return save_aclfile(*server, path); });
}

void cmd_acl_load(CommandContext& ctx) {
  const std::string path = ctx.server.config().str(Key::kAclFile);
  if (path.empty()) return ctx.out.error(err::kAclNoFile);
  Server* server = &ctx.server;
  run_file_job(ctx, [server, path] {
    std::string e = load_aclfile(*server, path);
    return e.empty() ? e : "ERR " + e;
  });
}

// ACL DRYRUN user command [arg ...]: what the pipeline's ACL stage would say.
void cmd_acl_dryrun(CommandContext& ctx) {
  std::shared_ptr<const acl::User> u = ctx.server.acl().find(ctx.args[2]);
  if (u == nullptr) return ctx.out.error(err::acl_user_not_found(ctx.args[2]));
  const auto call = ctx.args.subspan(3);
  const CommandSpec* spec = ctx.server.commands().resolve(call);
  if (spec == nullptr)
    return ctx.out.error("ERR Command '" + std::string(call[0]) + "' not found");
  if (!CommandTable::arity_ok(*spec, call.size()))
    return ctx.out.error(err::wrong_arity(spec->full_name));
  std::vector<size_t> keys;
  uint32_t arg = 0;
  switch (acl_check(ctx.server, *u, *spec, call, keys, &arg)) {
    case PreparedCommand::Verdict::kRun:
      return ctx.out.ok();
    case PreparedCommand::Verdict::kNoPermCommand:
      return ctx.out.bulk(err::acl_dryrun_command(spec->full_name));
    case PreparedCommand::Verdict::kNoPermKey:
      return ctx.out.bulk(err::acl_dryrun_key(call[arg]));
    default:
      return ctx.out.bulk(err::acl_dryrun_channel(call[arg]));
  }
}

void cmd_acl_help(CommandContext& ctx) {
  reply_help(ctx, "ACL",
             {"CAT [<category>]",
              "    List all commands that belong to <category>, or all command categories",
              "    when no category is specified.",
              "DELUSER <username> [<username> ...]",
              "    Delete a list of users.",
              "DRYRUN <username> <command> [<arg> ...]",
              "    Returns whether the user can execute the given command without executing the command.",
              "GETUSER <username>",
              "    Get the user's details.",
              "GENPASS [<bits>]",
              "    Generate a secure 256-bit user password. The optional `bits` argument can",
              "    be used to specify a different size.",
              "LIST",
              "    Show users details in config file format.",
              "LOAD",
              "    Reload users from the ACL file.",
              "LOG [<count> | RESET]",
              "    Show the ACL log entries.",
              "SAVE",
              "    Save the current config to the ACL file.",
              "SETUSER <username> <attribute> [<attribute> ...]",
              "    Create or modify a user with the specified attributes.",
              "USERS",
              "    List all the registered usernames.",
              "WHOAMI",
              "    Return the current connection username."});
}

}  // namespace

void register_acl_family(CommandTable& t) {
  CommandBuilder b(t, "server");
  const uint32_t admin = kAdmin | kNoScript | kLoading | kStale;
  const uint32_t plain = kNoScript | kLoading | kStale;
  CommandSpec acl = b.spec("acl", -2, 0, kNoKeys, nullptr, {"A container for Access List Control commands", "6.0.0"});
  acl.complexity = "Depends on subcommand.";
  acl.subcommands = {
      b.spec("cat", -2, plain, kNoKeys, cmd_acl_cat, {"List the ACL categories or the commands inside a category", "6.0.0", "O(1) since the categories and commands are a fixed set."}),
      b.spec("deluser", -3, admin, kNoKeys, cmd_acl_deluser, {"Remove the specified ACL users and the associated rules", "6.0.0", "O(1) amortized time considering the typical user."}),
      b.spec("dryrun", -4, admin, kNoKeys, cmd_acl_dryrun, {"Returns whether the user can execute the given command without executing the command.", "7.0.0", "O(1)."}),
      b.spec("genpass", -2, plain, kNoKeys, cmd_acl_genpass, {"Generate a pseudorandom secure password to use for ACL users", "6.0.0"}),
      b.spec("getuser", 3, admin, kNoKeys, cmd_acl_getuser, {"Get the rules for a specific ACL user", "6.0.0", "O(N). Where N is the number of password, command and pattern rules that the user has."}),
      b.spec("help", 2, kLoading | kStale, kNoKeys, cmd_acl_help, {"Show helpful text about the different subcommands", "6.0.0"}),
      b.spec("list", 2, admin, kNoKeys, cmd_acl_list, {"List the current ACL rules in ACL config file format", "6.0.0", "O(N). Where N is the number of configured users."}),
      b.spec("load", 2, admin, kNoKeys, cmd_acl_load, {"Reload the ACLs from the configured ACL file", "6.0.0", "O(N). Where N is the number of configured users."}),
      b.spec("log", -2, admin, kNoKeys, cmd_acl_log, {"List latest events denied because of ACLs in place", "6.0.0", "O(N) with N being the number of entries shown."}),
      b.spec("save", 2, admin, kNoKeys, cmd_acl_save, {"Save the current ACL rules in the configured ACL file", "6.0.0", "O(N). Where N is the number of configured users."}),
      b.spec("setuser", -3, admin, kNoKeys, cmd_acl_setuser, {"Modify or create the rules for a specific ACL user", "6.0.0", "O(N). Where N is the number of rules provided."}),
      b.spec("users", 2, admin, kNoKeys, cmd_acl_users, {"List the username of all the configured ACL rules", "6.0.0", "O(N). Where N is the number of configured users."}),
      b.spec("whoami", 2, plain, kNoKeys, cmd_acl_whoami, {"Return the name of the user associated to the current connection", "6.0.0"}),
  };
  b.add(std::move(acl));
}

}  // namespace server
