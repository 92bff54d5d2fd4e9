// bench/kvbench/options.h - stratakv-bench's command line: what to run, against what, and
// what to report.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace kvbench {

/// kFast: the fast path through the C++ SDK; kFastRaw: the same commands over raw sockets.
enum class Protocol { kResp, kFast, kFastRaw };
enum class Mode { kConversation, kTrace };
enum class Verify { kNone, kSampled, kFull };
enum class Progress { kAuto, kBar, kLines, kNone };

/// Parameters of the synthetic trace generator (--gen-trace).
struct GenOptions {
  std::string path;             ///< output file; empty = no generation
  uint64_t requests = 1000;     ///< lines to write
  double rate = 4.0;            ///< mean arrivals per second (Poisson)
  uint64_t prefixes = 8;        ///< distinct shared prefixes (system prompts), Zipf-popular
  uint64_t prefix_blocks = 8;   ///< blocks in each shared prefix
  double session_prob = 0.5;    ///< chance that a request continues an earlier session
  uint64_t new_blocks = 8;      ///< mean blocks of new input per request
  uint64_t sessions = 256;      ///< sessions kept open for continuation
};

struct Options {
  // Server.
  Protocol protocol = Protocol::kResp;
  std::string host = "127.0.0.1";
  int port = 6379;
  std::string unix_path;  ///< Unix socket: required by the fast protocols; optional for resp
  /// --protocol fast: the SDK's URL instead of the Unix socket, e.g. a cluster's
  /// "redis+cluster://host:port,..." (INFO for the report then comes from --host/--port).
  std::string url;
  std::string password;   ///< AUTH before anything else when set

  // Workload.
  Mode mode = Mode::kConversation;
  std::string trace_path;
  double speedup = 0;            ///< trace: 0 = as fast as possible, 1 = real time, 10 = 10x
  uint64_t block_tokens = 512;   ///< trace: tokens per hash id
  uint64_t users = 16;
  uint64_t rounds = 4;
  uint64_t system_prompts = 1;
  uint64_t system_tokens = 1024;
  uint64_t user_tokens = 512;    ///< mean new user tokens per round (uniform 50%-150%)
  uint64_t output_tokens = 256;  ///< answer tokens per round, part of the next round's prompt
  uint64_t chunk_tokens = 256;
  uint64_t bytes_per_token = uint64_t{128} << 10;  ///< Llama-3-8B bf16
  uint64_t value_size = 0;       ///< bytes per chunk; 0 = chunk (or block) tokens x bytes per token
  uint64_t repeat = 1;           ///< passes over the workload
  uint64_t max_requests = 0;     ///< 0 = all
  double duration = 0;           ///< seconds; 0 = no limit
  uint64_t seed = 1;
  /// Prefill rate of the modeled TTFT (ttft.h). The default is an assumption, not a
  /// measurement: Llama-3-8B costs about 2 x 8.0e9 = 16 GFLOP per prompt token, and one
  /// A100 (312 TFLOPS dense bf16) at about 50% utilisation prefills about 10,000 tokens/s
  /// (an H100 about 3x that). Pass the rate measured on the engine when it is known.
  double prefill_tokens_per_s = 10000;
  std::string key_prefix = "kvbench/llama-3-8b@1@0";

  // Execution.
  int streams = 4;
  uint64_t batch = 0;            ///< chunks per pipelined batch; 0 = auto (about 128 MiB)
  bool pin = true;               ///< fast, fast-raw: KV.PREFIX ... PIN pin_ms
  uint64_t pin_ms = 10000;
  bool unpin = true;             ///< fast, with pin: KV.UNPIN the prefix once it is loaded
  Verify verify = Verify::kSampled;

  // Output.
  std::string json_path;
  std::string label;
  Progress progress = Progress::kAuto;
  double sample_secs = 1.0;      ///< timeline resolution
  double progress_secs = 5.0;    ///< plain progress lines, every this many seconds

  GenOptions gen;

  /// True for the fast path (fast or fast-raw).
  bool fast_path() const { return protocol != Protocol::kResp; }

  /// Tokens of one chunk (or trace block).
  uint64_t tokens_per_chunk() const { return mode == Mode::kTrace ? block_tokens : chunk_tokens; }

  /// Bytes of one value (chunk or trace block).
  uint64_t chunk_bytes() const {
    if (value_size) return value_size;
    return tokens_per_chunk() * bytes_per_token;
  }
};

/// Parses argv; prints usage and exits with status 2 on bad usage, 0 on --help.
Options parse_options(int argc, char** argv);

/// "32m" -> 33554432: k, m, g, t suffixes (optionally followed by b or ib) are binary.
bool parse_size(const std::string& s, uint64_t& out);

const char* to_string(Protocol p);
const char* to_string(Mode m);
const char* to_string(Verify v);

}  // namespace kvbench
