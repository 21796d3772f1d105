// A property case: one all-reduce call as pure data. World size, dtype, op (with
// the pre-multiplier of premulsum), count, in-place or not, and every rank's
// input. Inputs come from a data class and a seed (cheap to send and rebuild
// anywhere) or are explicit element bits (what shrinking produces).
//
// A case round-trips through a one-word replay token, so that a failure prints
// one command line that replays exactly that case:
//   v1:p2:float32:sum:s1:n3:oop:x:3f800000.0.40400000/0.0.3f800000
//   v1:p4:int8:avg:s1:n1000:ip:d:wrap:9e3779b97f4a7c15
// (fields: version, ranks, dtype, op, scalar, count, oop|ip, then either
// x:<rank>/<rank>/... with '.'-separated hex element bits, or d:<class>:<seed>.
// The scalar is a decimal or a C99 hex float.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "harness/data.h"
#include "impl/semantics.h"

namespace collcheck {

struct Case {
  int p = 1;
  DType dtype = DType::Float32;
  RedOp op = RedOp::Sum;
  double scalar = 1.0;  // premulsum's multiplier (ignored by other ops)
  size_t count = 0;
  bool inplace = false;
  // Seeded inputs (explicit == false)...
  DataClass data = DataClass::Exact;
  uint64_t seed = 0;
  // ...or explicit ones: values[rank][i], element bits.
  bool explicit_values = false;
  std::vector<std::vector<uint64_t>> values;

  uint64_t input(int rank, size_t i) const;
  // Turns seeded inputs into explicit ones (a no-op if already explicit).
  void make_explicit();
  // Each rank's input as a byte buffer of the dtype.
  std::vector<std::vector<std::byte>> input_buffers() const;
  Reduction reduction() const { return resolve_reduction(dtype, op, p, scalar); }
};

bool operator==(const Case& a, const Case& b);

std::string encode_case(const Case& c);
// Throws std::invalid_argument naming the field that is malformed.
Case decode_case(std::string_view token);

// "p=2 float32 sum count=3 out-of-place, data exact seed 0x..." on one line.
std::string case_summary(const Case& c);
// The summary plus every rank's values in hex and decimal, at most
// `max_elements` per rank.
std::string describe_case(const Case& c, size_t max_elements = 16);

}  // namespace collcheck
