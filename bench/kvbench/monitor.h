// bench/kvbench/monitor.h - watches a run from its own thread: samples the streams' counts
// into a timeline (for the JSON report and the hit-ratio-over-time chart) and shows progress
// on stderr: a bar redrawn in place on a terminal, plain lines otherwise.
#pragma once

#include <condition_variable>
#include <mutex>
#include <thread>
#include <vector>

#include "driver.h"
#include "stats.h"

namespace kvbench {

class Monitor {
 public:
  /// `streams` outlive the monitor; `total` requests (0 = unknown) scale the bar.
  Monitor(const Options& o, std::vector<const StreamStats*> streams, uint64_t total,
          Clock::time_point start);
  ~Monitor();
  /// Starts the sampling thread.
  void start();
  /// Stops it, takes a last sample and ends the progress output.
  void finish();
  /// The samples, oldest first (the last one is the end of the run).
  const std::vector<Sample>& timeline() const { return timeline_; }

 private:
  void loop();
  Counts counts() const;
  void sample(double t);
  void show(double t, bool final);

  const Options& opt_;
  std::vector<const StreamStats*> streams_;
  uint64_t total_;
  Clock::time_point start_;
  bool bar_ = false, lines_ = false;
  std::vector<Sample> timeline_;
  Sample last_shown_;
  double next_line_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
};

}  // namespace kvbench
