// bench/kvbench/driver.cc - one request stream (see driver.h).
#include "driver.h"

#include <algorithm>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "net.h"
#include "ttft.h"

namespace kvbench {
namespace {

uint64_t ns_between(Clock::time_point a, Clock::time_point b) {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(b - a).count());
}

class Stream {
 public:
  Stream(const Run& run, Backend& backend, StreamStats& stats)
      : opt_(run.opt), start_(run.start), content_(run.content), be_(backend), st_(stats) {
    for (size_t i = 0; i < be_.slots(); ++i) content_.fill(be_.store_slot(i), 0);
  }

  void execute(const Request& req) {
    const size_t n = req.chunks.size();
    keys_.resize(n);
    for (size_t i = 0; i < n; ++i) keys_[i] = chunk_key(opt_.key_prefix, req.chunks[i]);
    add(&Counts::requests, 1);
    add(&Counts::chunks, n);
    add(&Counts::prompt_tokens, req.prompt_tokens);
    if (n == 0) {
      add(&Counts::prefill_tokens, req.prompt_tokens);
      st_.ttft.record_ns(modeled_ttft_ns(0, req.prompt_tokens, opt_.prefill_tokens_per_s));
      return;
    }
    const std::span<const std::string> keys(keys_);
    const size_t slots = be_.slots();

    // Lookup.
    auto t0 = Clock::now();
    const size_t prefix = std::min(be_.lookup(keys), n);
    uint64_t op_ns = ns_between(t0, Clock::now());
    st_.lookup.record_ns(op_ns);
    add(&Counts::lookup_hits, prefix);

    // Load the prefix, checking each chunk; stop at the first one that is not right.
    size_t loaded = 0;
    bool broken = false;
    for (size_t b = 0; b < prefix && !broken; b += slots) {
      const size_t m = std::min(slots, prefix - b);
      if (opt_.verify != Verify::kNone)
        for (size_t i = 0; i < m; ++i) content_.poison(be_.load_slot(i));
      const auto ta = Clock::now();
      be_.load(keys.subspan(b, m), results_);
      const auto tb = Clock::now();
      const uint64_t ns = ns_between(ta, tb);
      st_.load.record_ns(ns);
      st_.load_spans.push_back({ns_between(start_, ta), ns_between(start_, tb)});
      op_ns += ns;
      for (size_t i = 0; i < m && !broken; ++i) {
        if (accept_load(results_[i], keys_[b + i], req.chunks[b + i], be_.load_slot(i))) ++loaded;
        else broken = true;
      }
    }
    add(&Counts::hits, loaded);
    add(&Counts::bytes_loaded, loaded * be_.value_bytes());
    st_.prefix_load.record_ns(op_ns);
    const uint64_t prefill = prefill_tokens(req.prompt_tokens, loaded, opt_.tokens_per_chunk());
    add(&Counts::prefill_tokens, prefill);
    st_.ttft.record_ns(modeled_ttft_ns(op_ns, prefill, opt_.prefill_tokens_per_s));
    be_.release(keys.first(prefix));

    // Store the rest.
    for (size_t b = loaded; b < n; b += slots) {
      const size_t m = std::min(slots, n - b);
      for (size_t i = 0; i < m; ++i) content_.restamp(be_.store_slot(i), req.chunks[b + i]);
      const auto ta = Clock::now();
      be_.store(keys.subspan(b, m), results_);
      const auto tb = Clock::now();
      const uint64_t ns = ns_between(ta, tb);
      st_.store.record_ns(ns);
      st_.store_spans.push_back({ns_between(start_, ta), ns_between(start_, tb)});
      op_ns += ns;
      uint64_t ok = 0;
      for (size_t i = 0; i < m; ++i) {
        if (results_[i].status == KeyResult::Status::kOk) ++ok;
        else error("store " + keys_[b + i] + ": " + results_[i].error);
      }
      add(&Counts::stored, ok);
      add(&Counts::bytes_stored, ok * be_.value_bytes());
    }
    st_.request.record_ns(op_ns);
  }

 private:
  void add(uint64_t Counts::*field, uint64_t n) { st_.live.add(field, n); }

  void error(const std::string& what) {
    add(&Counts::errors, 1);
    if (st_.first_error.empty()) st_.first_error = what;
  }

  void mismatch(const std::string& what) {
    add(&Counts::mismatches, 1);
    if (st_.first_mismatch.empty()) st_.first_mismatch = what;
  }

  // Checks one load result; true when the chunk counts as a hit.
  bool accept_load(const KeyResult& r, const std::string& key, uint64_t hash, const std::byte* slot) {
    switch (r.status) {
      case KeyResult::Status::kMiss:
        add(&Counts::stale, 1);
        return false;
      case KeyResult::Status::kError:
        error("load " + key + ": " + r.error);
        return false;
      case KeyResult::Status::kWrongLength:
        mismatch(key + ": length " + std::to_string(r.length) + ", expected " + std::to_string(be_.value_bytes()));
        return false;
      case KeyResult::Status::kOk:
        break;
    }
    if (opt_.verify == Verify::kNone) return true;
    const bool full = opt_.verify == Verify::kFull;
    const size_t bad = full ? content_.check_full(slot, hash) : content_.check_sampled(slot, hash);
    if (bad != Content::kOk) {
      mismatch(key + ": wrong byte at offset " + std::to_string(bad));
      return false;
    }
    add(full ? &Counts::verified_full : &Counts::verified_sampled, 1);
    return true;
  }

  const Options& opt_;
  const Clock::time_point start_;
  const Content& content_;
  Backend& be_;
  StreamStats& st_;
  std::vector<std::string> keys_;
  std::vector<KeyResult> results_;
};

// Sleeps until `at_secs` after the start; false when the run was stopped meanwhile.
bool wait_until(Run& run, double at_secs) {
  const auto when = run.start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(at_secs));
  while (!run.stop.load(std::memory_order_relaxed)) {
    const auto now = Clock::now();
    if (now >= when) return true;
    std::this_thread::sleep_for(std::min<Clock::duration>(when - now, std::chrono::milliseconds(100)));
  }
  return false;
}

}  // namespace

void run_stream(Run& run, int index, Backend& backend, StreamStats& stats) {
  try {
    Stream stream(run, backend, stats);
    Request req;
    while (!run.stop.load(std::memory_order_relaxed) && run.source.next(index, req)) {
      if (run.opt.max_requests && run.started.fetch_add(1) >= run.opt.max_requests) break;
      if (run.opt.duration > 0 &&
          std::chrono::duration<double>(Clock::now() - run.start).count() >= run.opt.duration) {
        run.stop = true;
        break;
      }
      if (req.at_secs >= 0 && !wait_until(run, req.at_secs)) break;
      stream.execute(req);
    }
  } catch (const std::exception& e) {
    stats.fatal = e.what();
    stats.live.add(&Counts::errors, 1);
    if (stats.first_error.empty()) stats.first_error = e.what();
  }
}

}  // namespace kvbench
