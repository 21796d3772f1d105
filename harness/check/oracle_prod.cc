// The oracle's model of a product in any reduction order: the expectation
// of one element (oracle_model.cc holds the sum's, and the notation).
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

// PROD, over the magnitudes a_i of finite nonzero y_i (signs: the sign of any
// product, zero and Inf included, is the XOR of the operands' signs). A zero and
// an Inf give NaN in every order (a subtree holding the zero is 0 or NaN, one
// holding the Inf is Inf or NaN). Let x = prod a_i, k = p - 1,
// Smin/Smax = the smallest/largest product of two or more of the a_i,
// Amin = prod of the a_i < 1, Bmax = prod of the a_i > 1.
// (p1) Rounding errs by at most max(u z, h), so a step with exact input z >= m0
//      errs by at most delta z whenever delta >= u and delta >= h / m0.
// (p2) By induction over any tree: if every node's input z >= m0 then every node
//      over leaves S has value in x_S [(1-delta)^|S|-1, (1+delta)^|S|-1], so its
//      input is z >= Smin (1-delta)^(k-1). Choosing delta with
//      h / (Smin (1-delta)^(k-1)) <= delta (a fixed point, found by iteration,
//      kept only if delta k <= 1/8) makes the premise true: r is within
//      x [(1-delta)^k, (1+delta)^k] unless some node overflows, and no node can
//      round to zero. delta = u when Smin (1-u)^(k-1) >= mn: no subnormal
//      intermediate in any order, and that with no overflow is the Bound.
// (p3) Without such a delta, some order may underflow deeply (even to 0). Take
//      the topmost nodes whose input is below mn: each rounds to at most mn, and
//      every node above them errs relatively by u, so r <= (1+u)^k mn Bmax (the
//      leaves outside those subtrees multiply to at most Bmax, and mn <= 1); or
//      r <= x (1+u)^k if no node is below mn. Zero is reachable.
// (p4) Overflow needs a node input above M: z <= Smax (1+delta)^(k-1) under (p2),
//      z <= Bmax (1+u)^k under (p3). Float types give +-Inf (a finite result then
//      comes from an order without overflow, so the ranges above hold), and NaN
//      when zero is reachable too. fp8 saturates: r <= M, and for the lower side
//      take the topmost saturated nodes (value M >= 1 each): if no node can be
//      subnormal (delta = u) and M Amin (1-u)^p >= mn, every node above them errs
//      relatively by u, so r >= M Amin (1-u)^k; otherwise r may be anything down
//      to zero.
// Any Inf input (float16..float64): Inf in every order, or NaN if some partial
// product of the finite values can reach zero (p3). fp8 e5m2 Inf inputs saturate
// at the first step (Inf x 0 first gives NaN, M x 0 later gives 0); above p = 8
// the oracle then accepts the whole range of the product's sign, zero and NaN,
// and counts it as an interval.

// What (p1)-(p4) need to know of the finite nonzero magnitudes (at least two).
struct ProdModel {
  Scaled x, amin, bmax;
  LD delta = 0;
  bool delta_ok = false;  // (p2) holds with delta
  bool overflow = false;  // (p4): some node's input can exceed M
};

// `a`: the magnitudes (doubles: every dtype's values are), in rank order.
// The products are taken in that order: each errs by at most n ulps of long
// double in any order (the widening below). Only the two smallest and the two
// largest are needed by name, so nothing is sorted (a sort of the p magnitudes
// was a sixth of a p = 62 fp8 product case's time).
ProdModel prod_model(DType t, std::span<const double> a) {
  const FloatInfo lim = float_info(t);
  const size_t n = a.size();
  const int k = static_cast<int>(n) - 1;
  ProdModel m;
  Scaled amin, bmax;
  size_t below = 0, above = 0;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  double lo1 = kInf, lo2 = kInf, hi1 = -kInf, hi2 = -kInf;  // lo1 <= lo2 the smallest, hi1 >= hi2 the largest
  for (const double v : a) {
    lo2 = std::min(lo2, std::max(lo1, v));
    lo1 = std::min(lo1, v);
    hi2 = std::max(hi2, std::min(hi1, v));
    hi1 = std::max(hi1, v);
    below += v < 1;
    above += v > 1;
  }
  const ScaledProducts prods = ScaledProducts::of(a);
  m.x = prods.all();
  amin = prods.below();
  bmax = prods.above();
  // Each product of n factors errs by at most n ulps of long double.
  const Scaled down = Scaled::of(1 - 2 * static_cast<LD>(n) * kLdEps), up = Scaled::of(1 + 2 * static_cast<LD>(n) * kLdEps);
  m.amin = amin * down;
  m.bmax = bmax * up;
  const Scaled smin = below >= 2 ? m.amin : Scaled::of(lo1) * Scaled::of(lo2) * down;
  const Scaled smax = above >= 2 ? m.bmax : Scaled::of(hi1) * Scaled::of(hi2) * up;
  const LD u = lim.unit_roundoff * (1 + kWiden), h = subnormal_step_error(t) * (1 + kWiden);
  const Scaled mn = Scaled::of(lim.min_normal), M = Scaled::of(lim.max_finite);
  LD delta = u;
  for (int it = 0; it < 200; ++it) {
    const Scaled m0 = smin * Scaled::of(pow_down(delta, k - 1));
    if (!(m0 < mn)) {
      m.delta_ok = true;
      break;
    }
    const LD need = h / m0.value();
    if (need <= delta) {
      m.delta_ok = true;
      break;
    }
    delta = std::max(need * (1 + 1.0L / 64), delta * (1 + 1.0L / 64));
    if (!(delta * k <= 0.125L)) break;
  }
  m.delta = delta;
  if (m.delta_ok) {
    m.overflow = !(smax * Scaled::of(pow_up(delta, k)) < M);
  } else {
    m.overflow = !(m.bmax * Scaled::of(pow_up(u, k)) < M);
  }
  return m;
}

Expectation expect_prod(const Reduction& red, std::span<const uint64_t> ys, std::span<const double> y) {
  const DType t = red.dtype;
  const FloatInfo lim = float_info(t);
  const size_t p = ys.size();
  const int k = static_cast<int>(p) - 1;
  const uint64_t nan = canonical_nan(t);
  bool negative = false;
  size_t zeros = 0, infs = 0;
  thread_local std::vector<double> mags;  // reused: this runs once per checked element
  mags.clear();
  for (double v : y) {
    negative ^= std::signbit(v);
    if (v == 0) ++zeros;
    else if (std::isinf(v)) ++infs;
    else mags.push_back(std::fabs(v));
  }
  const uint64_t zero = signed_bits(t, negative, 0.0);
  if (p == 1) return bitwise(ys[0]);
  if (lim.saturates && infs > 0) {
    // e5m2: an Inf saturates to M at its first step and then behaves as a
    // finite value, so zero, NaN (from Inf x 0 before that) and anything of
    // the product's sign are accepted; enumerated exactly up to p = 8.
    std::vector<uint64_t> outcomes;
    if (p <= 8 && special_value_outcomes(red, ys, outcomes)) return interval(t, false, 0, 0, 0, std::move(outcomes));
    if (zeros > 0) return interval(t, false, 0, 0, 0, {zero, nan});
    const LD eta = lim.min_subnormal, M = lim.max_finite;
    return negative ? interval(t, true, -M, -eta, 0, {zero, nan}) : interval(t, true, eta, M, 0, {zero, nan});
  }
  if (zeros > 0 && infs > 0) return bitwise(nan);
  std::optional<ProdModel> m;
  if (mags.size() >= 2) m = prod_model(t, mags);
  if (zeros > 0) {  // +-0, or NaN if a partial product of the others can overflow to Inf
    if (!lim.saturates && m && m->overflow) return interval(t, false, 0, 0, 0, {zero, nan});
    return bitwise(zero);
  }
  if (infs > 0) {
    std::vector<uint64_t> sp = {signed_bits(t, negative, INFINITY)};
    if (m && !m->delta_ok) sp.push_back(nan);
    return interval(t, false, 0, 0, 0, std::move(sp));
  }

  // Every input finite and nonzero.
  const LD u = lim.unit_roundoff * (1 + kWiden);
  const LD x = m->x.value();
  if (m->delta_ok && m->delta == u && !m->overflow) {  // (p2) with delta = u: the Bound
    bool pow2 = true;
    for (double v : y) pow2 = pow2 && lowest_bit_weight(v) == std::fabs(v);
    if (pow2) return bitwise(fold(red, ys));  // products of powers of two stay exact within the normal range
    if (auto set = small_outcome_set(red, ys)) return interval(t, false, 0, 0, 0, std::move(*set));
    Expectation e;
    e.kind = CheckKind::Bound;
    e.exact = negative ? -x : x;
    e.bound = (static_cast<LD>(steps_error(t, k)) * (1 + kWiden) * x + 4 * p * kLdEps * x);
    return e;
  }
  std::vector<uint64_t> outcomes;
  if (p <= 8 && special_value_outcomes(red, ys, outcomes)) return interval(t, false, 0, 0, 0, std::move(outcomes));

  const LD M = lim.max_finite, mn = lim.min_normal;
  bool zero_reachable = !m->delta_ok;
  LD lo, hi;
  if (m->delta_ok) {  // (p2)
    lo = x * pow_down(m->delta, k);
    hi = x * pow_up(m->delta, k);
  } else {  // (p3)
    lo = 0;
    hi = std::max(x, (Scaled::of(mn) * m->bmax).value()) * pow_up(u, k);
  }
  std::vector<uint64_t> sp;
  if (m->overflow) {  // (p4)
    hi = std::min(hi, M);
    if (lim.saturates) {
      const Scaled floor = Scaled::of(M) * m->amin;
      if (m->delta_ok && m->delta == u && !(floor * Scaled::of(pow_down(u, k + 1)) < Scaled::of(mn))) {
        lo = std::min(lo, floor.value() * pow_down(u, k));
      } else {
        lo = 0;
        zero_reachable = true;
      }
    } else {
      sp.push_back(signed_bits(t, negative, INFINITY));
      if (zero_reachable) sp.push_back(nan);
    }
  }
  if (zero_reachable) sp.push_back(zero);
  hi = std::min(hi, M);
  lo = std::max(lo, static_cast<LD>(lim.min_subnormal));  // a nonzero result is at least eta; zero is a special
  const LD slack = 4 * static_cast<LD>(p) * kLdEps * hi;
  if (negative) return interval(t, true, -hi, -lo, slack, std::move(sp));
  return interval(t, true, lo, hi, slack, std::move(sp));
}

}  // namespace oracle_detail
}  // namespace collcheck
