#include "task_pool.h"

#include <algorithm>
#include <atomic>

namespace stratakv::detail {

// One run(): indices are claimed by whoever comes (the caller and pool threads). `users` counts
// queue entries and threads inside work() (under mu_); the caller returns when it is 0.
struct TaskPool::Batch {
  const std::function<void(size_t)>* f = nullptr;
  size_t n = 0;
  std::atomic<size_t> next{0};
  size_t users = 0;
  std::condition_variable done;
};

TaskPool::TaskPool(size_t max_threads) : max_threads_(std::max<size_t>(max_threads, 1)) {}

TaskPool::~TaskPool() {
  {
    std::lock_guard lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void TaskPool::work(Batch& b) {
  for (size_t i; (i = b.next.fetch_add(1, std::memory_order_relaxed)) < b.n;) (*b.f)(i);
}

void TaskPool::run(size_t n, const std::function<void(size_t)>& f) {
  if (n == 0) return;
  if (n == 1) return f(0);
  Batch b;
  b.f = &f;
  b.n = n;
  const size_t helpers = std::min(n - 1, max_threads_);
  {
    std::lock_guard lk(mu_);
    // Threads waiting now serve this batch first; start more, up to the limit, for the rest.
    for (size_t i = idle_; i < helpers && threads_.size() < max_threads_; ++i)
      threads_.emplace_back([this] { loop(); });
    for (size_t i = 0; i < helpers; ++i) queue_.push_back(&b);
    b.users = helpers;
  }
  cv_.notify_all();
  work(b);
  std::unique_lock lk(mu_);
  // Entries no thread took are withdrawn; then wait for the threads inside work().
  const auto before = queue_.size();
  std::erase(queue_, &b);
  b.users -= before - queue_.size();
  b.done.wait(lk, [&] { return b.users == 0; });
}

void TaskPool::loop() {
  std::unique_lock lk(mu_);
  for (;;) {
    ++idle_;
    cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
    --idle_;
    if (stop_) return;
    Batch* b = queue_.front();
    queue_.pop_front();
    lk.unlock();
    work(*b);
    lk.lock();
    if (--b->users == 0) b->done.notify_all();
  }
}

}  // namespace stratakv::detail
