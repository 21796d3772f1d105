// What peers_test.cc and peers_mpi_test.cc share (one executable).
#pragma once

#include <cstdint>

#include "properties/case.h"

namespace peers_test {

// A seeded case of p ranks.
inline collcheck::Case seeded(int p, collcheck::DType t, collcheck::RedOp op, size_t count, collcheck::DataClass data, uint64_t seed, bool inplace = false) {
  collcheck::Case c;
  c.p = p;
  c.dtype = t;
  c.op = op;
  c.count = count;
  c.data = data;
  c.seed = seed;
  c.inplace = inplace;
  return c;
}

}  // namespace peers_test

using peers_test::seeded;
