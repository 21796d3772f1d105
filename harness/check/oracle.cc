// The oracle: the expectation of one element (expect_element: bit for bit
// where the order cannot matter, else the models of oracle_model.cc and
// oracle_prod.cc or the sets of oracle_enumerate.cc), its verdict (judge), and
// how expectations are described.
#include "harness/check/oracle.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
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

namespace oracle_detail {

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

}  // namespace oracle_detail

using namespace oracle_detail;


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

namespace {
long double compute_subnormal_step_error(DType t) {
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
}  // namespace

// Both computed once (per dtype; per dtype and n, for the last few asked on
// the thread): the oracle asks for them per element.
long double subnormal_step_error(DType t) {
  static const auto table = [] {
    std::array<long double, kAllDTypes.size()> a{};
    for (DType d : kAllDTypes)
      if (dtype_is_float(d)) a[static_cast<size_t>(d)] = compute_subnormal_step_error(d);
    return a;
  }();
  return table.at(static_cast<size_t>(t));
}

double steps_error(DType t, int n) {
  if (n <= 0) return 0;
  thread_local RecentValues<std::pair<DType, int>, double, 4> recent;
  return recent.get({t, n}, [&] { return std::expm1(n * std::log1p(step_roundoff(t))); });
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


Expectation expect_element(const Reduction& red, std::span<const uint64_t> values) {
  const DType t = red.dtype;
  const size_t p = values.size();
  // Reused across calls: this runs once per checked element.
  thread_local std::vector<uint64_t> ys;
  thread_local std::vector<double> y;
  ys.resize(p);
  y.resize(p);
  for (size_t i = 0; i < p; ++i) ys[i] = premul_bits_fast(red, values[i]);
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
