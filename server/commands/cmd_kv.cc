// server/cmd_kv.cc - the fast path's commands (docs/fast-path.md): registering client
// memory, and puts/gets whose payload moves out of band, described by scatter-gather lists.
//
// The payload is copied once, by the server, between the client's registered segment and the
// value's block in the memory region, with no lock held (kv_copy.h: plan, copy, finish): a put
// fills a new value and then publishes it under the shard lock (readers see the old value or the
// new one, whole); a get takes a reference to the value under the lock and copies after
// releasing it (a DEL or overwrite meanwhile cannot tear what is copied). A large copy runs on
// the transfer pool, off the I/O thread (server/transfer_pool.h).
#include <unistd.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <vector>

#include "rdma/segment.h"
#include "server/arg_parser.h"
#include "server/config.h"
#include "server/connection.h"
#include "server/errors.h"
#include "server/commands/family.h"
#include "server/commands/kv_copy.h"
#include "server/commands/kv_layout.h"
#include "server/server.h"
#include "tiering/key_lock.h"

namespace server {
namespace {

using tiering::KeyLock;

// One key's part of a command: its scatter-gather list.
struct KeyPart {
  std::string_view key;
  uint64_t total = 0;  // KV.PUT: the value's length
  std::vector<rdma::Descriptor> sgl;
};

// Reads descriptors (seg off len, three non-negative integers each) while the next argument is
// an integer (KV.PUT/KV.GET: options follow).
void read_open_descriptors(ArgParser& p, std::span<const std::string_view> args, size_t& at,
                           std::vector<rdma::Descriptor>& out) {
  while (at < args.size() && parse_int(args[at]).has_value()) {
    ArgParser triplet(args, at);
    if (triplet.remaining() < 3) return p.fail(err::kSyntax);
    const int64_t seg = triplet.next_int(), off = triplet.next_int(), len = triplet.next_int();
    if (!triplet.ok()) return p.fail(triplet.error());
    if (seg < 0 || off < 0 || len < 0) return p.fail(err::kNotInteger);
    out.push_back({static_cast<uint64_t>(seg), static_cast<uint64_t>(off),
                   static_cast<uint64_t>(len)});
    at += 3;
  }
}

// Reads `[EX s | PX ms] [NX]` from `at` to the end.
bool read_put_options(CommandContext& ctx, std::string_view command, size_t at, PutOptions& o) {
  ArgParser p(ctx.args, at);
  ExpireOption e;
  while (!p.done() && p.ok()) {
    if (parse_expire_option(p, false, false, &e)) continue;
    if (p.eat("NX")) o.nx = true;
    else p.fail(err::kSyntax);
  }
  std::optional<std::string> error;
  if (!p.ok()) error = p.error();
  else error = resolve_expire(&e, command, ctx.now_ms);
  if (error) {
    ctx.out.error(*error);
    return false;
  }
  if (e.kind == ExpireOption::kAt) o.expire_ms = e.at_ms;
  return true;
}

// ---- commands ----

void cmd_register(CommandContext& ctx) {
  Connection& conn = ctx.conn;
  if (iequals(ctx.args[1], "shm")) {
    if (ctx.args.size() != 3) return ctx.out.error(err::kSyntax);
    auto length = parse_int(ctx.args[2]);
    if (!length || *length < 0) return ctx.out.error(err::kNotInteger);
    if (conn.passed_fds.empty()) return ctx.out.error(err::kShmNeedsFd);
    const int fd = conn.passed_fds.front();
    conn.passed_fds.erase(conn.passed_fds.begin());
    std::string error;
    const uint64_t id = conn.segments.add_shm(fd, static_cast<uint64_t>(*length), error);
    if (id == 0) return ctx.out.error(error);
    return ctx.out.integer(static_cast<int64_t>(id));
  }
  if (iequals(ctx.args[1], "verbs")) {
    if (ctx.args.size() != 5) return ctx.out.error(err::kSyntax);
    if (ctx.server.verbs() == nullptr) return ctx.out.error(err::kNoRdma);
    if (!conn.verbs) return ctx.out.error(err::kVerbsNeedsConnect);
    auto addr = parse_int(ctx.args[2]), length = parse_int(ctx.args[3]);
    auto rkey = parse_int(ctx.args[4]);
    if (!addr || !length || !rkey || *addr < 0 || *length <= 0 || *rkey < 0 ||
        *rkey > UINT32_MAX)
      return ctx.out.error(err::kNotInteger);
    const uint64_t id = conn.segments.add_verbs(static_cast<uint64_t>(*addr),
                                                static_cast<uint64_t>(*length),
                                                static_cast<uint32_t>(*rkey));
    return ctx.out.integer(static_cast<int64_t>(id));
  }
  ctx.out.error(err::kSyntax);
}

// KV.CONNECT VERBS gid qpn psn mtu: this connection's queue pair, connected to the client's.
void cmd_connect(CommandContext& ctx) {
  if (!iequals(ctx.args[1], "verbs")) return ctx.out.error(err::kSyntax);
  rdma::VerbsDevice* device = ctx.server.verbs();
  if (device == nullptr) return ctx.out.error(err::kNoRdma);
  rdma::QpAddress remote;
  auto qpn = parse_int(ctx.args[3]), psn = parse_int(ctx.args[4]), mtu = parse_int(ctx.args[5]);
  if (!rdma::QpAddress::parse_gid(ctx.args[2], remote.gid))
    return ctx.out.error(err::kInvalidGid);
  if (!qpn || !psn || !mtu || *qpn < 0 || *qpn >= (1 << 24) || *psn < 0 || *psn >= (1 << 24) ||
      rdma::mtu_from_bytes(static_cast<uint32_t>(*mtu)) == ibv_mtu(0))
    return ctx.out.error(err::kInvalidQpAddress);
  remote.qpn = static_cast<uint32_t>(*qpn);
  remote.psn = static_cast<uint32_t>(*psn);
  remote.mtu = static_cast<uint32_t>(*mtu);
  std::string error;
  Connection& conn = ctx.conn;
  if (!conn.verbs) {
    conn.verbs = rdma::VerbsEndpoint::create(*device, {}, error);
    if (!conn.verbs) return ctx.out.error(error);
    if (!conn.verbs->connect(remote, error)) return ctx.out.error(error);
  } else if (!conn.verbs->reconnect(remote, error)) {  // after an error: both sides anew
    return ctx.out.error(error);
  }
  const rdma::QpAddress local = conn.verbs->local_address();
  ctx.out.array(4);
  ctx.out.bulk(local.gid_hex());
  ctx.out.integer(local.qpn);
  ctx.out.integer(local.psn);
  ctx.out.integer(local.mtu);
}

void cmd_unregister(CommandContext& ctx) {
  auto id = parse_int(ctx.args[1]);
  if (!id) return ctx.out.error(err::kNotInteger);
  ctx.out.integer(ctx.conn.segments.remove(static_cast<uint64_t>(*id)) ? 1 : 0);
}

void cmd_put(CommandContext& ctx) {
  KeyPart part{ctx.args[1]};
  auto total = parse_int(ctx.args[2]);
  if (!total || *total < 0) return ctx.out.error(err::kNotInteger);
  part.total = static_cast<uint64_t>(*total);
  ArgParser p(ctx.args, 3);
  size_t at = 3;
  read_open_descriptors(p, ctx.args, at, part.sgl);
  if (!p.ok()) return ctx.out.error(p.error());
  PutOptions o;
  if (!read_put_options(ctx, "kv.put", at, o)) return;
  auto plan = std::make_unique<KvPlan>(false, o);
  plan->add_put(ctx, part.key, part.total, part.sgl);
  KvPlan::run(ctx, std::move(plan));
}

void cmd_get(CommandContext& ctx) {
  KeyPart part{ctx.args[1]};
  ArgParser p(ctx.args, 2);
  size_t at = 2;
  read_open_descriptors(p, ctx.args, at, part.sgl);
  if (!p.ok()) return ctx.out.error(p.error());
  if (at != ctx.args.size() || part.sgl.empty()) return ctx.out.error(err::kSyntax);
  auto plan = std::make_unique<KvPlan>(false, PutOptions{});
  plan->add_get(ctx, part.key, part.sgl);
  KvPlan::run(ctx, std::move(plan));
}

// The entries of a batch as KeyParts, read with the batch layout (kv_layout.h, the same reader
// as the key finder and the write-bytes count). Returns the index after the last entry, or 0
// after replying the layout's error.
size_t read_batch(CommandContext& ctx, BatchLayout::Kind kind, std::vector<KeyPart>& parts) {
  BatchLayout layout(ctx.args, kind);
  // The count comes from the client: every entry takes two arguments at least.
  parts.reserve(std::min<uint64_t>(layout.count(), ctx.args.size() / 2));
  for (;;) {
    KeyPart& part = parts.emplace_back();
    BatchEntry e;
    if (!layout.next(e, &part.sgl)) {
      parts.pop_back();
      break;
    }
    part.key = ctx.args[e.key];
    part.total = e.total;
  }
  if (!layout.error().empty()) return ctx.out.error(layout.error()), 0;
  return layout.end();
}

void cmd_mput(CommandContext& ctx) {
  std::vector<KeyPart> parts;
  const size_t at = read_batch(ctx, BatchLayout::Kind::kPut, parts);
  if (at == 0) return;
  PutOptions o;
  if (!read_put_options(ctx, "kv.mput", at, o)) return;
  auto plan = std::make_unique<KvPlan>(true, o);
  for (const KeyPart& part : parts) {
    // A key another node serves: its entry says where, and its bytes are not read.
    if (std::string elsewhere = key_elsewhere(ctx, part.key); !elsewhere.empty())
      plan->add_error(std::move(elsewhere));
    else plan->add_put(ctx, part.key, part.total, part.sgl);
  }
  KvPlan::run(ctx, std::move(plan));
}

void cmd_mget(CommandContext& ctx) {
  std::vector<KeyPart> parts;
  const size_t at = read_batch(ctx, BatchLayout::Kind::kGet, parts);
  if (at == 0) return;
  if (at != ctx.args.size()) return ctx.out.error(err::kSyntax);
  auto plan = std::make_unique<KvPlan>(true, PutOptions{});
  for (const KeyPart& part : parts) {
    if (part.sgl.empty()) {
      plan->add_error(std::string(err::kSyntax));
    } else if (std::string elsewhere = read_key_elsewhere(ctx, part.key); !elsewhere.empty()) {
      plan->add_error(std::move(elsewhere));  // another node serves it: nothing is written
    } else {
      plan->add_get(ctx, part.key, part.sgl);
    }
  }
  KvPlan::run(ctx, std::move(plan));
}

// KV.PREFIX key [key ...] [PIN ms]: the keys are args[1, end); with four arguments or more, a
// next-to-last PIN followed by an integer is the option (pin_ms; -1 without it). Nothing for a
// negative ms. The handler and the key finder (prefix_keys) both read it here.
struct PrefixArgs {
  size_t end;
  int64_t pin_ms;
};
std::optional<PrefixArgs> prefix_args(std::span<const std::string_view> args) {
  PrefixArgs a{args.size(), -1};
  if (a.end >= 4 && iequals(args[a.end - 2], "pin")) {
    if (auto ms = parse_int(args[a.end - 1])) {
      if (*ms < 0) return std::nullopt;
      a.pin_ms = *ms;
      a.end -= 2;
    }
  }
  return a;
}

void cmd_prefix(CommandContext& ctx) {
  const std::optional<PrefixArgs> a = prefix_args(ctx.args);
  if (!a) return ctx.out.error(err::kNotInteger);
  const size_t end = a->end;
  const int64_t pin_ms = a->pin_ms;
  const int64_t ttl = ctx.server.config().num(Key::kLeaseTtl);
  const int64_t until = ctx.now_ms + (pin_ms == 0 ? ttl : std::min(pin_ms, ttl));
  int64_t n = 0;
  Connection& conn = ctx.conn;
  // In a cluster, keys another node serves are skipped: the run is counted over this node's
  // keys, and the first foreign key met before the run ends is where it leaves this node.
  size_t left_at = 0;  // args index of that key; 0 = none
  std::string left_to;
  for (size_t i = 1; i < end; ++i) {
    std::string_view key = ctx.args[i];
    if (std::string elsewhere = read_key_elsewhere(ctx, key); !elsewhere.empty()) {
      if (left_at == 0) {
        left_at = i;
        left_to = std::move(elsewhere);
      }
      continue;
    }
    {
      KeyLock lock(ctx.ks, key, ctx.now_ms);
      const KeyLock::Item* item = lock.lookup(key);
      if (item == nullptr) break;
      if (pin_ms >= 0) lock.lease(item, conn.id(), until);
    }
    if (pin_ms >= 0) {
      int64_t& mine = conn.pins[std::string(key)];
      mine = std::max(mine, until);
    }
    ++n;
  }
  if (conn.pins.size() > 4096)  // forget leases that ended by themselves
    std::erase_if(conn.pins, [&](const auto& p) { return p.second <= ctx.now_ms; });
  if (left_at == 0) return ctx.out.integer(n);
  // [count, index of the key where the run left this node (0-based among the keys), its
  // -MOVED or -CLUSTERDOWN entry].
  ctx.out.array(3);
  ctx.out.integer(n);
  ctx.out.integer(static_cast<int64_t>(left_at - 1));
  ctx.out.error(left_to);
}

// KV.UNPIN key...: releases this connection's leases; in a cluster, keys another node serves
// are skipped (their leases were taken there), so one call may carry keys of any slots.
void cmd_unpin(CommandContext& ctx) {
  int64_t n = 0;
  for (size_t i = 1; i < ctx.args.size(); ++i) {
    if (!key_elsewhere(ctx, ctx.args[i]).empty()) continue;
    n += ctx.conn.unpin(ctx.args[i], ctx.now_ms);
  }
  ctx.out.integer(n);
}

// The most bytes a KV.PUT or KV.MPUT is said to write: no value is larger (tiering::ValueRef::
// kMaxSize; the handler refuses a larger total_length). Client totals are capped here, so the
// server-wide sums of the writes waiting for room (Evictor::want, room claims) cannot wrap.
constexpr uint64_t kMaxWriteBytes = tiering::ValueRef::kMaxSize;

// The bytes KV.PUT key total_length ... writes (for waiting on room before it runs).
uint64_t put_bytes(std::span<const std::string_view> args) {
  auto total = args.size() > 2 ? parse_int(args[2]) : std::nullopt;
  return total && *total > 0 ? std::min(static_cast<uint64_t>(*total), kMaxWriteBytes) : 0;
}

// The bytes KV.MPUT writes (the batch layout's sum of its total_lengths), at most
// kMaxWriteBytes.
uint64_t mput_capped_bytes(std::span<const std::string_view> args) {
  return std::min(mput_bytes(args), kMaxWriteBytes);
}

// KV.PREFIX's keys (prefix_args, the handler's own reading). False for a negative ms (the
// handler's error).
bool prefix_keys(std::span<const std::string_view> args, std::vector<size_t>& out) {
  const std::optional<PrefixArgs> a = prefix_args(args);
  if (!a) return false;
  for (size_t i = 1; i < a->end; ++i) out.push_back(i);
  return true;
}

}  // namespace

void register_kv_family(CommandTable& t) {
  CommandBuilder b(t, "kv");
  const uint32_t w = kWrite | kDenyOom;
  b.add("kv.register", -3, kFast, kNoKeys, cmd_register, {"Register client memory (a memfd passed over the Unix socket, or an RDMA buffer)", "0.1.0"});
  b.add("kv.connect", 6, kFast, kNoKeys, cmd_connect, {"Exchange RDMA queue-pair addresses with the server", "0.1.0"});
  b.add("kv.unregister", 2, kFast, kNoKeys, cmd_unregister, {"Unregister a segment", "0.1.0"});
  b.add("kv.put", -3, w | kNoValue, key_at(1), cmd_put, {"Set a key to bytes read from registered client memory", "0.1.0", "O(N) in the value's bytes"});
  b.add("kv.get", -5, kReadonly, key_at(1), cmd_get, {"Write a key's value into registered client memory", "0.1.0", "O(N) in the value's bytes"});
  t.set_write_bytes("kv.put", put_bytes);
  // Batches carry their keys where the batch layout says (kv_layout.h): movable keys, found by
  // the same reader as the handler's, and KV.MPUT's bytes by it too.
  b.add("kv.mput", -5, w | kNoValue | kPerKeySlots, kNoKeys, cmd_mput, {"KV.PUT of several keys", "0.1.0", "O(N) in the bytes"});
  t.set_find_keys("kv.mput", mput_keys);
  t.set_write_bytes("kv.mput", mput_capped_bytes);
  b.add("kv.mget", -6, kReadonly | kPerKeySlots, kNoKeys, cmd_mget, {"KV.GET of several keys", "0.1.0", "O(N) in the bytes"});
  t.set_find_keys("kv.mget", mget_keys);
  b.add("kv.prefix", -2, kReadonly | kNoValue | kPerKeySlots, {1, -1, 1}, cmd_prefix, {"Count the leading keys of a chain that exist, optionally leasing them", "0.1.0", "O(N)"});
  t.set_find_keys("kv.prefix", prefix_keys);
  b.add("kv.unpin", -2, kWrite | kFast | kNoValue | kPerKeySlots, {1, -1, 1}, cmd_unpin, {"Release leases", "0.1.0", "O(N)"});
}

}  // namespace server
