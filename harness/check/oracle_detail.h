// What the oracle's two files share (oracle.cc: the expectation of one
// element; oracle_check.cc: the check of a whole output): the reference
// arithmetic's type and its error constants. Not for use outside the oracle.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <limits>
#include <optional>
#include <span>
#include <utility>
#include <vector>

#include "harness/check/oracle.h"

namespace collcheck::oracle_detail {

using LD = long double;
static_assert(std::numeric_limits<LD>::digits >= 64, "the oracle's reference values need a 64-bit significand");
constexpr LD kLdEps = 0x1p-63L;  // at least the relative error of one long double operation
constexpr LD kWiden = 0x1p-40L;  // widening of every bound for the double arithmetic that derived it

// A thread's last N answers of a pure function of a small key, most recent
// first found: the oracle asks for the same few (a dtype's error over n steps,
// a power) per element, and each is a libm call.
template <typename Key, typename Value, size_t N>
class RecentValues {
 public:
  template <typename Compute>
  Value get(const Key& key, Compute compute) {
    for (size_t i = 0; i < used_; ++i)
      if (keys_[i] == key) return values_[i];
    const size_t slot = next_++ % N;
    keys_[slot] = key;
    values_[slot] = compute();
    used_ = std::min(used_ + 1, N);
    return values_[slot];
  }

 private:
  std::array<Key, N> keys_{};
  std::array<Value, N> values_{};
  size_t used_ = 0, next_ = 0;
};

// oracle.cc: element helpers.
uint64_t canonical_nan(DType t);  // any NaN of t, canonicalised
bool is_nan_bits(DType t, uint64_t b);
uint64_t fold(const Reduction& red, std::span<const uint64_t> ys);  // rank order, with the element semantics
// Every result some reduction order can give, when there are few (else none).
std::optional<std::vector<uint64_t>> small_outcome_set(const Reduction& red, std::span<const uint64_t> ys);
// 2^k as a double, exactly (k in the double range, subnormals included).
inline double pow2(int k) {
  if (k > 1023) return std::numeric_limits<double>::infinity();
  if (k >= -1022) return std::bit_cast<double>(static_cast<uint64_t>(k + 1023) << 52);
  if (k >= -1074) return std::bit_cast<double>(uint64_t{1} << (k + 1074));
  return 0;
}
// log2 of lowest_bit_weight(v), from the bits (v finite, nonzero).
inline int lowest_bit_exponent(double v) {
  const uint64_t b = std::bit_cast<uint64_t>(v) & 0x7fffffffffffffffull;
  const int exp = static_cast<int>(b >> 52);
  const uint64_t frac = b & ((uint64_t{1} << 52) - 1);
  const uint64_t m = exp ? frac | (uint64_t{1} << 52) : frac;
  return (exp ? exp - 1075 : -1074) + std::countr_zero(m);
}
// Weight of the lowest set bit of v's significand (v finite, nonzero).
inline double lowest_bit_weight(double v) { return pow2(lowest_bit_exponent(v)); }

// oracle.cc: every outcome of combining ys in any binary-tree order (false
// when a set grows past cap or the work past budget combining steps).
bool all_order_outcomes(const Reduction& red, std::span<const uint64_t> ys, std::vector<uint64_t>& out, size_t cap,
                        size_t budget);
// The same, saying the combining steps it took (`work`); `general`: by the
// hash-table way for every dtype, not the 1-byte dtypes' own (for the tests
// that hold one to the other).
bool all_order_outcomes_with_work(const Reduction& red, std::span<const uint64_t> ys, std::vector<uint64_t>& out,
                                  size_t cap, size_t budget, size_t& work, bool general);
// The same where some order overflows, saturates or underflows (p <= 8, at
// most 64 outcomes, 60,000 steps), within what is left of the thread's
// EnumerationBudget, if one lives (false once it is spent).
bool special_value_outcomes(const Reduction& red, std::span<const uint64_t> ys, std::vector<uint64_t>& out);

// oracle_model.cc: the arithmetic of the bounds, and the model of a sum.
LD pow_up(LD d, int n);    // (1 + d)^n rounded up
LD pow_down(LD d, int n);  // (1 - d)^n rounded down
double round_down(LD v);
double round_up(LD v);
uint64_t signed_bits(DType t, bool negative, double magnitude);
Expectation interval(DType t, bool has_range, LD lo, LD hi, LD slack, std::vector<uint64_t> specials);
Expectation bitwise(uint64_t bits);
Expectation expect_sum(const Reduction& red, std::span<const uint64_t> values, std::span<const uint64_t> ys,
                       std::span<const double> y);
// oracle_prod.cc: the model of a product.
Expectation expect_prod(const Reduction& red, std::span<const uint64_t> ys, std::span<const double> y);

}  // namespace collcheck::oracle_detail
