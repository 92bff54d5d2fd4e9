#include "tiering/admission.h"

#include <algorithm>

namespace tiering {
namespace {

constexpr uint64_t kWindowUs = 250'000;  // writer time per measurement of the speed

}  // namespace

AdmissionPolicy::AdmissionPolicy(uint64_t max_depth, uint64_t max_rate)
    : max_depth_(std::max(max_depth, kMinDepth)), max_rate_(max_rate) {
  tokens_ = static_cast<double>(depth_locked());
}

uint64_t AdmissionPolicy::rate_locked() const {
  const uint64_t r = measured_ != 0 ? measured_ : kInitialRate;
  return max_rate_ != 0 ? std::min(r, max_rate_) : r;
}

uint64_t AdmissionPolicy::depth_locked() const {
  const auto d = static_cast<uint64_t>(static_cast<double>(rate_locked()) * kDepthMs / 1000);
  return std::clamp(d, kMinDepth, max_depth_);
}

AdmissionDecision AdmissionPolicy::decide(uint64_t bytes, bool reused, uint64_t pending,
                                          int64_t now_ms) {
  std::lock_guard lock(mu_);
  const double depth = static_cast<double>(depth_locked());
  if (refilled_ms_ >= 0 && now_ms > refilled_ms_)
    tokens_ += static_cast<double>(rate_locked()) * static_cast<double>(now_ms - refilled_ms_) /
               1000.0;
  if (refilled_ms_ < now_ms) refilled_ms_ = now_ms;
  tokens_ = std::min(tokens_, depth);
  // The queue's bound holds whatever the budget says: queued values are still in memory. Its
  // last quarter is kept for read values, as the bucket's is: a writer slower than its
  // measured speed (starved of CPU, a disk that stalls) fills the queue before the budget.
  if (pending != 0 && pending + bytes > (reused ? max_depth_ : max_depth_ - max_depth_ / 4))
    return AdmissionDecision::kReject;
  // A value larger than the bucket costs the whole bucket (it goes when the bucket is full).
  const double cost = std::min(static_cast<double>(bytes), depth);
  bool admit;
  if (reused) {
    admit = tokens_ >= cost;
  } else {
    // A run of never-read values ends when it would take the bucket below a quarter (kept for
    // read values) and starts again at three quarters.
    if (tokens_ >= depth * 3 / 4) run_ = true;
    if (run_ && tokens_ - cost < depth / 4 && tokens_ < depth) run_ = false;
    admit = run_ && tokens_ >= cost;
  }
  if (!admit) return AdmissionDecision::kReject;
  tokens_ -= cost;
  return AdmissionDecision::kAdmit;
}

void AdmissionPolicy::record_write(uint64_t bytes, uint64_t micros) {
  if (bytes == 0) return;
  std::lock_guard lock(mu_);
  window_bytes_ += bytes;
  window_us_ += std::max<uint64_t>(micros, 1);
  if (window_us_ < kWindowUs) return;
  const uint64_t r = static_cast<uint64_t>(static_cast<double>(window_bytes_) * 1e6 /
                                           static_cast<double>(window_us_));
  measured_ = measured_ == 0 ? r : (measured_ + r) / 2;
  window_bytes_ = window_us_ = 0;
}

uint64_t AdmissionPolicy::rate() const {
  std::lock_guard lock(mu_);
  return rate_locked();
}

uint64_t AdmissionPolicy::measured_rate() const {
  std::lock_guard lock(mu_);
  return measured_;
}

uint64_t AdmissionPolicy::depth() const {
  std::lock_guard lock(mu_);
  return depth_locked();
}

uint64_t AdmissionPolicy::tokens() const {
  std::lock_guard lock(mu_);
  return tokens_ > 0 ? static_cast<uint64_t>(tokens_) : 0;
}

void AdmissionPolicy::set_max_rate(uint64_t bytes_per_s) {
  std::lock_guard lock(mu_);
  max_rate_ = bytes_per_s;
}

}  // namespace tiering
