#include "harness/check/small_sum.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <type_traits>

#include "harness/check/oracle_detail.h"
#include "impl/element_ops.h"
#include "impl/float_formats.h"
#include "impl/kernels.h"

namespace collcheck {

namespace {

using oracle_detail::LD;

template <typename T>
double widen(uint64_t b) {
  using Ops = ElementOps<T>;
  if constexpr (std::is_floating_point_v<T>) return static_cast<double>(Ops::from_bits(b));
  else return static_cast<double>(Ops::w(Ops::from_bits(b)));  // float16, bfloat16, fp8: exact in float
}

// Every reduction tree's outcome over y[0..p) (2 <= p <= 5), sorted and
// distinct, into out; their number returned. Dynamic programming over the
// subsets of the ranks: a subset's outcomes are those of each split into two
// (each unordered split once: A holds the subset's lowest rank), combined
// with the element step. A subset of k ranks has at most (2k-3)!! outcomes
// before duplicates go (1, 1, 3, 15, 105): 225 in all at p = 5.
// `steps` (fp8 only): fp8_step_table's sums, one load a step.
template <typename T>
size_t tree_outcomes(const uint64_t* y, size_t p, uint64_t* out, [[maybe_unused]] const uint8_t* steps) {
  using Ops = ElementOps<T>;
  uint64_t buf[256];
  uint16_t off[32], len[32];
  const size_t n = size_t{1} << p;
  size_t used = 0;
  for (size_t mask = 1; mask < n; ++mask) {
    off[mask] = static_cast<uint16_t>(used);
    if ((mask & (mask - 1)) == 0) {
      buf[used++] = y[std::countr_zero(mask)];
      len[mask] = 1;
      continue;
    }
    uint64_t* s = &buf[used];
    size_t m = 0;
    // fp8: the outcomes are 8-bit patterns, kept as a set of 256 bits and
    // read out in increasing order (what the sort and unique give, without
    // them: the sort was a third of these calls' derivations).
    [[maybe_unused]] uint64_t seen[4] = {0, 0, 0, 0};
    const size_t low = mask & (~mask + 1), rest = mask ^ low;
    for (size_t sub = (rest - 1) & rest;; sub = (sub - 1) & rest) {
      const size_t a = sub | low, b = mask ^ a;
      for (size_t ia = 0; ia < len[a]; ++ia) {
        if constexpr (sizeof(T) == 1) {
          const uint8_t* row = steps + (buf[off[a] + ia] << 8);
          for (size_t ib = 0; ib < len[b]; ++ib) {
            const uint64_t v = row[buf[off[b] + ib]];
            seen[v >> 6] |= uint64_t{1} << (v & 63);
          }
        } else {
          const T x = Ops::from_bits(buf[off[a] + ia]);
          for (size_t ib = 0; ib < len[b]; ++ib) s[m++] = Ops::to_bits(Ops::sum(x, Ops::from_bits(buf[off[b] + ib])));
        }
      }
      if (sub == 0) break;
    }
    if constexpr (sizeof(T) == 1) {
      for (uint64_t w = 0; w < 4; ++w)
        for (uint64_t bits = seen[w]; bits != 0; bits &= bits - 1) s[m++] = w * 64 + static_cast<uint64_t>(std::countr_zero(bits));
    } else {
      std::sort(s, s + m);
      m = static_cast<size_t>(std::unique(s, s + m) - s);
    }
    len[mask] = static_cast<uint16_t>(m);
    used += m;
  }
  const size_t all = n - 1;
  std::copy(&buf[off[all]], &buf[off[all]] + len[all], out);
  return len[all];
}

}  // namespace

SmallSumOracle::SmallSumOracle(const Reduction& red, size_t ranks) : red_(red), ranks_(ranks) {
  if (!dtype_is_float(red.dtype) || red.combine != Combine::Sum || red.postdiv) return;
  if (ranks < 2 || ranks > kMaxRanks) return;
  // small_outcome_set's ranks: always up to 4, above as one_of_ranks() says.
  if (ranks > static_cast<size_t>(kOneOfAlwaysRanks) && static_cast<int>(ranks) > one_of_ranks()) return;
  const FloatInfo lim = float_info(red.dtype);
  max_finite_ = lim.max_finite;
  // expect_sum: no order overflows or saturates where pos (1 + ref_err) g < M
  // and likewise for neg, in long double. The double sum of at most five
  // magnitudes here is within 2^-50 of that one; the margin of 2^-30 keeps
  // every element this test passes clear of the full way's.
  const double ref_err = static_cast<double>(2 * static_cast<LD>(ranks) * oracle_detail::kLdEps);
  const double E = static_cast<double>(static_cast<LD>(steps_error(red.dtype, static_cast<int>(ranks) - 1)) *
                                       (1 + oracle_detail::kWiden));
  overflow_scale_ = (1 + ref_err) * (1 + E) * (1 + 0x1p-30);
  steps_ = fp8_step_table(red.dtype, Combine::Sum);
  fn_ = visit_dtype(red.dtype, [](auto tag) -> Fn {
    using T = decltype(tag);
    if constexpr (std::is_integral_v<T>) return nullptr;
    else return &SmallSumOracle::derive<T>;
  });
}

// expect_element's way, for these calls: the ranks' contributions y (the
// pre-multiplied inputs, as NCCL computes them); a NaN or Inf among them, or a
// sum of magnitudes that some order may carry past the largest finite value,
// is the full way's. Otherwise every order's sum is finite, and the full way
// answers with the set of every tree's outcome (small_outcome_set), which is a
// single value (Bitwise) exactly where the sums are exact too (its fold).
template <typename T>
bool SmallSumOracle::derive(const SmallSumOracle& self, std::span<const uint64_t> values, Expectation& e) {
  const size_t p = self.ranks_;
  if (values.size() != p) return false;
  uint64_t y[kMaxRanks];
  double pos = 0, neg = 0;
  for (size_t r = 0; r < p; ++r) {
    if constexpr (sizeof(T) == 1) y[r] = premul_bits_fast(self.red_, values[r]);  // a table
    else y[r] = premul_bits_as<T>(self.red_, values[r]);
    const double v = widen<T>(y[r]);
    if (!std::isfinite(v)) return false;
    (v > 0 ? pos : neg) += std::fabs(v);
  }
  if (!(pos * self.overflow_scale_ < self.max_finite_) || !(neg * self.overflow_scale_ < self.max_finite_)) return false;
  uint64_t out[128];
  const size_t n = tree_outcomes<T>(y, p, out, self.steps_);
  for (size_t k = 0; k < n; ++k)
    if (!std::isfinite(widen<T>(out[k]))) return false;  // not reachable past the test above; the full way's if it were
  e.kind = n == 1 ? CheckKind::Bitwise : CheckKind::OneOf;
  e.bits = n == 1 ? out[0] : 0;
  e.exact = 0;
  e.bound = 0;
  e.lo = 1;
  e.hi = 0;
  if (n == 1) e.allowed.clear();
  else e.allowed.assign(out, out + n);
  return true;
}

}  // namespace collcheck
