// AVX2 + F16C reduce kernels: the vector half of impl/kernels.cc, chosen at
// run time when the CPU has both (kernels.cc keeps the scalar loops as the
// fallback and as the reference the tests hold these to, bit for bit).
//
// Every element is widened to float (exact for float16, bfloat16 and fp8),
// combined in float, and narrowed back with round-to-nearest-even: one float
// operation followed by one narrowing is the correctly rounded result, as
// float's 24 bits are >= 2p + 2 for every narrow format (impl/element_ops.h).
// fp8 follows NCCL's path: widen, operate, round to float16, then round that
// to fp8 with saturation, all in vector lanes (max and min on the bytes). Integers are the
// scalar steps of impl/element_ops.h compiled here for AVX2, where GCC has
// vpmaxsd, vpmulld and vpcmpgtq to vectorize them with.
// max and min keep NCCL's semantics: a NaN operand is dropped, NaN only when
// both are, and +0 > -0.
//
// Only functions marked COLLCHECK_AVX2 use the instructions; the file is
// compiled with the project's flags, so nothing here leaks AVX2 into code
// that runs on a CPU without it.
#include "impl/kernels_avx2.h"

#include <cpuid.h>
#include <immintrin.h>


#include "impl/element_ops.h"
#include "impl/float_formats.h"

namespace collcheck {

#if defined(__x86_64__)

#define COLLCHECK_AVX2 __attribute__((target("avx2,f16c"), always_inline)) inline

namespace {

// ---- max and min on float lanes ----

// NCCL's max: a NaN operand is dropped (NaN only when both are), and +0 > -0.
// MAXPS(b, a) gives b where b > a and a otherwise, a NaN in either included,
// so it drops b's NaN; a NaN in a is dropped by a blend. Equal operands give
// a AND b (for max; OR for min): the same bits, or +0 (-0 for min) from two
// zeros of opposite signs.
COLLCHECK_AVX2 __m256 max_ps(__m256 a, __m256 b) {
  const __m256 r = _mm256_blendv_ps(_mm256_max_ps(b, a), _mm256_and_ps(a, b), _mm256_cmp_ps(a, b, _CMP_EQ_OQ));
  return _mm256_blendv_ps(r, b, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
}
COLLCHECK_AVX2 __m256 min_ps(__m256 a, __m256 b) {
  const __m256 r = _mm256_blendv_ps(_mm256_min_ps(b, a), _mm256_or_ps(a, b), _mm256_cmp_ps(a, b, _CMP_EQ_OQ));
  return _mm256_blendv_ps(r, b, _mm256_cmp_ps(a, a, _CMP_UNORD_Q));
}
COLLCHECK_AVX2 __m256d max_pd(__m256d a, __m256d b) {
  const __m256d r = _mm256_blendv_pd(_mm256_max_pd(b, a), _mm256_and_pd(a, b), _mm256_cmp_pd(a, b, _CMP_EQ_OQ));
  return _mm256_blendv_pd(r, b, _mm256_cmp_pd(a, a, _CMP_UNORD_Q));
}
COLLCHECK_AVX2 __m256d min_pd(__m256d a, __m256d b) {
  const __m256d r = _mm256_blendv_pd(_mm256_min_pd(b, a), _mm256_or_pd(a, b), _mm256_cmp_pd(a, b, _CMP_EQ_OQ));
  return _mm256_blendv_pd(r, b, _mm256_cmp_pd(a, a, _CMP_UNORD_Q));
}

// sum and prod of widened float16/bfloat16 (their max and min stay on the bits).
template <Combine C>
COLLCHECK_AVX2 __m256 apply_ps(__m256 a, __m256 b) {
  static_assert(C == Combine::Sum || C == Combine::Prod);
  if constexpr (C == Combine::Sum) return _mm256_add_ps(a, b);
  else return _mm256_mul_ps(a, b);
}

// ---- 8 lanes of a narrow format, to and from float ----

// The 8 x 32-bit lane mask of a NaN float, as 8 x 16 bits.
COLLCHECK_AVX2 __m128i nan_mask16(__m256 r) {
  const __m256i m = _mm256_castps_si256(_mm256_cmp_ps(r, r, _CMP_UNORD_Q));
  return _mm_packs_epi32(_mm256_castsi256_si128(m), _mm256_extracti128_si256(m, 1));
}

// float16: F16C converts exactly one way and rounds to nearest even the other,
// with float16 subnormals and overflow to Inf; a NaN becomes 0x7fff, the
// canonical NaN of float_to_f16.
COLLCHECK_AVX2 __m256 f16_load(const void* p) {
  return _mm256_cvtph_ps(_mm_loadu_si128(static_cast<const __m128i*>(p)));
}
COLLCHECK_AVX2 __m128i f16_narrow(__m256 r) {
  const __m128i h = _mm256_cvtps_ph(r, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  return _mm_blendv_epi8(h, _mm_set1_epi16(0x7fff), nan_mask16(r));
}

// bfloat16: the top half of a float. 16 elements at a time: unpacking with
// zeros below widens the low and high four of each 128-bit lane, and packing
// the two results back restores the order (both work within lanes, so the
// shuffles stay cheap). Narrowing adds 0x7fff plus the lowest kept bit and
// drops the low half (ties to even, overflow carries into Inf); a NaN becomes
// 0x7fff.
COLLCHECK_AVX2 __m256i bf16_round(__m256 r) {
  const __m256i x = _mm256_castps_si256(r);
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
  const __m256i rounded = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)), lsb), 16);
  return _mm256_castps_si256(_mm256_blendv_ps(_mm256_castsi256_ps(rounded), _mm256_castsi256_ps(_mm256_set1_epi32(0x7fff)),
                                              _mm256_cmp_ps(r, r, _CMP_UNORD_Q)));
}

// ---- the loops: whole steps; the caller does the tail ----

// max and min of float16 and bfloat16 need no widening: their bits order like
// their values once a negative one has every bit flipped and a positive one
// its sign bit (so -0 < +0), and a NaN operand is dropped by hand: the other
// one is the result, 0x7fff when both are NaN. `inf` is the format's +Inf.
template <bool Max>
__attribute__((target("avx2,f16c"))) size_t half_minmax_loop(uint16_t* d, const uint16_t* a, const uint16_t* b,
                                                              size_t n, uint16_t inf) {
  const __m256i sign = _mm256_set1_epi16(static_cast<short>(0x8000));
  const __m256i abs_mask = _mm256_set1_epi16(0x7fff);
  const __m256i inf_v = _mm256_set1_epi16(static_cast<short>(inf));
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i));
    const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i));
    const __m256i kx = _mm256_xor_si256(x, _mm256_or_si256(_mm256_srai_epi16(x, 15), sign));
    const __m256i ky = _mm256_xor_si256(y, _mm256_or_si256(_mm256_srai_epi16(y, 15), sign));
    const __m256i k = Max ? _mm256_max_epu16(kx, ky) : _mm256_min_epu16(kx, ky);
    __m256i r = _mm256_xor_si256(k, _mm256_or_si256(_mm256_srai_epi16(_mm256_xor_si256(k, sign), 15), sign));
    const __m256i nan_x = _mm256_cmpgt_epi16(_mm256_and_si256(x, abs_mask), inf_v);
    const __m256i nan_y = _mm256_cmpgt_epi16(_mm256_and_si256(y, abs_mask), inf_v);
    r = _mm256_blendv_epi8(r, y, nan_x);
    r = _mm256_blendv_epi8(r, x, nan_y);
    r = _mm256_blendv_epi8(r, abs_mask, _mm256_and_si256(nan_x, nan_y));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), r);
  }
  return i;
}

template <Combine C>
__attribute__((target("avx2,f16c"))) size_t f16_loop(uint16_t* d, const uint16_t* a, const uint16_t* b, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), f16_narrow(apply_ps<C>(f16_load(a + i), f16_load(b + i))));
  return i;
}
template <Combine C>
__attribute__((target("avx2,f16c"))) size_t bf16_loop(uint16_t* d, const uint16_t* a, const uint16_t* b, size_t n) {
  const __m256i zero = _mm256_setzero_si256();
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i));
    const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i));
    const __m256 lo = apply_ps<C>(_mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, x)),
                                  _mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, y)));
    const __m256 hi = apply_ps<C>(_mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, x)),
                                  _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, y)));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), _mm256_packus_epi32(bf16_round(lo), bf16_round(hi)));
  }
  return i;
}
// float and double: sum and prod are plain IEEE operations that GCC already
// vectorizes in kernels.cc; max and min need the masks above.
template <bool Max>
__attribute__((target("avx2,f16c"))) size_t f32_loop(float* d, const float* a, const float* b, size_t n) {
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(a + i), y = _mm256_loadu_ps(b + i);
    _mm256_storeu_ps(d + i, Max ? max_ps(x, y) : min_ps(x, y));
  }
  return i;
}
template <bool Max>
__attribute__((target("avx2,f16c"))) size_t f64_loop(double* d, const double* a, const double* b, size_t n) {
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m256d x = _mm256_loadu_pd(a + i), y = _mm256_loadu_pd(b + i);
    _mm256_storeu_pd(d + i, Max ? max_pd(x, y) : min_pd(x, y));
  }
  return i;
}

// ---- fp8 ----
// sum and prod: 16 elements at a time, in two halves of 8 float lanes.
// Widening goes through float16 bits, which F16C widens exactly (subnormals
// included). e5m2 is float16's top byte. e4m3's magnitude shifted left by 7 is
// a float16 whose exponent is 8 too small (bias 15 against 7), subnormals
// alike, so e4m3 is widened to its value times 2^-8, exactly. Its one NaN
// (S.1111.111) would widen to 480, so the loop finds NaNs on the bytes and
// writes 0x7f over their results (a NaN operand makes a NaN sum or product,
// and nothing else does: e4m3 has no Inf, and its values cannot overflow a
// float). The scale is a power of two that
// keeps every sum (2^-8) and product (2^-16) a normal float, so the result's
// rounding is unchanged and only the encoder's thresholds move.
template <DType T>
COLLCHECK_AVX2 __m256i fp8_to_f16(__m128i v) {
  const __m256i x = _mm256_slli_epi16(_mm256_cvtepu8_epi16(v), 8);
  if constexpr (T == DType::Fp8E5M2) return x;
  // e4m3: the sign stays in bit 15, the magnitude moves down one bit (the
  // arithmetic shift copies the sign into bit 14, which the mask clears).
  return _mm256_and_si256(_mm256_srai_epi16(x, 1), _mm256_set1_epi16(static_cast<short>(0xbfff)));
}

// float16 -> e5m2 in 16 x 16-bit lanes: f16_to_e5m2 of impl/float_formats.h
// (nearest even on the low byte, saturate at 0x7b, Inf included) with NaN ->
// 0x7e: float_to_f16 makes every NaN 0x7fff, and F16C keeps a NaN's sign, so
// the sign is dropped here instead.
COLLCHECK_AVX2 __m256i f16_to_e5m2_x16(__m256i h) {
  const __m256i sign = _mm256_srli_epi16(_mm256_and_si256(h, _mm256_set1_epi16(static_cast<short>(0x8000))), 8);
  const __m256i x = _mm256_and_si256(h, _mm256_set1_epi16(0x7fff));
  const __m256i lsb = _mm256_and_si256(_mm256_srli_epi16(x, 8), _mm256_set1_epi16(1));
  __m256i r = _mm256_srli_epi16(_mm256_add_epi16(_mm256_add_epi16(x, _mm256_set1_epi16(0x7f)), lsb), 8);
  r = _mm256_or_si256(_mm256_min_epu16(r, _mm256_set1_epi16(0x7b)), sign);
  return _mm256_blendv_epi8(r, _mm256_set1_epi16(0x7e), _mm256_cmpgt_epi16(x, _mm256_set1_epi16(0x7c00)));
}

// A float that is an e4m3 result times 2^-K -> e4m3, in 8 x 32-bit lanes,
// through float16 as the table of impl/float_formats.cc rounds it. The
// float16 rounding is done on the float's bits: nearest even to 10 mantissa
// bits, which is float16's rounding wherever float16 is normal (below, the
// value is under 2^-14 and rounds to zero in e4m3 whichever way it went; an
// overflow to Inf saturates like any value over 448). Then: below 2^-6
// (e4m3's smallest normal) the code is the value in units of 2^-9, rounded
// to an integer (8 is the smallest normal's code, so a carry needs no care);
// above, rounding to 3 mantissa bits and rebasing the exponent (127 -> 7)
// gives the code, a carry included, saturating at 448 (0x7e). NaNs are the
// loop's.
template <int K>
COLLCHECK_AVX2 __m256i e4m3_encode_x8(__m256 y) {
  const __m256i bits = _mm256_castps_si256(y);
  const __m256i sign = _mm256_and_si256(_mm256_srli_epi32(bits, 24), _mm256_set1_epi32(0x80));
  const __m256i ab = _mm256_and_si256(bits, _mm256_set1_epi32(0x7fffffff));
  const __m256i lsb13 = _mm256_and_si256(_mm256_srli_epi32(ab, 13), _mm256_set1_epi32(1));
  const __m256i h = _mm256_and_si256(_mm256_add_epi32(_mm256_add_epi32(ab, _mm256_set1_epi32(0xfff)), lsb13),
                                     _mm256_set1_epi32(static_cast<int>(0xffffe000u)));
  const __m256i sub = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_castsi256_ps(h), _mm256_set1_ps(0x1p9f * (1 << K))));
  const __m256i lsb20 = _mm256_and_si256(_mm256_srli_epi32(h, 20), _mm256_set1_epi32(1));
  __m256i nor = _mm256_srli_epi32(_mm256_add_epi32(_mm256_add_epi32(h, _mm256_set1_epi32(0x7ffff)), lsb20), 20);
  nor = _mm256_min_epi32(_mm256_sub_epi32(nor, _mm256_set1_epi32((120 - K) << 3)), _mm256_set1_epi32(0x7e));
  const int small = (127 - 6 - K) << 23;  // 2^(-6-K): the smallest normal, scaled
  return _mm256_or_si256(_mm256_blendv_epi8(nor, sub, _mm256_cmpgt_epi32(_mm256_set1_epi32(small), h)), sign);
}

template <DType T, Combine C>
__attribute__((target("avx2,f16c"))) size_t fp8_loop(uint8_t* d, const uint8_t* a, const uint8_t* b, size_t n) {
  static_assert(C == Combine::Sum || C == Combine::Prod);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m128i va = _mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i));
    const __m128i vb = _mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i));
    const __m256i ha = fp8_to_f16<T>(va), hb = fp8_to_f16<T>(vb);
    const __m256 lo = apply_ps<C>(_mm256_cvtph_ps(_mm256_castsi256_si128(ha)), _mm256_cvtph_ps(_mm256_castsi256_si128(hb)));
    const __m256 hi = apply_ps<C>(_mm256_cvtph_ps(_mm256_extracti128_si256(ha, 1)), _mm256_cvtph_ps(_mm256_extracti128_si256(hb, 1)));
    __m128i out;
    if constexpr (T == DType::Fp8E5M2) {
      constexpr int kNearest = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
      const __m256i h = _mm256_inserti128_si256(_mm256_castsi128_si256(_mm256_cvtps_ph(lo, kNearest)),
                                                _mm256_cvtps_ph(hi, kNearest), 1);
      const __m256i e = f16_to_e5m2_x16(h);
      out = _mm_packus_epi16(_mm256_castsi256_si128(e), _mm256_extracti128_si256(e, 1));
    } else {
      constexpr int K = C == Combine::Sum ? 8 : 16;
      const __m256i w = _mm256_packus_epi32(e4m3_encode_x8<K>(lo), e4m3_encode_x8<K>(hi));
      const __m256i ordered = _mm256_permute4x64_epi64(w, 0xd8);  // packs work within 128-bit lanes
      out = _mm_packus_epi16(_mm256_castsi256_si128(ordered), _mm256_extracti128_si256(ordered, 1));
      const __m128i mag = _mm_set1_epi8(0x7f);
      const __m128i nan = _mm_or_si128(_mm_cmpeq_epi8(_mm_and_si128(va, mag), mag), _mm_cmpeq_epi8(_mm_and_si128(vb, mag), mag));
      out = _mm_blendv_epi8(out, mag, nan);
    }
    _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), out);
  }
  return i;
}

// max and min: the result is one operand, so they stay on the bytes, 32 at a
// time, ordered as half_minmax_loop orders float16. What NCCL's round trip
// through float16 changes is put back: a NaN operand is dropped, two give
// the canonical NaN (0x7f in e4m3, 0x7e in e5m2), and e5m2's Inf saturates
// to 0x7b, as every value over the largest finite does.
COLLCHECK_AVX2 __m256i fp8_key(__m256i x) {  // a negative value: every bit flipped; else the top bit
  return _mm256_xor_si256(x, _mm256_or_si256(_mm256_cmpgt_epi8(_mm256_setzero_si256(), x),
                                             _mm256_set1_epi8(static_cast<char>(0x80))));
}
template <DType T>
COLLCHECK_AVX2 __m256i fp8_is_nan(__m256i x) {
  const __m256i m = _mm256_and_si256(x, _mm256_set1_epi8(0x7f));
  if constexpr (T == DType::Fp8E4M3) return _mm256_cmpeq_epi8(m, _mm256_set1_epi8(0x7f));
  else return _mm256_cmpgt_epi8(m, _mm256_set1_epi8(0x7c));
}
template <DType T, bool Max>
__attribute__((target("avx2,f16c"))) size_t fp8_minmax_loop(uint8_t* d, const uint8_t* a, const uint8_t* b, size_t n) {
  const __m256i top = _mm256_set1_epi8(static_cast<char>(0x80));
  const __m256i abs_mask = _mm256_set1_epi8(0x7f);
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i x = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i));
    const __m256i y = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i));
    const __m256i k = Max ? _mm256_max_epu8(fp8_key(x), fp8_key(y)) : _mm256_min_epu8(fp8_key(x), fp8_key(y));
    // Back from a key: a set top bit was a non-negative value (flip the top bit), a clear one a negative value (flip all).
    __m256i r = _mm256_xor_si256(k, _mm256_or_si256(_mm256_cmpgt_epi8(k, _mm256_set1_epi8(-1)), top));
    const __m256i nan_x = fp8_is_nan<T>(x), nan_y = fp8_is_nan<T>(y);
    r = _mm256_blendv_epi8(r, y, nan_x);
    r = _mm256_blendv_epi8(r, x, nan_y);
    if constexpr (T == DType::Fp8E5M2)
      r = _mm256_blendv_epi8(r, _mm256_xor_si256(r, _mm256_set1_epi8(0x07)),  // 0x7c -> 0x7b, sign kept
                             _mm256_cmpeq_epi8(_mm256_and_si256(r, abs_mask), _mm256_set1_epi8(0x7c)));
    r = _mm256_blendv_epi8(r, _mm256_set1_epi8(T == DType::Fp8E4M3 ? 0x7f : 0x7e), _mm256_and_si256(nan_x, nan_y));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), r);
  }
  return i;
}

template <DType T>
size_t fp8_by_op(Combine c, uint8_t* d, const uint8_t* a, const uint8_t* b, size_t n) {
  switch (c) {
    case Combine::Sum: return fp8_loop<T, Combine::Sum>(d, a, b, n);
    case Combine::Prod: return fp8_loop<T, Combine::Prod>(d, a, b, n);
    case Combine::Max: return fp8_minmax_loop<T, true>(d, a, b, n);
    case Combine::Min: return fp8_minmax_loop<T, false>(d, a, b, n);
  }
  return 0;
}

// ---- integers: the scalar steps, vectorized by GCC for AVX2 ----
// Whole blocks of 32 bytes, so the count done is exact and the tail is the
// caller's, like every loop here.
template <typename T, Combine C>
__attribute__((target("avx2"))) size_t int_loop(T* d, const T* a, const T* b, size_t n) {
  const size_t whole = n / (32 / sizeof(T)) * (32 / sizeof(T));
  for (size_t i = 0; i < whole; ++i) d[i] = combine_elements<T>(C, a[i], b[i]);
  return whole;
}
template <typename T>
size_t int_by_op(Combine c, void* d, const void* a, const void* b, size_t n) {
  auto* x = static_cast<T*>(d);
  auto* y = static_cast<const T*>(a);
  auto* z = static_cast<const T*>(b);
  switch (c) {
    case Combine::Sum: return int_loop<T, Combine::Sum>(x, y, z, n);
    case Combine::Prod: return int_loop<T, Combine::Prod>(x, y, z, n);
    case Combine::Max: return int_loop<T, Combine::Max>(x, y, z, n);
    case Combine::Min: return int_loop<T, Combine::Min>(x, y, z, n);
  }
  return 0;
}

template <template <Combine> class L, typename T>
size_t by_op(Combine c, T* d, const T* a, const T* b, size_t n) {
  switch (c) {
    case Combine::Sum: return L<Combine::Sum>::run(d, a, b, n);
    case Combine::Prod: return L<Combine::Prod>::run(d, a, b, n);
    default: return 0;  // max and min: half_minmax_loop
  }
}
template <Combine C>
struct F16 {
  static size_t run(uint16_t* d, const uint16_t* a, const uint16_t* b, size_t n) { return f16_loop<C>(d, a, b, n); }
};
template <Combine C>
struct BF16 {
  static size_t run(uint16_t* d, const uint16_t* a, const uint16_t* b, size_t n) { return bf16_loop<C>(d, a, b, n); }
};
}  // namespace

bool avx2_kernels_available() {
  // AVX2 through the compiler (it checks the OS saves the registers too);
  // F16C from CPUID leaf 1 (clang has no name for it in the builtin).
  static const bool ok = [] {
    unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
    return __builtin_cpu_supports("avx2") && __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & bit_F16C) != 0;
  }();
  return ok;
}

size_t combine_avx2(void* dst, const void* a, const void* b, size_t n, DType t, Combine c) {
  if (!avx2_kernels_available()) return 0;
  switch (t) {
    case DType::Float16:
      if (c == Combine::Max) return half_minmax_loop<true>(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(a), static_cast<const uint16_t*>(b), n, 0x7c00);
      if (c == Combine::Min) return half_minmax_loop<false>(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(a), static_cast<const uint16_t*>(b), n, 0x7c00);
      return by_op<F16>(c, static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(a),
                        static_cast<const uint16_t*>(b), n);
    case DType::BFloat16:
      if (c == Combine::Max) return half_minmax_loop<true>(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(a), static_cast<const uint16_t*>(b), n, 0x7f80);
      if (c == Combine::Min) return half_minmax_loop<false>(static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(a), static_cast<const uint16_t*>(b), n, 0x7f80);
      return by_op<BF16>(c, static_cast<uint16_t*>(dst), static_cast<const uint16_t*>(a),
                         static_cast<const uint16_t*>(b), n);
    case DType::Float32:
      if (c == Combine::Max) return f32_loop<true>(static_cast<float*>(dst), static_cast<const float*>(a), static_cast<const float*>(b), n);
      if (c == Combine::Min) return f32_loop<false>(static_cast<float*>(dst), static_cast<const float*>(a), static_cast<const float*>(b), n);
      return 0;
    case DType::Float64:
      if (c == Combine::Max) return f64_loop<true>(static_cast<double*>(dst), static_cast<const double*>(a), static_cast<const double*>(b), n);
      if (c == Combine::Min) return f64_loop<false>(static_cast<double*>(dst), static_cast<const double*>(a), static_cast<const double*>(b), n);
      return 0;
    case DType::Fp8E4M3:
      return fp8_by_op<DType::Fp8E4M3>(c, static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(a),
                                       static_cast<const uint8_t*>(b), n);
    case DType::Fp8E5M2:
      return fp8_by_op<DType::Fp8E5M2>(c, static_cast<uint8_t*>(dst), static_cast<const uint8_t*>(a),
                                       static_cast<const uint8_t*>(b), n);
    case DType::Int8: return int_by_op<int8_t>(c, dst, a, b, n);
    case DType::Uint8: return int_by_op<uint8_t>(c, dst, a, b, n);
    case DType::Int32: return int_by_op<int32_t>(c, dst, a, b, n);
    case DType::Uint32: return int_by_op<uint32_t>(c, dst, a, b, n);
    case DType::Int64: return int_by_op<int64_t>(c, dst, a, b, n);
    case DType::Uint64: return int_by_op<uint64_t>(c, dst, a, b, n);
  }
  return 0;
}

#else  // not x86-64: the scalar kernels only

bool avx2_kernels_available() { return false; }
size_t combine_avx2(void*, const void*, const void*, size_t, DType, Combine) { return 0; }

#endif

}  // namespace collcheck
