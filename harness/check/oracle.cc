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
#include "impl/element_ops.h"
#include "impl/float_formats.h"
#include "impl/kernels.h"

namespace collcheck {

namespace {

// Any NaN of t, canonicalised so that sets of outcomes compare NaNs as equal.
uint64_t canonical_nan(DType t) { return to_element_bits(t, std::numeric_limits<double>::quiet_NaN()); }

bool is_nan_bits(DType t, uint64_t b) { return dtype_is_float(t) && std::isnan(element_to_double(t, b)); }

// Folds the values in rank order with the element semantics: the bit-exact
// result whenever the order does not matter.
uint64_t fold(const Reduction& red, std::span<const uint64_t> ys) {
  return visit_dtype(red.dtype, [&](auto tag) -> uint64_t {
    using T = decltype(tag);
    using Ops = ElementOps<T>;
    T acc = Ops::from_bits(ys[0]);
    for (size_t i = 1; i < ys.size(); ++i) acc = combine_elements(red.combine, acc, Ops::from_bits(ys[i]));
    if (red.postdiv) acc = Ops::postdiv(acc, red.divisor);
    return Ops::to_bits(acc);
  });
}

// Whether element bits of type T are a NaN (integers never are).
template <typename T>
bool is_nan_of(uint64_t b) {
  using Ops = ElementOps<T>;
  if constexpr (std::is_integral_v<T>) {
    return false;
  } else if constexpr (std::is_floating_point_v<T>) {
    return std::isnan(Ops::from_bits(b));
  } else {
    return std::isnan(Ops::w(Ops::from_bits(b)));  // float16, bfloat16, fp8: widened exactly
  }
}

// Every outcome of combining `ys` in any binary-tree order (dynamic programming
// over subsets). False if a set grows past `cap` or the work past `budget`
// combining steps: the caller then uses its interval, which is sound at any p.
bool all_order_outcomes(const Reduction& red, std::span<const uint64_t> ys, std::vector<uint64_t>& out,
                        size_t cap = 64, size_t budget = 60000) {
  const size_t p = ys.size();
  // The sets of every subset, flat: set `mask` holds size[mask] outcomes from
  // pool[mask * (cap + 1)] (one slot of room past the cap, to notice it).
  thread_local std::vector<uint64_t> pool;
  thread_local std::vector<uint32_t> size;
  const size_t stride = cap + 1, n = size_t{1} << p;
  pool.resize(n * stride);
  size.assign(n, 0);
  return visit_dtype(red.dtype, [&](auto tag) -> bool {
    using T = decltype(tag);
    using Ops = ElementOps<T>;
    const uint64_t nan = canonical_nan(red.dtype);
    auto canon = [&](uint64_t b) { return is_nan_of<T>(b) ? nan : b; };
    size_t work = 0;
    for (size_t i = 0; i < p; ++i) {
      pool[(size_t{1} << i) * stride] = canon(ys[i]);
      size[size_t{1} << i] = 1;
    }
    for (size_t mask = 1; mask < n; ++mask) {
      if (std::popcount(mask) < 2) continue;
      uint64_t* s = &pool[mask * stride];
      uint32_t& len = size[mask];
      const size_t low = mask & (~mask + 1);
      // Submasks A containing the lowest bit (each unordered split once).
      for (size_t a = (mask - 1) & mask; a > 0; a = (a - 1) & mask) {
        if (!(a & low)) continue;
        const size_t b = mask ^ a;
        work += size_t{size[a]} * size[b];
        if (work > budget) return false;
        const uint64_t* sa = &pool[a * stride];
        const uint64_t* sb = &pool[b * stride];
        for (uint32_t ia = 0; ia < size[a]; ++ia)
          for (uint32_t ib = 0; ib < size[b]; ++ib) {
            const uint64_t r =
                canon(Ops::to_bits(combine_elements(red.combine, Ops::from_bits(sa[ia]), Ops::from_bits(sb[ib]))));
            if (std::find(s, s + len, r) == s + len) {
              s[len++] = r;
              if (len > cap) return false;
            }
          }
      }
    }
    out.assign(&pool[(n - 1) * stride], &pool[(n - 1) * stride] + size[n - 1]);
    std::sort(out.begin(), out.end());
    return true;
  });
}

// Where the set of every order's outcome is small, the oracle accepts exactly
// that set (issue 31) instead of an error bound: at p = 2 the one right result
// round(y0 op y1), Bitwise; at p = 3 and 4 the 3 and 15 reduction trees (up to
// commutativity), OneOf. Above, up to one_of_ranks() (5 by default), the same
// wherever the set has at most 256 outcomes within 200,000 combining steps.
// Elsewhere nullopt: the Bound.
std::atomic<int> g_one_of_ranks{kOneOfDefaultRanks};
std::optional<std::vector<uint64_t>> small_outcome_set(const Reduction& red, std::span<const uint64_t> ys) {
  const size_t p = ys.size();
  if (p < 2 || p > static_cast<size_t>(std::max(kOneOfAlwaysRanks, one_of_ranks()))) return std::nullopt;
  std::vector<uint64_t> out;
  if (!all_order_outcomes(red, ys, out, 256, 200000)) return std::nullopt;
  return out;
}

// Weight of the lowest set bit of v's significand (v finite, nonzero).
double lowest_bit_weight(double v) {
  int e;
  const double f = std::frexp(std::fabs(v), &e);  // f in [0.5, 1)
  const uint64_t m = static_cast<uint64_t>(std::ldexp(f, 53));
  return std::ldexp(1.0, e - 53 + std::countr_zero(m));
}

}  // namespace

void set_one_of_ranks(int n) {
  if (n < kOneOfAlwaysRanks || n > kOneOfMaxRanks)
    throw std::invalid_argument(fmt::format("one-of ranks must be {} to {}, got {}", kOneOfAlwaysRanks, kOneOfMaxRanks, n));
  g_one_of_ranks = n;
}
int one_of_ranks() { return g_one_of_ranks.load(std::memory_order_relaxed); }

std::string_view check_kind_name(CheckKind k) {
  switch (k) {
    case CheckKind::Bitwise: return "bitwise";
    case CheckKind::Bound: return "bound";
    case CheckKind::OneOf: return "one-of";
    case CheckKind::Interval: return "interval";
  }
  return "?";
}

double step_roundoff(DType t) { return float_info(t).unit_roundoff; }

long double subnormal_step_error(DType t) {
  const FloatInfo lim = float_info(t);
  const long double half_eta = static_cast<long double>(lim.min_subnormal) / 2;  // 2^-1075 for float64: not a double
  switch (t) {
    // fp8: the float16 rounding first (at most u16 * min_normal of the fp8 format
    // there, or half float16's smallest subnormal below it), then the fp8 one.
    case DType::Fp8E4M3:
    case DType::Fp8E5M2: return half_eta + std::ldexp(lim.min_normal, -11) + std::ldexp(1.0, -25);
    // bfloat16 via float: a product below float's normals is rounded to float's
    // subnormals (2^-149) before bfloat16's (2^-133).
    case DType::BFloat16: return half_eta + std::ldexp(1.0L, -150);
    default: return half_eta;
  }
}

double steps_error(DType t, int n) {
  if (n <= 0) return 0;
  return std::expm1(n * std::log1p(step_roundoff(t)));
}

std::string format_element(DType t, uint64_t bits) {
  const int width = static_cast<int>(dtype_size(t) * 2);
  if (dtype_is_float(t)) return fmt::format("{:#0{}x} ({:.9g})", bits, width + 2, element_to_double(t, bits));
  if (dtype_is_signed_int(t)) {
    const int shift = 64 - 8 * static_cast<int>(dtype_size(t));
    const int64_t v = static_cast<int64_t>(bits << shift) >> shift;
    return fmt::format("{:#0{}x} ({})", bits, width + 2, v);
  }
  return fmt::format("{:#0{}x} ({})", bits, width + 2, bits);
}

std::string Expectation::describe(DType t) const {
  switch (kind) {
    case CheckKind::Bitwise: return fmt::format("{} [bitwise]", format_element(t, bits));
    case CheckKind::Bound:
      return fmt::format("{:.17g} +- {:.3g} [bound]", static_cast<double>(exact), bound);
    case CheckKind::Interval: {
      std::string s = fmt::format("[{:.17g}, {:.17g}]", lo, hi);
      for (size_t i = 0; i < allowed.size(); ++i) s += (i ? ", " : " or ") + format_element(t, allowed[i]);
      return s + " [interval]";
    }
    case CheckKind::OneOf: {
      std::string s = "one of {";
      for (size_t i = 0; i < allowed.size(); ++i) s += (i ? ", " : "") + format_element(t, allowed[i]);
      return s + "} [one-of]";
    }
  }
  return "?";
}

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

namespace {

using oracle_detail::LD;
using oracle_detail::kLdEps;
using oracle_detail::kWiden;

// A positive magnitude m * 2^e with its exponent kept apart.
struct Scaled {
  LD m = 0.5L;  // in [0.5, 1)
  int64_t e = 1;
  // x87's 80-bit long double: a 64-bit significand with its leading bit
  // explicit, then the sign and a 15-bit exponent (bias 16383) at byte 8.
  // frexp and ldexp of a positive normal value are then a swap of that
  // exponent field: exact, and without the libm calls, which were a tenth
  // of verify's time. Anything else takes the libm way.
  static constexpr bool kX87 = std::numeric_limits<LD>::digits == 64 && std::numeric_limits<LD>::max_exponent == 16384;
  static constexpr int kHalfExp = 16382;  // the field of a value in [0.5, 1)
  static uint16_t exp_field(const LD& v) {
    uint16_t se;
    std::memcpy(&se, reinterpret_cast<const char*>(&v) + 8, 2);
    return se;
  }
  static LD with_exp_field(LD v, uint16_t se) {
    std::memcpy(reinterpret_cast<char*>(&v) + 8, &se, 2);
    return v;
  }
  static Scaled of(LD v) {
    if constexpr (kX87) {
      const uint16_t se = exp_field(v);
      if (se != 0 && se < 0x7fff) return {with_exp_field(v, kHalfExp), static_cast<int64_t>(se) - kHalfExp};
    }
    int ex = 0;
    const LD f = std::frexp(v, &ex);
    return {f, ex};
  }
  friend Scaled operator*(Scaled a, Scaled b) {
    // a.m * b.m is in [0.25, 1) (its rounding cannot reach 1: the largest
    // m squared rounds to 1 - 2^-63), so frexp's normalization is at most
    // one doubling, which is exact: the same result without the libm call.
    LD f = a.m * b.m;
    int64_t e = a.e + b.e;
    if (f < 0.5L) {
      f *= 2;
      e -= 1;
    }
    return {f, e};
  }
  friend bool operator<(Scaled a, Scaled b) { return a.e != b.e ? a.e < b.e : a.m < b.m; }
  LD value() const {  // saturating at long double's range (far beyond every dtype's)
    if (e > 16000) return std::numeric_limits<LD>::infinity();
    if (e < -16000) return 0;
    if constexpr (kX87) {
      if (exp_field(m) == kHalfExp) return with_exp_field(m, static_cast<uint16_t>(kHalfExp + e));
    }
    return std::ldexp(m, static_cast<int>(e));
  }
};

// (1 + d)^n rounded up, (1 - d)^n rounded down.
// Memoized per thread: an element's expectation asks for the same few
// (d, n) over and over (d is the dtype's unit roundoff unless underflow
// widens it), and powl is the costliest step of a product's expectation.
LD pow_memo(LD base, int n) {
  struct Entry {
    LD base = -1;
    int n = -1;
    LD value = 0;
  };
  thread_local Entry memo[8];
  thread_local unsigned next = 0;
  for (const Entry& m : memo)
    if (m.n == n && m.base == base) return m.value;
  Entry& slot = memo[next++ % 8];
  slot = {base, n, std::pow(base, static_cast<LD>(n))};
  return slot.value;
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
         (sum_abs / q <= std::ldexp(1.0, lim.precision) && sum_abs <= lim.max_finite);
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
  if (p <= 8 && all_order_outcomes(red, ys, outcomes)) return interval(t, false, 0, 0, 0, std::move(outcomes));
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

// What (p1)-(p4) need to know of the finite nonzero magnitudes (at least two).
struct ProdModel {
  Scaled x, amin, bmax;
  LD delta = 0;
  bool delta_ok = false;  // (p2) holds with delta
  bool overflow = false;  // (p4): some node's input can exceed M
};

ProdModel prod_model(DType t, std::vector<LD>& a) {  // sorts a
  const FloatInfo lim = float_info(t);
  const size_t n = a.size();
  const int k = static_cast<int>(n) - 1;
  std::sort(a.begin(), a.end());
  ProdModel m;
  Scaled amin = Scaled::of(1), bmax = Scaled::of(1);
  size_t below = 0, above = 0;
  for (LD v : a) {
    const Scaled sv = Scaled::of(v);
    m.x = m.x * sv;
    if (v < 1) ++below, amin = amin * sv;
    if (v > 1) ++above, bmax = bmax * sv;
  }
  // Each product of n factors errs by at most n ulps of long double.
  const Scaled down = Scaled::of(1 - 2 * static_cast<LD>(n) * kLdEps), up = Scaled::of(1 + 2 * static_cast<LD>(n) * kLdEps);
  m.amin = amin * down;
  m.bmax = bmax * up;
  const Scaled smin = below >= 2 ? m.amin : Scaled::of(a[0]) * Scaled::of(a[1]) * down;
  const Scaled smax = above >= 2 ? m.bmax : Scaled::of(a[n - 1]) * Scaled::of(a[n - 2]) * up;
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
  thread_local std::vector<LD> mags;  // reused: this runs once per checked element
  mags.clear();
  for (double v : y) {
    negative ^= std::signbit(v);
    if (v == 0) ++zeros;
    else if (std::isinf(v)) ++infs;
    else mags.push_back(std::fabs(static_cast<LD>(v)));
  }
  const uint64_t zero = signed_bits(t, negative, 0.0);
  if (p == 1) return bitwise(ys[0]);
  if (lim.saturates && infs > 0) {
    // e5m2: an Inf saturates to M at its first step and then behaves as a
    // finite value, so zero, NaN (from Inf x 0 before that) and anything of
    // the product's sign are accepted; enumerated exactly up to p = 8.
    std::vector<uint64_t> outcomes;
    if (p <= 8 && all_order_outcomes(red, ys, outcomes)) return interval(t, false, 0, 0, 0, std::move(outcomes));
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
  if (p <= 8 && all_order_outcomes(red, ys, outcomes)) return interval(t, false, 0, 0, 0, std::move(outcomes));

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

}  // namespace

Expectation expect_element(const Reduction& red, std::span<const uint64_t> values) {
  const DType t = red.dtype;
  const size_t p = values.size();
  // Reused across calls: this runs once per checked element.
  thread_local std::vector<uint64_t> ys;
  thread_local std::vector<double> y;
  ys.resize(p);
  y.resize(p);
  for (size_t i = 0; i < p; ++i) ys[i] = premul_bits(red, values[i]);
  if (order_free(red)) return bitwise(fold(red, ys));
  for (size_t i = 0; i < p; ++i) {
    y[i] = element_to_double(t, ys[i]);
    if (std::isnan(y[i])) return bitwise(canonical_nan(t));  // NaN propagates through sum and prod in any order
  }
  if (red.combine == Combine::Sum) return expect_sum(red, values, ys, y);
  return expect_prod(red, ys, y);
}

Verdict judge(const Reduction& red, const Expectation& e, uint64_t result_bits) {
  const DType t = red.dtype;
  constexpr double kInf = std::numeric_limits<double>::infinity();
  switch (e.kind) {
    case CheckKind::Bitwise: {
      const bool ok = is_nan_bits(t, e.bits) ? is_nan_bits(t, result_bits) : result_bits == e.bits;
      return {ok, ok ? 0 : kInf};
    }
    case CheckKind::OneOf: {
      const uint64_t r = is_nan_bits(t, result_bits) ? canonical_nan(t) : result_bits;
      const bool ok = std::find(e.allowed.begin(), e.allowed.end(), r) != e.allowed.end();
      return {ok, ok ? 0 : kInf};
    }
    case CheckKind::Interval: {
      const double r = element_to_double(t, result_bits);
      bool ok;
      if (!std::isfinite(r) || r == 0) {
        const uint64_t b = std::isnan(r) ? canonical_nan(t) : result_bits;
        ok = std::find(e.allowed.begin(), e.allowed.end(), b) != e.allowed.end();
        if (!ok && r == 0) ok = e.lo <= r && r <= e.hi;  // sums: zero of either sign is a value in the range
      } else {
        ok = e.lo <= r && r <= e.hi;
      }
      return {ok, ok ? 0 : kInf};
    }
    case CheckKind::Bound: {
      const double r = element_to_double(t, result_bits);
      if (!std::isfinite(r)) return {false, kInf};
      const LD diff = std::fabs(static_cast<LD>(r) - e.exact);
      const double units = e.bound > 0 ? static_cast<double>(diff / e.bound) : (diff == 0 ? 0 : kInf);
      // The subtraction above rounds by at most 2^-63 of diff.
      const bool ok = diff <= e.bound * (1 + 2 * kLdEps);
      return {ok, units};
    }
  }
  return {false, kInf};
}

}  // namespace collcheck
