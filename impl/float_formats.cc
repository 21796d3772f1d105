#include "impl/float_formats.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>

namespace collcheck {

namespace {
constexpr SmallFloatSpec make_spec(int exp_bits, int man_bits, bool has_inf, bool saturate,
                                   double max_finite) {
  const int bias = (1 << (exp_bits - 1)) - 1;
  const int emin = 1 - bias;
  double min_normal = 1.0;
  for (int i = 0; i < -emin; ++i) min_normal /= 2;
  double min_sub = min_normal;
  for (int i = 0; i < man_bits; ++i) min_sub /= 2;
  double u = 1.0;
  for (int i = 0; i < man_bits + 1; ++i) u /= 2;
  return SmallFloatSpec{exp_bits, man_bits, bias, has_inf, saturate, max_finite, min_normal, min_sub, u};
}

const SmallFloatSpec kSpecs[4] = {
    make_spec(5, 10, true, false, 65504.0),
    make_spec(8, 7, true, false, 3.3895313892515355e38),  // (2 - 2^-7) * 2^127
    make_spec(4, 3, false, true, 448.0),
    make_spec(5, 2, true, true, 57344.0),
};

uint32_t nan_bits(SmallFloat f, bool negative) {
  switch (f) {
    case SmallFloat::F16: return 0x7fff;
    case SmallFloat::BF16: return 0x7fff;
    case SmallFloat::E4M3: return negative ? 0xffu : 0x7fu;
    case SmallFloat::E5M2: return negative ? 0xfeu : 0x7eu;
  }
  return 0;
}
}  // namespace

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

namespace {
// 2^k as a double, for k in the normal range (every narrow format's values
// and quanta are well inside it).
double pow2_normal(int k) { return std::bit_cast<double>(static_cast<uint64_t>(k + 1023) << 52); }
}  // namespace

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

// Round to nearest, ties to even, on the double's 53-bit significand: the
// quantum is 2^(e - man_bits) with e the value's exponent, or emin below
// the normal range, so the kept bits are the significand shifted right.
uint32_t small_float_encode(SmallFloat f, double x) {
  const auto& s = small_float_spec(f);
  const int total = 1 + s.exp_bits + s.man_bits;
  const uint32_t sign = std::signbit(x) ? (1u << (total - 1)) : 0u;
  if (std::isnan(x)) return nan_bits(f, sign != 0);
  const uint32_t inf_bits = ((1u << s.exp_bits) - 1u) << s.man_bits;
  const uint64_t b = std::bit_cast<uint64_t>(x) & 0x7fffffffffffffffull;
  const int biased = static_cast<int>(b >> 52);
  if (biased == 0x7ff) {  // Inf: the overflow rule
    return s.saturate ? sign | small_float_encode(f, s.max_finite) : sign | inf_bits;
  }
  if (biased == 0) return sign;  // zero, or a double subnormal: far below half the least subnormal
  const int E = biased - 1023;   // x in [2^E, 2^(E+1))
  const uint64_t M = (b & ((uint64_t{1} << 52) - 1)) | (uint64_t{1} << 52);  // x = M 2^(E-52)
  const int emin = 1 - s.bias;
  int e = std::max(E, emin);
  const int shift = 52 - s.man_bits + (e - E);  // x / quantum = M 2^-shift
  if (shift >= 54) return sign;                 // below half a quantum: rounds to zero
  uint64_t n = M >> shift;
  const uint64_t rem = M & ((uint64_t{1} << shift) - 1), half = uint64_t{1} << (shift - 1);
  if (rem > half || (rem == half && (n & 1))) ++n;
  if (n == 0) return sign;
  if (n >> (s.man_bits + 1)) {  // rounded up into the next binade
    n >>= 1;
    ++e;
  }
  // n 2^(e - man_bits), exactly; above the largest finite value it overflows.
  if (static_cast<double>(n) * pow2_normal(e - s.man_bits) > s.max_finite)
    return s.saturate ? sign | small_float_encode(f, s.max_finite) : sign | inf_bits;
  if (!(n >> s.man_bits)) return sign | static_cast<uint32_t>(n);  // subnormal (e == emin)
  return sign | (static_cast<uint32_t>(e + s.bias) << s.man_bits) | (static_cast<uint32_t>(n) & ((1u << s.man_bits) - 1u));
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

FloatInfo float_info(DType t) {
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

uint8_t float_to_e4m3(float f) {
  return static_cast<uint8_t>(small_float_encode(SmallFloat::E4M3, static_cast<double>(f)));
}
uint8_t float_to_e5m2(float f) {
  return static_cast<uint8_t>(small_float_encode(SmallFloat::E5M2, static_cast<double>(f)));
}

}  // namespace collcheck
