// server/cmd_server.cc - server administration: INFO, CONFIG, COMMAND, SLOWLOG, TIME,
// LASTSAVE, SHUTDOWN, DEBUG SLEEP. Semantics, reply shapes and error texts follow Redis 7.0
// (server.c, config.c, slowlog.c, debug.c); the INFO text and COMMAND INFO/DOCS shapes are
// built in info.cc.
#include <sys/time.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <set>
#include <thread>

#include "cluster/slot.h"
#include "server/arg_parser.h"
#include "server/config.h"
#include "server/connection.h"
#include "server/errors.h"
#include "server/os_tuning.h"
#include "server/commands/family.h"
#include "server/info.h"
#include "server/log.h"
#include "server/migration.h"
#include "server/server.h"
#include "tiering/glob.h"

namespace server {
namespace {

void reply_help(resp::Writer& out, std::initializer_list<const char*> lines) {
  out.array(lines.size());
  for (const char* l : lines) out.simple(l);
}

// Redis's subcommand syntax error for this command and its first argument.
std::string subcommand_syntax_error(const CommandContext& ctx) {
  return err::subcommand_syntax(ctx.args[1], ctx.args[0]);
}

// ---- INFO, TIME, LASTSAVE ----

void cmd_info(CommandContext& ctx) {
  std::string text = info_text(ctx.server, ctx.args.subspan(1), ctx.now_ms);
  ctx.out.verbatim("txt", text);
}

void cmd_time(CommandContext& ctx) {
  timeval tv;
  gettimeofday(&tv, nullptr);
  ctx.out.array(2);
  ctx.out.bulk(std::to_string(tv.tv_sec));
  ctx.out.bulk(std::to_string(tv.tv_usec));
}

// No RDB is ever saved: the last "save" is the start of the process, when the dataset was
// known (empty or recovered).
void cmd_lastsave(CommandContext& ctx) { ctx.out.integer(ctx.server.start_ms() / 1000); }

// ---- CONFIG ----

void cmd_config_get(CommandContext& ctx) {
  std::vector<std::pair<std::string, std::string>> found;
  std::set<std::string> seen;
  for (size_t i = 2; i < ctx.args.size(); ++i)
    for (auto& kv : ctx.server.config().get(ctx.args[i]))
      if (seen.insert(kv.first).second) found.push_back(std::move(kv));
  ctx.out.map(found.size());
  for (const auto& [name, value] : found) {
    ctx.out.bulk(name);
    ctx.out.bulk(value);
  }
}

// The current value of a known key, as CONFIG GET shows it; `name` becomes the key's own name.
std::string current_value(const Config& config, std::string* name) {
  auto kv = config.get(*name);
  *name = kv.at(0).first;
  return kv.at(0).second;
}

// CONFIG SET name value [name value ...]: every pair is checked (unknown, immutable, duplicate)
// before any is set, and a value refused rolls back the ones already set (config.c).
void cmd_config_set(CommandContext& ctx) {
  if (ctx.args.size() % 2 != 0) return ctx.out.error(err::kSyntax);
  // One CONFIG SET at a time: the checks below write a key's own value back to it, and a
  // rollback must not undo another client's change.
  static std::mutex mu;
  std::lock_guard lock(mu);
  Config& config = ctx.server.config();
  struct Pair {
    std::string name;  // the key's own (lower-case) name
    std::string_view value;
    std::string old;
  };
  std::vector<Pair> pairs;
  std::string unknown, error, error_arg;
  for (size_t i = 2; i < ctx.args.size(); i += 2) {
    std::string_view arg = ctx.args[i];
    if (!Config::known(arg)) {
      if (unknown.empty() && error.empty()) unknown = arg;
      continue;
    }
    if (!unknown.empty() || !error.empty()) continue;
    Pair p{std::string(arg), ctx.args[i + 1], {}};
    p.old = current_value(config, &p.name);
    // Writing the current value back fails only when the key cannot be set at run time.
    if (config.set(p.name, p.old, true)) {
      error = "can't set immutable config";
      error_arg = arg;
      continue;
    }
    for (const auto& q : pairs) {
      if (q.name == p.name) {
        error = "duplicate parameter";
        error_arg = arg;
      }
    }
    pairs.push_back(std::move(p));
  }
  if (!unknown.empty())
    return ctx.out.error(err::config_set_unknown(unknown));
  for (size_t i = 0; error.empty() && i < pairs.size(); ++i) {
    if (auto e = config.set(pairs[i].name, pairs[i].value, true)) {
      error = *e;
      error_arg = pairs[i].name;
      for (size_t j = 0; j <= i; ++j) (void)config.set(pairs[j].name, pairs[j].old, false);
    }
  }
  // A larger maxclients needs a larger open-files limit (config.c updateMaxclients).
  for (size_t i = 0; error.empty() && i < pairs.size(); ++i) {
    if (pairs[i].name != "maxclients") continue;
    const int64_t want = config.num(Key::kMaxClients);
    const OpenFilesLimit files = adjust_open_files_limit(want);
    for (const auto& [level, line] : files.log) log::write(level, line);
    if (files.maxclients < want) {
      error = "The operating system is not able to handle the specified number of clients, "
              "try with " + std::to_string(files.maxclients);
      error_arg = pairs[i].name;
      log::warning("Failed applying new configuration. Possibly related to new maxclients "
                   "setting. Restoring previous settings.");
      for (const auto& p : pairs) (void)config.set(p.name, p.old, false);
    }
  }
  // A tls-* key changed while TLS is on: a new context (checked as at start: tls-auth-clients
  // needs a CA, too), or none of the pairs is kept and the old context stays.
  if (error.empty() && ctx.server.tls_wanted()) {
    for (const auto& p : pairs) {
      if (!p.name.starts_with("tls-")) continue;
      if (ctx.server.configure_tls()) {
        error = err::kTlsReconfigure;
        error_arg = p.name;
        for (const auto& q : pairs) (void)config.set(q.name, q.old, false);
      }
      break;
    }
  }
  if (!error.empty())
    return ctx.out.error(err::config_set_failed(error_arg, error));
  for (const auto& p : pairs) {
    if (p.name == "loglevel")
      log::configure(static_cast<log::Level>(config.num(Key::kLogLevel)), "");
    // requirepass is the default user's password (config.c updateRequirePass).
    if (p.name == "requirepass") ctx.server.acl().set_requirepass(config.str(Key::kRequirePass));
    const bool secret = p.name == "requirepass" || p.name == "tls-key-file-pass";
    log::verbose("config set " + p.name + "=" + (secret ? "(redacted)" : std::string(p.value)));
  }
  ctx.out.ok();
}

void cmd_config_resetstat(CommandContext& ctx) {
  ctx.server.reset_stats();
  ctx.out.ok();
}

void cmd_config_help(CommandContext& ctx) {
  reply_help(ctx.out, {
      "CONFIG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
      "GET <pattern>", "    Return parameters matching the glob-like <pattern> and their values.",
      "SET <directive> <value>", "    Set the configuration <directive> to <value>.",
      "RESETSTAT", "    Reset statistics reported by the INFO command.",
      "HELP", "    Prints this help.",
  });
}

// ---- COMMAND ----

void reply_all_infos(CommandContext& ctx) {
  const auto& all = ctx.server.commands().all();
  ctx.out.array(all.size());
  for (const CommandSpec* spec : all) reply_command_info(ctx.out, spec);
}

// COMMAND with no subcommand: the info of every command.
void cmd_command(CommandContext& ctx) { reply_all_infos(ctx); }

void cmd_command_count(CommandContext& ctx) {
  ctx.out.integer(static_cast<int64_t>(ctx.server.commands().all().size()));
}

void cmd_command_info(CommandContext& ctx) {
  if (ctx.args.size() == 2) return reply_all_infos(ctx);
  ctx.out.array(ctx.args.size() - 2);
  for (size_t i = 2; i < ctx.args.size(); ++i)
    reply_command_info(ctx.out, lookup_full_name(ctx.server.commands(), ctx.args[i]));
}

void cmd_command_docs(CommandContext& ctx) {
  std::vector<const CommandSpec*> specs;
  if (ctx.args.size() == 2) {
    specs = ctx.server.commands().all();
  } else {
    for (size_t i = 2; i < ctx.args.size(); ++i)
      if (const CommandSpec* s = lookup_full_name(ctx.server.commands(), ctx.args[i]))
        specs.push_back(s);
  }
  ctx.out.map(specs.size());
  for (const CommandSpec* s : specs) {
    ctx.out.bulk(s->full_name);
    reply_command_docs(ctx.out, *s);
  }
}

// COMMAND LIST [FILTERBY MODULE name | ACLCAT category | PATTERN pattern]
void cmd_command_list(CommandContext& ctx) {
  enum { kAll, kModule, kAclCat, kPattern } filter = kAll;
  std::string_view arg;
  if (ctx.args.size() == 5 && iequals(ctx.args[2], "filterby")) {
    arg = ctx.args[4];
    if (iequals(ctx.args[3], "module")) filter = kModule;
    else if (iequals(ctx.args[3], "aclcat")) filter = kAclCat;
    else if (iequals(ctx.args[3], "pattern")) filter = kPattern;
    else return ctx.out.error(err::kSyntax);
  } else if (ctx.args.size() != 2) {
    return ctx.out.error(err::kSyntax);
  }
  auto matches = [&](const CommandSpec& s) {
    switch (filter) {
      case kAll:
        return true;
      case kModule:
        return false;  // no modules
      case kAclCat: {
        auto cats = acl_categories(s);
        return std::any_of(cats.begin(), cats.end(),
                           [&](std::string_view c) { return iequals(c.substr(1), arg); });
      }
      case kPattern:
        return tiering::glob_match(arg, s.full_name, true);
    }
    return false;
  };
  std::vector<std::string_view> names;
  for (const CommandSpec* spec : ctx.server.commands().all()) {
    if (matches(*spec)) names.push_back(spec->full_name);
    for (const auto& sub : spec->subcommands)
      if (matches(sub)) names.push_back(sub.full_name);
  }
  ctx.out.array(names.size());
  for (auto n : names) ctx.out.bulk(n);
}

// COMMAND GETKEYS / GETKEYSANDFLAGS <command> [arg ...] (server.c getKeysSubcommandImpl), with
// the one key extractor the pipeline uses (CommandTable::keys).
void getkeys_generic(CommandContext& ctx, bool with_flags) {
  auto argv = ctx.args.subspan(2);
  const CommandSpec* spec = ctx.server.commands().resolve(argv);
  if (spec == nullptr) return ctx.out.error(err::kInvalidCommand);
  // Shard channels are keys for the slot stage only: Redis's key specs flag them not_key.
  if (!CommandTable::has_keys(*spec) || (spec->flags & kPubSub))
    return ctx.out.error(err::kNoKeyArguments);
  if (!CommandTable::arity_ok(*spec, argv.size()))
    return ctx.out.error(err::kInvalidArgCount);
  std::vector<size_t> positions;
  if (!CommandTable::keys(*spec, argv, positions) || positions.empty())
    return ctx.out.error(err::kInvalidArguments);
  auto flags = key_spec_flags(*spec);
  ctx.out.array(positions.size());
  for (size_t pos : positions) {
    if (!with_flags) {
      ctx.out.bulk(argv[pos]);
      continue;
    }
    ctx.out.array(2);
    ctx.out.bulk(argv[pos]);
    ctx.out.set(flags.size());
    for (auto f : flags) ctx.out.simple(f);
  }
}
void cmd_command_getkeys(CommandContext& ctx) { getkeys_generic(ctx, false); }
void cmd_command_getkeysandflags(CommandContext& ctx) { getkeys_generic(ctx, true); }

void cmd_command_help(CommandContext& ctx) {
  reply_help(ctx.out, {
      "COMMAND <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
      "(no subcommand)", "    Return details about all Redis commands.",
      "COUNT", "    Return the total number of commands in this Redis server.",
      "LIST", "    Return a list of all commands in this Redis server.",
      "INFO [<command-name> ...]",
      "    Return details about multiple Redis commands.",
      "    If no command names are given, documentation details for all",
      "    commands are returned.",
      "DOCS [<command-name> ...]",
      "    Return documentation details about multiple Redis commands.",
      "    If no command names are given, documentation details for all",
      "    commands are returned.",
      "GETKEYS <full-command>", "    Return the keys from a full Redis command.",
      "GETKEYSANDFLAGS <full-command>",
      "    Return the keys and the access flags from a full Redis command.",
      "HELP", "    Prints this help.",
  });
}

// ---- SLOWLOG ----

void cmd_slowlog_get(CommandContext& ctx) {
  if (ctx.args.size() > 3) return ctx.out.error(subcommand_syntax_error(ctx));
  int64_t count = 10;
  if (ctx.args.size() == 3) {
    auto n = parse_int(ctx.args[2]);
    if (!n || *n < -1) return ctx.out.error(err::kSlowlogCount);
    count = *n;
  }
  auto entries = ctx.server.slowlog().get(count);
  ctx.out.array(entries.size());
  for (const auto& e : entries) {
    ctx.out.array(6);
    ctx.out.integer(static_cast<int64_t>(e.id));
    ctx.out.integer(e.time_s);
    ctx.out.integer(e.duration_us);
    ctx.out.array(e.args.size());
    for (const auto& a : e.args) ctx.out.bulk(a);
    ctx.out.bulk(e.peer);
    ctx.out.bulk(e.name);
  }
}

void cmd_slowlog_len(CommandContext& ctx) {
  ctx.out.integer(static_cast<int64_t>(ctx.server.slowlog().size()));
}

void cmd_slowlog_reset(CommandContext& ctx) {
  ctx.server.slowlog().reset();
  ctx.out.ok();
}

void cmd_slowlog_help(CommandContext& ctx) {
  reply_help(ctx.out, {
      "SLOWLOG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
      "GET [<count>]",
      "    Return top <count> entries from the slowlog (default: 10, -1 mean all).",
      "    Entries are made of:",
      "    id, timestamp, time in microseconds, arguments array, client IP and port,",
      "    client name",
      "LEN", "    Return the length of the slowlog.",
      "RESET", "    Reset the slowlog.",
      "HELP", "    Prints this help.",
  });
}

// ---- SHUTDOWN, DEBUG ----

// SHUTDOWN [NOSAVE|SAVE] [NOW] [FORCE] [ABORT]. stratakv keeps no RDB: with the SSD tier on, a
// stop writes the values held only in memory to SSD (tiering.ssd.flush_on_shutdown, bounded by
// flush_on_shutdown_timeout; NOSAVE skips it, SAVE forces it); there is no waiting for replicas,
// so no shutdown is ever in progress for ABORT. No reply on success: the
// connection closes as the server stops, as in Redis.
void cmd_shutdown(CommandContext& ctx) {
  bool nosave = false, save = false, abort = false, other = false;
  for (size_t i = 1; i < ctx.args.size(); ++i) {
    std::string_view a = ctx.args[i];
    if (iequals(a, "nosave")) nosave = true;
    else if (iequals(a, "save")) save = true;
    else if (iequals(a, "now") || iequals(a, "force")) other = true;
    else if (iequals(a, "abort")) abort = true;
    else return ctx.out.error(err::kSyntax);
  }
  if ((abort && (nosave || save || other)) || (nosave && save))
    return ctx.out.error(err::kSyntax);
  if (abort) return ctx.out.error(err::kNoShutdown);
  log::warning("User requested shutdown... client=" + std::to_string(ctx.conn.id()));
  // NOSAVE drops the values held only in memory, SAVE writes them to the SSD tier whatever
  // tiering.ssd.flush_on_shutdown says (Redis: whether the RDB is saved).
  ctx.server.stop(nosave ? Server::ShutdownSave::kNoSave
                         : save ? Server::ShutdownSave::kSave : Server::ShutdownSave::kDefault);
}

// DEBUG SET-SLOT-OWNER <first-slot> <last-slot> <host:port> | MYSELF: a test aid. Slots
// [first, last] are served by the node at host:port (their keys get -MOVED) or again by this
// one. The cluster's topology will own this map (server/slot_owner.h).
void debug_set_slot_owner(CommandContext& ctx) {
  auto first = parse_int(ctx.args[2]), last = parse_int(ctx.args[3]);
  if (!first || !last || *first < 0 || *last < *first || *last >= cluster::kSlots)
    return ctx.out.error(err::kInvalidSlot);
  std::string_view to = ctx.args[4];
  if (iequals(to, "myself")) to = {};
  else if (to.find(':') == std::string_view::npos) return ctx.out.error(err::kSyntax);
  ctx.server.slot_owner().assign(static_cast<uint16_t>(*first), static_cast<uint16_t>(*last), to);
  ctx.out.ok();
}

// DEBUG SLEEP <seconds> | SET-SLOT-OWNER ... | HELP. Sleeping blocks this connection's worker
// thread, like Redis blocks its main thread: meant for tests (SLOWLOG, timeouts).
void cmd_debug(CommandContext& ctx) {
  if (iequals(ctx.args[1], "help") && ctx.args.size() == 2) {
    return reply_help(ctx.out, {
        "DEBUG <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
        "SLEEP <seconds>", "    Stop the server for <seconds>. Decimals allowed.",
        "SET-SLOT-OWNER <first-slot> <last-slot> <host:port>|MYSELF",
        "    Test aid: the slots are served by the node at <host:port> (their keys get",
        "    -MOVED), or again by this node (MYSELF).",
        "MIGRATION-HOLD <0|1>",
        "    Test aid: 1 puts off the handover of the slot migrations this node feeds (they",
        "    keep streaming); 0 lets them complete.",
        "HELP", "    Prints this help.",
    });
  }
  if (iequals(ctx.args[1], "set-slot-owner") && ctx.args.size() == 5)
    return debug_set_slot_owner(ctx);
  if (iequals(ctx.args[1], "migration-hold") && ctx.args.size() == 3) {
    if (ctx.args[2] != "0" && ctx.args[2] != "1") return ctx.out.error(err::kSyntax);
    ctx.server.migrations().hold_handovers(ctx.args[2] == "1");
    return ctx.out.ok();
  }
  if (iequals(ctx.args[1], "sleep") && ctx.args.size() == 3) {
    // As Redis: strtod, so a non-number sleeps 0 seconds.
    double secs = std::strtod(std::string(ctx.args[2]).c_str(), nullptr);
    // Microseconds beyond int64 (1e13 s, inf) do not convert (undefined behaviour). Redis's
    // conversion overflows to a negative time there and it answers at once: so does this.
    const double us = secs * 1e6;
    if (secs > 0 && us < 0x1p63)
      std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int64_t>(us)));
    return ctx.out.ok();
  }
  ctx.out.error(subcommand_syntax_error(ctx));
}

}  // namespace

void register_server_family(CommandTable& t) {
  CommandBuilder b(t, "server");
  const uint32_t ls = kLoading | kStale;
  const uint32_t admin = kAdmin | kNoScript | kLoading | kStale;
  const char* help = "Show helpful text about the different subcommands";
  const char* by_sub = "Depends on subcommand.";

  b.add(b.spec("info", -1, ls, kNoKeys, cmd_info, {"Get information and statistics about the server", "1.0.0"}));
  b.add(b.spec("time", 1, ls | kFast, kNoKeys, cmd_time, {"Return the current server time", "2.6.0"}));
  b.add(b.spec("lastsave", 1, ls | kFast, kNoKeys, cmd_lastsave, {"Get the UNIX time stamp of the last successful save to disk", "1.0.0"}));
  b.add(b.spec("shutdown", -1, admin | kAllowBusy, kNoKeys, cmd_shutdown, {"Synchronously save the dataset to disk and then shut down the server", "1.0.0", "O(N) when saving, where N is the total number of keys in all databases when "
             "saving data, otherwise O(1)"}));
  b.add(b.spec("debug", -2, admin, kNoKeys, cmd_debug, {"A container for debugging commands", "1.0.0", by_sub}));

  const char* config_n = "O(N) when N is the number of configuration parameters provided";
  CommandSpec config = b.spec("config", -2, 0, kNoKeys, nullptr, {"A container for server configuration commands", "2.0.0", by_sub});
  config.subcommands = {
      b.spec("get", -3, admin, kNoKeys, cmd_config_get, {"Get the values of configuration parameters", "2.0.0", config_n}),
      b.spec("set", -4, admin, kNoKeys, cmd_config_set, {"Set configuration parameters to the given values", "2.0.0", config_n}),
      b.spec("resetstat", 2, admin, kNoKeys, cmd_config_resetstat, {"Reset the stats returned by INFO", "2.0.0"}),
      b.spec("help", 2, ls, kNoKeys, cmd_config_help, {help, "5.0.0"}),
  };
  b.add(std::move(config));

  const char* lookup_n = "O(N) where N is the number of commands to look up";
  const char* getkeys_n = "O(N) where N is the number of arguments to the command";
  const char* all_n = "O(N) where N is the total number of Redis commands";
  CommandSpec command = b.spec("command", -1, ls, kNoKeys, cmd_command, {"Get array of Redis command details", "2.8.13", all_n});
  command.subcommands = {
      b.spec("count", 2, ls, kNoKeys, cmd_command_count, {"Get total number of Redis commands", "2.8.13"}),
      b.spec("docs", -2, ls, kNoKeys, cmd_command_docs, {"Get array of specific Redis command documentation", "7.0.0", lookup_n}),
      b.spec("getkeys", -4, ls, kNoKeys, cmd_command_getkeys, {"Extract keys given a full Redis command", "2.8.13", getkeys_n}),
      b.spec("getkeysandflags", -4, ls, kNoKeys, cmd_command_getkeysandflags, {"Extract keys and access flags given a full Redis command", "7.0.0", getkeys_n}),
      b.spec("help", 2, ls, kNoKeys, cmd_command_help, {help, "5.0.0"}),
      b.spec("info", -2, ls, kNoKeys, cmd_command_info, {"Get array of specific Redis command details, or all when no argument is given.", "2.8.13", lookup_n}),
      b.spec("list", -2, ls, kNoKeys, cmd_command_list, {"Get an array of Redis command names", "7.0.0", all_n}),
  };
  b.add(std::move(command));

  const uint32_t slow_admin = kAdmin | kLoading | kStale;
  CommandSpec slowlog = b.spec("slowlog", -2, 0, kNoKeys, nullptr, {"A container for slow log commands", "2.2.12", by_sub});
  slowlog.subcommands = {
      b.spec("get", -2, slow_admin, kNoKeys, cmd_slowlog_get, {"Get the slow log's entries", "2.2.12", "O(N) where N is the number of entries returned"}),
      b.spec("len", 2, slow_admin, kNoKeys, cmd_slowlog_len, {"Get the slow log's length", "2.2.12"}),
      b.spec("reset", 2, slow_admin, kNoKeys, cmd_slowlog_reset, {"Clear all entries from the slow log", "2.2.12", "O(N) where N is the number of entries in the slowlog"}),
      b.spec("help", 2, ls, kNoKeys, cmd_slowlog_help, {help, "6.2.0"}),
  };
  b.add(std::move(slowlog));
}

}  // namespace server
