// AVX2 + F16C reduce kernels: the vector half of impl/kernels.cc, chosen at
// run time when the CPU has both (kernels.cc keeps the scalar loops as the
// fallback and as the reference the tests hold these to, bit for bit).
//
// Every element is widened to float (exact for float16, bfloat16 and fp8),
// combined in float, and narrowed back with round-to-nearest-even: one float
// operation followed by one narrowing is the correctly rounded result, as
// float's 24 bits are >= 2p + 2 for every narrow format (impl/element_ops.h).
// fp8 has no vector loop: kernels.cc looks each pair up in a table of
// results (one load per element beats the arithmetic, and gathers are slow).
// max and min keep NCCL's semantics: a NaN operand is dropped, NaN only when
// both are, and +0 > -0.
//
// Only functions marked COLLCHECK_AVX2 use the instructions; the file is
// compiled with the project's flags, so nothing here leaks AVX2 into code
// that runs on a CPU without it.
#include "impl/kernels_avx2.h"

#include <cpuid.h>
#include <immintrin.h>


#include "impl/float_formats.h"

namespace collcheck {

#if defined(__x86_64__)

#define COLLCHECK_AVX2 __attribute__((target("avx2,f16c"), always_inline)) inline

namespace {

// ---- max and min on float lanes ----

// a where a wins, else b: a > b; a == b and a is +0 (or any equal pair with a
// non-negative sign: the same bits); b is NaN and a is not. Both NaN: b.
COLLCHECK_AVX2 __m256 max_ps(__m256 a, __m256 b) {
  const __m256 gt = _mm256_cmp_ps(a, b, _CMP_GT_OQ);
  const __m256 eq_a_pos = _mm256_andnot_ps(a, _mm256_cmp_ps(a, b, _CMP_EQ_OQ));  // sign bit: eq and a's sign clear
  const __m256 b_nan_only =
      _mm256_andnot_ps(_mm256_cmp_ps(a, a, _CMP_UNORD_Q), _mm256_cmp_ps(b, b, _CMP_UNORD_Q));
  return _mm256_blendv_ps(b, a, _mm256_or_ps(_mm256_or_ps(gt, eq_a_pos), b_nan_only));
}
COLLCHECK_AVX2 __m256 min_ps(__m256 a, __m256 b) {
  const __m256 lt = _mm256_cmp_ps(a, b, _CMP_LT_OQ);
  const __m256 eq_a_neg = _mm256_and_ps(a, _mm256_cmp_ps(a, b, _CMP_EQ_OQ));  // sign bit: eq and a's sign set
  const __m256 b_nan_only =
      _mm256_andnot_ps(_mm256_cmp_ps(a, a, _CMP_UNORD_Q), _mm256_cmp_ps(b, b, _CMP_UNORD_Q));
  return _mm256_blendv_ps(b, a, _mm256_or_ps(_mm256_or_ps(lt, eq_a_neg), b_nan_only));
}
COLLCHECK_AVX2 __m256d max_pd(__m256d a, __m256d b) {
  const __m256d gt = _mm256_cmp_pd(a, b, _CMP_GT_OQ);
  const __m256d eq_a_pos = _mm256_andnot_pd(a, _mm256_cmp_pd(a, b, _CMP_EQ_OQ));
  const __m256d b_nan_only =
      _mm256_andnot_pd(_mm256_cmp_pd(a, a, _CMP_UNORD_Q), _mm256_cmp_pd(b, b, _CMP_UNORD_Q));
  return _mm256_blendv_pd(b, a, _mm256_or_pd(_mm256_or_pd(gt, eq_a_pos), b_nan_only));
}
COLLCHECK_AVX2 __m256d min_pd(__m256d a, __m256d b) {
  const __m256d lt = _mm256_cmp_pd(a, b, _CMP_LT_OQ);
  const __m256d eq_a_neg = _mm256_and_pd(a, _mm256_cmp_pd(a, b, _CMP_EQ_OQ));
  const __m256d b_nan_only =
      _mm256_andnot_pd(_mm256_cmp_pd(a, a, _CMP_UNORD_Q), _mm256_cmp_pd(b, b, _CMP_UNORD_Q));
  return _mm256_blendv_pd(b, a, _mm256_or_pd(_mm256_or_pd(lt, eq_a_neg), b_nan_only));
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
    default: return 0;  // integers: GCC vectorizes the scalar loops; fp8: kernels.cc's tables
  }
}

#else  // not x86-64: the scalar kernels only

bool avx2_kernels_available() { return false; }
size_t combine_avx2(void*, const void*, const void*, size_t, DType, Combine) { return 0; }

#endif

}  // namespace collcheck
