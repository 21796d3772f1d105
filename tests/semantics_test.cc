// The NCCL semantics table, case by case (impl/semantics.h, impl/element_ops.h).
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "impl/element_ops.h"
#include "impl/kernels.h"
#include "impl/semantics.h"

using namespace collcheck;

namespace {
template <typename T>
T run(DType t, RedOp op, int p, std::vector<T> inputs, double scalar = 1.0) {
  // Folds like an algorithm would: pre, combine in rank order, post.
  const Reduction r = resolve_reduction(t, op, p, scalar);
  std::vector<T> acc(1), tmp(1);
  apply_pre(r, acc.data(), &inputs[0], 1);
  for (size_t i = 1; i < inputs.size(); ++i) {
    apply_pre(r, tmp.data(), &inputs[i], 1);
    reduce(acc.data(), tmp.data(), 1, t, r.combine);
  }
  apply_post(r, acc.data(), 1);
  return acc[0];
}
f16_t h(float f) { return f16_t{float_to_f16(f)}; }
float hf(f16_t v) { return f16_to_float(v.bits); }
}  // namespace

TEST(Semantics, ParsesNamesAndAliases) {
  EXPECT_EQ(parse_dtype("float16"), DType::Float16);
  EXPECT_EQ(parse_dtype("half"), DType::Float16);
  EXPECT_EQ(parse_dtype("BF16"), DType::BFloat16);
  EXPECT_EQ(parse_dtype("fp8_e4m3"), DType::Fp8E4M3);
  EXPECT_FALSE(parse_dtype("float128"));
  EXPECT_EQ(parse_op("premulsum"), RedOp::PreMulSum);
  EXPECT_FALSE(parse_op("xor"));
  for (DType t : kAllDTypes) EXPECT_EQ(parse_dtype(dtype_name(t)), t);
  for (RedOp o : kAllOps) EXPECT_EQ(parse_op(op_name(o)), o);
}

TEST(Semantics, IntegersWrap) {
  EXPECT_EQ(run<int8_t>(DType::Int8, RedOp::Sum, 2, {127, 1}), -128);
  EXPECT_EQ(run<uint8_t>(DType::Uint8, RedOp::Sum, 3, {200, 100, 10}), 54);
  EXPECT_EQ(run<uint8_t>(DType::Uint8, RedOp::Prod, 2, {16, 16}), 0);
  EXPECT_EQ(run<int32_t>(DType::Int32, RedOp::Sum, 2, {std::numeric_limits<int32_t>::max(), 1}),
            std::numeric_limits<int32_t>::min());
  EXPECT_EQ(run<int64_t>(DType::Int64, RedOp::Prod, 2, {std::numeric_limits<int64_t>::min(), -1}),
            std::numeric_limits<int64_t>::min());
  EXPECT_EQ(run<uint64_t>(DType::Uint64, RedOp::Sum, 2, {~uint64_t{0}, 2}), 1u);
  EXPECT_EQ(run<int8_t>(DType::Int8, RedOp::PreMulSum, 2, {100, 1}, 3.0), static_cast<int8_t>(300 + 3));
}

TEST(Semantics, IntegerAvgWrapsThenTruncatesTowardZero) {
  EXPECT_EQ(run<int32_t>(DType::Int32, RedOp::Avg, 2, {-7, 0}), -3);
  EXPECT_EQ(run<int32_t>(DType::Int32, RedOp::Avg, 2, {7, 0}), 3);
  EXPECT_EQ(run<int8_t>(DType::Int8, RedOp::Avg, 2, {-128, 0}), -64);
  EXPECT_EQ(run<int8_t>(DType::Int8, RedOp::Avg, 2, {100, 100}), static_cast<int8_t>(-56 / 2));  // 200 wraps to -56
  EXPECT_EQ(run<uint8_t>(DType::Uint8, RedOp::Avg, 3, {255, 255, 255}), (765 % 256) / 3);
  EXPECT_EQ(run<int64_t>(DType::Int64, RedOp::Avg, 1, {std::numeric_limits<int64_t>::min()}),
            std::numeric_limits<int64_t>::min());
}

TEST(Semantics, HalfPrecisionRoundsAfterEveryStep) {
  // 2048 + 1 + 1 in float16: each step rounds back to 2048 (ulp is 2 there),
  // while a float accumulator would give 2050.
  EXPECT_EQ(hf(run<f16_t>(DType::Float16, RedOp::Sum, 3, {h(2048), h(1), h(1)})), 2048.0f);
  // bfloat16: 256 + 1 = 257 is not representable (8 bits): ties to even, 256.
  bf16_t a{float_to_bf16(256)}, b{float_to_bf16(1)};
  EXPECT_EQ(bf16_to_float(run<bf16_t>(DType::BFloat16, RedOp::Sum, 2, {a, b}).bits), 256.0f);
  // Overflow of a float16 sum is Inf.
  EXPECT_TRUE(std::isinf(hf(run<f16_t>(DType::Float16, RedOp::Sum, 2, {h(60000), h(60000)}))));
}

TEST(Semantics, FloatAvgPremultipliesByRoundedReciprocal) {
  const Reduction r3 = resolve_reduction(DType::Float16, RedOp::Avg, 3);
  EXPECT_TRUE(r3.premul);
  EXPECT_EQ(r3.scalar_bits, float_to_f16(static_cast<float>(1.0 / 3)));
  const Reduction r3f = resolve_reduction(DType::Float32, RedOp::Avg, 3);
  EXPECT_EQ(r3f.scalar_bits, std::bit_cast<uint32_t>(static_cast<float>(1.0 / 3)));
  // avg(1, 1, 1) in float32 is 3 * fl(1/3) summed with rounding, not exactly 1.
  const float s = static_cast<float>(1.0 / 3);
  EXPECT_EQ(run<float>(DType::Float32, RedOp::Avg, 3, {1, 1, 1}), (s + s) + s);
  // fp8: 1/p goes through float, then to fp8 with one rounding.
  const Reduction r5 = resolve_reduction(DType::Fp8E4M3, RedOp::Avg, 5);
  EXPECT_EQ(e4m3_to_float(static_cast<uint8_t>(r5.scalar_bits)), 0.203125f);  // nearest e4m3 to 0.2
  // p == 1 is a copy for avg: the scalar is exactly 1.
  EXPECT_EQ(run<double>(DType::Float64, RedOp::Avg, 1, {0.1}), 0.1);
  // Integer avg does not pre-multiply.
  EXPECT_FALSE(resolve_reduction(DType::Int32, RedOp::Avg, 4).premul);
  EXPECT_TRUE(resolve_reduction(DType::Int32, RedOp::Avg, 4).postdiv);
}

TEST(Semantics, PreMulSumAppliesItsScalarEvenAtOneRank) {
  EXPECT_EQ(run<float>(DType::Float32, RedOp::PreMulSum, 1, {2.5f}, 3.0), 7.5f);
  EXPECT_EQ(run<double>(DType::Float64, RedOp::PreMulSum, 2, {1.0, 2.0}, 0.5), 1.5);
  EXPECT_EQ(run<uint32_t>(DType::Uint32, RedOp::PreMulSum, 1, {7u}, 3.0), 21u);
}

TEST(Semantics, MaxAndMinDropNaNAndOrderSignedZeros) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(run<float>(DType::Float32, RedOp::Max, 2, {nan, 1.0f}), 1.0f);
  EXPECT_EQ(run<float>(DType::Float32, RedOp::Max, 2, {1.0f, nan}), 1.0f);
  EXPECT_EQ(run<float>(DType::Float32, RedOp::Min, 3, {nan, -2.0f, nan}), -2.0f);
  EXPECT_TRUE(std::isnan(run<float>(DType::Float32, RedOp::Max, 2, {nan, nan})));
  EXPECT_FALSE(std::signbit(run<float>(DType::Float32, RedOp::Max, 2, {-0.0f, 0.0f})));
  EXPECT_FALSE(std::signbit(run<float>(DType::Float32, RedOp::Max, 2, {0.0f, -0.0f})));
  EXPECT_TRUE(std::signbit(run<float>(DType::Float32, RedOp::Min, 2, {0.0f, -0.0f})));
  EXPECT_TRUE(std::signbit(run<double>(DType::Float64, RedOp::Min, 2, {-0.0, 0.0})));
  EXPECT_EQ(hf(run<f16_t>(DType::Float16, RedOp::Max, 2, {f16_t{0x7e00}, h(-3)})), -3.0f);
  EXPECT_EQ(run<e4m3_t>(DType::Fp8E4M3, RedOp::Max, 2, {e4m3_t{0x7f}, e4m3_t{0x38}}).bits, 0x38);
  EXPECT_EQ(run<int32_t>(DType::Int32, RedOp::Min, 3, {5, -9, 3}), -9);
}

TEST(Semantics, NaNAndInfPropagateInSumAndProd) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(std::isnan(run<float>(DType::Float32, RedOp::Sum, 2, {inf, -inf})));
  EXPECT_EQ(run<float>(DType::Float32, RedOp::Sum, 2, {inf, 1.0f}), inf);
  EXPECT_TRUE(std::isnan(run<float>(DType::Float32, RedOp::Prod, 2, {inf, 0.0f})));
  EXPECT_TRUE(std::isnan(run<double>(DType::Float64, RedOp::Sum, 2, {std::nan(""), 1.0})));
}

TEST(Semantics, Fp8OperatesInHalfAndSaturates) {
  // e4m3: 448 + 448 = 896 in float16, saturated back to 448 (not NaN, not Inf).
  e4m3_t m{0x7e};
  EXPECT_EQ(run<e4m3_t>(DType::Fp8E4M3, RedOp::Sum, 2, {m, m}).bits, 0x7e);
  EXPECT_EQ(run<e4m3_t>(DType::Fp8E4M3, RedOp::Prod, 2, {m, m}).bits, 0x7e);
  // e5m2: 57344 * 2 overflows float16 to Inf, which then saturates to 57344.
  e5m2_t big{0x7b}, two{float_to_e5m2(2.0f)};
  EXPECT_EQ(run<e5m2_t>(DType::Fp8E5M2, RedOp::Prod, 2, {big, two}).bits, 0x7b);
  // Rounding after every step: 1 + 1/16 in e4m3 (3 mantissa bits) rounds to 1.
  e4m3_t one{float_to_e4m3(1.0f)}, small{float_to_e4m3(0.0625f)};
  EXPECT_EQ(run<e4m3_t>(DType::Fp8E4M3, RedOp::Sum, 3, {one, small, small}).bits, one.bits);
  // e4m3 NaN propagates through sum.
  EXPECT_TRUE(std::isnan(e4m3_to_float(run<e4m3_t>(DType::Fp8E4M3, RedOp::Sum, 2, {e4m3_t{0x7f}, one}).bits)));
}

// premul_bits_fast (a per-thread table for the 1-byte dtypes) gives
// premul_bits for every input, while the dtype and scalar change between
// calls (each change must remake the table) and for the other dtypes.
TEST(Semantics, TheTabledPremultiplyIsPremulBitsForEveryInput) {
  size_t compared = 0;
  for (int round = 0; round < 3; ++round)
    for (DType t : kAllDTypes)
      for (double scalar : {0.5, -0.25, 3.0, 1.0})
        for (RedOp op : {RedOp::Avg, RedOp::PreMulSum, RedOp::Sum})
          for (int p : {3, 7}) {
            const Reduction r = resolve_reduction(t, op, p, scalar);
            const uint32_t inputs = dtype_size(t) == 1 ? 256 : 4096;
            for (uint32_t b = 0; b < inputs; ++b) {
              const uint64_t x = dtype_size(t) == 1 ? b : uint64_t{b} * 0x9e3779b97f4a7c15ull >> (64 - 8 * dtype_size(t));
              ASSERT_EQ(premul_bits_fast(r, x), premul_bits(r, x))
                  << dtype_name(t) << " " << op_name(op) << " scalar " << scalar << " p " << p << " input " << x;
              ++compared;
            }
          }
  EXPECT_GT(compared, 100000u);
}

TEST(Semantics, RejectsEmptyWorld) { EXPECT_THROW(resolve_reduction(DType::Int8, RedOp::Sum, 0), std::invalid_argument); }

TEST(Kernels, EveryDtypeAndOpMatchesTheElementFunctorsIncludingAliasing) {
  for (DType t : kAllDTypes) {
    for (Combine c : {Combine::Sum, Combine::Prod, Combine::Max, Combine::Min}) {
      visit_dtype(t, [&](auto tag) {
        using T = decltype(tag);
        using Ops = ElementOps<T>;
        const size_t n = 1031;
        std::vector<T> a(n), b(n), d(n);
        uint64_t x = 0x1234 + static_cast<uint64_t>(t) * 77 + static_cast<uint64_t>(c);
        for (size_t i = 0; i < n; ++i) {
          x = x * 6364136223846793005ull + 1442695040888963407ull;
          a[i] = Ops::from_bits(x >> 11);
          b[i] = Ops::from_bits(x >> 29);
        }
        combine(d.data(), a.data(), b.data(), n, t, c);
        std::vector<T> in_place = a;
        reduce(in_place.data(), b.data(), n, t, c);
        for (size_t i = 0; i < n; ++i) {
          const uint64_t want = Ops::to_bits(combine_elements(c, a[i], b[i]));
          const bool nan_ok = dtype_is_float(t) && std::isnan(element_to_double(t, want)) &&
                              std::isnan(element_to_double(t, Ops::to_bits(d[i])));
          ASSERT_TRUE(nan_ok || Ops::to_bits(d[i]) == want) << dtype_name(t) << " i=" << i;
          ASSERT_EQ(Ops::to_bits(d[i]), Ops::to_bits(in_place[i])) << dtype_name(t);
        }
      });
    }
  }
}
