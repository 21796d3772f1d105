// Cross-checks our conversions against CUDA's own host implementations of
// __float2half_rn, __float2bfloat16_rn and __nv_cvt_*_to_fp8(__NV_SATFINITE),
// the conversions NCCL's kernels use. Built only when CUDA's headers exist.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>

#include "impl/float_formats.h"

using namespace collcheck;

namespace {
uint16_t cuda_f16(float f) {
  __half_raw r = __float2half_rn(f);
  return r.x;
}
uint16_t cuda_bf16(float f) {
  __nv_bfloat16_raw r = __float2bfloat16_rn(f);
  return r.x;
}
bool same_or_both_nan(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || (a == b && std::signbit(a) == std::signbit(b));
}
}  // namespace

TEST(CudaHost, HalfToFp8MatchesOnAllPatterns) {
  for (uint32_t b = 0; b < 65536; ++b) {
    __half_raw h;
    h.x = static_cast<unsigned short>(b);
    const auto e4 = __nv_cvt_halfraw_to_fp8(h, __NV_SATFINITE, __NV_E4M3);
    const auto e5 = __nv_cvt_halfraw_to_fp8(h, __NV_SATFINITE, __NV_E5M2);
    ASSERT_TRUE(same_or_both_nan(e4m3_to_float(f16_to_e4m3(static_cast<uint16_t>(b))), e4m3_to_float(e4))) << b;
    ASSERT_TRUE(same_or_both_nan(e5m2_to_float(f16_to_e5m2(static_cast<uint16_t>(b))), e5m2_to_float(e5))) << b;
    if (!std::isnan(f16_to_float(static_cast<uint16_t>(b)))) {
      ASSERT_EQ(f16_to_e4m3(static_cast<uint16_t>(b)), e4) << b;
      ASSERT_EQ(f16_to_e5m2(static_cast<uint16_t>(b)), e5) << b;
    }
  }
}

TEST(CudaHost, Fp8DecodeMatchesOnAllPatterns) {
  for (uint32_t b = 0; b < 256; ++b) {
    const auto s = static_cast<__nv_fp8_storage_t>(b);
    __half_raw h4 = __nv_cvt_fp8_to_halfraw(s, __NV_E4M3);
    __half_raw h5 = __nv_cvt_fp8_to_halfraw(s, __NV_E5M2);
    ASSERT_TRUE(same_or_both_nan(e4m3_to_float(static_cast<uint8_t>(b)), f16_to_float(h4.x))) << b;
    ASSERT_TRUE(same_or_both_nan(e5m2_to_float(static_cast<uint8_t>(b)), f16_to_float(h5.x))) << b;
  }
}

TEST(CudaHost, FloatToHalfAndBf16MatchOnEveryHalfBoundaryAndRandomFloats) {
  // Every float16/bfloat16 value, midpoint and its float neighbours...
  for (uint32_t b = 0; b < 65536; ++b) {
    for (float base : {f16_to_float(static_cast<uint16_t>(b)), bf16_to_float(static_cast<uint16_t>(b))}) {
      for (float f : {base, std::nextafter(base, 0.0f), std::nextafter(base, INFINITY)}) {
        if (std::isnan(f)) continue;
        ASSERT_EQ(float_to_f16(f), cuda_f16(f)) << f;
        ASSERT_EQ(float_to_bf16(f), cuda_bf16(f)) << f;
      }
    }
  }
  // ...and ten million random float bit patterns.
  std::mt19937 rng(12345);
  for (int i = 0; i < 10'000'000; ++i) {
    const float f = std::bit_cast<float>(static_cast<uint32_t>(rng()));
    if (std::isnan(f)) {
      ASSERT_EQ(float_to_f16(f), 0x7fff);
      continue;
    }
    ASSERT_EQ(float_to_f16(f), cuda_f16(f)) << f;
    ASSERT_EQ(float_to_bf16(f), cuda_bf16(f)) << f;
  }
}

TEST(CudaHost, FloatToFp8MatchesOnRandomFloats) {
  std::mt19937 rng(777);
  for (int i = 0; i < 2'000'000; ++i) {
    const float f = std::bit_cast<float>((static_cast<uint32_t>(rng()) & 0xc7ffffffu) | 0x38000000u);  // |f| in fp8 range
    const auto e4 = __nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E4M3);
    const auto e5 = __nv_cvt_float_to_fp8(f, __NV_SATFINITE, __NV_E5M2);
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_e4m3(f), e4) << f;
    ASSERT_EQ(float_to_e5m2(f), e5) << f;
  }
}
