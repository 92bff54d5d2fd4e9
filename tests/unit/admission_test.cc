// Unit tests of tiering::AdmissionPolicy (tiering/admission.h): everything is admitted while the
// disk keeps up; when it falls behind, values read since written keep the budget and the rest
// are admitted in runs; the rate comes from the writer's batches.
#include <doctest.h>

#include <cstdint>

#include "tiering/admission.h"

using namespace tiering;

namespace {

constexpr uint64_t MiB = 1 << 20;

// Offers `n` values of `size` bytes at one instant (no refill); returns how many were admitted.
int offer(AdmissionPolicy& p, int n, uint64_t size, bool reused, int64_t now = 1000) {
  int admitted = 0;
  for (int i = 0; i < n; ++i)
    admitted += p.decide(size, reused, 0, now) == AdmissionDecision::kAdmit;
  return admitted;
}

}  // namespace

TEST_CASE("a disk that keeps up admits every value") {
  AdmissionPolicy p(256 * MiB, 100 * MiB);  // 100 MB/s of budget, 100 MB deep
  // 10 ms apart, 512 KiB each: 50 MB/s offered against 100 MB/s.
  int admitted = 0;
  for (int i = 0; i < 1000; ++i)
    admitted += p.decide(512 << 10, false, 0, 1000 + 10 * i) == AdmissionDecision::kAdmit;
  CHECK(admitted == 1000);
}

TEST_CASE("behind the disk, values read since written are admitted over never-read ones") {
  AdmissionPolicy p(256 * MiB, 8 * MiB);  // 8 MB/s: an 8 MB bucket
  CHECK(p.depth() == 8 * MiB);
  // A burst of never-read values at one instant: a run, down to a quarter of the bucket.
  CHECK(offer(p, 64, 256 << 10, false) == 24);  // 6 MiB of the 16 MiB offered
  CHECK(p.tokens() == 2 * MiB);
  // Read values get the quarter kept for them, and then the bucket is dry.
  CHECK(offer(p, 64, 256 << 10, true) == 8);
  CHECK(offer(p, 16, 256 << 10, true) == 0);
  CHECK(offer(p, 16, 256 << 10, false) == 0);
  // A second later the bucket is full again: admitted again.
  CHECK(offer(p, 4, 256 << 10, false, 2000) == 4);
}

TEST_CASE("never-read values are admitted in runs: none between a quarter and 3/4 on the way up") {
  AdmissionPolicy p(256 * MiB, 8 * MiB);
  CHECK(offer(p, 64, 256 << 10, false) == 24);  // the run ends at a quarter (2 MiB)
  // +250 ms: 4 MiB in the bucket, under 3/4: still no run (read values would get in).
  CHECK(offer(p, 1, 256 << 10, false, 1250) == 0);
  CHECK(p.tokens() == 4 * MiB);
  // +500 ms: 6 MiB, three quarters: a run of 4 MiB starts.
  CHECK(offer(p, 64, 256 << 10, false, 1500) == 16);
  CHECK(p.tokens() == 2 * MiB);
}

TEST_CASE("the queue's bound holds whatever the budget") {
  AdmissionPolicy p(16 * MiB, 0);
  CHECK(p.decide(MiB, true, 15 * MiB + 1, 1000) == AdmissionDecision::kReject);
  CHECK(p.decide(MiB, true, 15 * MiB, 1000) == AdmissionDecision::kAdmit);
  // Its last quarter is kept for read values: a queue the writer drains slower than the budget
  // refills still takes them.
  CHECK(p.decide(MiB, false, 11 * MiB + 1, 1000) == AdmissionDecision::kReject);
  CHECK(p.decide(MiB, false, 11 * MiB, 1000) == AdmissionDecision::kAdmit);
  CHECK(p.decide(MiB, true, 12 * MiB, 1000) == AdmissionDecision::kAdmit);
  // An empty queue takes a value larger than the bucket, when the bucket is full.
  AdmissionPolicy q(4 * MiB, 4 * MiB);
  CHECK(q.decide(64 * MiB, false, 0, 1000) == AdmissionDecision::kAdmit);
  CHECK(q.decide(64 * MiB, true, 0, 1000) == AdmissionDecision::kReject);
}

TEST_CASE("the budget's rate is the writer's measured speed, capped by max_write_rate") {
  AdmissionPolicy p(1024 * MiB, 0);
  CHECK(p.measured_rate() == 0);
  CHECK(p.rate() == AdmissionPolicy::kInitialRate);
  // 100 ms batches of 10 MiB: 100 MiB/s, measured once 250 ms of writing are seen.
  p.record_write(10 * MiB, 100'000);
  p.record_write(10 * MiB, 100'000);
  CHECK(p.measured_rate() == 0);
  p.record_write(10 * MiB, 100'000);
  CHECK(p.measured_rate() == 100 * MiB);
  CHECK(p.rate() == 100 * MiB);
  CHECK(p.depth() == 100 * MiB);
  // The next window at 300 MiB/s averages with the last.
  for (int i = 0; i < 3; ++i) p.record_write(30 * MiB, 100'000);
  CHECK(p.measured_rate() == 200 * MiB);
  p.set_max_rate(50 * MiB);
  CHECK(p.rate() == 50 * MiB);
  CHECK(p.measured_rate() == 200 * MiB);
  p.set_max_rate(1 * MiB);
  CHECK(p.depth() == AdmissionPolicy::kMinDepth);
}
