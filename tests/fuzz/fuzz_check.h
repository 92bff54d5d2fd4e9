// tests/fuzz/fuzz_check.h - the fuzz targets' invariant check: CHECK(cond) aborts with the
// target's file and the condition when it does not hold, so libFuzzer keeps the input as a
// crash (scripts/fuzz.sh fails the run and saves it).
#pragma once

#include <cstdio>
#include <cstdlib>

#define CHECK(cond)                                                                    \
  do {                                                                                 \
    if (!(cond)) {                                                                     \
      std::fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                    \
    }                                                                                  \
  } while (0)
