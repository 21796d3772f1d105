// Exhaustive tests of the narrow float conversions: every bit pattern of every
// format, every rounding boundary between adjacent values, and the special
// values (NaN, +-Inf, +-0, subnormals, saturation).
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <limits>
#include <random>

#include "impl/float_encode.h"
#include "impl/float_formats.h"

using namespace collcheck;

namespace {

struct Fmt {
  SmallFloat f;
  const char* name;
  uint32_t patterns;
};
const Fmt kFormats[] = {{SmallFloat::F16, "float16", 1u << 16},
                        {SmallFloat::BF16, "bfloat16", 1u << 16},
                        {SmallFloat::E4M3, "fp8_e4m3", 1u << 8},
                        {SmallFloat::E5M2, "fp8_e5m2", 1u << 8}};

bool same_value(double a, double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

// The i-th of a stream of doubles for an encoder of `spec`: one in four any
// bit pattern (any magnitude, NaNs and Infs); the others a random significand
// at an exponent from two below the least subnormal to two above the largest,
// one in four of them cut to a tie of the format's rounding.
double draw_double(std::mt19937_64& rng, const SmallFloatSpec& spec, int i) {
  if (i % 4 == 0) return std::bit_cast<double>(rng());
  const int emax = std::ilogb(spec.max_finite), emin = std::ilogb(spec.min_subnormal);
  const double m = 1.0 + static_cast<double>(rng() >> 12) * 0x1p-52;
  const int e = emin - 2 + static_cast<int>(rng() % static_cast<uint64_t>(emax - emin + 5));
  const double x = std::ldexp(rng() % 2 ? -m : m, e);
  if (i % 4 == 1) return std::nearbyint(std::ldexp(x, -e + spec.man_bits + 1)) * std::ldexp(1.0, e - spec.man_bits - 1);
  return x;
}

}  // namespace

TEST(FloatFormats, EveryPatternRoundTripsThroughTheGenericEncoder) {
  for (const auto& fm : kFormats) {
    size_t nans = 0, infs = 0;
    for (uint32_t b = 0; b < fm.patterns; ++b) {
      const double v = small_float_decode(fm.f, b);
      if (std::isnan(v)) {
        ++nans;
        EXPECT_TRUE(std::isnan(small_float_decode(fm.f, small_float_encode(fm.f, v)))) << fm.name << " " << b;
        continue;
      }
      if (std::isinf(v)) ++infs;
      const uint32_t back = small_float_encode(fm.f, v);
      if (std::isinf(v) && small_float_spec(fm.f).saturate) {
        // e5m2 has Inf encodings, but NCCL's conversion saturates them.
        EXPECT_EQ(back, (b & (fm.patterns >> 1)) | 0x7bu) << fm.name;
        continue;
      }
      EXPECT_EQ(back, b) << fm.name << " pattern " << b << " value " << v;
    }
    // Format facts: how many NaN and Inf encodings exist.
    if (fm.f == SmallFloat::F16) {
      EXPECT_EQ(nans, 2u * 1023u);
      EXPECT_EQ(infs, 2u);
    } else if (fm.f == SmallFloat::BF16) {
      EXPECT_EQ(nans, 2u * 127u);
      EXPECT_EQ(infs, 2u);
    } else if (fm.f == SmallFloat::E4M3) {
      EXPECT_EQ(nans, 2u);  // S.1111.111 only
      EXPECT_EQ(infs, 0u);
    } else {
      EXPECT_EQ(nans, 6u);  // S.11111.{01,10,11}
      EXPECT_EQ(infs, 2u);
    }
  }
}

TEST(FloatFormats, FastDecodersMatchTheGenericDecoderOnEveryPattern) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const uint16_t h = static_cast<uint16_t>(b);
    ASSERT_TRUE(same_value(f16_to_float(h), small_float_decode(SmallFloat::F16, b))) << b;
    ASSERT_TRUE(same_value(bf16_to_float(h), small_float_decode(SmallFloat::BF16, b))) << b;
  }
  for (uint32_t b = 0; b < 65536; ++b) {
    // half -> fp8 fast paths against the generic encoder.
    const double v = small_float_decode(SmallFloat::F16, b);
    ASSERT_EQ(f16_to_e5m2(static_cast<uint16_t>(b)), small_float_encode(SmallFloat::E5M2, v)) << b;
    ASSERT_EQ(f16_to_e4m3(static_cast<uint16_t>(b)), small_float_encode(SmallFloat::E4M3, v)) << b;
  }
  for (uint32_t b = 0; b < 256; ++b) {
    const uint8_t v = static_cast<uint8_t>(b);
    ASSERT_TRUE(same_value(e4m3_to_float(v), small_float_decode(SmallFloat::E4M3, b))) << b;
    ASSERT_TRUE(same_value(e5m2_to_float(v), small_float_decode(SmallFloat::E5M2, b))) << b;
  }
}

TEST(FloatFormats, FastEncodersRoundTripEveryPattern) {
  for (uint32_t b = 0; b < 65536; ++b) {
    const uint16_t h = static_cast<uint16_t>(b);
    const float fh = f16_to_float(h);
    if (std::isnan(fh)) {
      EXPECT_EQ(float_to_f16(fh), 0x7fff);  // canonical NaN, as CUDA's host code
    } else {
      EXPECT_EQ(float_to_f16(fh), h) << b;
    }
    const float fb = bf16_to_float(h);
    if (std::isnan(fb)) {
      EXPECT_EQ(float_to_bf16(fb), 0x7fff);
    } else {
      EXPECT_EQ(float_to_bf16(fb), h) << b;
    }
  }
}

// For every pair of adjacent finite values a < b of the format, the midpoint
// rounds to the one with the even significand, and the doubles just below and
// above the midpoint round to a and b. This pins round-to-nearest-even at every
// boundary of every format, including the subnormal range and zero.
TEST(FloatFormats, EveryRoundingBoundaryIsNearestEven) {
  for (const auto& fm : kFormats) {
    const auto& spec = small_float_spec(fm.f);
    const uint32_t sign_bit = fm.patterns >> 1;
    for (uint32_t lo = 0; lo + 1 < sign_bit; ++lo) {
      const double a = small_float_decode(fm.f, lo);
      const double b = small_float_decode(fm.f, lo + 1);
      if (!std::isfinite(a) || !std::isfinite(b)) continue;
      const double mid = (a + b) / 2;  // exact in double
      const uint32_t even = (lo & 1u) ? lo + 1 : lo;
      for (double s : {1.0, -1.0}) {
        const uint32_t sb = s < 0 ? sign_bit : 0;
        ASSERT_EQ(small_float_encode(fm.f, s * mid), even | sb) << fm.name << " mid " << mid;
        ASSERT_EQ(small_float_encode(fm.f, s * std::nextafter(mid, 0.0)), lo | sb) << fm.name << " " << mid;
        ASSERT_EQ(small_float_encode(fm.f, s * std::nextafter(mid, INFINITY)), (lo + 1) | sb) << fm.name << " " << mid;
      }
      // The fast float paths see the same boundaries (midpoints are exact in float).
      if (fm.f == SmallFloat::F16 || fm.f == SmallFloat::BF16) {
        const float fmid = static_cast<float>(mid);
        ASSERT_EQ(static_cast<double>(fmid), mid);
        auto enc = [&](float x) -> uint32_t { return fm.f == SmallFloat::F16 ? float_to_f16(x) : float_to_bf16(x); };
        ASSERT_EQ(enc(fmid), even) << fm.name;
        ASSERT_EQ(enc(std::nextafter(fmid, 0.0f)), lo) << fm.name;
        ASSERT_EQ(enc(std::nextafter(fmid, INFINITY)), lo + 1) << fm.name;
        ASSERT_EQ(enc(-fmid), even | sign_bit) << fm.name;
      }
    }
    (void)spec;
  }
}

TEST(FloatFormats, OverflowGoesToInfForHalfAndSaturatesForFp8) {
  // float16: max 65504; 65520 (max + half an ulp) is the tie that rounds to Inf.
  EXPECT_EQ(float_to_f16(65519.0f), 0x7bff);
  EXPECT_EQ(float_to_f16(65520.0f), 0x7c00);
  EXPECT_EQ(float_to_f16(-1e9f), 0xfc00);
  EXPECT_EQ(float_to_f16(INFINITY), 0x7c00);
  EXPECT_EQ(float_to_bf16(3.4e38f), 0x7f80);  // rounds past the largest bfloat16
  EXPECT_EQ(float_to_bf16(-INFINITY), 0xff80);
  // fp8 e4m3: max 448 (0x7e); everything larger, Inf included, saturates.
  EXPECT_EQ(float_to_e4m3(448.0f), 0x7e);
  EXPECT_EQ(float_to_e4m3(464.0f), 0x7e);  // tie between 448 and 480 (not representable): even = 448
  EXPECT_EQ(float_to_e4m3(1e6f), 0x7e);
  EXPECT_EQ(float_to_e4m3(INFINITY), 0x7e);
  EXPECT_EQ(float_to_e4m3(-INFINITY), 0xfe);
  EXPECT_EQ(float_to_e4m3(NAN), 0x7f);
  // fp8 e5m2: max 57344 (0x7b); Inf saturates too (__NV_SATFINITE).
  EXPECT_EQ(float_to_e5m2(57344.0f), 0x7b);
  EXPECT_EQ(float_to_e5m2(1e6f), 0x7b);
  EXPECT_EQ(float_to_e5m2(INFINITY), 0x7b);
  EXPECT_EQ(float_to_e5m2(-INFINITY), 0xfb);
  EXPECT_TRUE(std::isnan(e5m2_to_float(float_to_e5m2(NAN))));
  // The float16 -> fp8 tables saturate float16 Inf as well.
  EXPECT_EQ(f16_to_e4m3(0x7c00), 0x7e);
  EXPECT_EQ(f16_to_e5m2(0xfc00), 0xfb);
  EXPECT_EQ(f16_to_e4m3(0x7e00), 0x7f);
}

TEST(FloatFormats, SignedZerosAndSubnormals) {
  EXPECT_EQ(float_to_f16(0.0f), 0x0000);
  EXPECT_EQ(float_to_f16(-0.0f), 0x8000);
  EXPECT_EQ(float_to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(float_to_e4m3(-0.0f), 0x80);
  // Smallest subnormals: f16 2^-24, e4m3 2^-9, e5m2 2^-16.
  EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(float_to_f16(std::ldexp(1.0f, -25)), 0x0000);        // tie with 0: even
  EXPECT_EQ(float_to_f16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(float_to_f16(std::ldexp(3.0f, -25)), 0x0002);        // tie 1.5 ulps: even = 2
  EXPECT_EQ(float_to_e4m3(std::ldexp(1.0f, -9)), 0x01);
  EXPECT_EQ(float_to_e4m3(std::ldexp(1.0f, -10)), 0x00);
  EXPECT_EQ(float_to_e5m2(std::ldexp(1.0f, -16)), 0x01);
  EXPECT_EQ(float_to_e5m2(-std::ldexp(1.0f, -17)), 0x80);
  EXPECT_EQ(e4m3_to_float(0x01), std::ldexp(1.0f, -9));
  EXPECT_EQ(f16_to_float(0x03ff), std::ldexp(1023.0f, -24));  // largest subnormal
  EXPECT_EQ(f16_to_float(0x0400), std::ldexp(1.0f, -14));     // smallest normal
  EXPECT_EQ(bf16_to_float(0x0001), std::ldexp(1.0f, -133));
}

// The encoder on the bits (small_float_encode) against the reference written
// with frexp and ldexp (the decoder is held to the kernels' decoders above):
// encoded from every pattern's value, every midpoint between neighbours and the doubles either
// side of it, the overflow thresholds, and millions of random doubles of
// every magnitude (any bits, and values in and around each format's range).
// The bits must be the same. Fresh seed, printed.
TEST(FloatFormats, TheBitEncoderMatchesTheReferenceEncoder) {
  const uint64_t seed = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  std::printf("[ seed    ] seed %#llx\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  for (const auto& fm : kFormats) {
    const auto& spec = small_float_spec(fm.f);
    size_t encoded = 0;
    auto same_enc = [&](double x) {
      ++encoded;
      const uint32_t want = small_float_encode_reference(fm.f, x), got = small_float_encode(fm.f, x);
      if (want != got) {
        ADD_FAILURE() << fm.name << ": encode(" << std::hexfloat << x << ") gave " << std::hex << got
                      << ", the reference " << want;
        return false;
      }
      return true;
    };
    for (uint32_t b = 0; b < fm.patterns; ++b) {
      const double want = small_float_decode(fm.f, b);
      if (!std::isfinite(want)) continue;
      ASSERT_TRUE(same_enc(want));
      const double next = small_float_decode(fm.f, b + 1 < fm.patterns ? b + 1 : b);
      if (std::isfinite(next) && (next > want) == (want >= 0)) {
        const double mid = (want + next) / 2;
        for (double x : {mid, std::nextafter(mid, 0.0), std::nextafter(mid, INFINITY), -mid})
          ASSERT_TRUE(same_enc(x));
      }
    }
    const double M = spec.max_finite, q = M * spec.unit_roundoff;  // half the top quantum
    for (double x : {M, M + q, std::nextafter(M + q, 0.0), std::nextafter(M + q, INFINITY), 2 * M, 1e300,
                     static_cast<double>(INFINITY), 4.9e-324, 2.2e-308, spec.min_subnormal / 2,
                     std::nextafter(spec.min_subnormal / 2, 1.0), spec.min_normal})
      for (double sg : {1.0, -1.0}) ASSERT_TRUE(same_enc(sg * x));
    for (int i = 0; i < 1000000; ++i)
      if (!same_enc(draw_double(rng, spec, i))) return;
    std::printf("[ checked ] %s: %zu doubles encoded\n", fm.name, encoded);
  }
}

// The input generator sets a value's sign as a bit after encoding its
// magnitude (harness/model/data.cc: signed_bits): that holds only if every
// encoder is symmetric, -m's bits being m's with the sign bit set, for every
// magnitude that is not a NaN (rounding, subnormals, overflow and saturation
// included).
TEST(FloatFormats, EveryEncoderIsSymmetricInTheSign) {
  const uint64_t seed = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  std::printf("[ seed    ] seed %#llx\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  for (const auto& fm : kFormats) {
    const auto& spec = small_float_spec(fm.f);
    const uint32_t sign_bit = 1u << (spec.exp_bits + spec.man_bits);
    const int emin = std::ilogb(spec.min_subnormal) - 2, span = std::ilogb(spec.max_finite) + 3 - emin;
    for (int i = 0; i < 200000; ++i) {
      double m = std::fabs(std::bit_cast<double>(rng()));  // any magnitude
      if (i % 2) m = std::ldexp(1.0 + static_cast<double>(rng() >> 12) * 0x1p-52, emin + static_cast<int>(rng() % span));
      if (i % 1000 == 0) m = i % 3000 == 0 ? 0.0 : INFINITY;
      if (std::isnan(m)) continue;
      ASSERT_EQ(small_float_encode(fm.f, -m), small_float_encode(fm.f, m) | sign_bit)
          << fm.name << " " << std::hexfloat << m;
    }
  }
  for (int i = 0; i < 200000; ++i) {  // float32: the conversion the generator uses
    const double m = std::fabs(std::bit_cast<double>(rng()));
    if (std::isnan(m)) continue;
    ASSERT_EQ(std::bit_cast<uint32_t>(static_cast<float>(-m)), std::bit_cast<uint32_t>(static_cast<float>(m)) | 0x80000000u)
        << std::hexfloat << m;
  }
}

// The input fill's fp8 encoder (float_encode::Fp8Table: a table of encode's
// answers by exponent, top fraction bits and sticky bit) gives encode's bits
// for every double: every fp8 value and the midpoints between neighbours (and
// the doubles next to them), both signs, every table entry's least and
// greatest double, the specials, and a million drawn doubles, on a fresh seed.
TEST(FloatFormats, TheFp8TableIsTheEncoder) {
  const uint64_t seed = (static_cast<uint64_t>(std::random_device{}()) << 32) ^ std::random_device{}();
  std::printf("[ seed    ] seed %#llx\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  const auto check = [&]<SmallFloat F>(const char* name) {
    const auto& spec = small_float_spec(F);
    size_t checked = 0;
    const auto same = [&](double x) {
      ++checked;
      const uint32_t want = float_encode::encode<F>(x), got = float_encode::Fp8Table<F>::encode(x);
      if (want == got) return true;
      ADD_FAILURE() << name << ": the table gives " << std::hex << got << " for " << std::hexfloat << x
                    << ", encode " << want;
      return false;
    };
    for (uint32_t b = 0; b < 256; ++b) {
      const double v = small_float_decode(F, b), next = small_float_decode(F, (b + 1) & 0xff);
      if (!std::isfinite(v)) continue;
      for (double x : {v, -v}) ASSERT_TRUE(same(x));
      if (!std::isfinite(next) || (next > v) != (v >= 0)) continue;
      const double mid = (v + next) / 2;
      for (double x : {mid, std::nextafter(mid, 0.0), std::nextafter(mid, INFINITY), -mid}) ASSERT_TRUE(same(x));
    }
    // Each exponent's doubles with the low fraction bits all clear and all set.
    for (int e = -1022; e <= 1023; ++e)
      for (uint64_t top = 0; top < 16; ++top)
        for (uint64_t low : {uint64_t{0}, uint64_t{1}, (uint64_t{1} << 48) - 1}) {
          const uint64_t bits = static_cast<uint64_t>(e + 1023) << 52 | top << 48 | low;
          ASSERT_TRUE(same(std::bit_cast<double>(bits)));
        }
    for (double x : {0.0, 4.9e-324, 2.2e-308, spec.max_finite, 1e300, static_cast<double>(INFINITY),
                     std::numeric_limits<double>::quiet_NaN()})
      for (double sg : {1.0, -1.0}) ASSERT_TRUE(same(sg * x));
    for (int i = 0; i < 1000000; ++i)
      if (!same(draw_double(rng, spec, i))) return;
    std::printf("[ checked ] %s: %zu doubles\n", name, checked);
  };
  check.operator()<SmallFloat::E4M3>("fp8_e4m3");
  check.operator()<SmallFloat::E5M2>("fp8_e5m2");
}
