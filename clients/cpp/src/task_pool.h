// task_pool.h - a few threads that run the per-node parts of one Client call at once (a batch
// split over the nodes of a cluster). Threads start on demand, up to a limit, and live as long
// as the pool.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace stratakv::detail {

/// Thread-safe: any number of threads may call run() at once.
class TaskPool {
 public:
  /// At most `max_threads` threads (besides the callers').
  explicit TaskPool(size_t max_threads);
  ~TaskPool();
  TaskPool(const TaskPool&) = delete;
  TaskPool& operator=(const TaskPool&) = delete;

  /// Runs f(0) .. f(n-1) and returns when all have returned: the calling thread takes indices
  /// too, the pool's threads the others. f must not throw (catch inside it). A task may call
  /// run() itself: a caller waits only for tasks already running.
  void run(size_t n, const std::function<void(size_t)>& f);

 private:
  struct Batch;
  static void work(Batch& b);
  void loop();

  const size_t max_threads_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Batch*> queue_;  // one entry per thread wanted by a batch
  std::vector<std::thread> threads_;
  size_t idle_ = 0;  // threads waiting for an entry
  bool stop_ = false;
};

}  // namespace stratakv::detail
