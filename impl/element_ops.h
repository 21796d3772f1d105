// One functor per (dtype, step): the element-level half of the semantics table in
// impl/semantics.h, in the spirit of NCCL's reduce_kernel.h. Kernels and the
// oracle both call these, so there is exactly one definition of every step.
#pragma once

#include <array>

#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "impl/dtype.h"
#include "impl/float_formats.h"
#include "impl/semantics.h"

namespace collcheck {

// fmax/fmin as NCCL gets them from CUDA (fmaxf, __hmax): a NaN operand is
// dropped, NaN only if both are NaN, and +0 is greater than -0, which makes the
// result independent of the order of the operands.
template <typename F>
inline F nan_dropping_max(F a, F b) {
  if (std::isnan(a)) return b;
  if (std::isnan(b)) return a;
  if (a == b) return std::signbit(a) ? b : a;
  return a > b ? a : b;
}
template <typename F>
inline F nan_dropping_min(F a, F b) {
  if (std::isnan(a)) return b;
  if (std::isnan(b)) return a;
  if (a == b) return std::signbit(a) ? a : b;
  return a < b ? a : b;
}

template <typename T, typename = void>
struct ElementOps;

// Integers: sum and prod wrap modulo 2^bits (computed in the unsigned type, so
// there is no signed-overflow UB); avg divides the wrapped sum, truncating
// toward zero.
template <typename T>
struct ElementOps<T, std::enable_if_t<std::is_integral_v<T>>> {
  using U = std::make_unsigned_t<T>;
  // Promotion of uint8 to int cannot overflow here (255*255 < 2^31); wider types
  // are already unsigned and wrap by definition.
  static T sum(T a, T b) { return static_cast<T>(static_cast<U>(static_cast<U>(a) + static_cast<U>(b))); }
  static T prod(T a, T b) { return static_cast<T>(static_cast<U>(static_cast<U>(a) * static_cast<U>(b))); }
  static T max(T a, T b) { return a < b ? b : a; }
  static T min(T a, T b) { return b < a ? b : a; }
  static T premul(T x, T s) { return prod(x, s); }
  static T postdiv(T x, uint64_t n) {
    if constexpr (std::is_signed_v<T>) {
      return static_cast<T>(static_cast<int64_t>(x) / static_cast<int64_t>(n));  // C++ truncates toward zero
    } else {
      return static_cast<T>(static_cast<uint64_t>(x) / n);
    }
  }
  static T from_bits(uint64_t b) { return static_cast<T>(static_cast<U>(b)); }
  static uint64_t to_bits(T v) { return static_cast<U>(v); }
};

// float and double: IEEE arithmetic in the type itself.
template <typename T>
struct ElementOps<T, std::enable_if_t<std::is_floating_point_v<T>>> {
  static T sum(T a, T b) { return a + b; }
  static T prod(T a, T b) { return a * b; }
  static T max(T a, T b) { return nan_dropping_max(a, b); }
  static T min(T a, T b) { return nan_dropping_min(a, b); }
  static T premul(T x, T s) { return x * s; }
  static T postdiv(T x, uint64_t) { return x; }
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
  static T from_bits(uint64_t b) { return std::bit_cast<T>(static_cast<Bits>(b)); }
  static uint64_t to_bits(T v) { return std::bit_cast<Bits>(v); }
};

// float16 / bfloat16: widen to float (exact), operate, round back to nearest even.
// One float operation followed by one narrowing equals the correctly rounded
// result, because float's 24 bits are >= 2*11+2 (double rounding is innocuous).
template <typename Wrapper, float (*Widen)(uint16_t), uint16_t (*Narrow)(float)>
struct HalfLikeOps {
  static Wrapper mk(float f) { return Wrapper{Narrow(f)}; }
  static float w(Wrapper v) { return Widen(v.bits); }
  static Wrapper sum(Wrapper a, Wrapper b) { return mk(w(a) + w(b)); }
  static Wrapper prod(Wrapper a, Wrapper b) { return mk(w(a) * w(b)); }
  // max/min return one operand, so no rounding; a NaN-NaN pair gives canonical NaN.
  static Wrapper max(Wrapper a, Wrapper b) { return pick(a, b, nan_dropping_max(w(a), w(b))); }
  static Wrapper min(Wrapper a, Wrapper b) { return pick(a, b, nan_dropping_min(w(a), w(b))); }
  static Wrapper premul(Wrapper x, Wrapper s) { return prod(x, s); }
  static Wrapper postdiv(Wrapper x, uint64_t) { return x; }
  static Wrapper from_bits(uint64_t b) { return Wrapper{static_cast<uint16_t>(b)}; }
  static uint64_t to_bits(Wrapper v) { return v.bits; }

 private:
  static Wrapper pick(Wrapper a, Wrapper b, float r) {
    if (std::isnan(r)) return Wrapper{0x7fff};
    const float fa = w(a);
    if (fa == r && std::signbit(fa) == std::signbit(r)) return a;
    return b;
  }
};
template <>
struct ElementOps<f16_t> : HalfLikeOps<f16_t, f16_to_float, float_to_f16> {};
template <>
struct ElementOps<bf16_t> : HalfLikeOps<bf16_t, bf16_to_float, float_to_bf16> {};

// fp8: NCCL converts to float16, applies __hadd/__hmul/__hmax (correctly
// rounded to float16), then converts back with __NV_SATFINITE. We widen to float
// (exact), operate in float (innocuous double rounding as above), round to
// float16, then narrow with the saturating table.
template <typename Wrapper, float (*Widen)(uint8_t), uint8_t (*FromHalf)(uint16_t)>
struct Fp8Ops {
  static float w(Wrapper v) { return Widen(v.bits); }
  static Wrapper mk(float f) { return Wrapper{FromHalf(float_to_f16(f))}; }
  static Wrapper sum(Wrapper a, Wrapper b) { return mk(w(a) + w(b)); }
  static Wrapper prod(Wrapper a, Wrapper b) { return mk(w(a) * w(b)); }
  static Wrapper max(Wrapper a, Wrapper b) { return mk(nan_dropping_max(w(a), w(b))); }
  static Wrapper min(Wrapper a, Wrapper b) { return mk(nan_dropping_min(w(a), w(b))); }
  static Wrapper premul(Wrapper x, Wrapper s) { return prod(x, s); }
  static Wrapper postdiv(Wrapper x, uint64_t) { return x; }
  static Wrapper from_bits(uint64_t b) { return Wrapper{static_cast<uint8_t>(b)}; }
  static uint64_t to_bits(Wrapper v) { return v.bits; }
};
template <>
struct ElementOps<e4m3_t> : Fp8Ops<e4m3_t, e4m3_to_float, f16_to_e4m3> {};
template <>
struct ElementOps<e5m2_t> : Fp8Ops<e5m2_t, e5m2_to_float, f16_to_e5m2> {};

template <typename T>
inline T combine_elements(Combine c, T a, T b) {
  using Ops = ElementOps<T>;
  switch (c) {
    case Combine::Sum: return Ops::sum(a, b);
    case Combine::Prod: return Ops::prod(a, b);
    case Combine::Max: return Ops::max(a, b);
    case Combine::Min: return Ops::min(a, b);
  }
  return a;
}

// The same steps on element bits, with the dtype's type T known (a loop over
// one call's elements dispatches once, then calls these).
template <typename T>
inline uint64_t combine_bits_as(Combine c, uint64_t a, uint64_t b) {
  using Ops = ElementOps<T>;
  return Ops::to_bits(combine_elements(c, Ops::from_bits(a), Ops::from_bits(b)));
}
// What a rank contributes for input x: x times the scalar when the reduction
// pre-multiplies, else x.
template <typename T>
inline uint64_t premul_bits_as(const Reduction& r, uint64_t x) {
  using Ops = ElementOps<T>;
  return r.premul ? Ops::to_bits(Ops::premul(Ops::from_bits(x), Ops::from_bits(r.scalar_bits))) : x;
}
// And with the dtype found at run time (one dispatch per step): for the
// oracle and tests, which work on single elements of any dtype.
inline uint64_t combine_bits(DType t, Combine c, uint64_t a, uint64_t b) {
  return visit_dtype(t, [&](auto tag) { return combine_bits_as<decltype(tag)>(c, a, b); });
}
inline uint64_t premul_bits(const Reduction& r, uint64_t x) {
  if (!r.premul) return x;
  return visit_dtype(r.dtype, [&](auto tag) { return premul_bits_as<decltype(tag)>(r, x); });
}

// premul_bits, for the 1-byte dtypes through a table of all 256 inputs (made
// once per thread for the last dtype and scalar asked): the oracle's
// per-element loops ask it p times an element, and an fp8 premultiply is two
// conversions and a rounding through float16.
inline uint64_t premul_bits_fast(const Reduction& r, uint64_t x) {
  if (!r.premul || dtype_size(r.dtype) != 1) return premul_bits(r, x);
  struct Table {
    bool made = false;
    DType dtype{};
    uint64_t scalar = 0;
    std::array<uint8_t, 256> of{};
  };
  thread_local Table table;
  if (!table.made || table.dtype != r.dtype || table.scalar != r.scalar_bits) {
    for (uint32_t b = 0; b < 256; ++b) table.of[b] = static_cast<uint8_t>(premul_bits(r, b));
    table = {true, r.dtype, r.scalar_bits, table.of};
  }
  return table.of[x & 0xff];
}

}  // namespace collcheck
