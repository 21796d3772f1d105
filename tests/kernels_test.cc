// The fast reduce kernels (impl/kernels_avx2.cc; fp8's tables of results for
// the tail in impl/kernels.cc) against the scalar ones (combine_scalar, the
// reference), bit for bit: exhaustively for fp8 (every pair), every float16
// and bfloat16 value against a spread of partners on both sides, random
// millions for float, double and every integer type with special values
// mixed in, and every tail length, misalignment and in-place form.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "impl/dtype.h"
#include "impl/element_ops.h"
#include "impl/kernels.h"
#include "impl/kernels_avx2.h"

using namespace collcheck;

namespace {

constexpr Combine kOps[] = {Combine::Sum, Combine::Prod, Combine::Max, Combine::Min};
const char* op_text(Combine c) {
  switch (c) {
    case Combine::Sum: return "sum";
    case Combine::Prod: return "prod";
    case Combine::Max: return "max";
    case Combine::Min: return "min";
  }
  return "?";
}

#define REQUIRE_AVX2()                                                                                          \
  if (!avx2_kernels_available())                                                                                \
    GTEST_SKIP() << "this CPU lacks AVX2 or F16C: only the scalar kernels run here, and they are the reference"

// Runs combine (vector + scalar tail) and combine_scalar over the same inputs;
// returns the first element index whose bits differ, or -1.
template <typename T>
long first_difference(DType t, Combine c, const std::vector<T>& a, const std::vector<T>& b) {
  std::vector<T> fast(a.size()), ref(a.size());
  combine(fast.data(), a.data(), b.data(), a.size(), t, c);
  combine_scalar(ref.data(), a.data(), b.data(), a.size(), t, c);
  for (size_t i = 0; i < a.size(); ++i)
    if (std::memcmp(&fast[i], &ref[i], sizeof(T)) != 0) return static_cast<long>(i);
  return -1;
}

template <typename T>
std::string bits_text(T v) {
  uint64_t u = 0;
  std::memcpy(&u, &v, sizeof(T));
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%0*llx", static_cast<int>(2 * sizeof(T)), static_cast<unsigned long long>(u));
  return buf;
}

template <typename T>
void expect_identical(DType t, Combine c, const std::vector<T>& a, const std::vector<T>& b, const std::string& what) {
  const long i = first_difference(t, c, a, b);
  if (i < 0) return;
  std::vector<T> ref(1);
  std::vector<T> whole(a.size());
  combine(whole.data(), a.data(), b.data(), a.size(), t, c);
  combine_scalar(ref.data(), &a[static_cast<size_t>(i)], &b[static_cast<size_t>(i)], 1, t, c);
  ADD_FAILURE() << what << " " << dtype_name(t) << " " << op_text(c) << ": element " << i << ": "
                << bits_text(a[static_cast<size_t>(i)]) << " (op) " << bits_text(b[static_cast<size_t>(i)])
                << " gave " << bits_text(whole[static_cast<size_t>(i)]) << ", the scalar kernel gives "
                << bits_text(ref[0]);
}

// Partners for a 16-bit format: zeros, infinities, NaNs with payloads,
// subnormals, the extremes, values that round to ties, and random ones.
std::vector<uint16_t> partners16(uint16_t max_finite, uint16_t min_normal, std::mt19937_64& rng) {
  std::vector<uint16_t> p = {0x0000, 0x8000, 0x0001, 0x8001, static_cast<uint16_t>(min_normal - 1),
                             min_normal, static_cast<uint16_t>(min_normal | 0x8000), max_finite,
                             static_cast<uint16_t>(max_finite | 0x8000), static_cast<uint16_t>(max_finite + 1),
                             static_cast<uint16_t>((max_finite + 1) | 0x8000), static_cast<uint16_t>(max_finite + 2),
                             0x7fff, 0xffff, static_cast<uint16_t>(max_finite + 3)};
  for (uint16_t one : {uint16_t{0x3c00}, uint16_t{0x3f80}}) {  // 1.0 in float16 and bfloat16, and around it
    for (int d = -3; d <= 3; ++d) {
      p.push_back(static_cast<uint16_t>(one + d));
      p.push_back(static_cast<uint16_t>((one + d) | 0x8000));
    }
  }
  while (p.size() < 160) p.push_back(static_cast<uint16_t>(rng()));
  return p;
}

template <typename T>
void every_value_against_partners(DType t, const std::vector<uint16_t>& partners) {
  std::vector<T> all(65536), other(65536);
  for (uint32_t i = 0; i < 65536; ++i) std::memcpy(&all[i], &i, sizeof(T));
  for (const Combine c : kOps) {
    for (const uint16_t p : partners) {
      for (auto& o : other) std::memcpy(&o, &p, sizeof(T));
      expect_identical(t, c, all, other, "every value (op) " + bits_text(p) + ":");
      expect_identical(t, c, other, all, bits_text(p) + " (op) every value:");
      if (::testing::Test::HasFailure()) return;
    }
  }
}

}  // namespace

TEST(VectorKernels, EveryPairOfFp8Values) {
  REQUIRE_AVX2();
  std::vector<uint8_t> a(65536), b(65536);
  for (uint32_t i = 0; i < 65536; ++i) {
    a[i] = static_cast<uint8_t>(i >> 8);
    b[i] = static_cast<uint8_t>(i);
  }
  for (const DType t : {DType::Fp8E4M3, DType::Fp8E5M2})
    for (const Combine c : kOps) expect_identical(t, c, a, b, "every pair:");
}

TEST(VectorKernels, EveryHalfValueAgainstASpreadOfPartners) {
  REQUIRE_AVX2();
  const uint64_t seed = std::random_device{}();
  std::printf("[ seed    ] partners drawn with seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  every_value_against_partners<uint16_t>(DType::Float16, partners16(0x7bff, 0x0400, rng));
  every_value_against_partners<uint16_t>(DType::BFloat16, partners16(0x7f7f, 0x0080, rng));
}

// float and double: random bit patterns (every class appears: NaNs with
// payloads, subnormals, infinities) mixed with equal pairs and signed zeros.
TEST(VectorKernels, RandomMillionsOfFloatsAndDoubles) {
  REQUIRE_AVX2();
  const uint64_t seed = std::random_device{}();
  std::printf("[ seed    ] seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  const size_t n = size_t{1} << 20;
  std::vector<uint32_t> fa(n), fb(n);
  std::vector<uint64_t> da(n), db(n);
  const uint32_t f_special[] = {0, 0x80000000u, 0x7f800000u, 0xff800000u, 0x7fc00000u, 0xffc00001u, 0x7f800001u, 1};
  const uint64_t d_special[] = {0, 0x8000000000000000ull, 0x7ff0000000000000ull, 0xfff8000000000001ull, 1};
  for (size_t i = 0; i < n; ++i) {
    const uint64_t r = rng();
    fa[i] = static_cast<uint32_t>(r);
    fb[i] = static_cast<uint32_t>(r >> 32);
    da[i] = r;
    db[i] = rng();
    switch (r % 8) {
      case 0: fb[i] = fa[i]; db[i] = da[i]; break;                           // equal
      case 1: fa[i] = f_special[rng() % 8]; da[i] = d_special[rng() % 5]; break;
      case 2: fb[i] = f_special[rng() % 8]; db[i] = d_special[rng() % 5]; break;
      case 3: fb[i] = fa[i] ^ 0x80000000u; db[i] = da[i] ^ 0x8000000000000000ull; break;  // opposite signs
      default: break;
    }
  }
  for (const Combine c : kOps) {
    expect_identical(DType::Float32, c, fa, fb, "random:");
    expect_identical(DType::Float64, c, da, db, "random:");
  }
}

// Every integer type: random bits, with the extremes (wrap-around of sum and
// prod, the signed/unsigned order of max and min) and equal pairs mixed in.
template <typename T>
void random_integers(DType t, std::mt19937_64& rng) {
  const size_t n = (size_t{1} << 20) + 7;  // and a tail
  std::vector<T> a(n), b(n);
  const T special[] = {T(0), T(1), T(-1), std::numeric_limits<T>::min(), std::numeric_limits<T>::max(),
                       static_cast<T>(std::numeric_limits<T>::max() - 1), static_cast<T>(std::numeric_limits<T>::min() + 1)};
  for (size_t i = 0; i < n; ++i) {
    const uint64_t r = rng();
    a[i] = static_cast<T>(r);
    b[i] = static_cast<T>(rng());
    switch (r % 8) {
      case 0: b[i] = a[i]; break;
      case 1: a[i] = special[rng() % 7]; break;
      case 2: b[i] = special[rng() % 7]; break;
      default: break;
    }
  }
  for (const Combine c : kOps) expect_identical(t, c, a, b, "random:");
}

TEST(VectorKernels, RandomMillionsOfEveryIntegerType) {
  REQUIRE_AVX2();
  const uint64_t seed = std::random_device{}();
  std::printf("[ seed    ] seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  random_integers<int8_t>(DType::Int8, rng);
  random_integers<uint8_t>(DType::Uint8, rng);
  random_integers<int32_t>(DType::Int32, rng);
  random_integers<uint32_t>(DType::Uint32, rng);
  random_integers<int64_t>(DType::Int64, rng);
  random_integers<uint64_t>(DType::Uint64, rng);
}

// Every length up to 40 (the vector step and the scalar tail), with each
// buffer starting 0-3 elements past a 32-byte boundary (the vector loops load
// and store unaligned; the kernels require element alignment, as any typed
// pointer does), out of place and in place on either side.
TEST(VectorKernels, TailsMisalignmentAndInPlace) {
  REQUIRE_AVX2();
  std::mt19937_64 rng(7);
  for (const DType t : kAllDTypes) {
    const size_t sz = dtype_size(t);
    for (const Combine c : kOps) {
      for (size_t n = 0; n <= 40; ++n) {
        for (size_t off = 0; off < 4; ++off) {
          const size_t oa = off * sz, ob = (3 - off) * sz;  // whole elements: a typed pointer stays aligned
          // 64-byte aligned storage: the offsets above decide the misalignment.
          const auto buffer = [&] { return std::vector<uint64_t>((n * sz + 8 * sz) / 8 + 8); };
          std::vector<uint64_t> a = buffer(), b = buffer(), d1 = buffer(), d2 = buffer();
          for (auto* v : {&a, &b})
            for (auto& x : *v) x = rng() & 0x3f3f3f3f3f3f3f3full;  // small positive values: no NaN
          auto* pa = reinterpret_cast<std::byte*>(a.data()) + oa;
          auto* pb = reinterpret_cast<std::byte*>(b.data()) + ob;
          combine(reinterpret_cast<std::byte*>(d1.data()) + oa, pa, pb, n, t, c);
          combine_scalar(reinterpret_cast<std::byte*>(d2.data()) + oa, pa, pb, n, t, c);
          ASSERT_EQ(std::memcmp(d1.data(), d2.data(), d1.size() * 8), 0)
              << dtype_name(t) << " " << op_text(c) << " n=" << n << " offset " << off << " out of place";
          const auto* want = reinterpret_cast<const std::byte*>(d2.data()) + oa;
          // dst = a (op) b in place on a, and on b.
          std::vector<uint64_t> ia(a), ib(b);
          auto* pia = reinterpret_cast<std::byte*>(ia.data()) + oa;
          combine(pia, pia, pb, n, t, c);
          ASSERT_EQ(std::memcmp(pia, want, n * sz), 0)
              << dtype_name(t) << " " << op_text(c) << " n=" << n << " in place on the first operand";
          auto* pib = reinterpret_cast<std::byte*>(ib.data()) + ob;
          combine(pib, pa, pib, n, t, c);
          ASSERT_EQ(std::memcmp(pib, want, n * sz), 0)
              << dtype_name(t) << " " << op_text(c) << " n=" << n << " in place on the second operand";
        }
      }
    }
  }
}

// The vector path does run here: a machine with AVX2 takes it for every
// integer type, float16, bfloat16 and fp8 (every op), and for float and
// double max and min (GCC vectorizes their sum and prod in kernels.cc), so a
// dispatch that silently fell back to scalar would pass the identity tests
// above while testing nothing.
TEST(VectorKernels, TheVectorLoopsRunOnThisMachine) {
  REQUIRE_AVX2();
  std::vector<std::byte> a(64 * 8), b(64 * 8), d(64 * 8);
  for (const DType t : kAllDTypes) {
    if (t == DType::Float32 || t == DType::Float64) continue;
    for (const Combine c : kOps)
      EXPECT_EQ(combine_avx2(d.data(), a.data(), b.data(), 64, t, c), 64u) << dtype_name(t) << " " << op_text(c);
  }
  for (const DType t : {DType::Float32, DType::Float64})
    for (const Combine c : {Combine::Max, Combine::Min})
      EXPECT_EQ(combine_avx2(d.data(), a.data(), b.data(), 64, t, c), 64u) << dtype_name(t);
}

// What a rank contributes (apply_pre: avg's 1/p on floats, premulsum's
// scalar) runs the product kernels against a block of the scalar; it must
// give premul_bits's element steps, bit for bit: random bit patterns (NaN and
// Inf included) in every dtype, lengths across the kernel's 1024-element
// blocks with tails, out of place and in place.
TEST(VectorKernels, PremultiplyingGivesTheElementStepsBits) {
  const uint64_t seed = std::random_device{}();
  std::printf("[ seed    ] seed %llu\n", static_cast<unsigned long long>(seed));
  std::mt19937_64 rng(seed);
  for (const DType t : kAllDTypes) {
    const size_t sz = dtype_size(t);
    std::vector<Reduction> reds;
    for (double s : {-2.0, 0.5, 3.0, 1.5, -0.25, 4.0}) reds.push_back(resolve_reduction(t, RedOp::PreMulSum, 4, s));
    for (int p : {3, 7}) reds.push_back(resolve_reduction(t, RedOp::Avg, p));
    for (const Reduction& red : reds) {
      if (!red.premul) continue;
      for (size_t n : {size_t{1}, size_t{37}, size_t{1024}, size_t{2500}}) {
        std::vector<std::byte> x(n * sz), got(n * sz);
        for (size_t i = 0; i < n; ++i) store_element(t, x.data(), i, rng());
        apply_pre(red, got.data(), x.data(), n);
        std::vector<std::byte> in_place(x);
        apply_pre(red, in_place.data(), in_place.data(), n);
        for (size_t i = 0; i < n; ++i) {
          const uint64_t want = premul_bits(red, load_element(t, x.data(), i));
          ASSERT_EQ(load_element(t, got.data(), i), want)
              << dtype_name(t) << " scalar bits " << red.scalar_bits << " n=" << n << " element " << i << " input "
              << load_element(t, x.data(), i);
          ASSERT_EQ(load_element(t, in_place.data(), i), want) << dtype_name(t) << " in place, element " << i;
        }
      }
    }
  }
}
