// bench/kvbench/driver.h - one request stream: for each request, look up the cached prefix,
// load the hit chunks in batches and check them, store the missing chunks in batches; time
// every operation.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "backend.h"
#include "content.h"
#include "options.h"
#include "stats.h"
#include "workload.h"

namespace kvbench {

using Clock = std::chrono::steady_clock;

/// What the streams of a run share.
struct Run {
  const Options& opt;
  const Content& content;
  RequestSource& source;
  Clock::time_point start;
  std::atomic<uint64_t> started{0};  ///< requests begun, for --requests
  std::atomic<bool> stop{false};     ///< set by --duration, or by a signal
};

/// Runs stream `index` on `backend` until its requests run out or the run stops, recording
/// into `stats`. Never throws: a lost connection ends the stream with `stats.fatal` set and
/// one error counted.
///
/// Per request: lookup of all its keys; loads of keys [0, prefix) in batches of
/// backend.slots(), each chunk checked after its batch (outside the timed part) against
/// Content (the slots are poisoned first); the hit count is the loaded, checked prefix: a
/// miss (stale lookup), a wrong length, a wrong byte or an error ends it, and the rest of
/// the request's chunks are stored from there, in batches, from store slots restamped with
/// their keys' contents.
void run_stream(Run& run, int index, Backend& backend, StreamStats& stats);

}  // namespace kvbench
