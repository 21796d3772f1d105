// Host conversions between float/double and the narrow floating formats NCCL
// reduces: float16 (IEEE binary16), bfloat16, fp8 e4m3 (OCP "FN": no Inf, one NaN
// mantissa, max 448) and fp8 e5m2 (IEEE-like, max 57344).
//
// Every narrowing conversion rounds to nearest, ties to even. float16 and
// bfloat16 overflow to Inf. fp8 saturates to the largest finite value, including
// from +-Inf, exactly as CUDA's __NV_SATFINITE conversions that NCCL uses
// (`__nv_fp8_e4m3(__half)`); NaN stays NaN. NaNs produced by narrowing are the
// canonical patterns CUDA's host code produces: 0x7fff for float16 and bfloat16,
// sign|0x7f for e4m3 and sign|0x7e for e5m2. Widening is always exact.
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>

#include "impl/dtype.h"

namespace collcheck {

enum class SmallFloat : uint8_t { F16, BF16, E4M3, E5M2 };

struct SmallFloatSpec {
  int exp_bits;
  int man_bits;     // explicit mantissa bits
  int bias;
  bool has_inf;     // e4m3 has none
  bool saturate;    // overflow (and Inf) saturates to max finite instead of Inf
  double max_finite;
  double min_normal;
  double min_subnormal;
  double unit_roundoff;  // 2^-(man_bits+1)
};
const SmallFloatSpec& small_float_spec(SmallFloat f);

// Exact decode of any bit pattern.
double small_float_decode(SmallFloat f, uint32_t bits);
// Correctly rounded (RNE) encode of any double, with the format's overflow rule.
uint32_t small_float_encode(SmallFloat f, double x);
// The encoder written with frexp and ldexp as the formats define rounding:
// the reference the one above (on the bits, without libm) is tested against.
uint32_t small_float_encode_reference(SmallFloat f, double x);

// Fast paths used by the reduce kernels. Each one is checked against the
// generic encoder/decoder above in tests/float_formats_test.cc.
inline float f16_to_float(uint16_t h);
inline uint16_t float_to_f16(float f);
inline float bf16_to_float(uint16_t b);
inline uint16_t float_to_bf16(float f);
inline float e4m3_to_float(uint8_t v);
inline float e5m2_to_float(uint8_t v);
// float16 -> fp8, RNE with saturation: the conversion NCCL applies after every
// fp8 operation, which it performs in float16.
inline uint8_t f16_to_e4m3(uint16_t h);
inline uint8_t f16_to_e5m2(uint16_t h);
// float -> fp8 directly (one rounding): used for scalars (avg's 1/p).
uint8_t float_to_e4m3(float f);
uint8_t float_to_e5m2(float f);

// float16 -> e4m3 for all 65536 patterns, built once from small_float_encode.
const uint8_t* f16_to_e4m3_table();

// What the oracle and the data generators need to know of a floating dtype.
struct FloatInfo {
  int precision;         // significand bits, the hidden one included
  double max_finite;
  double min_normal;
  double min_subnormal;
  double unit_roundoff;  // worst relative error of one rounded step (fp8: via float16, so two roundings)
  bool saturates;        // overflow saturates instead of giving Inf (fp8)
};
// Throws std::invalid_argument for integer dtypes.
FloatInfo float_info(DType t);

inline float f16_to_float(uint16_t h) {
  // Place exponent and mantissa in float's fields and rescale by 2^(127-15):
  // exact for normals and subnormals alike, and free of data-dependent branches
  // so that loops over it vectorize. Inf and NaN are patched in afterwards.
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t em = h & 0x7fffu;
  float mag = std::bit_cast<float>(em << 13) * 0x1p112f;
  if (em >= 0x7c00u) mag = std::bit_cast<float>(0x7f800000u | ((em & 0x3ffu) << 13));
  return std::bit_cast<float>(std::bit_cast<uint32_t>(mag) | sign);
}

inline uint16_t float_to_f16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t a = x & 0x7fffffffu;
  if (a > 0x7f800000u) return 0x7fff;                       // NaN
  if (a >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to Inf
  if (a >= 0x38800000u) {                                   // normal in float16 (>= 2^-14)
    a += 0xfffu + ((a >> 13) & 1u);                         // round to nearest even on bit 13
    a -= 0x38000000u;                                       // rebias 127 -> 15
    return static_cast<uint16_t>(sign | (a >> 13));
  }
  // Subnormal (or zero): the float16 quantum is 2^-24, so scale and round to an
  // integer; 1024 is the smallest normal, whose encoding is also 1024. Adding
  // and subtracting 2^23 rounds to an integer in the current (nearest-even)
  // mode without a libm call, which GCC would otherwise hoist out of the branch.
  const float scaled = std::bit_cast<float>(a) * 16777216.0f;  // exact: power-of-two scale
  const float rounded = (scaled + 8388608.0f) - 8388608.0f;
  return static_cast<uint16_t>(sign | static_cast<uint32_t>(rounded));
}

inline float bf16_to_float(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

inline uint16_t float_to_bf16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return 0x7fff;  // NaN
  x += 0x7fffu + ((x >> 16) & 1u);                     // ties to even; overflow carries into Inf
  return static_cast<uint16_t>(x >> 16);
}

inline float e4m3_to_float(uint8_t v) {
  const uint32_t sign = static_cast<uint32_t>(v & 0x80u) << 24;
  const uint32_t exp = (v >> 3) & 0xfu;
  const uint32_t man = v & 0x7u;
  if (exp == 0xf && man == 0x7) return std::bit_cast<float>(sign | 0x7fc00000u);  // the only NaN
  if (exp == 0) {                                                                   // man * 2^-9
    const float f = static_cast<float>(man) * 0.001953125f;
    return sign ? -f : f;
  }
  return std::bit_cast<float>(sign | ((exp + 120u) << 23) | (man << 20));
}

// e5m2 is binary16 with the low 8 mantissa bits cut off: same exponent range,
// same subnormals, so widening is a shift and narrowing rounds the low byte.
inline float e5m2_to_float(uint8_t v) { return f16_to_float(static_cast<uint16_t>(v << 8)); }

inline uint8_t f16_to_e5m2(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) >> 8;
  uint32_t x = h & 0x7fffu;
  if (x > 0x7c00u) return static_cast<uint8_t>(sign | 0x7eu);  // NaN
  x = (x + 0x7fu + ((x >> 8) & 1u)) >> 8;                        // nearest even on the low byte
  if (x > 0x7bu) x = 0x7bu;                                      // saturate, Inf included
  return static_cast<uint8_t>(sign | x);
}

inline uint8_t f16_to_e4m3(uint16_t h) {
  static const uint8_t* const table = f16_to_e4m3_table();
  return table[h];
}

}  // namespace collcheck
