// bench/kvbench/trace.h - Mooncake-format request traces: reading them for replay, and
// writing synthetic ones.
//
// Format (kvcache-ai/Mooncake FAST25-release/traces): one JSON object a line,
//   {"timestamp": 40, "input_length": 23769, "output_length": 3, "hash_ids": [151, 152, ...]}
// timestamp in ms from the start, lengths in tokens, one hash id per block of 512 tokens
// (the last one partial); equal ids mean the same prefix block.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "options.h"
#include "workload.h"

namespace kvbench {

/// One line of a trace.
struct TraceRecord {
  double timestamp_ms = 0;
  uint64_t input_length = 0;
  uint64_t output_length = 0;
  std::vector<uint64_t> hash_ids;
};

/// Reads a trace file. Throws std::runtime_error naming the line on a malformed record.
std::vector<TraceRecord> read_trace(const std::string& path);

/// Replays `records`: request i has chunk j's hash = H(hash of j-1, hash_ids[j]), and starts
/// at timestamp / speedup (all at once when speedup is 0). Streams take requests in trace
/// order from one shared cursor. Pass p of --repeat replays the trace again after the
/// previous pass's last timestamp.
std::unique_ptr<RequestSource> make_trace_source(const Options& o, std::vector<TraceRecord> records);

/// Writes a synthetic trace of `g.requests` lines to `g.path`: Poisson arrivals at `g.rate`
/// per second; each request either continues one of the last `g.sessions` sessions (with
/// probability `g.session_prob`: its whole previous prompt plus new blocks) or starts a new
/// one on a shared prefix chosen Zipf(1) among `g.prefixes`. Returns the number of distinct
/// hash ids written. Throws std::runtime_error when the file cannot be written.
uint64_t write_synthetic_trace(const GenOptions& g, uint64_t seed, uint64_t block_tokens);

}  // namespace kvbench
