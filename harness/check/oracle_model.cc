// The oracle's model of a sum and a product in any reduction order (the
// bounds of docs/oracle.md): the expectation of one element when the order
// matters. expect_element (oracle.cc) hands it the contributions.
#include "harness/check/oracle.h"

#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <stdexcept>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <vector>

#include "harness/check/oracle_detail.h"
#include "harness/check/oracle_scaled.h"
#include "impl/element_ops.h"
#include "impl/float_formats.h"
#include "impl/kernels.h"

namespace collcheck {
namespace oracle_detail {

// ---- The model -------------------------------------------------------------
//
// Notation: u = step_roundoff(T) (the worst relative error of one rounded step
// whose exact result z is a normal number), h = subnormal_step_error(T) (the
// worst absolute error when z is subnormal), E(n) = (1+u)^n - 1, M = the largest
// finite value, eta = the smallest subnormal, mn = the smallest normal, and y_i
// = the value rank i contributes: x_i itself, or fl(x_i * s) for avg and
// premulsum, which the oracle computes exactly as NCCL does. Any reduction order
// is a binary tree of p-1 steps over the y_i. Rounding is monotone: a <= a' gives
// fl(a op b) <= fl(a' op b) for magnitudes, and saturation (fp8) is monotone too.
//
// Reference values are computed in long double (a 64-bit significand and an
// exponent range far beyond float64's); products keep their exponent apart
// (Scaled), so nothing the reference computes overflows or underflows. Every
// bound adds the reference's own rounding error, 2p * 2^-63 relative, and is
// widened by 2^-40 of itself for the double arithmetic that computed E(n).
//
// SUM (also avg and premulsum, over the y_i). Let P = sum of the positive y_i,
// N = sum of the |negative| y_i, S = sum y_i, A = P + N, g = 1 + E(p-1).
// (s1) A partial sum over k+1 leaves is within E(k) * (its sum of |y|) of its
//      exact value when nothing overflows: each step gives fl(z) = z(1+d), |d| <= u,
//      and a step whose result is subnormal is exact (sums of multiples of eta
//      below mn are representable), so underflow adds nothing.
// (s2) Replacing every negative leaf by 0 can only raise every node (monotone),
//      so every node is <= P g; likewise >= -N g. If P g < M and N g < M no step
//      overflows or saturates in any order, and |r - S| <= E(p-1) A: the Bound.
// (s3) Float16, bfloat16, float32, float64 overflow to +-Inf, and an Inf never
//      becomes finite again (Inf + finite = Inf, Inf + -Inf = NaN). So a finite r
//      comes from an order where nothing overflowed and (s1) holds; +Inf needs
//      P g >= M or a +Inf input, -Inf likewise, NaN needs both signs of Inf. A
//      +Inf input gives +Inf, or NaN if -Inf is reachable.
// (s4) fp8 saturates to +-M instead. r stays within [max(-M, -N g), min(M, P g)]
//      by (s2). If only +M saturation is reachable (N g < M), a saturated node is
//      below what the unsaturated step would give, so by monotonicity r <= S + E A.
//      For the lower side, take the topmost saturated nodes (k >= 1 of them, each
//      exactly M): above them nothing saturates, so by (s1) over the leaves
//      {M (k times)} + the rest, r >= k M (1 - E) + P'(1 - E) - N'(1 + E)
//      >= M (1 - E) - N (1 + E) when E < 1; or r >= S - E A if nothing saturated.
//      -M alone is symmetric; with both reachable only (s2) is used.
//
// AVG and PREMULSUM in the Bound case are checked against the ideal value
// sum x_i c (c = 1/p, or the scalar): y_i = x_i s (1+d_i) + e_i with s = c(1+d_s)
// (d_s computed exactly from the scalar NCCL uses), |d_i| <= u, |e_i| <= h, so
// |r - sum x_i c| <= E(p-1) A + ((1+d_s)(1+u) - 1) sum|x_i c| + p h. An
// implementation that sums first and divides last passes too.
//

// (1 + d)^n rounded up, (1 - d)^n rounded down.
// Memoized per thread: an element's expectation asks for the same few
// (d, n) over and over (d is the dtype's unit roundoff unless underflow
// widens it), and powl is the costliest step of a product's expectation.
LD pow_memo(LD base, int n) {
  thread_local RecentValues<std::pair<LD, int>, LD, 8> recent;
  return recent.get({base, n}, [&] { return std::pow(base, static_cast<LD>(n)); });
}
LD pow_up(LD d, int n) { return n <= 0 ? 1 : pow_memo(1 + d, n) * (1 + 64 * kLdEps); }
LD pow_down(LD d, int n) { return n <= 0 ? 1 : pow_memo(1 - d, n) * (1 - 64 * kLdEps); }

double round_down(LD v) {
  double d = static_cast<double>(v);
  if (static_cast<LD>(d) > v) d = std::nextafter(d, -std::numeric_limits<double>::infinity());
  return d;
}
double round_up(LD v) {
  double d = static_cast<double>(v);
  if (static_cast<LD>(d) < v) d = std::nextafter(d, std::numeric_limits<double>::infinity());
  return d;
}

Expectation bitwise(uint64_t bits) {
  Expectation e;
  e.kind = CheckKind::Bitwise;
  e.bits = bits;
  return e;
}

uint64_t signed_bits(DType t, bool negative, double magnitude) {
  return to_element_bits(t, negative ? -magnitude : magnitude);
}

// An Interval from a finite range [lo, hi] (widened by `slack` and rounded
// outward) and the special values some order can reach; with no finite range it
// collapses into Bitwise or OneOf, which is what it then is.
Expectation interval(DType t, bool has_range, LD lo, LD hi, LD slack, std::vector<uint64_t> specials) {
  const uint64_t nan = canonical_nan(t);
  for (uint64_t& b : specials)
    if (is_nan_bits(t, b)) b = nan;
  std::sort(specials.begin(), specials.end());
  specials.erase(std::unique(specials.begin(), specials.end()), specials.end());
  Expectation e;
  if (!has_range || lo > hi) {
    if (specials.size() == 1) return bitwise(specials[0]);
    e.kind = CheckKind::OneOf;
    e.allowed = std::move(specials);
    return e;
  }
  e.kind = CheckKind::Interval;
  e.lo = round_down(lo - slack);
  e.hi = round_up(hi + slack);
  e.allowed = std::move(specials);
  return e;
}

// Exactly representable sums: every partial sum in any order is a multiple of
// the smallest lowest-set-bit weight q and at most A, so it is exact when
// A / q <= 2^precision (and A <= M).
bool sums_are_exact(const FloatInfo& lim, std::span<const double> y, double sum_abs) {
  double q = std::numeric_limits<double>::infinity();
  for (double v : y)
    if (v != 0) q = std::min(q, lowest_bit_weight(v));
  return q == std::numeric_limits<double>::infinity() ||
         (sum_abs / q <= pow2(lim.precision) && sum_abs <= lim.max_finite);
}

Expectation expect_sum(const Reduction& red, std::span<const uint64_t> values, std::span<const uint64_t> ys,
                       std::span<const double> y) {
  const DType t = red.dtype;
  const FloatInfo lim = float_info(t);
  const size_t p = ys.size();
  const LD M = lim.max_finite;
  LD pos = 0, neg = 0, s = 0;
  bool pos_inf = false, neg_inf = false;
  for (double v : y) {
    if (std::isinf(v)) (v > 0 ? pos_inf : neg_inf) = true;
    else if (v > 0) pos += v;
    else neg -= v;
    if (std::isfinite(v)) s += v;
  }
  const LD ref_err = 2 * static_cast<LD>(p) * kLdEps;  // relative to pos + neg
  pos *= 1 + ref_err;
  neg *= 1 + ref_err;
  const LD sum_abs = pos + neg;
  const LD E = static_cast<LD>(steps_error(t, static_cast<int>(p) - 1)) * (1 + kWiden);
  const LD g = 1 + E;
  const bool can_pos = pos_inf || pos * g >= M;
  const bool can_neg = neg_inf || neg * g >= M;

  if (!can_pos && !can_neg) {  // (s2): nothing overflows or saturates in any order
    if (sums_are_exact(lim, y, static_cast<double>(sum_abs))) return bitwise(fold(red, ys));
    if (auto set = small_outcome_set(red, ys)) return interval(t, false, 0, 0, 0, std::move(*set));
    Expectation e;
    e.kind = CheckKind::Bound;
    if (!red.premul) {
      e.exact = s;
      e.bound = (E * sum_abs + ref_err * sum_abs);
      return e;
    }
    const LD c = red.op == RedOp::Avg ? 1.0L / red.nranks : static_cast<LD>(element_to_double(t, red.scalar_bits));
    const LD sc = element_to_double(t, red.scalar_bits);
    const LD d_s = red.op == RedOp::Avg ? std::fabs(sc - c) / c * (1 + 4 * kLdEps) : 0;
    LD ideal = 0, ideal_abs = 0;
    for (uint64_t xb : values) {
      const LD x = element_to_double(t, xb);
      ideal += x * c;
      ideal_abs += std::fabs(x * c);
    }
    const LD u = lim.unit_roundoff;
    e.exact = ideal;
    e.bound = ((E * sum_abs + ((1 + d_s) * (1 + u) - 1) * ideal_abs * (1 + kWiden) +
                                   static_cast<LD>(p) * subnormal_step_error(t)) *
                                      (1 + kWiden) +
                                  ref_err * (sum_abs + ideal_abs));
    return e;
  }

  // Some order overflows or saturates.
  std::vector<uint64_t> outcomes;
  if (p <= 8 && special_value_outcomes(red, ys, outcomes)) return interval(t, false, 0, 0, 0, std::move(outcomes));
  const LD slack = ref_err * sum_abs + kLdEps * M;
  const uint64_t nan = canonical_nan(t);
  if (!lim.saturates) {  // (s3)
    if (pos_inf && neg_inf) return bitwise(nan);
    if (pos_inf || neg_inf) {
      std::vector<uint64_t> sp = {signed_bits(t, neg_inf, INFINITY)};
      if (pos_inf ? neg * g >= M : pos * g >= M) sp.push_back(nan);
      return interval(t, false, 0, 0, 0, std::move(sp));
    }
    std::vector<uint64_t> sp;
    if (can_pos) sp.push_back(signed_bits(t, false, INFINITY));
    if (can_neg) sp.push_back(signed_bits(t, true, INFINITY));
    if (can_pos && can_neg) sp.push_back(nan);
    const LD lo = std::max({s - E * sum_abs, -neg * g, -M});
    const LD hi = std::min({s + E * sum_abs, pos * g, M});
    return interval(t, true, lo, hi, slack, std::move(sp));
  }
  // (s4) fp8.
  if (pos_inf || neg_inf) {  // e5m2 only: an Inf saturates at its first step
    std::vector<uint64_t> sp;
    if (pos_inf && neg_inf) sp.push_back(nan);
    return interval(t, true, -M, M, 0, std::move(sp));
  }
  LD lo = std::max(-M, -neg * g), hi = std::min(M, pos * g);
  if (can_pos && !can_neg) {
    hi = std::min(hi, s + E * sum_abs);
    if (E < 1) lo = std::max(lo, std::min(s - E * sum_abs, (1 - E) * M - (1 + E) * neg));
  } else if (can_neg && !can_pos) {
    lo = std::max(lo, s - E * sum_abs);
    if (E < 1) hi = std::min(hi, std::max(s + E * sum_abs, (1 + E) * pos - (1 - E) * M));
  }
  return interval(t, true, lo, hi, slack, {});
}

}  // namespace oracle_detail
}  // namespace collcheck
