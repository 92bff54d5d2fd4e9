// server/commands/cmd_pubsub.cc - Pub/Sub commands: SUBSCRIBE, UNSUBSCRIBE, PSUBSCRIBE,
// PUNSUBSCRIBE, PUBLISH, SSUBSCRIBE, SUNSUBSCRIBE, SPUBLISH and PUBSUB CHANNELS|NUMSUB|NUMPAT|
// SHARDCHANNELS|SHARDNUMSUB|HELP, with Redis 7.0's replies (pubsub.c; docs/pubsub.md).
//
// The registry and delivery are server/pubsub.h's. A (un)subscribe reply is one RESP3 push or
// RESP2 array per channel: [kind, channel, count], count being the client's channels plus
// patterns (shard channels alone for the S- commands). Shard channels are keys: SSUBSCRIBE,
// SUNSUBSCRIBE and SPUBLISH pass the pipeline's slot stage (-MOVED, -CROSSSLOT in cluster mode);
// PUBLISH reaches the subscribers of the node it was sent to.
#include <string>
#include <vector>

#include "server/connection.h"
#include "server/errors.h"
#include "server/commands/family.h"
#include "server/pubsub.h"
#include "server/server.h"

namespace server {
namespace {

// addReplyPubsubSubscribed / addReplyPubsubUnsubscribed: [kind, channel (null: none), count].
void reply_sub(CommandContext& ctx, std::string_view kind, const std::string_view* channel,
               int64_t count) {
  ctx.out.push(3);
  ctx.out.bulk(kind);
  if (channel != nullptr) ctx.out.bulk(*channel);
  else ctx.out.null();
  ctx.out.integer(count);
}

int64_t count_of(const PubSubClient& c, ChannelKind kind) {
  return kind == ChannelKind::kShard ? c.shard_count() : c.subscription_count();
}

void subscribe_generic(CommandContext& ctx, ChannelKind kind) {
  ctx.conn.ensure_mailbox();
  PubSubClient& c = ctx.conn.pubsub();
  const std::string_view what = kind == ChannelKind::kShard ? "ssubscribe" : "subscribe";
  for (size_t i = 1; i < ctx.args.size(); ++i) {
    c.subscribe(kind, ctx.args[i]);  // an existing subscription is answered all the same
    reply_sub(ctx, what, &ctx.args[i], count_of(c, kind));
  }
}

void unsubscribe_generic(CommandContext& ctx, ChannelKind kind) {
  PubSubClient& c = ctx.conn.pubsub();
  const std::string_view what = kind == ChannelKind::kShard ? "sunsubscribe" : "unsubscribe";
  if (ctx.args.size() == 1) {
    // Every channel; one reply even when there was none (pubsubUnsubscribeAllChannels).
    const std::vector<std::string> all = c.channels(kind);
    for (const std::string& ch : all) {
      c.unsubscribe(kind, ch);
      const std::string_view v = ch;
      reply_sub(ctx, what, &v, count_of(c, kind));
    }
    if (all.empty()) reply_sub(ctx, what, nullptr, count_of(c, kind));
    return;
  }
  for (size_t i = 1; i < ctx.args.size(); ++i) {
    c.unsubscribe(kind, ctx.args[i]);
    reply_sub(ctx, what, &ctx.args[i], count_of(c, kind));
  }
}

void cmd_subscribe(CommandContext& ctx) { subscribe_generic(ctx, ChannelKind::kGlobal); }
void cmd_ssubscribe(CommandContext& ctx) { subscribe_generic(ctx, ChannelKind::kShard); }
void cmd_unsubscribe(CommandContext& ctx) { unsubscribe_generic(ctx, ChannelKind::kGlobal); }
void cmd_sunsubscribe(CommandContext& ctx) { unsubscribe_generic(ctx, ChannelKind::kShard); }

void cmd_psubscribe(CommandContext& ctx) {
  ctx.conn.ensure_mailbox();
  PubSubClient& c = ctx.conn.pubsub();
  for (size_t i = 1; i < ctx.args.size(); ++i) {
    c.psubscribe(ctx.args[i]);
    reply_sub(ctx, "psubscribe", &ctx.args[i], c.subscription_count());
  }
}

void cmd_punsubscribe(CommandContext& ctx) {
  PubSubClient& c = ctx.conn.pubsub();
  if (ctx.args.size() == 1) {
    const std::vector<std::string> all = c.patterns();
    for (const std::string& p : all) {
      c.punsubscribe(p);
      const std::string_view v = p;
      reply_sub(ctx, "punsubscribe", &v, c.subscription_count());
    }
    if (all.empty()) reply_sub(ctx, "punsubscribe", nullptr, c.subscription_count());
    return;
  }
  for (size_t i = 1; i < ctx.args.size(); ++i) {
    c.punsubscribe(ctx.args[i]);
    reply_sub(ctx, "punsubscribe", &ctx.args[i], c.subscription_count());
  }
}

// A RESP3 client subscribed to its own channel gets the message before the reply, as in Redis
// (but not inside EXEC's array, whose entries are one reply each, nor when the reply goes
// elsewhere than the connection's output, as a script's calls do).
void publish_generic(CommandContext& ctx, ChannelKind kind) {
  const int64_t n = ctx.server.pubsub().publish(kind, ctx.args[1], ctx.args[2]);
  if (!ctx.conn.txn.active() && &ctx.out == &ctx.conn.writer()) ctx.conn.drain_mailbox();
  ctx.out.integer(n);
}

void cmd_publish(CommandContext& ctx) { publish_generic(ctx, ChannelKind::kGlobal); }
void cmd_spublish(CommandContext& ctx) { publish_generic(ctx, ChannelKind::kShard); }

// ---- PUBSUB ----

// CHANNELS and SHARDCHANNELS take at most one pattern (pubsubCommand's argc checks).
void channels_generic(CommandContext& ctx, ChannelKind kind) {
  if (ctx.args.size() > 3) return ctx.out.error(err::subcommand_syntax(ctx.args[1], "pubsub"));
  const std::string_view pattern = ctx.args.size() == 3 ? ctx.args[2] : std::string_view();
  const std::vector<std::string> names = ctx.server.pubsub().channels(kind, pattern);
  ctx.out.array(names.size());
  for (const std::string& n : names) ctx.out.bulk(n);
}

void numsub_generic(CommandContext& ctx, ChannelKind kind) {
  ctx.out.array((ctx.args.size() - 2) * 2);
  for (size_t i = 2; i < ctx.args.size(); ++i) {
    ctx.out.bulk(ctx.args[i]);
    ctx.out.integer(ctx.server.pubsub().numsub(kind, ctx.args[i]));
  }
}

void cmd_pubsub_channels(CommandContext& ctx) { channels_generic(ctx, ChannelKind::kGlobal); }
void cmd_pubsub_shardchannels(CommandContext& ctx) { channels_generic(ctx, ChannelKind::kShard); }
void cmd_pubsub_numsub(CommandContext& ctx) { numsub_generic(ctx, ChannelKind::kGlobal); }
void cmd_pubsub_shardnumsub(CommandContext& ctx) { numsub_generic(ctx, ChannelKind::kShard); }
void cmd_pubsub_numpat(CommandContext& ctx) { ctx.out.integer(ctx.server.pubsub().numpat()); }

void cmd_pubsub_help(CommandContext& ctx) {
  reply_help(ctx, "PUBSUB",
             {"CHANNELS [<pattern>]",
              "    Return the currently active channels matching a <pattern> (default: '*').",
              "NUMPAT",
              "    Return number of subscriptions to patterns.",
              "NUMSUB [<channel> ...]",
              "    Return the number of subscribers for the specified channels, excluding",
              "    pattern subscriptions(default: no channels).",
              "SHARDCHANNELS [<pattern>]",
              "    Return the currently active shard level channels matching a <pattern> "
              "(default: '*').",
              "SHARDNUMSUB [<shardchannel> ...]",
              "    Return the number of subscribers for the specified shard level channel(s)"});
}

}  // namespace

void register_pubsub_family(CommandTable& t) {
  CommandBuilder b(t, "pubsub");
  // Redis 7.0's flags: the (un)subscribe commands are pubsub noscript loading stale; the
  // publishers pubsub loading stale fast. Shard channels are keys (kNoValue: nothing to load
  // from the SSD tier for them).
  const uint32_t sub = kPubSub | kNoScript | kLoading | kStale;
  const uint32_t pub = kPubSub | kLoading | kStale | kFast;
  const KeyRange all = {1, -1, 1};
  b.add("subscribe", -2, sub, kNoKeys, cmd_subscribe, {"Listen for messages published to the given channels", "2.0.0", "O(N) where N is the number of channels to subscribe to."});
  b.add("unsubscribe", -1, sub, kNoKeys, cmd_unsubscribe, {"Stop listening for messages posted to the given channels", "2.0.0", "O(N) where N is the number of clients already subscribed to a channel."});
  b.add("psubscribe", -2, sub, kNoKeys, cmd_psubscribe, {"Listen for messages published to channels matching the given patterns", "2.0.0", "O(N) where N is the number of patterns the client is already subscribed to."});
  b.add("punsubscribe", -1, sub, kNoKeys, cmd_punsubscribe, {"Stop listening for messages posted to channels matching the given patterns", "2.0.0", "O(N+M) where N is the number of patterns the client is already subscribed and M is the number of total patterns subscribed in the system (by any client)."});
  b.add("publish", 3, pub, kNoKeys, cmd_publish, {"Post a message to a channel", "2.0.0", "O(N+M) where N is the number of clients subscribed to the receiving channel and M is the total number of subscribed patterns (by any client)."});
  b.add("ssubscribe", -2, sub | kNoValue, all, cmd_ssubscribe, {"Listen for messages published to the given shard channels", "7.0.0", "O(N) where N is the number of shard channels to subscribe to."});
  b.add("sunsubscribe", -1, sub | kNoValue, all, cmd_sunsubscribe, {"Stop listening for messages posted to the given shard channels", "7.0.0", "O(N) where N is the number of clients already subscribed to a shard channel."});
  b.add("spublish", 3, pub | kNoValue, key_at(1), cmd_spublish, {"Post a message to a shard channel", "7.0.0", "O(N) where N is the number of clients subscribed to the receiving shard channel."});

  const uint32_t intro = kPubSub | kLoading | kStale;
  CommandSpec pubsub = b.spec("pubsub", -2, 0, kNoKeys, nullptr, {"A container for Pub/Sub commands", "2.8.0", "Depends on subcommand."});
  pubsub.subcommands = {
      b.spec("channels", -2, intro, kNoKeys, cmd_pubsub_channels, {"List active channels", "2.8.0", "O(N) where N is the number of active channels, and assuming constant time pattern matching (relatively short channels and patterns)"}),
      b.spec("numpat", 2, intro, kNoKeys, cmd_pubsub_numpat, {"Get the count of unique patterns pattern subscriptions", "2.8.0"}),
      b.spec("numsub", -2, intro, kNoKeys, cmd_pubsub_numsub, {"Get the count of subscribers for channels", "2.8.0", "O(N) for the NUMSUB subcommand, where N is the number of requested channels"}),
      b.spec("shardchannels", -2, intro, kNoKeys, cmd_pubsub_shardchannels, {"List active shard channels", "7.0.0", "O(N) where N is the number of active shard channels, and assuming constant time pattern matching (relatively short shard channels)."}),
      b.spec("shardnumsub", -2, intro, kNoKeys, cmd_pubsub_shardnumsub, {"Get the count of subscribers for shard channels", "7.0.0", "O(N) for the SHARDNUMSUB subcommand, where N is the number of requested shard channels"}),
      b.spec("help", 2, kLoading | kStale, kNoKeys, cmd_pubsub_help, {"Show helpful text about the different subcommands", "6.2.0"}),
  };
  b.add(std::move(pubsub));
}

}  // namespace server
