// bench/kvbench/options.cc - command-line parsing and usage text of stratakv-bench.
#include "options.h"

#include <cctype>
#include <charconv>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <string_view>

namespace kvbench {
namespace {

const char kUsage[] =
    "usage: stratakv-bench [options]\n"
    "The prefix-cache workload of LLM serving engines on a KV cache: per request, look up the\n"
    "longest cached prefix, load the hit chunks, store the missing ones; N concurrent streams.\n"
    "\n"
    "server\n"
    "  --protocol P           resp (default): pipelined EXISTS/GET/SET (any Redis server);\n"
    "                         fast: the C++ SDK's shm fast path over --unix (KV.PREFIX, KV.MGET,\n"
    "                         KV.MPUT from and into an alloc_buffer); fast-raw: the same commands\n"
    "                         spoken directly on a memfd segment, no SDK\n"
    "  --host H --port P      TCP address (default 127.0.0.1:6379)\n"
    "  --unix PATH            Unix socket (required by fast, fast-raw; resp uses it instead of TCP)\n"
    "  --url URL              fast: the SDK's URL instead of --unix, e.g. redis+cluster://h:p,...\n"
    "  --password S           AUTH S first\n"
    "workload: conversations (default)\n"
    "  --users N (16) --rounds N (4)      users, and rounds per user (each round's prompt is the\n"
    "                         system prompt, the history, and a new user message)\n"
    "  --system-prompts N (1) --system-tokens N (1024)   shared system prompts\n"
    "  --user-tokens N (512) --output-tokens N (256)     per round\n"
    "  --chunk-tokens N (256) --bytes-per-token B (128k) value = chunk tokens x bytes per token\n"
    "  --value-size B         bytes per value directly (overrides --bytes-per-token)\n"
    "workload: trace replay\n"
    "  --trace FILE           Mooncake JSON lines (timestamp, input_length, hash_ids)\n"
    "  --speedup X            0 = as fast as possible (default), 1 = real time, 10 = 10x faster\n"
    "  --block-tokens N       tokens per hash id (512); value = block tokens x bytes per token\n"
    "  --gen-trace FILE       write a synthetic trace and exit; with --gen-requests N (1000),\n"
    "                         --gen-rate R (4/s), --gen-prefixes N (8), --gen-prefix-blocks N (8),\n"
    "                         --gen-session-prob P (0.5), --gen-new-blocks N (8), --gen-sessions N\n"
    "                         (256), --seed\n"
    "common\n"
    "  --repeat N (1)         passes over the workload (later passes find earlier chunks)\n"
    "  --requests N           stop after N requests; --duration S: after S seconds\n"
    "  --seed S (1)           --key-prefix S (kvbench/llama-3-8b@1@0)\n"
    "  --prefill-tokens-per-s R (10000)  prefill rate of the modeled time to first token\n"
    "                         (TTFT = lookup and loads + prompt tokens after the loaded prefix\n"
    "                         / R); the default assumes Llama-3-8B bf16 on one A100 (16 GFLOP\n"
    "                         a token at about 50% of 312 TFLOPS): an estimate, not a measurement\n"
    "  --streams N (4)        concurrent request streams, one connection each\n"
    "  --batch N              chunks per pipelined batch and buffer slots per stream and\n"
    "                         direction (default: about 128 MiB worth, 1..64)\n"
    "  --pin-ms MS (10000)    fast*: KV.PREFIX ... PIN MS, KV.UNPIN after loading; --no-pin;\n"
    "                         --no-unpin: leave the leases to expire\n"
    "  --verify sampled|full|none   check loaded chunks: header, stamps and samples (default),\n"
    "                         or every byte; --verify-full = --verify full\n"
    "output\n"
    "  --json FILE            the report as JSON (also the timeline); --label S names the run\n"
    "  --progress auto|bar|lines|none  (auto: a bar on a terminal, else a line every\n"
    "                         --progress-secs S (5)); --quiet = --progress none\n"
    "  --sample-secs S (1)    timeline resolution\n"
    "Exit status: 0; 1 when any chunk mismatched or any operation failed; 2 on bad usage or a\n"
    "connection failure.\n";

[[noreturn]] void usage(const std::string& msg) {
  if (!msg.empty()) std::fprintf(stderr, "stratakv-bench: %s\n\n", msg.c_str());
  std::fputs(kUsage, msg.empty() ? stdout : stderr);
  std::exit(msg.empty() ? 0 : 2);
}

}  // namespace

bool parse_size(const std::string& s, uint64_t& out) {
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p == s.data()) return false;
  std::string suf(p, s.data() + s.size());
  for (auto& c : suf) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  int shift = -1;
  if (suf.empty() || suf == "b") shift = 0;
  else if (suf == "k" || suf == "kb" || suf == "kib") shift = 10;
  else if (suf == "m" || suf == "mb" || suf == "mib") shift = 20;
  else if (suf == "g" || suf == "gb" || suf == "gib") shift = 30;
  else if (suf == "t" || suf == "tb" || suf == "tib") shift = 40;
  if (shift < 0 || (shift > 0 && v > (UINT64_MAX >> shift))) return false;
  out = v << shift;
  return true;
}

Options parse_options(int argc, char** argv) {
  Options o;
  bool mode_set = false;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i], val;
    bool has_inline = false;
    if (auto eq = a.find('='); a.rfind("--", 0) == 0 && eq != std::string::npos) {
      val = a.substr(eq + 1);
      a.resize(eq);
      has_inline = true;
    }
    auto next = [&]() -> std::string {
      if (has_inline) return val;
      if (i + 1 >= argc) usage("missing value for " + a);
      return argv[++i];
    };
    auto num = [&](uint64_t lo, uint64_t hi) {
      std::string v = next();
      uint64_t x = 0;
      if (!parse_size(v, x) || x < lo || x > hi) usage("bad value for " + a + ": " + v);
      return x;
    };
    auto real = [&](double lo, double hi) {
      std::string v = next();
      char* end = nullptr;
      double x = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0' || !(x >= lo && x <= hi)) usage("bad value for " + a + ": " + v);
      return x;
    };
    const uint64_t kBig = uint64_t{1} << 40;
    if (a == "--protocol") {
      std::string v = next();
      if (v == "resp") o.protocol = Protocol::kResp;
      else if (v == "fast") o.protocol = Protocol::kFast;
      else if (v == "fast-raw") o.protocol = Protocol::kFastRaw;
      else usage("bad --protocol: " + v);
    } else if (a == "--host") o.host = next();
    else if (a == "--port") o.port = static_cast<int>(num(1, 65535));
    else if (a == "--unix") o.unix_path = next();
    else if (a == "--url") o.url = next();
    else if (a == "--password") o.password = next();
    else if (a == "--trace") { o.trace_path = next(); if (!mode_set) o.mode = Mode::kTrace; }
    else if (a == "--mode") {
      std::string v = next();
      mode_set = true;
      if (v == "conversation") o.mode = Mode::kConversation;
      else if (v == "trace") o.mode = Mode::kTrace;
      else usage("bad --mode: " + v);
    } else if (a == "--speedup") o.speedup = real(0, 1e9);
    else if (a == "--block-tokens") o.block_tokens = num(1, 1 << 20);
    else if (a == "--users") o.users = num(1, kBig);
    else if (a == "--rounds") o.rounds = num(1, kBig);
    else if (a == "--system-prompts") o.system_prompts = num(1, kBig);
    else if (a == "--system-tokens") o.system_tokens = num(0, 1 << 24);
    else if (a == "--user-tokens") o.user_tokens = num(1, 1 << 24);
    else if (a == "--output-tokens") o.output_tokens = num(0, 1 << 24);
    else if (a == "--chunk-tokens") o.chunk_tokens = num(1, 1 << 20);
    else if (a == "--bytes-per-token") o.bytes_per_token = num(1, uint64_t{1} << 30);
    else if (a == "--value-size") o.value_size = num(64, uint64_t{1} << 34);
    else if (a == "--repeat") o.repeat = num(1, kBig);
    else if (a == "--requests") o.max_requests = num(1, kBig);
    else if (a == "--duration") o.duration = real(0, 1e9);
    else if (a == "--seed") o.seed = num(0, UINT64_MAX);
    else if (a == "--key-prefix") o.key_prefix = next();
    else if (a == "--prefill-tokens-per-s") o.prefill_tokens_per_s = real(1, 1e12);
    else if (a == "--streams") o.streams = static_cast<int>(num(1, 1024));
    else if (a == "--batch") o.batch = num(1, 4096);
    else if (a == "--pin-ms") { o.pin_ms = num(0, kBig); o.pin = true; }
    else if (a == "--no-pin") o.pin = false;
    else if (a == "--no-unpin") o.unpin = false;
    else if (a == "--verify") {
      std::string v = next();
      if (v == "none") o.verify = Verify::kNone;
      else if (v == "sampled") o.verify = Verify::kSampled;
      else if (v == "full") o.verify = Verify::kFull;
      else usage("bad --verify: " + v);
    } else if (a == "--verify-full") o.verify = Verify::kFull;
    else if (a == "--json") o.json_path = next();
    else if (a == "--label") o.label = next();
    else if (a == "--progress") {
      std::string v = next();
      if (v == "auto") o.progress = Progress::kAuto;
      else if (v == "bar") o.progress = Progress::kBar;
      else if (v == "lines") o.progress = Progress::kLines;
      else if (v == "none") o.progress = Progress::kNone;
      else usage("bad --progress: " + v);
    } else if (a == "--quiet" || a == "-q") o.progress = Progress::kNone;
    else if (a == "--sample-secs") o.sample_secs = real(0.01, 3600);
    else if (a == "--progress-secs") o.progress_secs = real(0.1, 3600);
    else if (a == "--gen-trace") o.gen.path = next();
    else if (a == "--gen-requests") o.gen.requests = num(1, kBig);
    else if (a == "--gen-rate") o.gen.rate = real(1e-6, 1e9);
    else if (a == "--gen-prefixes") o.gen.prefixes = num(1, kBig);
    else if (a == "--gen-prefix-blocks") o.gen.prefix_blocks = num(0, 1 << 20);
    else if (a == "--gen-session-prob") o.gen.session_prob = real(0, 1);
    else if (a == "--gen-new-blocks") o.gen.new_blocks = num(1, 1 << 20);
    else if (a == "--gen-sessions") o.gen.sessions = num(1, kBig);
    else if (a == "--help" || a == "-h") usage("");
    else usage("unknown option " + a);
  }
  if (!o.gen.path.empty()) return o;
  if (o.mode == Mode::kTrace && o.trace_path.empty()) usage("--mode trace needs --trace FILE");
  if (o.fast_path() && o.unix_path.empty() && !(o.protocol == Protocol::kFast && !o.url.empty()))
    usage(std::string("--protocol ") + to_string(o.protocol) + " needs --unix PATH" +
          (o.protocol == Protocol::kFast ? " or --url URL" : ""));
  const uint64_t bytes = o.chunk_bytes();
  if (bytes < 64 || bytes % 8 != 0 || bytes > (uint64_t{1} << 34))
    usage("a value must be a multiple of 8 bytes, 64 B to 16 GiB (got " + std::to_string(bytes) + ")");
  if (o.batch == 0) {
    const uint64_t want = (uint64_t{128} << 20) / bytes;
    o.batch = want < 1 ? 1 : want > 64 ? 64 : want;
  }
  return o;
}

const char* to_string(Protocol p) {
  return p == Protocol::kFast ? "fast" : p == Protocol::kFastRaw ? "fast-raw" : "resp";
}
const char* to_string(Mode m) { return m == Mode::kTrace ? "trace" : "conversation"; }
const char* to_string(Verify v) {
  return v == Verify::kFull ? "full" : v == Verify::kSampled ? "sampled" : "none";
}

}  // namespace kvbench
