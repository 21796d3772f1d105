#include "impl/float_formats.h"

#include "impl/float_encode.h"

#include <algorithm>
#include <bit>
#include <array>
#include <cmath>
#include <optional>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>

namespace collcheck {

using float_encode::kSpecs;
using float_encode::nan_bits;
using float_encode::pow2_normal;

const SmallFloatSpec& small_float_spec(SmallFloat f) { return kSpecs[static_cast<int>(f)]; }

uint32_t small_float_encode_reference(SmallFloat f, double x) {
  const auto& s = small_float_spec(f);
  const int total = 1 + s.exp_bits + s.man_bits;
  const uint32_t sign = std::signbit(x) ? (1u << (total - 1)) : 0u;
  if (std::isnan(x)) return nan_bits(f, sign != 0);
  double a = std::fabs(x);
  const int emin = 1 - s.bias;
  double r;
  if (std::isinf(a)) {
    r = INFINITY;
  } else if (a == 0) {
    return sign;
  } else {
    int e;
    std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1)
    e -= 1;             // a in [2^e, 2^(e+1))
    if (e < emin) e = emin;
    const int q = e - s.man_bits;  // quantum exponent
    r = std::ldexp(std::nearbyint(std::ldexp(a, -q)), q);  // default mode: ties to even
  }
  if (r > s.max_finite) {
    if (s.saturate) {
      r = s.max_finite;
    } else {
      return sign | (((1u << s.exp_bits) - 1u) << s.man_bits);  // Inf
    }
  }
  if (r == 0) return sign;
  if (r < s.min_normal) {
    return sign | static_cast<uint32_t>(std::ldexp(r, -(emin - s.man_bits)));
  }
  int e;
  std::frexp(r, &e);
  e -= 1;
  const uint32_t man = static_cast<uint32_t>(std::ldexp(r, s.man_bits - e)) & ((1u << s.man_bits) - 1u);
  const uint32_t exp = static_cast<uint32_t>(e + s.bias);
  return sign | (exp << s.man_bits) | man;
}

// Exact: the significand scaled by an exact power of two, without a libm call
// (ldexp and frexp were a tenth of verify's time through the oracle's element
// conversions). FastDecodersMatchTheGenericDecoderOnEveryPattern holds it to
// the kernels' own decoders on every pattern.
double small_float_decode(SmallFloat f, uint32_t bits) {
  const auto& s = small_float_spec(f);
  const int total = 1 + s.exp_bits + s.man_bits;
  const bool negative = (bits >> (total - 1)) & 1u;
  const uint32_t exp = (bits >> s.man_bits) & ((1u << s.exp_bits) - 1u);
  const uint32_t man = bits & ((1u << s.man_bits) - 1u);
  const uint32_t exp_all_ones = (1u << s.exp_bits) - 1u;
  double v;
  if (s.has_inf && exp == exp_all_ones) {
    v = man == 0 ? INFINITY : NAN;
  } else if (!s.has_inf && exp == exp_all_ones && man == (1u << s.man_bits) - 1u) {
    v = NAN;  // e4m3: S.1111.111 is the only NaN; the rest of the top binade is finite
  } else if (exp == 0) {
    v = static_cast<double>(man) * pow2_normal(1 - s.bias - s.man_bits);
  } else {
    v = static_cast<double>(man | (1u << s.man_bits)) * pow2_normal(static_cast<int>(exp) - s.bias - s.man_bits);
  }
  return negative ? -v : v;
}

// The encoder of impl/float_encode.h, for a format known at run time.
uint32_t small_float_encode(SmallFloat f, double x) {
  switch (f) {
    case SmallFloat::F16: return float_encode::encode<SmallFloat::F16>(x);
    case SmallFloat::BF16: return float_encode::encode<SmallFloat::BF16>(x);
    case SmallFloat::E4M3: return float_encode::encode<SmallFloat::E4M3>(x);
    case SmallFloat::E5M2: return float_encode::encode<SmallFloat::E5M2>(x);
  }
  return 0;
}

const uint8_t* f16_to_e4m3_table() {
  static const std::unique_ptr<uint8_t[]> table = [] {
    std::unique_ptr<uint8_t[]> t(new uint8_t[65536]);
    for (uint32_t i = 0; i < 65536; ++i)
      t[i] = static_cast<uint8_t>(small_float_encode(SmallFloat::E4M3, small_float_decode(SmallFloat::F16, i)));
    return t;
  }();
  return table.get();
}

namespace {
FloatInfo compute_float_info(DType t) {
  auto small = [](SmallFloat f) {
    const auto& s = small_float_spec(f);
    return FloatInfo{s.man_bits + 1, s.max_finite, s.min_normal, s.min_subnormal, s.unit_roundoff, s.saturate};
  };
  switch (t) {
    case DType::Float16: return small(SmallFloat::F16);
    case DType::BFloat16: return small(SmallFloat::BF16);
    case DType::Fp8E4M3:
    case DType::Fp8E5M2: {
      // NCCL rounds every fp8 step to float16 first, then to fp8.
      FloatInfo i = small(t == DType::Fp8E4M3 ? SmallFloat::E4M3 : SmallFloat::E5M2);
      const double u16 = small_float_spec(SmallFloat::F16).unit_roundoff;
      i.unit_roundoff = i.unit_roundoff + u16 + i.unit_roundoff * u16;
      return i;
    }
    case DType::Float32:
      return {24, std::numeric_limits<float>::max(), std::numeric_limits<float>::min(),
              std::numeric_limits<float>::denorm_min(), std::ldexp(1.0, -24), false};
    case DType::Float64:
      return {53, std::numeric_limits<double>::max(), std::numeric_limits<double>::min(),
              std::numeric_limits<double>::denorm_min(), std::ldexp(1.0, -53), false};
    default: throw std::invalid_argument("float_info: not a floating dtype");
  }
}
}  // namespace

// Computed once per dtype: the oracle asks for it per element.
FloatInfo float_info(DType t) {
  static const auto table = [] {
    std::array<std::optional<FloatInfo>, kAllDTypes.size()> a;
    for (DType d : kAllDTypes)
      if (dtype_is_float(d)) a[static_cast<size_t>(d)] = compute_float_info(d);
    return a;
  }();
  const size_t i = static_cast<size_t>(t);
  if (i >= table.size() || !table[i]) throw std::invalid_argument("float_info: not a floating dtype");
  return *table[i];
}

uint8_t float_to_e4m3(float f) {
  return static_cast<uint8_t>(small_float_encode(SmallFloat::E4M3, static_cast<double>(f)));
}
uint8_t float_to_e5m2(float f) {
  return static_cast<uint8_t>(small_float_encode(SmallFloat::E5M2, static_cast<double>(f)));
}

}  // namespace collcheck
