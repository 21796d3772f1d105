// The data of a scenario's collective call: element i of the input of the
// group's rank q, a pure function of the call's seed, so that every rank and
// every process of an MPI world computes the same.
//
// Where the dtype and op allow it (float32, float64 and the 32- and 64-bit
// integers; sum, max and min), the data is split: element i of rank q is
// A(i) + B(q) (over 4, for floats), with A and B drawn from the seed and
// small enough that every sum of p of them is exact in any order. The result
// of element i then has a closed form, p·A(i) + ΣB, A(i) + max B or
// A(i) + min B, checked in O(1) per element instead of O(p); and A is drawn
// once per call in a process, not once per rank. A 128-rank replay of 40
// all-reduces of 1 MiB spent most of its time making and checking inputs.
// A rank's contribution is still told apart (B differs from rank to rank),
// and so is an element's place (A differs from element to element).
//
// For the other dtypes and ops the data is harness/model's exact data
// (input_element), and there is no closed form.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "impl/semantics.h"

namespace collcheck {

class CallData {
 public:
  // n: the elements of each rank's input.
  CallData(DType t, RedOp op, int p, uint64_t seed, size_t n);

  // The bits of element i of the group's rank q.
  uint64_t element(int q, size_t i) const;
  // Rank q's whole input (n elements of the dtype).
  void fill(int q, void* out) const;
  // Whether the reduction has a closed form (reduced()).
  bool split() const { return a_ != nullptr; }
  // The bits of the reduction of element i over the p ranks (split() only).
  uint64_t reduced(size_t i) const;

 private:
  uint64_t bits_of(int64_t k) const;
  DType t_;
  RedOp op_;
  int p_;
  uint64_t seed_;
  size_t n_;
  std::shared_ptr<const std::vector<int32_t>> a_;
  std::vector<int64_t> b_;
  int64_t b_sum_ = 0, b_max_ = 0, b_min_ = 0;
};

}  // namespace collcheck
