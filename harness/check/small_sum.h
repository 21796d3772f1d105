// The expectation of a float sum (plain, avg or premulsum) over 2 to 5 ranks,
// derived in the dtype's own arithmetic for a whole call. There the oracle's
// answer (expect_element) is the set of every reduction tree's outcome (3, 15
// or 105 trees: small_outcome_set) wherever no order can overflow or
// saturate; this derives that set with the same element steps
// (combine_elements) over the subsets of the ranks, without the general
// enumeration's hash tables, its budget test or the long double model around
// it, and the per-call constants once. Where it cannot be certain (an input
// that is Inf or NaN, an order that may overflow or saturate, within a margin
// of 2^-30 of the full way's test) it gives no answer and the caller takes
// expect_element. Its answers are expect_element's, field for field
// (tests/small_sum_test.cc holds it to that).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "harness/check/oracle.h"

namespace collcheck {

class SmallSumOracle {
 public:
  // For the elements of one call: `red` over `ranks` ranks.
  SmallSumOracle(const Reduction& red, size_t ranks);
  // Whether this call is one it can answer for at all (float sum, avg or
  // premulsum; 2 to 4 ranks, or 5 where one_of_ranks() takes the set there).
  bool applies() const { return fn_ != nullptr; }
  // True: `e` is expect_element(red, values), every field. False: no answer.
  bool expect(std::span<const uint64_t> values, Expectation& e) const {
    return fn_ != nullptr && fn_(*this, values, e);
  }

  // The most ranks it ever answers for.
  static constexpr size_t kMaxRanks = 5;

 private:
  using Fn = bool (*)(const SmallSumOracle&, std::span<const uint64_t>, Expectation&);
  template <typename T>
  static bool derive(const SmallSumOracle& self, std::span<const uint64_t> values, Expectation& e);

  Reduction red_;
  size_t ranks_ = 0;
  double max_finite_ = 0;
  // What a sum of magnitudes is multiplied by before the overflow test: the
  // full way's (1 + reference error) (1 + E(p-1)), and the margin.
  double overflow_scale_ = 0;
  Fn fn_ = nullptr;
  const uint8_t* steps_ = nullptr;  // fp8: fp8_step_table's sums
};

}  // namespace collcheck
