#include "harness/model/data.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "harness/model/fast_mod.h"
#include "impl/dtype.h"
#include "impl/semantics.h"
#include "impl/float_encode.h"
#include "impl/float_formats.h"

namespace collcheck {

std::string_view data_class_name(DataClass c) {
  switch (c) {
    case DataClass::Exact: return "exact";
    case DataClass::Random: return "random";
    case DataClass::Mixed: return "mixed";
    case DataClass::Extreme: return "extreme";
    case DataClass::Special: return "special";
    case DataClass::Wrap: return "wrap";
  }
  return "?";
}

std::optional<DataClass> parse_data_class(std::string_view s) {
  for (DataClass c : kAllDataClasses)
    if (data_class_name(c) == s) return c;
  return std::nullopt;
}

std::string data_class_choices() {
  std::string out;
  for (DataClass c : kAllDataClasses) {
    if (!out.empty()) out += ", ";
    out += data_class_name(c);
  }
  return out;
}

uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

namespace {

double unit(uint64_t r) { return static_cast<double>(r >> 11) * 0x1.0p-53; }  // [0, 1)

// What exact_float's sums need of the dtype, op and world size (computed once
// per buffer, not per element).
struct ExactSumShape {
  int64_t k_max = 0;  // contributions are k / 4 with |k| <= k_max
  int64_t m = 0;      // ranks with a nonzero contribution per element
  FastMod k_range;    // % (2 k_max + 1)
  // Where filled (tabulate_exact): the bits of (i - k_max) / 4 at i.
  std::vector<uint64_t> bits;
};

ExactSumShape exact_sum_shape(DType t, RedOp op, int nranks) {
  // Integers k in [-K, K] scaled by 1/4, where m nonzero contributors times K
  // (times 4 for premulsum's scalar, |scalar| <= 4) fit in the significand, so
  // every partial sum in any order is an exact integer multiple of 1/4. With
  // few significand bits (fp8) only m of the p ranks contribute a nonzero value
  // to a given element, rotating with the index. avg's 1/p is not exact; the
  // oracle detects whether its products stayed exact.
  const int avail = float_info(t).precision - (op == RedOp::PreMulSum ? 2 : 0);
  const int p_bits = static_cast<int>(std::ceil(std::log2(static_cast<double>(nranks))));
  const int k_bits = std::max(1, avail - p_bits);
  ExactSumShape s;
  s.k_max = (int64_t{1} << k_bits) - 1;
  s.m = std::min<int64_t>(nranks, std::max<int64_t>(1, (int64_t{1} << avail) / s.k_max));
  s.k_range = FastMod(static_cast<uint64_t>(2 * s.k_max + 1));
  return s;
}

// 2^(i - 4) for i in 0..8: a product by an exact power of two, which is what
// std::ldexp gives here (no overflow or underflow at these magnitudes) at a
// fraction of its cost in the input generator's hot loop.
constexpr double kPow2From4[9] = {1.0 / 16, 1.0 / 8, 1.0 / 4, 1.0 / 2, 1.0, 2.0, 4.0, 8.0, 16.0};

using float_encode::float_bits;

// `at` is the element's index modulo nranks (the fill keeps it as it goes).
template <DType T>
inline uint64_t exact_float(RedOp op, int nranks, int rank, size_t at, uint64_t r, const ExactSumShape& shape) {
  if (op == RedOp::Prod) {
    // One rank per element contributes 2^-1, 1 or 2; the rest contribute +-1.
    // The product is then a power of two in [1/2, 2]: exact in every dtype.
    const bool special = static_cast<size_t>(rank) == at;
    const double mag = special ? kPow2From4[3 + r % 3] : 1.0;
    return float_bits<T>((r >> 8) & 1 ? -mag : mag);
  }
  // (rank - index) mod nranks, without a divide.
  size_t slot = static_cast<size_t>(rank) + static_cast<size_t>(nranks) - at;
  if (slot >= static_cast<size_t>(nranks)) slot -= static_cast<size_t>(nranks);
  if (static_cast<int64_t>(slot) >= shape.m) return float_bits<T>(0.0);
  if (!shape.bits.empty()) return shape.bits[shape.k_range(r)];
  const int64_t k = static_cast<int64_t>(shape.k_range(r)) - shape.k_max;
  return float_bits<T>(static_cast<double>(k) * 0.25);
}

// A fill of this many elements or more looks the values k / 4 up (each
// encoded once) instead of encoding each element, where there are at most
// kMaxExactTable of them (k_max <= 2047: the narrow floats; float32 has 2^24).
constexpr int64_t kMaxExactTable = 4095;

template <DType T>
void tabulate_exact(ExactSumShape& shape, size_t count) {
  const int64_t n = 2 * shape.k_max + 1;
  if (shape.k_max == 0 || n > kMaxExactTable || count < 4 * static_cast<uint64_t>(n)) return;
  shape.bits.resize(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) shape.bits[static_cast<size_t>(i)] = float_bits<T>(static_cast<double>(i - shape.k_max) * 0.25);
}

// The bits of the value with magnitude m >= 0 (not a NaN), negative when
// `negative` (0 or 1) is 1. Every encoder rounds to nearest even, which is
// symmetric, so -m's bits are m's with the sign bit set: set here without a
// branch. (A branch on a random sign bit, as (r & 1) ? -m : m compiled, was
// mispredicted half the time: a third of a float fill's time.)
template <DType T>
inline uint64_t signed_bits(uint64_t negative, double m) {
  return float_bits<T>(m) | (negative << (8 * dtype_size(T) - 1));
}

template <DType T>
inline uint64_t random_float(RedOp op, uint64_t r) {
  const double x = unit(r);
  const uint64_t negative = r & 1;
  constexpr bool fp8 = T == DType::Fp8E4M3 || T == DType::Fp8E5M2;
  switch (op) {
    case RedOp::Prod:
      // Near 1, so that the product of 16 ranks stays far from overflow and
      // underflow (fp8 e4m3's normal range is only [2^-6, 448]).
      if constexpr (fp8) return signed_bits<T>(negative, 0.9 + 0.2 * x);
      return signed_bits<T>(negative, 0.8 + 0.45 * x);
    case RedOp::Max:
    case RedOp::Min:
      return signed_bits<T>(negative, (0.5 + x) * kPow2From4[(r >> 1) % 9]);
    default: {
      // fp8 sums of 16 ranks (times premulsum's scalar) must stay below 448.
      const double scale = fp8 ? (op == RedOp::PreMulSum ? 1.0 : 4.0) : 100.0;
      return signed_bits<T>(negative, (0.5 + x) * scale);
    }
  }
}

// `subnormals` is % (2^(precision-1) - 1). The three kinds of magnitude are
// all made, and one picked by index: a branch on random bits was mispredicted
// two times in three.
template <DType T>
inline uint64_t extreme_float(uint64_t r, const FloatInfo& lim, const FastMod& subnormals) {
  const uint64_t negative = r & 1;
  const double x = unit(r);
  const uint64_t k = 1 + subnormals(r >> 8);  // k times the smallest subnormal, k below 2^(precision-1)
  const double mag[3] = {lim.max_finite * (0.5 + 0.5 * x), static_cast<double>(k) * lim.min_subnormal, 1.0 + x};
  return signed_bits<T>(negative, mag[(r >> 1) % 3]);
}

// Each kind of special value is made, and one picked by index: a branch on
// random bits was mispredicted most of the time.
template <DType T>
inline uint64_t special_float(uint64_t r, const FloatInfo& lim) {
  const uint64_t negative = r & 1;
  const double sign = negative ? -1.0 : 1.0;
  uint64_t kind[4];
  {  // a quiet NaN with a random payload (fp8 e4m3 has a single NaN pattern)
    const uint64_t q = float_bits<T>(std::numeric_limits<double>::quiet_NaN());
    const int mant = lim.precision - 1;
    const uint64_t payload = mant > 2 ? ((r >> 8) & ((uint64_t{1} << (mant - 1)) - 1)) : 0;
    const uint64_t sign_bit = negative << (8 * dtype_size(T) - 1);
    kind[0] = T == DType::Fp8E4M3 ? q : (q | payload | sign_bit);
  }
  // Conversions saturate fp8 (as __NV_SATFINITE does), so e5m2's infinity is written as bits.
  if constexpr (T == DType::Fp8E5M2) kind[1] = negative ? 0xfc : 0x7c;
  else kind[1] = float_bits<T>(sign * std::numeric_limits<double>::infinity());
  kind[2] = signed_bits<T>(negative, 0.0);
  // (1 + u) 2^k for k in 0..3: kPow2From4[4 + k] is that 2^k exactly.
  kind[3] = signed_bits<T>(negative, (1.0 + unit(r)) * kPow2From4[4 + (r >> 4) % 4]);
  const uint64_t which = (r >> 1) % 7;  // 0, 1, 2, or one of four for the last kind
  return kind[which < 3 ? which : 3];
}

// Integers of `bits` bits as their two's-complement pattern.
uint64_t int_pattern(DType t, int64_t v) {
  const unsigned bits = 8 * static_cast<unsigned>(dtype_size(t));
  const uint64_t mask = bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
  return static_cast<uint64_t>(v) & mask;
}

uint64_t extreme_int(DType t, uint64_t r) {
  const unsigned bits = 8 * static_cast<unsigned>(dtype_size(t));
  const bool is_signed = dtype_is_signed_int(t);
  const uint64_t top = bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;  // all ones
  const uint64_t small = (r >> 8) % 4;
  // The maximum minus a little, or the minimum plus a little.
  const uint64_t max = is_signed ? top >> 1 : top;
  const uint64_t min = is_signed ? (top >> 1) + 1 : 0;
  return ((r >> 1) & 1) ? max - small : min + small;
}

uint64_t special_int(DType t, uint64_t r) {
  switch ((r >> 1) % 5) {
    case 0: return 0;
    case 1: return 1;
    case 2: return int_pattern(t, -1);
    default: return extreme_int(t, r >> 2) & ~uint64_t{3};  // the minimum or the maximum (low bits cleared)
  }
}

uint64_t wrap_int(DType t, uint64_t r) {
  // Magnitudes of at least a quarter of the range: signed values 01xx... or
  // 10xx... (two of the same sign always overflow), unsigned values 1xx...
  // (any two overflow). Products of nearly any two wrap.
  const unsigned bits = 8 * static_cast<unsigned>(dtype_size(t));
  const uint64_t mask = bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
  const uint64_t top = uint64_t{1} << (bits - 1), next = uint64_t{1} << (bits - 2);
  const uint64_t low = (r >> 8) & (next - 1);
  if (!dtype_is_signed_int(t)) return (top | (r >> 8)) & mask;
  return ((r & 1) ? (top | low) : (next | low)) & mask;
}

}  // namespace

namespace {

// The element's 64 random bits: the same three hashes for every dtype and
// class, the last of them (the index's) shared by every rank.
inline uint64_t rank_bits(int rank, uint64_t index_hash, uint64_t seed) {
  return splitmix64(seed ^ splitmix64(static_cast<uint64_t>(rank) * 0x100000001b3ull ^ index_hash));
}
inline uint64_t element_bits(int rank, size_t index, uint64_t seed) {
  return rank_bits(rank, splitmix64(static_cast<uint64_t>(index)), seed);
}

// What a buffer's elements share: computed once per fill (or kept by
// input_element), not per element.
struct GenShape {
  ExactSumShape sum;
  FloatInfo lim{};      // floats only
  FastMod subnormals;   // floats only: % (2^(precision-1) - 1)
};

// The element made of those bits.
// `at` is index % nranks.
template <DType T>
inline uint64_t element_value(RedOp op, int nranks, int rank, size_t index, size_t at, uint64_t r, DataClass cls,
                              const GenShape& shape) {
  if constexpr (!dtype_is_float(T)) {
    switch (cls) {
      case DataClass::Extreme: return extreme_int(T, r);
      case DataClass::Special: return special_int(T, r);
      case DataClass::Wrap: return wrap_int(T, r);
      default: return r & (dtype_size(T) == 8 ? ~uint64_t{0} : (uint64_t{1} << (8 * dtype_size(T))) - 1);
    }
  } else {
    if (cls == DataClass::Extreme || cls == DataClass::Wrap) return extreme_float<T>(r, shape.lim, shape.subnormals);
    if (cls == DataClass::Special) return special_float<T>(r, shape.lim);
    DataClass c = cls;
    if (c == DataClass::Mixed) c = (index % 2 == 0) ? DataClass::Exact : DataClass::Random;
    return c == DataClass::Exact ? exact_float<T>(op, nranks, rank, at, r, shape.sum) : random_float<T>(op, r);
  }
}

GenShape shape_for(DType t, RedOp op, int nranks, DataClass cls) {
  GenShape g;
  const bool exact_sums = dtype_is_float(t) && op != RedOp::Prod && (cls == DataClass::Exact || cls == DataClass::Mixed);
  if (exact_sums) g.sum = exact_sum_shape(t, op, nranks);
  if (dtype_is_float(t)) {
    g.lim = float_info(t);
    g.subnormals = FastMod((uint64_t{1} << (g.lim.precision - 1)) - 1);
  }
  return g;
}

}  // namespace

uint64_t input_element(DType t, RedOp op, int nranks, int rank, size_t index, uint64_t seed, DataClass cls) {
  // The shape depends on four small values and was a tenth of a large
  // replay's time when made per element: the last one is kept (per thread;
  // nothing blocks in here, so the simulated world's fibers cannot interleave).
  struct Memo {
    DType t;
    RedOp op;
    int nranks;
    DataClass cls;
    GenShape shape;
  };
  thread_local std::optional<Memo> memo;
  if (!memo || memo->t != t || memo->op != op || memo->nranks != nranks || memo->cls != cls)
    memo = Memo{t, op, nranks, cls, shape_for(t, op, nranks, cls)};
  const uint64_t r = element_bits(rank, index, seed);
  return visit_dtype(t, [&](auto tag) {
    const size_t at = nranks > 0 ? index % static_cast<size_t>(nranks) : 0;
    return element_value<dtype_of<decltype(tag)>>(op, nranks, rank, index, at, r, cls, memo->shape);
  });
}

namespace {
// Ranks first_rank, first_rank + 1, ... into outs[0], outs[1], ...: a
// block's index hashes once for all of them, then each rank's hashes, in a
// loop of independent iterations that the CPU overlaps (one element's three
// hashes are a chain of dependent multiplies), then its values, in a loop
// compiled for the one dtype: the same elements as input_element.
void fill_ranks(std::span<void* const> outs, size_t count, DType t, RedOp op, int nranks, int first_rank, uint64_t seed,
                DataClass cls) {
  GenShape shape = shape_for(t, op, nranks, cls);
  visit_dtype(t, [&](auto tag) {
    constexpr DType T = dtype_of<decltype(tag)>;
    if constexpr (dtype_is_float(T)) tabulate_exact<T>(shape.sum, count);
    constexpr size_t kBlock = 256;
    uint64_t index_hash[kBlock], bits[kBlock];
    const auto ranks = static_cast<size_t>(nranks);
    for (size_t i0 = 0; i0 < count; i0 += kBlock) {
      const size_t m = std::min(kBlock, count - i0);
      for (size_t j = 0; j < m; ++j) index_hash[j] = splitmix64(static_cast<uint64_t>(i0 + j));
      const size_t at0 = ranks > 0 ? i0 % ranks : 0;
      for (size_t k = 0; k < outs.size(); ++k) {
        const int rank = first_rank + static_cast<int>(k);
        for (size_t j = 0; j < m; ++j) bits[j] = rank_bits(rank, index_hash[j], seed);
        size_t at = at0;  // (i0 + j) % nranks
        for (size_t j = 0; j < m; ++j) {
          store_element(T, outs[k], i0 + j, element_value<T>(op, nranks, rank, i0 + j, at, bits[j], cls, shape));
          if (++at == ranks) at = 0;
        }
      }
    }
  });
}
}  // namespace

void fill_input(void* out, size_t count, DType t, RedOp op, int nranks, int rank, uint64_t seed, DataClass cls) {
  fill_ranks(std::span<void* const>(&out, 1), count, t, op, nranks, rank, seed, cls);
}

void fill_inputs(std::span<void* const> outs, size_t count, DType t, RedOp op, int nranks, uint64_t seed,
                 DataClass cls) {
  fill_ranks(outs, count, t, op, nranks, 0, seed, cls);
}

}  // namespace collcheck
