// bench/kvbench/main.cc - stratakv-bench: the prefix-cache workload of LLM serving engines
// (vLLM + LMCache, SGLang HiCache) on a KV cache, over RESP (any Redis server) or stratakv's
// fast path. See bench/README.md and `stratakv-bench --help`.
//
//   stratakv-bench --port 6379 --users 16 --rounds 4 --json run.json
//   stratakv-bench --protocol fast --unix /tmp/stratakv.sock --bytes-per-token 2k
//                  --trace synthetic_trace.jsonl --speedup 0
//   stratakv-bench --gen-trace my.jsonl --gen-requests 2000
#include <csignal>
#include <cstdio>
#include <memory>
#include <thread>
#include <vector>

#include "backend.h"
#include "content.h"
#include "control.h"
#include "driver.h"
#include "monitor.h"
#include "options.h"
#include "report.h"
#include "trace.h"
#include "workload.h"

namespace {

std::atomic<bool>* g_stop = nullptr;

void on_signal(int) {
  if (g_stop) g_stop->store(true);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace kvbench;
  std::signal(SIGPIPE, SIG_IGN);
  const Options opt = parse_options(argc, argv);

  if (!opt.gen.path.empty()) {
    try {
      const uint64_t ids = write_synthetic_trace(opt.gen, opt.seed, opt.block_tokens);
      std::printf("wrote %llu requests (%llu distinct blocks) to %s\n", static_cast<unsigned long long>(opt.gen.requests),
                  static_cast<unsigned long long>(ids), opt.gen.path.c_str());
      return 0;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "stratakv-bench: %s\n", e.what());
      return 2;
    }
  }

  std::unique_ptr<RequestSource> source;
  try {
    source = opt.mode == Mode::kTrace ? make_trace_source(opt, read_trace(opt.trace_path)) : make_conversation_source(opt);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stratakv-bench: %s\n", e.what());
    return 2;
  }
  const uint64_t value_bytes = opt.chunk_bytes();
  const Content content(value_bytes);

  // Every connection and buffer is ready before the clock starts.
  std::vector<std::unique_ptr<Backend>> backends;
  std::vector<std::unique_ptr<StreamStats>> stats;
  try {
    for (int i = 0; i < opt.streams; ++i) {
      backends.push_back(make_backend(opt, opt.batch, value_bytes));
      stats.push_back(std::make_unique<StreamStats>());
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "stratakv-bench: %s\n", e.what());
    return 2;
  }
  Summary summary;
  summary.server_before = query_server_info(opt);

  Run run{opt, content, *source, Clock::now()};
  g_stop = &run.stop;
  std::signal(SIGINT, on_signal);
  std::signal(SIGTERM, on_signal);
  std::vector<const StreamStats*> views;
  for (auto& s : stats) views.push_back(s.get());
  uint64_t total = source->total();
  if (opt.max_requests && (total == 0 || opt.max_requests < total)) total = opt.max_requests;
  Monitor monitor(opt, views, total, run.start);
  monitor.start();
  std::vector<std::thread> threads;
  for (int i = 0; i < opt.streams; ++i)
    threads.emplace_back([&, i] { run_stream(run, i, *backends[static_cast<size_t>(i)], *stats[static_cast<size_t>(i)]); });
  for (auto& t : threads) t.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - run.start).count();
  monitor.finish();
  backends.clear();  // closes the connections (and releases leases) before the last INFO

  ServerInfo before = std::move(summary.server_before);
  summary = summarize(stats, elapsed, value_bytes, opt.batch);
  summary.server_before = std::move(before);
  summary.server_after = query_server_info(opt);
  print_report(stdout, opt, summary);
  bool ok = summary.ok();
  if (!opt.json_path.empty() && !write_json(opt.json_path, opt, summary, monitor.timeline())) ok = false;
  return ok ? 0 : 1;
}
