// bench/kvbench/workload.h - requests of the prefix-cache workload, and the conversation
// generator.
//
// A request is a chain of chunk hashes: chunk i's hash covers the request's tokens up to the
// end of chunk i (hash_i = H(hash_{i-1}, tokens of chunk i)), as vLLM, LMCache and SGLang key
// their KV cache, so two prompts share exactly the chunks of their common token prefix and a
// divergence changes every later key.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "options.h"

namespace kvbench {

/// One inference request, as the cache sees it.
struct Request {
  uint64_t seq = 0;              ///< position in the workload (over all streams and passes)
  double at_secs = -1;           ///< start time relative to the run's start; < 0 = at once
  std::vector<uint64_t> chunks;  ///< chained chunk hashes, in prompt order
  uint64_t prompt_tokens = 0;    ///< tokens of the whole prompt (the chunks and a partial tail)
};

/// Where the streams get their requests from.
class RequestSource {
 public:
  virtual ~RequestSource() = default;
  /// The next request for `stream` into `out`; false when that stream has no more. Streams
  /// call this concurrently, each with its own index.
  virtual bool next(int stream, Request& out) = 0;
  /// Requests in the whole run (all passes), or 0 when not known.
  virtual uint64_t total() const = 0;
};

/// The first link of every chain of a run: depends on the seed and the value size, so runs of
/// different sizes against one server do not read each other's values.
uint64_t chain_seed(const Options& o);

/// The cache key of a chunk: `<key_prefix>@<16 hex digits>@bf16` (LMCache's key shape,
/// `model@world_size@worker_id@hash@dtype`).
std::string chunk_key(const std::string& key_prefix, uint64_t chunk_hash);

/// Multi-round conversations: `users` users, each with `rounds` rounds. Round r's prompt is
/// the user's system prompt (one of `system_prompts`, shared by the users that have it), the
/// messages and answers of rounds 0..r-1, and a new message; its full chunks are the request.
/// User u belongs to stream u % streams, which serves its users round-robin, one round each
/// in turn, so a user's rounds run in order and the reuse distance grows with `users`. Every
/// pass of --repeat replays the same conversations (the same keys).
std::unique_ptr<RequestSource> make_conversation_source(const Options& o);

}  // namespace kvbench
