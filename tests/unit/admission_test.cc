// Unit tests of tiering::AdmissionPolicy (tiering/admission.h): everything is admitted while the
// disk keeps up; when it falls behind, values read since written keep the budget and the rest
// are admitted at random, less as the bucket empties; the rate comes from the writer's batches.
#include <doctest.h>

#include <cstdint>
#include <random>

#include "tiering/admission.h"

using namespace tiering;

namespace {

constexpr uint64_t MiB = 1 << 20;

// Offers `n` values of `size` bytes at one instant (no refill); returns how many were admitted.
int offer(AdmissionPolicy& p, int n, uint64_t size, bool reused, std::mt19937_64& rng,
          int64_t now = 1000) {
  int admitted = 0;
  for (int i = 0; i < n; ++i)
    admitted += p.decide(size, reused, 0, rng(), now) == AdmissionDecision::kAdmit;
  return admitted;
}

}  // namespace

TEST_CASE("a disk that keeps up admits every value") {
  AdmissionPolicy p(256 * MiB, 100 * MiB);  // 100 MB/s of budget, 100 MB deep
  std::mt19937_64 rng(1);
  // 10 ms apart, 512 KiB each: 50 MB/s offered against 100 MB/s.
  int admitted = 0;
  for (int i = 0; i < 1000; ++i)
    admitted += p.decide(512 << 10, false, 0, rng(), 1000 + 10 * i) == AdmissionDecision::kAdmit;
  CHECK(admitted == 1000);
}

TEST_CASE("behind the disk, values read since written are admitted over never-read ones") {
  AdmissionPolicy p(256 * MiB, 8 * MiB);  // 8 MB/s: an 8 MB bucket
  std::mt19937_64 rng(2);
  CHECK(p.depth() == 8 * MiB);
  // A burst of never-read values at one instant: admitted while the bucket is above a quarter,
  // at random between three quarters and a quarter, never below.
  const int unread = offer(p, 64, 256 << 10, false, rng);  // 16 MiB offered
  CHECK(unread >= 16);                      // at least the top quarter of the bucket
  CHECK(unread <= 24);                      // never the bottom quarter
  CHECK(p.tokens() >= 2 * MiB - (256 << 10));
  // Read values still get what is left, the bottom quarter kept for them included, and then
  // the bucket is dry.
  const uint64_t left = p.tokens();
  const int reused = offer(p, 64, 256 << 10, true, rng);
  CHECK(reused == static_cast<int>(left / (256 << 10)));
  CHECK(reused >= 8);
  CHECK(offer(p, 16, 256 << 10, true, rng) == 0);
  CHECK(offer(p, 16, 256 << 10, false, rng) == 0);
  // A second later the bucket is full again: admitted again.
  CHECK(offer(p, 4, 256 << 10, false, rng, 2000) == 4);
}

TEST_CASE("the random admission falls with the bucket's level") {
  // Half the offers admitted at mid level: p = 1 at 3/4, 0 at 1/4 of the depth.
  AdmissionPolicy p(256 * MiB, 8 * MiB);
  std::mt19937_64 rng(3);
  // Take the bucket to half with read values (admitted deterministically).
  CHECK(offer(p, 16, 256 << 10, true, rng) == 16);
  CHECK(p.tokens() == 4 * MiB);
  int admitted = 0;
  for (int i = 0; i < 4000; ++i) {
    // Tiny values: the level stays at about half.
    if (p.decide(1, false, 0, rng(), 1000) == AdmissionDecision::kAdmit) ++admitted;
  }
  CHECK(admitted > 1700);
  CHECK(admitted < 2300);
}

TEST_CASE("the queue's bound holds whatever the budget") {
  AdmissionPolicy p(16 * MiB, 0);
  std::mt19937_64 rng(4);
  CHECK(p.decide(MiB, true, 15 * MiB + 1, rng(), 1000) == AdmissionDecision::kReject);
  CHECK(p.decide(MiB, true, 15 * MiB, rng(), 1000) == AdmissionDecision::kAdmit);
  // An empty queue takes a value larger than the bucket, when the bucket is full.
  AdmissionPolicy q(4 * MiB, 4 * MiB);
  CHECK(q.decide(64 * MiB, false, 0, rng(), 1000) == AdmissionDecision::kAdmit);
  CHECK(q.decide(64 * MiB, true, 0, rng(), 1000) == AdmissionDecision::kReject);
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
