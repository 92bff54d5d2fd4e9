// server/commands/cmd_introspection.cc - what operators watch a server with: LATENCY (the
// latency monitor, server/latency.h) and MONITOR (the command stream, server/monitor.h).
// Replies and error texts are Redis 7.0's (latency.c, replication.c monitorCommand).
#include <chrono>

#include "server/commands/family.h"
#include "server/connection.h"
#include "server/errors.h"
#include "server/server.h"

namespace server {
namespace {

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// ---- LATENCY ----

// LATENCY LATEST: [event, time of the latest spike, its latency, all-time high] per event.
void cmd_latency_latest(CommandContext& ctx) {
  const auto events = ctx.server.latency().all();
  ctx.out.array(events.size());
  for (const auto& [event, ts] : events) {
    ctx.out.array(4);
    ctx.out.bulk(event);
    ctx.out.integer(ts.latest().time_s);
    ctx.out.integer(ts.latest().latency_ms);
    ctx.out.integer(ts.max_ms);
  }
}

// LATENCY HISTORY <event>: [time, latency] per sample, oldest first; empty for no samples.
void cmd_latency_history(CommandContext& ctx) {
  const auto ts = ctx.server.latency().find(ctx.args[2]);
  if (!ts) return ctx.out.array(0);
  const auto samples = ts->in_order();
  ctx.out.array(samples.size());
  for (const auto& s : samples) {
    ctx.out.array(2);
    ctx.out.integer(s.time_s);
    ctx.out.integer(s.latency_ms);
  }
}

// LATENCY RESET [event ...]: the number of series dropped.
void cmd_latency_reset(CommandContext& ctx) {
  LatencyMonitor& latency = ctx.server.latency();
  if (ctx.args.size() == 2) return ctx.out.integer(latency.reset({}));
  int64_t resets = 0;
  for (size_t i = 2; i < ctx.args.size(); ++i)
    if (!ctx.args[i].empty()) resets += latency.reset(ctx.args[i]);
  ctx.out.integer(resets);
}

void cmd_latency_doctor(CommandContext& ctx) {
  const Config& config = ctx.server.config();
  ctx.out.verbatim("txt", latency_doctor(ctx.server.latency(),
                                         config.num(Key::kLatencyMonitorThreshold),
                                         config.num(Key::kSlowlogLogSlowerThan),
                                         config.num(Key::kHz), unix_seconds()));
}

void cmd_latency_graph(CommandContext& ctx) {
  const auto ts = ctx.server.latency().find(ctx.args[2]);
  if (!ts) return ctx.out.error(err::latency_no_samples(ctx.args[2]));
  ctx.out.verbatim("txt", latency_graph(ctx.args[2], *ts, unix_seconds()));
}

void cmd_latency_help(CommandContext& ctx) {
  reply_help(ctx, "LATENCY", {
      "DOCTOR",
      "    Return a human readable latency analysis report.",
      "GRAPH <event>",
      "    Return an ASCII latency graph for the <event> class.",
      "HISTORY <event>",
      "    Return time-latency samples for the <event> class.",
      "LATEST",
      "    Return the latest latency samples for all events.",
      "RESET [<event> ...]",
      "    Reset latency data of one or more <event> classes.",
      "    (default: reset all data for all event classes)",
  });
}

// ---- MONITOR ----

// MONITOR: +OK, then every command other clients run. Refused inside a transaction (Redis's
// DENY_BLOCKING client); a monitor asking again gets no reply at all, as in Redis.
void cmd_monitor(CommandContext& ctx) {
  if (ctx.conn.txn.active()) return ctx.out.error(err::kMonitorDenyBlocking);
  if (!ctx.conn.start_monitor()) return;
  ctx.out.ok();
}

}  // namespace

void register_introspection_family(CommandTable& t) {
  CommandBuilder b(t, "server");
  const uint32_t admin = kAdmin | kNoScript | kLoading | kStale;
  const char* by_sub = "Depends on subcommand.";

  CommandSpec latency = b.spec("latency", -2, 0, kNoKeys, nullptr, {"A container for latency diagnostics commands", "2.8.13", by_sub});
  latency.subcommands = {
      b.spec("doctor", 2, admin, kNoKeys, cmd_latency_doctor, {"Return a human readable latency analysis report.", "2.8.13"}),
      b.spec("graph", 3, admin, kNoKeys, cmd_latency_graph, {"Return a latency graph for the event.", "2.8.13"}),
      b.spec("help", 2, kLoading | kStale, kNoKeys, cmd_latency_help, {"Show helpful text about the different subcommands.", "2.8.13"}),
      b.spec("history", 3, admin, kNoKeys, cmd_latency_history, {"Return timestamp-latency samples for the event.", "2.8.13"}),
      b.spec("latest", 2, admin, kNoKeys, cmd_latency_latest, {"Return the latest latency samples for all events.", "2.8.13"}),
      b.spec("reset", -2, admin, kNoKeys, cmd_latency_reset, {"Reset latency data for one or more events.", "2.8.13"}),
  };
  b.add(std::move(latency));
  b.add(b.spec("monitor", 1, admin, kNoKeys, cmd_monitor, {"Listen for all requests received by the server in real time", "1.0.0"}));
}

}  // namespace server
