#include "harness/oracle.h"

#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

#include "impl/element_ops.h"
#include "impl/float_formats.h"

namespace collcheck {

namespace {

// ---- double-double arithmetic: the exact reference values ----
struct DD {
  double hi = 0, lo = 0;
};
DD two_sum(double a, double b) {
  const double s = a + b;
  const double bb = s - a;
  return {s, (a - (s - bb)) + (b - bb)};
}
DD dd_add(DD x, double y) {
  DD s = two_sum(x.hi, y);
  s.lo += x.lo;
  return two_sum(s.hi, s.lo);
}
DD dd_mul(DD x, double y) {
  const double p = x.hi * y;
  const double e = std::fma(x.hi, y, -p);
  return two_sum(p, e + x.lo * y);
}
DD dd_div(DD x, double y) {
  const double q = x.hi / y;
  const double r = std::fma(-q, y, x.hi) + x.lo;
  return two_sum(q, r / y);
}

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

// Every outcome of combining `ys` in any binary-tree order (dynamic programming
// over subsets). False if a set grows past `cap`.
bool all_order_outcomes(const Reduction& red, std::span<const uint64_t> ys, std::vector<uint64_t>& out,
                        size_t cap = 256) {
  const size_t p = ys.size();
  const uint64_t nan = canonical_nan(red.dtype);
  auto canon = [&](uint64_t b) { return is_nan_bits(red.dtype, b) ? nan : b; };
  std::vector<std::vector<uint64_t>> sets(size_t{1} << p);
  for (size_t i = 0; i < p; ++i) sets[size_t{1} << i] = {canon(ys[i])};
  for (size_t mask = 1; mask < sets.size(); ++mask) {
    if (std::popcount(mask) < 2) continue;
    auto& s = sets[mask];
    const size_t low = mask & (~mask + 1);
    // Submasks A containing the lowest bit (each unordered split once).
    for (size_t a = (mask - 1) & mask; a > 0; a = (a - 1) & mask) {
      if (!(a & low)) continue;
      const size_t b = mask ^ a;
      for (uint64_t x : sets[a])
        for (uint64_t y : sets[b]) {
          const uint64_t r = canon(combine_bits(red.dtype, red.combine, x, y));
          if (std::find(s.begin(), s.end(), r) == s.end()) {
            s.push_back(r);
            if (s.size() > cap) return false;
          }
        }
    }
  }
  out = sets.back();
  std::sort(out.begin(), out.end());
  return true;
}

// Weight of the lowest set bit of v's significand (v finite, nonzero).
double lowest_bit_weight(double v) {
  int e;
  const double f = std::frexp(std::fabs(v), &e);  // f in [0.5, 1)
  const uint64_t m = static_cast<uint64_t>(std::ldexp(f, 53));
  return std::ldexp(1.0, e - 53 + std::countr_zero(m));
}

}  // namespace

std::string_view check_kind_name(CheckKind k) {
  switch (k) {
    case CheckKind::Bitwise: return "bitwise";
    case CheckKind::Bound: return "bound";
    case CheckKind::OneOf: return "one-of";
    case CheckKind::Coarse: return "coarse";
  }
  return "?";
}

double step_roundoff(DType t) { return float_info(t).unit_roundoff; }

double steps_error(DType t, int n) {
  if (n <= 0) return 0;
  return std::expm1(n * std::log1p(step_roundoff(t)));
}

uint64_t load_element(DType t, const void* base, size_t i) {
  const size_t es = dtype_size(t);
  uint64_t v = 0;
  std::memcpy(&v, static_cast<const std::byte*>(base) + i * es, es);  // little-endian host
  return v;
}

void store_element(DType t, void* base, size_t i, uint64_t bits) {
  const size_t es = dtype_size(t);
  std::memcpy(static_cast<std::byte*>(base) + i * es, &bits, es);
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
    case CheckKind::Coarse:
      return fmt::format("{:.17g} +- {:.3g} [{}]", exact_hi + exact_lo, bound, check_kind_name(kind));
    case CheckKind::OneOf: {
      std::string s = "one of {";
      for (size_t i = 0; i < allowed.size(); ++i) s += (i ? ", " : "") + format_element(t, allowed[i]);
      return s + "} [one-of]";
    }
  }
  return "?";
}

// The bounds. Notation: u = step_roundoff(T), E(n) = (1+u)^n - 1, eta = the
// smallest subnormal of T, y_i = the value rank i contributes (after the
// pre-multiplication, computed exactly as NCCL does, so y_i is known).
//
// Sum: any reduction order is a binary tree of p-1 additions. Each addition
// rounds its exact result s to fl(s) = s(1+d), |d| <= u (sums in the subnormal
// range are exact, so underflow adds nothing). A partial sum over a set S is
// then within E(k)*sum_{i in S}|y_i| of its exact value after k steps, and by
// induction |r - sum y_i| <= E(p-1) * sum |y_i|. E(p-1) <= gamma(p-1) whenever
// (p-1)u < 1, so this is the DESIGN.md bound, made finite for fp8.
//
// Avg and premulsum, against the ideal value sum x_i * c (c = 1/p for avg, the
// user's scalar for premulsum): NCCL multiplies first, y_i = fl(x_i * s) with
// s = fl(c) (avg; for premulsum s = c exactly). So y_i = x_i c (1+d_s)(1+d_i)
// + e_i with |d_s|, |d_i| <= u and |e_i| <= eta/2 (underflow of the product),
// hence |y_i - x_i c| <= (2u + u^2)|x_i c| + eta/2 and
//   |r - sum x_i c| <= E(p-1) sum|y_i| + (2u + u^2) sum|x_i c| + p eta/2.
//
// Prod: with no overflow or underflow in any partial product (checked first,
// else the OneOf/Coarse path), each multiplication adds one factor (1+d), so
// |r - prod y_i| <= E(p-1) |prod y_i|.
Expectation expect_element(const Reduction& red, std::span<const uint64_t> values) {
  const DType t = red.dtype;
  const size_t p = values.size();
  Expectation e;
  // Reused across calls: this runs once per checked element.
  thread_local std::vector<uint64_t> ys;
  thread_local std::vector<double> y;
  ys.resize(p);
  y.resize(p);
  for (size_t i = 0; i < p; ++i) ys[i] = premul_bits(red, values[i]);

  if (!dtype_is_float(t) || red.combine == Combine::Max || red.combine == Combine::Min) {
    e.kind = CheckKind::Bitwise;
    e.bits = fold(red, ys);
    return e;
  }

  const FloatInfo lim = float_info(t);
  bool nonfinite = false, any_zero = false;
  double sum_abs = 0, big = 1, small = 1;
  for (size_t i = 0; i < p; ++i) {
    y[i] = element_to_double(t, ys[i]);
    if (!std::isfinite(y[i])) nonfinite = true;
    const double a = std::fabs(y[i]);
    sum_abs += a;
    if (a == 0) any_zero = true;
    if (a > 1) big *= a;
    if (a < 1 && a > 0) small *= a;
  }
  const double growth = 1 + steps_error(t, static_cast<int>(p) - 1);
  bool risky = nonfinite;
  if (red.combine == Combine::Sum) {
    risky = risky || sum_abs * growth >= lim.max_finite;
  } else {  // Prod: some partial product may overflow, or underflow into the subnormals
    risky = risky || big * growth >= lim.max_finite || (!any_zero && small / growth < lim.min_normal);
  }

  if (risky) {
    if (p <= 8 && all_order_outcomes(red, ys, e.allowed)) {
      if (e.allowed.size() == 1) {
        e.kind = CheckKind::Bitwise;
        e.bits = e.allowed[0];
        e.allowed.clear();
      } else {
        e.kind = CheckKind::OneOf;
      }
      return e;
    }
    e.kind = CheckKind::Coarse;
  } else {
    // Exactly representable data: every partial result is exact in any order.
    bool exact = false;
    if (red.combine == Combine::Sum) {
      double q = std::numeric_limits<double>::infinity();
      for (double v : y)
        if (v != 0) q = std::min(q, lowest_bit_weight(v));
      exact = q == std::numeric_limits<double>::infinity() ||
              (sum_abs / q <= std::ldexp(1.0, lim.precision) && sum_abs <= lim.max_finite);
    } else {
      exact = any_zero;  // no overflow risk (checked above): the product is +-0 in every order
      if (!exact) {
        bool pow2 = true;
        for (double v : y) pow2 = pow2 && lowest_bit_weight(v) == std::fabs(v);
        exact = pow2;  // products of powers of two stay exact within the normal range
      }
    }
    if (exact) {
      e.kind = CheckKind::Bitwise;
      e.bits = fold(red, ys);
      return e;
    }
    e.kind = CheckKind::Bound;
  }

  // Exact reference value and the bound (Bound and Coarse).
  const double u = lim.unit_roundoff;
  const double steps = steps_error(t, static_cast<int>(p) - 1);
  DD exact;
  if (red.combine == Combine::Prod) {
    exact.hi = 1;
    for (double v : y) exact = dd_mul(exact, v);
    e.bound = steps * std::fabs(exact.hi);
  } else if (red.premul) {
    double sum_abs_ideal = 0;
    if (red.op == RedOp::Avg) {
      // Sum x_i / p rather than divide the sum: the sum of p float64 values
      // near the largest finite one overflows a double, their mean does not.
      for (size_t i = 0; i < p; ++i) {
        const double x = element_to_double(t, values[i]);
        const DD q = dd_div(DD{x, 0}, static_cast<double>(red.nranks));
        exact = dd_add(dd_add(exact, q.hi), q.lo);
        sum_abs_ideal += std::fabs(x) / red.nranks;
      }
    } else {
      const double c = element_to_double(t, red.scalar_bits);
      for (size_t i = 0; i < p; ++i) {
        const double x = element_to_double(t, values[i]);
        const DD prod = dd_mul(DD{x, 0}, c);
        exact = dd_add(dd_add(exact, prod.hi), prod.lo);
        sum_abs_ideal += std::fabs(x * c);
      }
    }
    e.bound = steps * sum_abs + (2 * u + u * u) * sum_abs_ideal + static_cast<double>(p) * lim.min_subnormal / 2;
  } else {
    for (double v : y) exact = dd_add(exact, v);
    e.bound = steps * sum_abs;
  }
  e.exact_hi = exact.hi;
  e.exact_lo = exact.lo;
  return e;
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
    case CheckKind::Bound:
    case CheckKind::Coarse: {
      const double r = element_to_double(t, result_bits);
      if (!std::isfinite(r) || !std::isfinite(e.exact_hi)) {
        const bool ok = e.kind == CheckKind::Coarse;
        return {ok, ok ? 0 : kInf};
      }
      const double diff = std::fabs((r - e.exact_hi) - e.exact_lo);
      double units = e.bound > 0 ? diff / e.bound : (diff == 0 ? 0 : kInf);
      bool ok = units <= 1;
      if (!ok && e.kind == CheckKind::Coarse && float_info(t).saturates &&
          std::fabs(r) == float_info(t).max_finite) {
        ok = true;  // a saturated partial result
        units = 0;
      }
      return {ok, units};
    }
  }
  return {false, kInf};
}

CheckSummary check_all_reduce(const Reduction& red, std::span<const void* const> inputs, const void* result,
                              size_t count) {
  CheckSummary s;
  std::vector<uint64_t> values(inputs.size());
  for (size_t i = 0; i < count; ++i) {
    for (size_t r = 0; r < inputs.size(); ++r) values[r] = load_element(red.dtype, inputs[r], i);
    const Expectation e = expect_element(red, values);
    const uint64_t got = load_element(red.dtype, result, i);
    const Verdict v = judge(red, e, got);
    ++s.checked;
    ++s.by_kind[static_cast<size_t>(e.kind)];
    if ((e.kind == CheckKind::Bound || e.kind == CheckKind::Coarse) && std::isfinite(v.err_units))
      s.max_err_units = std::max(s.max_err_units, v.err_units);
    if (!v.ok) {
      if (!std::isfinite(v.err_units)) s.max_err_units = v.err_units;
      if (!s.first_wrong) {
        s.first_wrong = i;
        std::string ins;
        for (size_t r = 0; r < values.size(); ++r)
          ins += fmt::format("{}rank {}: {}", r ? ", " : "", r, format_element(red.dtype, values[r]));
        s.first_wrong_detail = fmt::format("element {}: expected {}, got {}; inputs: {}", i,
                                           e.describe(red.dtype), format_element(red.dtype, got), ins);
      }
      ++s.wrong;
    }
  }
  return s;
}

}  // namespace collcheck
