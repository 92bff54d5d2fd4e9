// bench/kvbench/stats.cc - histograms and counters.
#include "stats.h"

#include <algorithm>
#include <bit>

namespace kvbench {
namespace {

constexpr int kSub = 1 << 7;

size_t bucket_of(uint64_t v) {
  if (v < kSub) return static_cast<size_t>(v);
  const int e = 63 - std::countl_zero(v);  // >= 7
  const uint64_t sub = (v >> (e - 7)) & (kSub - 1);
  return static_cast<size_t>(e - 6) * kSub + static_cast<size_t>(sub);
}

// The middle of bucket i's range.
double bucket_value(size_t i) {
  if (i < kSub) return static_cast<double>(i);
  const int e = static_cast<int>(i / kSub) + 6;
  const uint64_t sub = i % kSub;
  const double lo = static_cast<double>((uint64_t{kSub} + sub) << (e - 7));
  return lo + static_cast<double>(uint64_t{1} << (e - 7)) / 2;
}

}  // namespace

Histogram::Histogram() : buckets_(static_cast<size_t>(58) * kSub) {}

void Histogram::record_ns(uint64_t ns) {
  ++buckets_[bucket_of(ns)];
  ++count_;
  sum_ns_ += ns;
  max_ns_ = std::max(max_ns_, ns);
}

void Histogram::merge(const Histogram& o) {
  for (size_t i = 0; i < buckets_.size(); ++i) buckets_[i] += o.buckets_[i];
  count_ += o.count_;
  sum_ns_ += o.sum_ns_;
  max_ns_ = std::max(max_ns_, o.max_ns_);
}

double Histogram::percentile_ms(double q) const {
  if (count_ == 0) return 0;
  // The smallest value with at least ceil(q * count) values at or below it.
  uint64_t rank = static_cast<uint64_t>(q * static_cast<double>(count_) + 0.999999);
  rank = std::clamp<uint64_t>(rank, 1, count_);
  uint64_t seen = 0;
  for (size_t i = 0; i < buckets_.size(); ++i) {
    seen += buckets_[i];
    if (seen >= rank) return std::min(bucket_value(i), static_cast<double>(max_ns_)) / 1e6;
  }
  return max_ms();
}

double union_secs(std::vector<Span> spans) {
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) { return a.begin_ns < b.begin_ns; });
  uint64_t total = 0, end = 0;
  for (const Span& s : spans) {
    const uint64_t from = std::max(s.begin_ns, end);
    if (s.end_ns > from) total += s.end_ns - from;
    end = std::max(end, s.end_ns);
  }
  return static_cast<double>(total) / 1e9;
}

Counts& Counts::operator+=(const Counts& o) {
  requests += o.requests;
  chunks += o.chunks;
  lookup_hits += o.lookup_hits;
  hits += o.hits;
  stale += o.stale;
  stored += o.stored;
  bytes_loaded += o.bytes_loaded;
  bytes_stored += o.bytes_stored;
  verified_sampled += o.verified_sampled;
  verified_full += o.verified_full;
  mismatches += o.mismatches;
  errors += o.errors;
  prompt_tokens += o.prompt_tokens;
  prefill_tokens += o.prefill_tokens;
  return *this;
}

namespace {
constexpr uint64_t Counts::*kFieldList[] = {
    &Counts::requests,       &Counts::chunks,       &Counts::lookup_hits,      &Counts::hits,
    &Counts::stale,          &Counts::stored,       &Counts::bytes_loaded,     &Counts::bytes_stored,
    &Counts::verified_sampled, &Counts::verified_full, &Counts::mismatches,    &Counts::errors,
    &Counts::prompt_tokens,  &Counts::prefill_tokens,
};
}  // namespace

size_t LiveCounts::index(uint64_t Counts::*field) {
  for (size_t i = 0; i < kFields; ++i)
    if (kFieldList[i] == field) return i;
  return 0;  // unreachable: every field is listed
}

Counts LiveCounts::snapshot() const {
  Counts c;
  for (size_t i = 0; i < kFields; ++i) c.*kFieldList[i] = cells_[i].load(std::memory_order_relaxed);
  return c;
}

}  // namespace kvbench
