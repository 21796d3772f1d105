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

// fp8 by a table of encode's answers. Below its binade's round bit, only
// whether any bit of a double's fraction is set can matter to the rounding
// (the sticky bit), and outside a window of exponents the answer is zero or
// saturation whatever the fraction: so (the exponent clamped to the window,
// the top man_bits + 1 bits of the fraction, the sticky bit) decides the
// answer, and a table of encode's answer for each such triple (672 entries
// for e4m3, 560 for e5m2) gives encode's bits with a load, where encode's
// steps were most of an fp8 input fill. tests/float_formats_test.cc holds it
// to encode on doubles of every kind.
template <SmallFloat F>
struct Fp8Table {
  static constexpr SmallFloatSpec s = kSpecs[static_cast<int>(F)];
  static_assert(1 + s.exp_bits + s.man_bits == 8, "Fp8Table: the 8-bit formats");
  static constexpr int kTop = s.man_bits + 1;        // the fraction's kept bits and the round bit
  static constexpr int kEmin = 1 - s.bias;           // the least normal exponent
  static constexpr int kLow = kEmin - s.man_bits - 1;  // below it, every value rounds to zero
  // Above the largest finite value's exponent, every value saturates.
  static constexpr int kHigh = [] {
    int e = 0;
    for (double m = s.max_finite; m >= 2; m /= 2) ++e;
    return e + 1;
  }();
  static constexpr int kRows = kHigh - kLow + 2;  // kLow - 1 (zero) .. kHigh (saturated)
  uint8_t bits[kRows << (kTop + 1)];
  Fp8Table();
  static const Fp8Table& get() {
    static const Fp8Table t;
    return t;
  }
  [[gnu::noinline, gnu::cold]] static uint32_t encode_special(double x) { return float_encode::encode<F>(x); }
  // The fill's loop inlines this; what it rarely takes (a NaN or an Inf,
  // the table's first use) is called out of line.
  [[gnu::always_inline]] static uint32_t encode(double x) {
    const uint64_t b = std::bit_cast<uint64_t>(x);
    const uint32_t sign = static_cast<uint32_t>(b >> 63) << 7;
    const int biased = static_cast<int>((b >> 52) & 0x7ff);
    if (biased == 0x7ff) [[unlikely]] return encode_special(x);
    const int e = std::clamp(biased - 1023, kLow - 1, kHigh);
    const uint64_t top = (b >> (52 - kTop)) & ((uint64_t{1} << kTop) - 1);
    const uint64_t sticky = (b & ((uint64_t{1} << (52 - kTop)) - 1)) != 0;
    const size_t i = (static_cast<size_t>(e - (kLow - 1)) << (kTop + 1)) | static_cast<size_t>(top << 1 | sticky);
    return sign | get().bits[i];
  }
};

// Each entry is encode's answer for the least double of its triple (a zero
// entry's is a value far below half the least subnormal: zero).
template <SmallFloat F>
Fp8Table<F>::Fp8Table() {
  for (int row = 0; row < kRows; ++row)
    for (uint64_t top = 0; top < (uint64_t{1} << kTop); ++top)
      for (uint64_t sticky = 0; sticky < 2; ++sticky) {
        const uint64_t biased = static_cast<uint64_t>(kLow - 1 + row + 1023);
        const double x = std::bit_cast<double>(biased << 52 | top << (52 - kTop) | sticky);
        bits[static_cast<size_t>(row) << (kTop + 1) | static_cast<size_t>(top << 1 | sticky)] =
            static_cast<uint8_t>(float_encode::encode<F>(x));
      }
}

// A floating dtype's element bits for a double (to_element_bits's floats),
// with the dtype known at compile time.
template <DType T>
[[gnu::always_inline]] inline uint64_t float_bits(double v) {
  static_assert(dtype_is_float(T), "float_bits: a floating dtype");
  if constexpr (T == DType::Float16) return encode<SmallFloat::F16>(v);
  else if constexpr (T == DType::BFloat16) return encode<SmallFloat::BF16>(v);
  else if constexpr (T == DType::Fp8E4M3) return Fp8Table<SmallFloat::E4M3>::encode(v);
  else if constexpr (T == DType::Fp8E5M2) return Fp8Table<SmallFloat::E5M2>::encode(v);
  else if constexpr (T == DType::Float32) return std::bit_cast<uint32_t>(static_cast<float>(v));
  else return std::bit_cast<uint64_t>(v);
}

}  // namespace collcheck::float_encode
