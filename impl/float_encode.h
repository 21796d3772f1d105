// The narrow floating formats' constants and their encoder, as templates that
// inline into a loop over one format (the input generator's fill): the spec
// table is constexpr here, so a loop's encode folds its format's constants.
// small_float_encode (impl/float_formats.h) is this encoder dispatched at run
// time, and to_element_bits (impl/semantics.h) takes its floats from
// float_bits below; tests/float_formats_test.cc holds the encoder to the
// frexp/ldexp reference.
#pragma once

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>

#include "impl/float_formats.h"

namespace collcheck::float_encode {

constexpr SmallFloatSpec make_spec(int exp_bits, int man_bits, bool has_inf, bool saturate, double max_finite) {
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

// Indexed by SmallFloat.
inline constexpr SmallFloatSpec kSpecs[4] = {
    make_spec(5, 10, true, false, 65504.0),
    make_spec(8, 7, true, false, 3.3895313892515355e38),  // (2 - 2^-7) * 2^127
    make_spec(4, 3, false, true, 448.0),
    make_spec(5, 2, true, true, 57344.0),
};

constexpr uint32_t nan_bits(SmallFloat f, bool negative) {
  switch (f) {
    case SmallFloat::F16: return 0x7fff;
    case SmallFloat::BF16: return 0x7fff;
    case SmallFloat::E4M3: return negative ? 0xffu : 0x7fu;
    case SmallFloat::E5M2: return negative ? 0xfeu : 0x7eu;
  }
  return 0;
}

// 2^k as a double, for k in the normal range (every narrow format's values
// and quanta are well inside it).
inline double pow2_normal(int k) { return std::bit_cast<double>(static_cast<uint64_t>(k + 1023) << 52); }

// Round to nearest, ties to even, on the double's 53-bit significand: the
// quantum is 2^(e - man_bits) with e the value's exponent, or emin below
// the normal range, so the kept bits are the significand shifted right.
template <SmallFloat F>
inline uint32_t encode(double x) {
  constexpr SmallFloatSpec s = kSpecs[static_cast<int>(F)];
  constexpr int total = 1 + s.exp_bits + s.man_bits;
  constexpr uint32_t inf_bits = ((1u << s.exp_bits) - 1u) << s.man_bits;
  constexpr int emin = 1 - s.bias;
  const uint32_t sign = std::signbit(x) ? (1u << (total - 1)) : 0u;
  if (std::isnan(x)) return nan_bits(F, sign != 0);
  const uint64_t b = std::bit_cast<uint64_t>(x) & 0x7fffffffffffffffull;
  const int biased = static_cast<int>(b >> 52);
  if (biased == 0x7ff) {  // Inf: the overflow rule
    return s.saturate ? sign | encode<F>(s.max_finite) : sign | inf_bits;
  }
  if (biased == 0) return sign;  // zero, or a double subnormal: far below half the least subnormal
  const int E = biased - 1023;   // x in [2^E, 2^(E+1))
  const uint64_t M = (b & ((uint64_t{1} << 52) - 1)) | (uint64_t{1} << 52);  // x = M 2^(E-52)
  int e = std::max(E, emin);
  const int shift = 52 - s.man_bits + (e - E);  // x / quantum = M 2^-shift
  if (shift >= 54) return sign;                 // below half a quantum: rounds to zero
  uint64_t n = M >> shift;
  const uint64_t rem = M & ((uint64_t{1} << shift) - 1), half = uint64_t{1} << (shift - 1);
  // Up when above half a quantum, or at half with n odd (ties to even):
  // without a branch, which random data mispredicted half the time.
  n += static_cast<uint64_t>(rem > half) | (static_cast<uint64_t>(rem == half) & n & 1u);
  if (n == 0) return sign;
  if (n >> (s.man_bits + 1)) {  // rounded up into the next binade
    n >>= 1;
    ++e;
  }
  // n 2^(e - man_bits), exactly; above the largest finite value it overflows.
  if (static_cast<double>(n) * pow2_normal(e - s.man_bits) > s.max_finite)
    return s.saturate ? sign | encode<F>(s.max_finite) : sign | inf_bits;
  if (!(n >> s.man_bits)) return sign | static_cast<uint32_t>(n);  // subnormal (e == emin)
  return sign | (static_cast<uint32_t>(e + s.bias) << s.man_bits) | (static_cast<uint32_t>(n) & ((1u << s.man_bits) - 1u));
}

// A floating dtype's element bits for a double (to_element_bits's floats),
// with the dtype known at compile time.
template <DType T>
inline uint64_t float_bits(double v) {
  static_assert(dtype_is_float(T), "float_bits: a floating dtype");
  if constexpr (T == DType::Float16) return encode<SmallFloat::F16>(v);
  else if constexpr (T == DType::BFloat16) return encode<SmallFloat::BF16>(v);
  else if constexpr (T == DType::Fp8E4M3) return encode<SmallFloat::E4M3>(v);
  else if constexpr (T == DType::Fp8E5M2) return encode<SmallFloat::E5M2>(v);
  else if constexpr (T == DType::Float32) return std::bit_cast<uint32_t>(static_cast<float>(v));
  else return std::bit_cast<uint64_t>(v);
}

}  // namespace collcheck::float_encode
