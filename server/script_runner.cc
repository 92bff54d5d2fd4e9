// server/script_runner.cc - the script cache, the script threads and one script's atomic run
// (script_runner.h).
#include "server/script_runner.h"

#include <asio/post.hpp>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <optional>

#include "server/ascii.h"
#include "server/connection.h"
#include "server/errors.h"
#include "server/keyspace_events.h"
#include "server/log.h"
#include "server/replication.h"
#include "server/server.h"
#include "tiering/exec_lock.h"
#include "tiering/need_room.h"

namespace server {

namespace {

// A script whose allocations keep needing room runs this many times at most.
constexpr int kMaxScriptAttempts = 8;

// Script threads run at a lower priority than the I/O threads (nice +5: a third of their CPU
// weight), so that on a loaded machine a CPU-bound script does not take the time slices of the
// I/O threads, whose clients must be answered meanwhile. Applied once per thread.
constexpr int kScriptNice = 5;
void lower_priority_once() {
  thread_local bool done = false;
  if (done) return;
  done = true;
  setpriority(PRIO_PROCESS, static_cast<id_t>(::gettid()), kScriptNice);  // best effort
}

// A keyless command a script may run: it touches no key (the connection's own commands and a
// few of the server's). Every other keyless command reads or changes keys it cannot declare.
bool keyless_allowed(const CommandSpec& spec) {
  if (spec.group == "connection") return true;
  const std::string& n = spec.full_name;
  return n == "time" || n == "lastsave" || n == "command" || n.starts_with("command|");
}

}  // namespace

struct ScriptRunner::Running {
  std::vector<size_t> shards;  // sorted; those of its KEYS (empty: none, or inside EXEC)
  std::atomic<int64_t> start_ms{0};  // 0 until its locks are held
  std::atomic<bool> wrote{false};
  std::atomic<bool> kill{false};
};

// ---- the cache ----

std::shared_ptr<const std::string> ScriptCache::find(std::string_view sha) const {
  const std::string key = to_lower(sha);
  std::lock_guard lock(mu_);
  auto it = scripts_.find(key);
  return it == scripts_.end() ? nullptr : it->second;
}

void ScriptCache::add(const std::string& sha, std::shared_ptr<const std::string> body) {
  std::lock_guard lock(mu_);
  scripts_.try_emplace(sha, std::move(body));
}

void ScriptCache::flush() {
  std::unordered_map<std::string, std::shared_ptr<const std::string>> old;
  {
    std::lock_guard lock(mu_);
    old.swap(scripts_);
    generation_.fetch_add(1, std::memory_order_acq_rel);
  }
}

size_t ScriptCache::size() const {
  std::lock_guard lock(mu_);
  return scripts_.size();
}

// ---- redis.call's side: one command for the running script ----

namespace {

class RunHost : public ScriptHost {
 public:
  RunHost(Server& server, ScriptCall& call, ScriptRunner::Running& running,
          const std::atomic<bool>& stopping, int64_t now_ms)
      : server_(server), call_(call), running_(running), stopping_(stopping), now_ms_(now_ms) {}

  Status call(std::span<const std::string_view> args, int protocol, std::string* reply,
              std::string* error) override {
    // The checks of script.c scriptCall, in its order.
    const CommandSpec* spec = server_.commands().resolve(args);
    if (spec == nullptr) return refuse(error, err::kScriptUnknownCommand);
    if (!CommandTable::arity_ok(*spec, args.size())) return refuse(error, err::kScriptWrongArity);
    if (spec->flags & kNoScript) return refuse(error, err::kScriptNotAllowed);
    // The caller's ACL, as for its own commands (script.c scriptVerifyACL).
    if (const acl::User* user = call_.conn->acl_user(); !user->unrestricted) {
      PreparedCommand denied;
      denied.spec = spec;
      denied.verdict = acl_check(server_, *user, *spec, args, keys_, &denied.denied_arg);
      if (!denied.runs()) {
        call_.conn->log_acl_refusal(denied, args, now_ms_, "lua");
        return refuse(error, denied.verdict == PreparedCommand::Verdict::kNoPermCommand
                                 ? err::kScriptNoPermCommand
                             : denied.verdict == PreparedCommand::Verdict::kNoPermKey
                                 ? err::kScriptNoPermKey
                                 : err::kScriptNoPermChannel);
      }
    }
    const bool writes = (spec->flags & kWrite) != 0;
    if (writes && (call_.read_only || call_.flags.no_writes))
      return refuse(error, err::kScriptWriteReadOnly);
    // Before its first write (script.c scriptVerifyWriteCommandAllow): a read-only replica,
    // and stratakv's fencing, refuse a script's writes as they refuse a client's.
    if (writes && !running_.wrote.load(std::memory_order_relaxed)) {
      if (server_.slot_owner().fenced()) return refuse(error, "-" + std::string(err::kFenced));
      if (server_.replication().is_replica() &&
          server_.config().num(Key::kReplicaReadOnly) != 0)
        return refuse(error, "-" + std::string(err::kReadOnlyReplica));
    }
    if ((spec->flags & kDenyOom) && call_.pre_oom && !call_.flags.allow_oom &&
        !running_.wrote.load(std::memory_order_relaxed))
      return refuse(error, "-" + std::string(err::kOom));
    // stratakv's rule: the script holds the shards of its KEYS, and only those.
    if (!CommandTable::has_keys(*spec) && !keyless_allowed(*spec))
      return refuse(error, err::script_keyless_command(spec->full_name));
    if (spec->group == "kv") return refuse(error, err::script_keyless_command(spec->full_name));
    keys_.clear();
    CommandTable::keys(*spec, args, keys_);
    for (size_t i : keys_) {
      if (i >= args.size()) continue;
      const std::string_view key = args[i];
      if (std::find(call_.keys.begin(), call_.keys.end(), key) == call_.keys.end())
        return refuse(error, err::script_undeclared_key(key));
    }
    if (writes) running_.wrote.store(true, std::memory_order_relaxed);  // SCRIPT_WRITE_DIRTY

    resp::Writer out(protocol);
    resp::Request req(std::vector<std::string_view>(args.begin(), args.end()));
    CommandContext ctx{server_, *call_.conn, out, req, req.args(), now_ms_, server_.keyspace()};
    const resp::Writer::Mark mark = out.mark();
    const auto start = std::chrono::steady_clock::now();
    try {
      // Keyspace notifications name the script's command (setrange, append ...), as EXEC's.
      KeyspaceEvents::CommandScope events(server_.keyspace_events(), spec);
      spec->handler(ctx);
    } catch (const tiering::NeedRoom& e) {
      if (!applied_) {
        // Nothing applied yet: stop the script; it runs again once room is made.
        need_room_ = e.bytes;
        *error = "-" + std::string(err::kOom);
        return Status::kAbort;
      }
      out.rewind(mark);  // after a write: this command answers -OOM (nothing applied twice)
      out.error(err::kOom);
    } catch (const std::bad_alloc&) {
      out.rewind(mark);
      out.error(err::kOom);
    }
    if (writes) applied_ = true;
    const auto us = std::chrono::duration_cast<std::chrono::microseconds>(
                        std::chrono::steady_clock::now() - start)
                        .count();
    calls_.push_back({spec->id, static_cast<uint64_t>(us), out.errors() != 0});
    // LATENCY and MONITOR see a script's commands as Redis's scriptCall does: each a call, shown
    // as from "[0 lua]".
    if (const int64_t latency = server_.config().num(Key::kLatencyMonitorThreshold); latency != 0)
      server_.latency().add_command(spec->flags & kFast, us, latency);
    if (server_.monitors().active() && !(spec->flags & (kAdmin | kSkipMonitor)))
      server_.monitors().feed("lua", args);
    bufs_.clear();
    out.buffers(&bufs_);
    for (const auto& b : bufs_) reply->append(b.data, b.size);
    return Status::kRan;
  }

  bool killed() override {
    return running_.kill.load(std::memory_order_relaxed) ||
           stopping_.load(std::memory_order_relaxed);
  }

  void log(int level, std::string_view message) override {
    log::write(static_cast<log::Level>(level), message);
  }

  uint64_t need_room() const { return need_room_; }
  std::vector<ScriptCommandStat>& calls() { return calls_; }
  bool applied() const { return applied_; }

 private:
  static Status refuse(std::string* error, std::string_view text) {
    *error = std::string(text);
    return Status::kRefused;
  }

  Server& server_;
  ScriptCall& call_;
  ScriptRunner::Running& running_;
  const std::atomic<bool>& stopping_;
  const int64_t now_ms_;
  uint64_t need_room_ = 0;
  bool applied_ = false;
  std::vector<size_t> keys_;
  std::vector<resp::OutBuffer> bufs_;
  std::vector<ScriptCommandStat> calls_;
};

}  // namespace

// ---- the runner ----

ScriptRunner::ScriptRunner(Server& server) : server_(server) {}

ScriptRunner::~ScriptRunner() { stop(); }

void ScriptRunner::start(size_t threads) {
  pool_ = std::make_unique<asio::thread_pool>(std::max<size_t>(1, threads));
}

void ScriptRunner::stop() {
  if (pool_ == nullptr) return;
  stopping_.store(true);
  pool_->join();
  pool_.reset();
}

ScriptEngine& ScriptRunner::engine() {
  // One interpreter per thread, replaced after SCRIPT FLUSH (Redis resets its interpreter).
  struct PerThread {
    std::unique_ptr<ScriptEngine> engine;
    uint64_t generation = 0;
  };
  thread_local PerThread t;
  const uint64_t gen = cache_.generation();
  if (t.engine == nullptr || t.generation != gen) {
    t.engine.reset();
    t.engine = std::make_unique<ScriptEngine>();
    t.generation = gen;
  }
  return *t.engine;
}

std::string ScriptRunner::compile(const std::string& sha, std::string_view body) {
  return engine().load(sha, body);
}

void ScriptRunner::submit(ScriptCall call, std::function<void(ScriptOutcome)> done) {
  asio::post(*pool_, [this, call = std::move(call), done = std::move(done)]() mutable {
    lower_priority_once();
    ScriptOutcome out;
    if (stopping_.load(std::memory_order_relaxed)) {
      out.error = true;
      out.reply = "ERR Script killed by user with SCRIPT KILL...";
    } else {
      out = execute(call, /*own_locks=*/true);
      // The script's writes were made on this thread: so were their SSD tickets.
      if (server_.ssd() != nullptr) out.ssd_ticket = tiering::SsdTier::take_barrier();
    }
    done(std::move(out));
  });
}

ScriptOutcome ScriptRunner::run_here(ScriptCall& call) { return execute(call, false); }

void ScriptRunner::enter(Running* r) {
  std::lock_guard lock(mu_);
  running_.push_back(r);
  running_count_.fetch_add(1, std::memory_order_relaxed);
}

void ScriptRunner::leave(Running* r) {
  std::lock_guard lock(mu_);
  std::erase(running_, r);
  running_count_.fetch_sub(1, std::memory_order_relaxed);
}

int64_t ScriptRunner::holding_ms(std::span<const size_t> shards, bool all, int64_t now_ms) const {
  int64_t longest = -1;
  std::lock_guard lock(mu_);
  for (const Running* r : running_) {
    if (r->shards.empty()) continue;
    bool overlaps = all;
    for (size_t i = 0; !overlaps && i < shards.size(); ++i)
      overlaps = std::binary_search(r->shards.begin(), r->shards.end(), shards[i]);
    if (!overlaps) continue;
    const int64_t start = r->start_ms.load(std::memory_order_relaxed);
    longest = std::max<int64_t>(longest, start == 0 ? 0 : std::max<int64_t>(0, now_ms - start));
  }
  return longest;
}

std::string_view ScriptRunner::kill(int64_t now_ms) {
  const int64_t threshold = server_.config().num(Key::kBusyReplyThreshold);
  std::lock_guard lock(mu_);
  std::vector<Running*> busy;
  for (Running* r : running_) {
    const int64_t start = r->start_ms.load(std::memory_order_relaxed);
    if (start != 0 && now_ms - start >= threshold) busy.push_back(r);
  }
  if (busy.empty()) return err::kNotBusy;
  for (Running* r : busy)
    if (r->wrote.load(std::memory_order_relaxed)) return err::kUnkillable;
  for (Running* r : busy) r->kill.store(true, std::memory_order_relaxed);
  return {};
}

ScriptOutcome ScriptRunner::execute(ScriptCall& call, bool own_locks) {
  const auto start = std::chrono::steady_clock::now();
  ScriptOutcome out;
  auto finish = [&] {
    out.us = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::microseconds>(
                                       std::chrono::steady_clock::now() - start)
                                       .count());
  };
  ScriptEngine& eng = engine();
  if (std::string err = eng.load(call.sha, *call.body); !err.empty()) {
    out.error = true;
    out.reply = std::move(err);
    finish();
    return out;
  }
  cache_.add(call.sha, call.body);  // EVAL caches a script that compiled

  tiering::Keyspace& ks = server_.keyspace();
  Running running;
  if (own_locks) {
    for (const std::string& k : call.keys) running.shards.push_back(ks.shard_index(k));
    std::sort(running.shards.begin(), running.shards.end());
    running.shards.erase(std::unique(running.shards.begin(), running.shards.end()),
                         running.shards.end());
  }
  enter(&running);
  std::vector<std::string_view> keys(call.keys.begin(), call.keys.end());
  for (int attempt = 1;; ++attempt) {
    uint64_t need = 0;
    {
      std::optional<tiering::ExecLock> lock;
      if (own_locks) lock.emplace(ks, keys, false, /*long_hold=*/true);
      const int64_t now = own_locks ? tiering::now_ms() : call.now_ms;
      running.start_ms.store(std::max<int64_t>(1, now), std::memory_order_relaxed);
      RunHost host(server_, call, running, stopping_, now);
      ScriptEngine::Result r = eng.run(call.sha, call.keys, call.argv, call.protocol, host);
      need = host.need_room();
      if (need == 0 || host.applied()) {
        out.reply = std::move(r.reply);
        out.error = r.error;
        out.calls = std::move(host.calls());
        break;
      }
      running.wrote.store(false, std::memory_order_relaxed);
      if (!own_locks || attempt >= kMaxScriptAttempts) {
        // Inside EXEC its caller makes room and runs the transaction again; else -OOM.
        if (!own_locks) out.need_room = need;
        out.error = true;
        out.reply = std::string(err::kOom);
        break;
      }
    }  // the locks go: room is made with none held
    if (!server_.evictor().make_room(need, /*allocation_failed=*/true, tiering::now_ms())) {
      out.error = true;  // noeviction, or nothing evictable: as a command, -OOM
      out.reply = std::string(err::kOom);
      break;
    }
  }
  leave(&running);
  finish();
  return out;
}

}  // namespace server
