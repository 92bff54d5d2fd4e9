// bench/kvbench/ttft.h - the modeled time to first token of one request: what the cache cost
// (the prefix's lookup and loads, as measured) plus the prefill of every prompt token the
// cache did not serve, at a fixed prefill rate (--prefill-tokens-per-s).
//
// An engine can only reuse a contiguous prefix of KV cache: the tokens it prefills are those
// after the last chunk of the loaded prefix (a missed chunk, and every chunk after the first
// miss, count as prefill even when a later chunk is cached), including the prompt's partial
// last chunk, which is never cached. The model leaves out everything else an engine does
// (queueing, batching, decode, the copy into GPU memory).
#pragma once

#include <algorithm>
#include <cstdint>

namespace kvbench {

/// Prompt tokens left to prefill when the first `loaded_chunks` chunks of `chunk_tokens`
/// tokens each were served from the cache: max(0, prompt_tokens - loaded x chunk_tokens).
inline uint64_t prefill_tokens(uint64_t prompt_tokens, uint64_t loaded_chunks, uint64_t chunk_tokens) {
  const uint64_t served = loaded_chunks * chunk_tokens;
  return prompt_tokens > served ? prompt_tokens - served : 0;
}

/// Modeled TTFT in nanoseconds: `cache_ns` (lookup + loads) + `prefill` tokens / `tokens_per_s`.
inline uint64_t modeled_ttft_ns(uint64_t cache_ns, uint64_t prefill, double tokens_per_s) {
  const double prefill_ns = tokens_per_s > 0 ? static_cast<double>(prefill) / tokens_per_s * 1e9 : 0;
  return cache_ns + static_cast<uint64_t>(std::max(0.0, prefill_ns));
}

}  // namespace kvbench
