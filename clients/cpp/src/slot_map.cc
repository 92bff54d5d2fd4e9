#include "slot_map.h"

#include <charconv>

#include "cluster/slot.h"
#include "stratakv/error.h"

namespace stratakv::detail {
namespace {

[[noreturn]] void bad_reply(const std::string& why) {
  throw Error(Error::Kind::kProtocol, "protocol error: unexpected reply to CLUSTER SLOTS: " + why);
}

template <class Int>
std::optional<Int> to_int(std::string_view s) {
  Int v{};
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc{} || end != s.data() + s.size()) return std::nullopt;
  return v;
}

std::string_view str(const redisReply* r) { return {r->str, r->len}; }

// A node of a CLUSTER SLOTS range: [host, port, id, ...].
NodeAddress parse_node(const redisReply* node, std::string_view asked_host) {
  if (node->type != REDIS_REPLY_ARRAY || node->elements < 2 || node->element[0]->type != REDIS_REPLY_STRING ||
      node->element[1]->type != REDIS_REPLY_INTEGER)
    bad_reply("a node is not [host, port, ...]");
  NodeAddress a;
  a.host = str(node->element[0]);
  if (a.host.empty() || a.host == "?") a.host = asked_host;
  a.port = static_cast<int>(node->element[1]->integer);
  if (node->elements >= 3 && node->element[2]->type == REDIS_REPLY_STRING) a.id = str(node->element[2]);
  return a;
}

// Index of host:port in `nodes`, added when absent.
uint16_t index_of(std::vector<NodeAddress>& nodes, NodeAddress a) {
  for (size_t n = 0; n < nodes.size(); ++n)
    if (nodes[n].host == a.host && nodes[n].port == a.port) return static_cast<uint16_t>(n);
  nodes.push_back(std::move(a));
  return static_cast<uint16_t>(nodes.size() - 1);
}

}  // namespace

SlotMap::SlotMap() : owner_(cluster::kSlots, kNone), replica_set_(cluster::kSlots, kNone) {}

SlotMap SlotMap::single(NodeAddress node) {
  SlotMap m;
  m.nodes_.push_back(std::move(node));
  m.owner_.assign(cluster::kSlots, 0);
  return m;
}

SlotMap SlotMap::from_cluster_slots(const redisReply* reply, std::string_view asked_host,
                                    uint64_t version) {
  if (reply->type != REDIS_REPLY_ARRAY) bad_reply("not an array");
  SlotMap m;
  m.version_ = version;
  for (size_t i = 0; i < reply->elements; ++i) {
    const redisReply* range = reply->element[i];
    if (range->type != REDIS_REPLY_ARRAY || range->elements < 3) bad_reply("a range is not [first, last, node...]");
    const redisReply* first = range->element[0];
    const redisReply* last = range->element[1];
    if (first->type != REDIS_REPLY_INTEGER || last->type != REDIS_REPLY_INTEGER || first->integer < 0 ||
        last->integer < first->integer || last->integer >= cluster::kSlots)
      bad_reply("bad slot numbers");
    const uint16_t index = index_of(m.nodes_, parse_node(range->element[2], asked_host));
    uint16_t set = kNone;
    if (range->elements > 3) {
      std::vector<uint16_t> replicas;
      for (size_t r = 3; r < range->elements; ++r)
        replicas.push_back(index_of(m.replicas_, parse_node(range->element[r], asked_host)));
      for (size_t k = 0; k < m.sets_.size() && set == kNone; ++k)
        if (m.sets_[k] == replicas) set = static_cast<uint16_t>(k);
      if (set == kNone) {
        set = static_cast<uint16_t>(m.sets_.size());
        m.sets_.push_back(std::move(replicas));
      }
    }
    for (int64_t s = first->integer; s <= last->integer; ++s) {
      m.owner_[static_cast<size_t>(s)] = index;
      m.replica_set_[static_cast<size_t>(s)] = set;
    }
  }
  return m;
}

void SlotMap::set_owner(uint16_t slot, std::string_view host, int port) {
  replica_set_[slot] = kNone;  // the new owner's replicas are not known yet
  for (size_t n = 0; n < nodes_.size(); ++n) {
    if (nodes_[n].host == host && nodes_[n].port == port) {
      owner_[slot] = static_cast<uint16_t>(n);
      return;
    }
  }
  owner_[slot] = static_cast<uint16_t>(nodes_.size());
  nodes_.push_back({std::string(host), port, {}});
}

uint64_t cluster_epoch(std::string_view info) {
  constexpr std::string_view field = "cluster_current_epoch:";
  const size_t at = info.find(field);
  if (at == std::string_view::npos || (at > 0 && info[at - 1] != '\n')) return 0;
  std::string_view rest = info.substr(at + field.size());
  rest = rest.substr(0, rest.find_first_of("\r\n"));
  return to_int<uint64_t>(rest).value_or(0);
}

std::optional<Redirect> parse_redirect(std::string_view error) {
  Redirect r;
  if (error.starts_with("MOVED ")) error.remove_prefix(6);
  else if (error.starts_with("ASK ")) error.remove_prefix(4), r.ask = true;
  else return std::nullopt;
  const size_t space = error.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  auto slot = to_int<uint16_t>(error.substr(0, space));
  std::string_view where = error.substr(space + 1);
  const size_t colon = where.rfind(':');
  if (!slot || *slot >= cluster::kSlots || colon == std::string_view::npos) return std::nullopt;
  auto port = to_int<int>(where.substr(colon + 1));
  if (!port || *port <= 0 || *port > 65535) return std::nullopt;
  std::string_view host = where.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  r.slot = *slot;
  r.host = host;
  r.port = *port;
  return r;
}

}  // namespace stratakv::detail
