#include "cluster/failover.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <cstring>
#include <map>
#include <vector>

#include <nlohmann/json.hpp>

namespace cluster {

namespace {

// A blocking RESP conversation with one node (the primary, in a manual failover): each call
// sends a command and returns the reply's first line ("+OK", ":123", "-ERR ..."), "" on error.
// Over TLS when `tls` is given (tls-replication).
class Peer {
 public:
  Peer(const std::string& host, uint16_t port, ssl_ctx_st* tls) {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &res) != 0) return;
    int fd = -1;
    for (addrinfo* ai = res; ai != nullptr && fd < 0; ai = ai->ai_next) {
      fd = ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
      if (fd < 0) continue;
      timeval tv{2, 0};
      ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
      ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
      if (::connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        ::close(fd);
        fd = -1;
      }
    }
    ::freeaddrinfo(res);
    if (fd < 0) return;
    if (tls != nullptr) {
      const std::atomic<bool> never{false};
      sock_ = ReplSocket::connect_tls(fd, tls, 2000, never, &error_);
    } else {
      sock_ = std::make_unique<ReplSocket>(fd);
    }
    if (sock_) sock_->set_timeouts(2000, 2000);
  }
  bool ok() const { return sock_ != nullptr; }
  const std::string& error() const { return error_; }
  std::string call(const std::vector<std::string>& args) {
    if (!sock_) return {};
    std::string req = "*" + std::to_string(args.size()) + "\r\n";
    for (const auto& a : args) req += "$" + std::to_string(a.size()) + "\r\n" + a + "\r\n";
    if (!sock_->send_all(req.data(), req.size())) return {};
    std::string line;
    char c;
    while (line.size() < 4096) {
      if (sock_->recv(&c, 1) != 1) return {};
      if (c == '\n') break;
      if (c != '\r') line.push_back(c);
    }
    return line;
  }

 private:
  std::unique_ptr<ReplSocket> sock_;
  std::string error_;
};

// The whole seconds lease `id` has left as etcd counts them (LeaseTimeToLive, truncated toward
// zero): negative once it expired a second or more ago, or -1 when etcd has no such lease.
int64_t lease_ttl(EtcdClient& client, int64_t id) {
  const std::string reply =
      client.post("/v3/lease/timetolive", "{\"ID\":\"" + std::to_string(id) + "\"}");
  const nlohmann::json j = nlohmann::json::parse(reply, nullptr, false);
  if (j.is_discarded() || !j.contains("TTL")) return 0;  // 0 is omitted from proto3 JSON
  const nlohmann::json& ttl = j["TTL"];
  if (ttl.is_number_integer()) return ttl.get<int64_t>();
  if (!ttl.is_string()) return 0;
  int64_t v = 0;
  const std::string s = ttl.get<std::string>();
  std::from_chars(s.data(), s.data() + s.size(), v);
  return v;
}

}  // namespace

FailoverAgent::FailoverAgent(FailoverOptions options)
    : options_(std::move(options)), client_(options_.etcd) {
  while (!options_.prefix.empty() && options_.prefix.back() == '/') options_.prefix.pop_back();
}

FailoverAgent::~FailoverAgent() { stop(); }

void FailoverAgent::start() {
  thread_ = std::jthread([this](std::stop_token stop) { run(stop); });
}

void FailoverAgent::stop() {
  if (!thread_.joinable()) return;
  thread_.request_stop();
  thread_.join();
}

void FailoverAgent::run(std::stop_token stop) {
  std::string last_error;
  while (!stop.stop_requested()) {
    try {
      poll_once();
      last_error.clear();
    } catch (const std::exception& e) {
      // etcd away or a record that does not decode: try again at the next poll, log once.
      if (e.what() != last_error && options_.log)
        options_.log(std::string("failover event=etcd_error error=") + e.what());
      last_error = e.what();
    }
    for (auto waited = std::chrono::milliseconds(0); waited < options_.poll && !stop.stop_requested();
         waited += std::chrono::milliseconds(50))
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

void FailoverAgent::request_manual(bool force) { manual_.store(force ? 2 : 1); }

void FailoverAgent::manual(bool force) {
  auto say = [&](const std::string& m) {
    if (options_.log) options_.log("failover event=manual " + m);
  };
  const std::shared_ptr<const Topology> t = options_.current ? options_.current() : nullptr;
  const Shard* mine = nullptr;
  if (t)
    for (const Shard& s : t->shards)
      if (std::find(s.replicas.begin(), s.replicas.end(), options_.my_id) != s.replicas.end())
        mine = &s;
  if (mine == nullptr || mine->primary.empty()) return say("refused: not a replica of a shard");
  if (options_.promotable && !options_.promotable())
    return say("refused: this replica has no complete copy yet");
  if (force) {
    say("forced: taking over without the primary");
    take_over(mine->id, mine->primary);
    return;
  }
  const NodeAddress* p = t->node(mine->primary);
  if (p == nullptr) return say("refused: the primary has no address");
  const bool tls = options_.tls_replication && options_.tls_replication();
  const std::shared_ptr<ssl_ctx_st> ctx = tls && options_.primary_tls ? options_.primary_tls() : nullptr;
  if (tls && (p->tls_port == 0 || !ctx))
    return say(p->tls_port == 0 ? "refused: tls-replication is on and the primary publishes no tls-port"
                                : "refused: tls-replication is on and no TLS context could be built");
  Peer peer(p->host, tls ? p->tls_port : p->port, ctx.get());
  if (!peer.ok())
    return say("failed: the primary is unreachable (use CLUSTER FAILOVER FORCE)" +
               (peer.error().empty() ? std::string() : ": " + peer.error()));
  if (options_.primary_auth) {
    const auto [user, pass] = options_.primary_auth();
    if (!pass.empty()) {
      std::vector<std::string> auth{"AUTH"};
      if (!user.empty()) auth.push_back(user);
      auth.push_back(pass);
      if (peer.call(auth) != "+OK") return say("failed: the primary refused AUTH (masterauth)");
    }
  }
  // 1. The primary refuses writes; 2. this node catches up with its offset, until the offset
  // stays put over two reads (a write already past the pause's check when it began lands
  // first); 3. the CAS. Any failure: the primary resumes.
  auto pause = [&](int ms) -> int64_t {
    const std::string r = peer.call({"REPLCONF", "pause-writes", std::to_string(ms)});
    int64_t off = -1;
    if (r.size() > 1 && r[0] == ':') std::from_chars(r.data() + 1, r.data() + r.size(), off);
    return off;
  };
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  int64_t target = pause(10000), previous = -2;
  bool caught_up = false;
  while (target >= 0 && std::chrono::steady_clock::now() < deadline) {
    if (options_.repl_offset && static_cast<int64_t>(options_.repl_offset()) >= target) {
      if (target == previous) {
        caught_up = true;
        break;
      }
      previous = target;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
      target = pause(10000);
      continue;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  if (!caught_up || !take_over(mine->id, mine->primary)) {
    pause(0);
    return say(caught_up ? "failed: the CAS lost; the primary resumes"
                         : "failed: could not catch up with the primary within 5 s");
  }
  say("done at offset " + std::to_string(target));
}

bool FailoverAgent::poll_once() {
  if (const int m = manual_.exchange(0); m != 0) manual(m == 2);
  if (options_.wants_confirmation && options_.confirm && options_.wants_confirmation()) {
    if (const std::optional<KeyValue> kv = client_.get(options_.prefix + "/topology"))
      options_.confirm(std::make_shared<const Topology>(decode(kv->value)));
  }
  const std::shared_ptr<const Topology> t = options_.current ? options_.current() : nullptr;
  if (!t) return false;
  const Shard* mine = nullptr;
  for (const Shard& s : t->shards)
    if (std::find(s.replicas.begin(), s.replicas.end(), options_.my_id) != s.replicas.end())
      mine = &s;
  if (mine == nullptr || mine->primary.empty()) {
    missing_primary_.clear();
    return false;
  }
  const uint64_t offset = options_.repl_offset ? options_.repl_offset() : 0;
  if (options_.publish_offset) options_.publish_offset(offset);

  std::map<std::string, NodeRecord> records;
  int64_t primary_lease = 0;
  for (const KeyValue& kv : client_.get_prefix(options_.prefix + "/nodes/")) {
    try {
      NodeRecord r = decode_node_record(kv.value);
      if (r.address.id == mine->primary) primary_lease = kv.lease;
      records.emplace(r.address.id, std::move(r));
    } catch (const std::exception&) {
      // A record of another version: not a live replica this one competes with.
    }
  }
  if (records.count(mine->primary)) {
    // etcd deletes the record when it revokes the expired lease, asynchronously: an expired
    // lease is queued for revocation and, if that does not complete (its apply loop busy, a
    // slow proposal), tried again only 3 s later (etcd's expiredLeaseRetryInterval), so under
    // load the record can outlive the lease by 3, 6 ... seconds. Waiting for the deletion alone
    // made a failover take two lease periods. So ask etcd how long the lease has left: a
    // negative TTL means it expired at least a second ago by etcd's clock, after the primary's
    // own fence (which counts from before etcd received the renewal): the primary is gone, and
    // its lease is revoked here (best effort) so that its record goes too.
    const int64_t ttl = primary_lease != 0 ? lease_ttl(client_, primary_lease) : 0;
    if (ttl >= 0) {
      missing_primary_.clear();
      return false;
    }
    if (options_.log)
      options_.log("failover event=primary_lease_expired primary=" + mine->primary.substr(0, 8) +
                   " ttl=" + std::to_string(ttl) + " action=revoke");
    try {
      client_.lease_revoke(primary_lease);
    } catch (const std::exception&) {
      // etcd revokes it itself in the end; the expiry is what counts here.
    }
    records.erase(mine->primary);
  }
  const auto now = std::chrono::steady_clock::now();
  if (missing_primary_ != mine->primary) {
    missing_primary_ = mine->primary;
    missing_since_ = now;
    if (options_.log)
      options_.log("failover event=primary_lease_lost primary=" + mine->primary.substr(0, 8) +
                   " shard=" + mine->id.substr(0, 8) + " my_offset=" + std::to_string(offset));
  }
  // Rank: the live replicas of this shard that are more up to date (ties: the lower id first).
  int rank = 0;
  for (const std::string& r : mine->replicas) {
    if (r == options_.my_id) continue;
    auto it = records.find(r);
    if (it == records.end()) continue;
    if (it->second.repl_offset > offset || (it->second.repl_offset == offset && r < options_.my_id))
      ++rank;
  }
  if (now - missing_since_ < std::chrono::seconds(rank)) return false;
  // A replica still taking (or that never took) its full copy would be promoted with part of
  // the data: it waits; a complete replica, or the primary's return, resolves it.
  if (options_.promotable && !options_.promotable()) return false;
  return take_over(mine->id, mine->primary);
}

bool FailoverAgent::take_over(const std::string& shard_id, const std::string& old_primary) {
  const std::string key = options_.prefix + "/topology";
  const std::optional<KeyValue> kv = client_.get(key);
  if (!kv) return false;
  Topology t = decode(kv->value);
  Shard* s = nullptr;
  for (Shard& x : t.shards)
    if (x.id == shard_id) s = &x;
  if (s == nullptr || s->primary != old_primary) return false;  // changed meanwhile
  auto me = std::find(s->replicas.begin(), s->replicas.end(), options_.my_id);
  if (me == s->replicas.end()) return false;
  s->replicas.erase(me);
  s->primary = options_.my_id;
  // The old primary stays in the shard as a replica: back, it follows the new primary.
  if (!old_primary.empty() &&
      std::find(s->replicas.begin(), s->replicas.end(), old_primary) == s->replicas.end())
    s->replicas.push_back(old_primary);
  ++s->primary_epoch;
  ++t.version;
  validate(t);
  if (!client_.compare_and_swap(key, kv->mod_revision, encode(t))) {
    if (options_.log)
      options_.log("failover event=lost_election shard=" + shard_id.substr(0, 8));
    return false;
  }
  promotions_.fetch_add(1, std::memory_order_relaxed);
  if (options_.log)
    options_.log("failover event=promoted shard=" + shard_id.substr(0, 8) +
                 " epoch=" + std::to_string(s->primary_epoch) +
                 " version=" + std::to_string(t.version) + " old_primary=" + old_primary.substr(0, 8));
  return true;
}

}  // namespace cluster
