// A test's seed: COLLCHECK_SEED when set (to repeat a run), else a fresh
// one; printed either way, so a failure names the seed that shows it.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>

namespace testutil {

inline uint64_t test_seed() {
  const char* env = std::getenv("COLLCHECK_SEED");
  const uint64_t seed = env ? std::strtoull(env, nullptr, 10) : std::random_device{}();
  std::printf("[ seed    ] seed %llu\n", static_cast<unsigned long long>(seed));
  return seed;
}

}  // namespace testutil
