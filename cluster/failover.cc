#include "cluster/failover.h"

#include <algorithm>
#include <map>

namespace cluster {

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

bool FailoverAgent::poll_once() {
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
  for (const KeyValue& kv : client_.get_prefix(options_.prefix + "/nodes/")) {
    try {
      NodeRecord r = decode_node_record(kv.value);
      records.emplace(r.address.id, std::move(r));
    } catch (const std::exception&) {
      // A record of another version: not a live replica this one competes with.
    }
  }
  if (records.count(mine->primary)) {
    missing_primary_.clear();
    return false;
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
