// The oracle: for every element of an all-reduce it says what the correct
// result is and which comparison applies.
//
//   Bitwise  the result is independent of the reduction order (integers, max,
//            min, and "exactly representable" float data where every partial
//            sum or product in any order is exact): it must match bit for bit.
//            A NaN matches any NaN (GPUs return a canonical NaN, CPUs propagate
//            a payload).
//   Bound    float sum/prod/avg/premulsum whose result depends on the order,
//            above one_of_ranks(): |result - exact| <= bound, with the bound
//            derived in oracle.cc.
//   OneOf    the order can change *which* value comes out: the oracle
//            enumerates every binary reduction tree and accepts exactly the set
//            of outcomes some order gives. Always at p <= 4 (1, 3 and 15 trees:
//            at p = 2 the one right result, so Bitwise), up to one_of_ranks() (5);
//            and up to p = 8 where some order overflows or saturates (a special
//            value, +Inf or -Inf, may come out of some orders only).
//   Interval the same situation where enumeration is too costly (p > 8, or
//            more than 64 outcomes): a rigorous superset of every order's
//            outcome, a finite range [lo, hi] plus the special values (+-Inf,
//            NaN, a signed zero) that some order can reach. The derivation,
//            covering overflow in some orders only, underflow into and through
//            the subnormals, and fp8 saturation at intermediate steps, is in
//            oracle.cc. Reports count these separately, so a loose rule cannot
//            hide behind a pass.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "impl/semantics.h"

namespace collcheck {

enum class CheckKind : uint8_t { Bitwise, Bound, OneOf, Interval };

// Float sums and products of up to one_of_ranks() ranks are checked against
// the exact set of every order's outcome (OneOf; Bitwise at p = 2) instead of
// the Bound. Always at p <= 4 (1, 3 and 15 trees); above, where the set has at
// most 256 outcomes within 200,000 combining steps: by default at p = 5 (105
// trees, about 2.5 us an element), up to p = 8 with verify --one-of-ranks (about
// 100 us an element). Process-wide: set once, before any check.
inline constexpr int kOneOfAlwaysRanks = 4, kOneOfDefaultRanks = 5, kOneOfMaxRanks = 8;
void set_one_of_ranks(int n);  // throws std::invalid_argument outside 4..8
int one_of_ranks();
inline constexpr size_t kCheckKinds = 4;
std::string_view check_kind_name(CheckKind k);

struct Expectation {
  CheckKind kind = CheckKind::Bitwise;
  uint64_t bits = 0;                 // Bitwise
  long double exact = 0;             // Bound: the exact (ideal) value, to 2^-62 relative
  long double bound = 0;             // Bound: allowed |result - exact|, the reference's own error included
                                     // (long double: float64 bounds can be below the smallest double)
  double lo = 1, hi = 0;             // Interval: finite nonzero results (and, for sums, zero) in [lo, hi]; empty if lo > hi
  std::vector<uint64_t> allowed;     // OneOf: every outcome; Interval: the special values (NaNs canonicalised)
  std::string describe(DType t) const;
};

struct Verdict {
  bool ok = true;
  double err_units = 0;  // |result - exact| / bound for Bound; 0 or +inf otherwise
};

// Where some order of an element's reduction overflows, saturates or
// underflows, expect_element enumerates every order's outcome (p <= 8) before
// it falls back to an interval that holds for any order. That costs up to
// 60,000 combining steps an element (float products of extreme values at
// p = 6 to 8: 20-100 us), seconds for one call of a large count. While a
// budget lives on a thread, those enumerations take at most `steps` combining
// steps in all there; past that an element gets its interval (sound, looser).
// The small worlds' sets (small_outcome_set, --one-of-ranks) are not limited.
class EnumerationBudget {
 public:
  explicit EnumerationBudget(size_t steps);
  ~EnumerationBudget();
  EnumerationBudget(const EnumerationBudget&) = delete;
  EnumerationBudget& operator=(const EnumerationBudget&) = delete;

 private:
  size_t left_;
  size_t* outer_;  // the budget this one replaced on the thread
};
// How many times this thread's expectations have consulted an
// EnumerationBudget (whether or not one lived): an expectation derived with no
// consult in between depends on its inputs alone (ExpectationMemo).
size_t enumeration_budget_consults();
// A call's budget in verify (CallChecker::oracle): 50-70 ms on this 2-core host.
inline constexpr size_t kEnumerationStepsPerCall = size_t{1} << 22;

// values: the p ranks' inputs for one element, as element bits.
Expectation expect_element(const Reduction& red, std::span<const uint64_t> values);
Verdict judge(const Reduction& red, const Expectation& e, uint64_t result_bits);

// Worst-case relative error of one rounded step of the dtype (fp8 rounds twice:
// to float16, then to fp8).
double step_roundoff(DType t);
// The largest absolute error of one rounded step whose exact result lies in the
// subnormal range: half the smallest subnormal, plus what an intermediate
// format adds (fp8 rounds to float16 first; bfloat16 products can reach
// float's subnormals first).
long double subnormal_step_error(DType t);
// (1+u)^n - 1: the bound on the relative error of n rounded steps. This is what
// gamma(n) = n u / (1 - n u) bounds from above, and unlike gamma it stays finite
// when n u >= 1, as it does for fp8 with many ranks.
double steps_error(DType t, int n);

// load_element and store_element: impl/dtype.h.
std::string format_element(DType t, uint64_t bits);  // "0x3c00 (1)"

struct CheckSummary {
  size_t checked = 0;
  size_t wrong = 0;
  double max_err_units = 0;  // largest err_units over Bound elements that passed or failed
  size_t by_kind[kCheckKinds] = {0, 0, 0, 0};
  std::optional<size_t> first_wrong;
  std::string first_wrong_detail;
};

// Whether every reduction order gives the same bits (integers wrap, max and
// min pick): the expectation is then the rank-order fold, bit for bit
// (expect_element's Bitwise class), and a check may fold once and compare.
inline bool order_free(const Reduction& red) {
  return !dtype_is_float(red.dtype) || red.combine == Combine::Max || red.combine == Combine::Min;
}

// Checks `result` (count elements) against the inputs of every rank. The
// order-free classes (integers, max, min) fold the inputs with the reduce
// kernels a block at a time and compare bit for bit; a plain float32/float64
// sum is decided in double arithmetic where the decision is certain. Every
// other element, and every element those do not pass, goes the full way
// (expect_element, judge), so the verdicts are check_all_reduce_elementwise's.
CheckSummary check_all_reduce(const Reduction& red, std::span<const void* const> inputs, const void* result,
                              size_t count);
// The full way for every element: the reference check_all_reduce is held to.
CheckSummary check_all_reduce_elementwise(const Reduction& red, std::span<const void* const> inputs,
                                          const void* result, size_t count);

}  // namespace collcheck
