// node_ops.cc - the commands of one node (node_ops.h). Payloads go through the connection's
// transport (transport.h); keys-only commands through hiredis.
#include "node_ops.h"

#include <unordered_set>
#include <vector>

#include "session.h"

namespace stratakv::detail {
namespace {

int64_t integer_reply(Session& s, const Reply& r, const char* command) {
  if (r->type == REDIS_REPLY_ERROR) throw Error(Error::Kind::kServer, std::string(text(r.get())));
  if (r->type != REDIS_REPLY_INTEGER) s.protocol_fail(std::string("unexpected reply to ") + command);
  return r->integer;
}

// With `asking`, ASKING goes before the command; its +OK is read by read_pair.
void append(Session& s, Args& a, bool asking) {
  if (asking) {
    Args ask{"ASKING"};
    s.append(ask);
  }
  s.append(a);
}

// The reply of a command appended with append(): an ASKING error replaces it.
Reply read_pair(Session& s, bool asking, std::string& asking_error) {
  asking_error.clear();
  if (asking) {
    Reply ok = s.read();
    if (ok->type == REDIS_REPLY_ERROR) asking_error = text(ok.get());
  }
  return s.read();
}

// One integer reply per key: kOk when > 0, kMiss when 0, kError for an error reply.
void per_key_integers(Session& s, std::string_view command, std::span<const KeyItem> keys,
                      std::span<Result> out, bool asking) {
  for (const KeyItem& k : keys) {
    Args a{command, k.key};
    append(s, a, asking);
  }
  std::string asked;
  for (size_t i = 0; i < keys.size(); ++i) {
    Reply r = read_pair(s, asking, asked);
    if (!asked.empty()) out[i] = {Result::Status::kError, 0, asked};
    else if (r->type == REDIS_REPLY_ERROR) out[i] = {Result::Status::kError, 0, std::string(text(r.get()))};
    else if (r->type == REDIS_REPLY_INTEGER) out[i] = {r->integer > 0 ? Result::Status::kOk : Result::Status::kMiss, 0, {}};
    else s.protocol_fail("unexpected reply to " + std::string(command));
  }
}

}  // namespace

void node_put(ClientCore& node, std::span<const PutItem> items, const PutOptions& options,
              std::span<Result> out, bool asking) {
  node.with_session([&](Session& s) {
    if (asking) return make_resp_transport(s, true)->put(items, options, out);
    s.transport().put(items, options, out);
  });
}

void node_get_into(ClientCore& node, std::span<const GetItem> items, std::span<Result> out, bool asking) {
  node.with_session([&](Session& s) {
    if (asking) return make_resp_transport(s, true)->get_into(items, out);
    s.transport().get_into(items, out);
  });
}

std::optional<size_t> node_get_with(ClientCore& node, std::string_view key, const Allocator& alloc,
                                    bool asking) {
  return node.with_session([&](Session& s) {
    if (asking) return make_resp_transport(s, true)->get_with(key, alloc);
    return s.transport().get_with(key, alloc);
  });
}

void node_exists(ClientCore& node, std::span<const KeyItem> keys, std::span<Result> out, bool asking) {
  node.with_session([&](Session& s) { per_key_integers(s, "EXISTS", keys, out, asking); });
}

size_t node_remove(ClientCore& node, std::span<const KeyItem> keys, std::span<Result> out,
                   bool per_key, bool asking) {
  return node.with_session([&](Session& s) -> size_t {
    if (!per_key) {
      Args a{"DEL"};
      for (const KeyItem& k : keys) a.add(k.key);
      Reply r = s.call(a);
      return static_cast<size_t>(integer_reply(s, r, "DEL"));
    }
    per_key_integers(s, "DEL", keys, out, asking);
    size_t n = 0;
    for (const Result& r : out) n += r.status == Result::Status::kOk;
    return n;
  });
}

PrefixReply node_prefix(ClientCore& node, std::span<const std::string_view> keys,
                        std::optional<uint64_t> pin_ms) {
  auto prefix = [&](Session& s) {
    Args a{"KV.PREFIX"};
    for (std::string_view k : keys) a.add(k);
    if (pin_ms) a.add("PIN").add(*pin_ms);
    Reply r = s.call(a);
    PrefixReply out;
    if (r->type == REDIS_REPLY_ERROR && text(r.get()).starts_with("ERR unknown command")) {
      out.supported = false;
      return out;
    }
    if (r->type == REDIS_REPLY_ARRAY) {  // [count, index, -MOVED ...]: the run left this node
      const auto* e = r->element;
      if (r->elements != 3 || e[0]->type != REDIS_REPLY_INTEGER || e[1]->type != REDIS_REPLY_INTEGER ||
          e[2]->type != REDIS_REPLY_ERROR || e[0]->integer < 0 || e[1]->integer < 0 ||
          static_cast<size_t>(e[1]->integer) >= keys.size())
        s.protocol_fail("unexpected reply to KV.PREFIX");
      out.count = static_cast<size_t>(e[0]->integer);
      out.left_at = static_cast<size_t>(e[1]->integer);
      out.redirect = text(e[2]);
      return out;
    }
    out.count = static_cast<size_t>(integer_reply(s, r, "KV.PREFIX"));
    return out;
  };
  // Leases belong to the connection that took them: pins go through the lease connection.
  return pin_ms ? node.with_lease_session(prefix) : node.with_session(prefix);
}

size_t node_unpin(ClientCore& node, std::span<const std::string_view> keys) {
  // One KV.UNPIN: a cluster node skips the keys another node serves (docs/cluster.md).
  return node.with_lease_session([&](Session& s) {
    Args a{"KV.UNPIN"};
    for (std::string_view k : keys) a.add(k);
    s.append(a);
    Reply r = s.read();
    if (r->type == REDIS_REPLY_ERROR) throw Error(Error::Kind::kServer, std::string(text(r.get())));
    return static_cast<size_t>(integer_reply(s, r, "KV.UNPIN"));
  });
}

std::vector<std::string> node_scan(ClientCore& node, std::string_view pattern) {
  return node.with_session([&](Session& s) {
    std::vector<std::string> keys;
    std::unordered_set<std::string> seen;  // SCAN may return a key twice
    std::string cursor = "0";
    do {
      Args a{"SCAN", cursor};
      a.add("MATCH").add(pattern).add("COUNT").add(uint64_t{1000});
      Reply r = s.call(a);
      if (r->type == REDIS_REPLY_ERROR) throw Error(Error::Kind::kServer, std::string(text(r.get())));
      if (r->type != REDIS_REPLY_ARRAY || r->elements != 2 || r->element[0]->type != REDIS_REPLY_STRING ||
          r->element[1]->type != REDIS_REPLY_ARRAY)
        s.protocol_fail("unexpected reply to SCAN");
      cursor = std::string(text(r->element[0]));
      const redisReply* batch = r->element[1];
      for (size_t i = 0; i < batch->elements; ++i) {
        if (batch->element[i]->type != REDIS_REPLY_STRING) s.protocol_fail("unexpected reply to SCAN");
        std::string k(text(batch->element[i]));
        if (seen.insert(k).second) keys.push_back(std::move(k));
      }
    } while (cursor != "0");
    return keys;
  });
}

}  // namespace stratakv::detail
