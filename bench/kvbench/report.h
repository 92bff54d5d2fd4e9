// bench/kvbench/report.h - the figures of a run: merged from the streams, printed as text,
// written as JSON (--json FILE).
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "control.h"
#include "options.h"
#include "stats.h"

namespace kvbench {

/// A run, merged over its streams.
struct Summary {
  Counts counts;
  Histogram lookup, load, store, prefix_load, request, ttft;
  double elapsed_secs = 0;
  double load_secs = 0;   ///< time during which at least one stream was inside a load batch
  double store_secs = 0;  ///< time during which at least one stream was inside a store batch
  uint64_t value_bytes = 0;
  uint64_t batch = 0;
  std::string first_error, first_mismatch, fatal;
  ServerInfo server_before, server_after;

  double hit_ratio() const { return counts.chunks ? static_cast<double>(counts.hits) / static_cast<double>(counts.chunks) : 0; }
  /// GB/s (10^9 bytes) while loading: loaded bytes over load_secs (the aggregate rate of the
  /// streams over the time any of them was loading).
  double load_gbps() const { return load_secs > 0 ? static_cast<double>(counts.bytes_loaded) / load_secs / 1e9 : 0; }
  double store_gbps() const { return store_secs > 0 ? static_cast<double>(counts.bytes_stored) / store_secs / 1e9 : 0; }
  /// Whether the run is clean: no error, no mismatch, no stream lost.
  bool ok() const { return counts.errors == 0 && counts.mismatches == 0 && fatal.empty(); }
};

/// Merges the streams' records.
Summary summarize(const std::vector<std::unique_ptr<StreamStats>>& streams, double elapsed_secs,
                  uint64_t value_bytes, uint64_t batch);

/// The human-readable report.
void print_report(std::FILE* out, const Options& o, const Summary& s);

/// Writes the JSON report (config, server, counts, hit ratios, throughput, latency
/// percentiles, checks, errors, timeline). False (and a message on stderr) when the file
/// cannot be written.
bool write_json(const std::string& path, const Options& o, const Summary& s, const std::vector<Sample>& timeline);

}  // namespace kvbench
