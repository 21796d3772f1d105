// The oracle's check of a whole output (check_all_reduce): the full way,
// element by element (expect_element, judge), and the fast paths whose
// verdicts are the full way's: order-free folds a block at a time, and the
// plain float sum decided in double arithmetic (FastSum, with AVX2 lanes).
#include <fmt/format.h>
#include <immintrin.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "harness/check/oracle.h"
#include "harness/check/oracle_detail.h"
#include "impl/element_ops.h"
#include "impl/float_formats.h"
#include "impl/kernels.h"

namespace collcheck {

using oracle_detail::LD;
using oracle_detail::kLdEps;
using oracle_detail::kWiden;
using oracle_detail::lowest_bit_exponent;
using oracle_detail::pow2;

namespace {

// Every binary tree's sum of x[0..p) for p <= 4, in T, with repeats (at p = 4
// each balanced tree twice): 1, 3 or 18 values into out.
template <typename T>
size_t tree_sums(const T* x, int p, T* out) {
  if (p == 1) {
    out[0] = x[0];
    return 1;
  }
  size_t n = 0;
  for (int a = 0; a < p; ++a)
    for (int b = a + 1; b < p; ++b) {
      T rest[4];
      int m = 0;
      rest[m++] = static_cast<T>(x[a] + x[b]);
      for (int k = 0; k < p; ++k)
        if (k != a && k != b) rest[m++] = x[k];
      n += tree_sums(rest, m, out + n);
    }
  return n;
}

// The plain float sum (expect_sum without a pre-multiplier) decided in double
// arithmetic wherever the decision is certain, and left to the full way where
// it is not. The full way computes in long double; here the sums of
// magnitudes are doubles (relative error below p 2^-53) and the exact sum a
// double-double (error below p^2 2^-104 of the magnitudes), so each of its
// three decisions is taken only with a margin of 2^-30 relative to spare:
// whether some order can overflow, whether every order's sum is exact (then
// the fold is compared bit for bit), and whether the result is within the
// bound (there also clear of the full way's own error, `tie_slack`, and with
// a finite sum of magnitudes). Everything else (non-finite inputs, near-ties,
// every failure) goes the full way, so the verdicts are the full way's,
// element for element; only the reported error in bound units
// (max_err_units) is computed in double, from the exact sum (the full way's
// differs by up to its reference error: 2^-8 of a bound unit for float64).
struct FastSum {
  int p = 0;
  double M = 0, ref_err = 0, E = 0, g = 0;
  // What a diff must stay clear of the bound by, relative to the sum of
  // magnitudes: the double-double's error (p^2 2^-104 < 2^-90 for p <= 2^7)
  // and the full way's own reference error (its long double sum is within
  // ref_err * sum_abs of the exact one). The second matters for float64,
  // where ref_err is 2^-10 of the bound; for float32 it is 2^-39.
  double tie_slack = 0;
  int precision = 0;
  static constexpr double kMargin = 0x1p-30;
  FastSum(DType t, int ranks) : p(ranks) {
    const FloatInfo lim = float_info(t);
    M = lim.max_finite;
    precision = lim.precision;
    ref_err = static_cast<double>(2 * static_cast<LD>(p) * kLdEps);
    E = static_cast<double>(static_cast<LD>(steps_error(t, p - 1)) * (1 + kWiden));
    g = 1 + E;
    tie_slack = 0x1p-90 + ref_err * (1 + kMargin);
  }
  // True: the element is right, as the full way would say; `kind` and
  // `units` say how. False: take the full way (it may be right or wrong).
  template <typename T>
  bool check(std::span<const void* const> inputs, const void* result, size_t i, CheckKind& kind, double& units) const {
    using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
    constexpr Bits kExp = static_cast<Bits>(sizeof(T) == 4 ? 0x7f800000ull : 0x7ff0000000000000ull);
    if (p > kOneOfAlwaysRanks && p <= one_of_ranks()) return false;  // enumerated the full way
    double hi = 0, lo = 0, pos = 0, neg = 0;
    int low = std::numeric_limits<int>::max();
    T fold{};
    for (int r = 0; r < p; ++r) {
      const T x = static_cast<const T*>(inputs[static_cast<size_t>(r)])[i];
      if ((std::bit_cast<Bits>(x) & kExp) == kExp) return false;  // Inf or NaN
      const double v = static_cast<double>(x);
      const double t = hi + v;  // TwoSum: t + err == hi + v exactly
      const double vv = t - hi;
      lo += (hi - (t - vv)) + (v - vv);
      hi = t;
      // No branch (random signs mispredict): SSE2's maxsd, which GCC does not
      // pick for std::max on its own.
      pos += _mm_cvtsd_f64(_mm_max_sd(_mm_set_sd(v), _mm_setzero_pd()));
      neg += _mm_cvtsd_f64(_mm_max_sd(_mm_set_sd(-v), _mm_setzero_pd()));
      if (x != 0) low = std::min(low, lowest_bit_exponent(v));
      fold = r == 0 ? x : static_cast<T>(fold + x);
    }
    const double up = 1 + kMargin, down = 1 - kMargin;
    if (pos * (1 + ref_err) * g * up >= M || neg * (1 + ref_err) * g * up >= M) return false;  // may overflow
    const double sum_abs = (pos + neg) * (1 + ref_err);
    // float64: pos and neg each clear of overflow may still add up past the
    // largest double (the full way sums in long double, which does not);
    // an infinite bound would pass anything.
    if (!(sum_abs * up <= std::numeric_limits<double>::max())) return false;
    const T got = static_cast<const T*>(result)[i];
    bool exact;
    if (low == std::numeric_limits<int>::max()) {
      exact = true;  // every input is zero
    } else {
      const double limit = std::min(pow2(precision + low), M);
      if (sum_abs * up <= limit) exact = true;
      else if (sum_abs * down > limit) exact = false;
      else return false;  // too close to tell here
    }
    if (exact) {
      kind = CheckKind::Bitwise;  // every order's sum is exact: the fold, bit for bit
      units = 0;
      return std::bit_cast<Bits>(got) == std::bit_cast<Bits>(fold);
    }
    if (p <= kOneOfAlwaysRanks) {
      // The full way's small set (small_outcome_set): every tree's sum in T,
      // which nothing overflows here. One outcome: Bitwise, else OneOf.
      T x[kOneOfAlwaysRanks];
      for (int r = 0; r < p; ++r) x[r] = static_cast<const T*>(inputs[static_cast<size_t>(r)])[i];
      T sums[18];
      const size_t n = tree_sums(x, p, sums);
      bool found = false, one = true;
      for (size_t k = 0; k < n; ++k) {
        found = found || std::bit_cast<Bits>(sums[k]) == std::bit_cast<Bits>(got);
        one = one && std::bit_cast<Bits>(sums[k]) == std::bit_cast<Bits>(sums[0]);
      }
      kind = one ? CheckKind::Bitwise : CheckKind::OneOf;
      units = 0;
      return found;  // not found: the full way says what was expected
    }
    kind = CheckKind::Bound;
    const double rv = static_cast<double>(got);
    if (!std::isfinite(rv)) return false;
    const double bound = (E + ref_err) * sum_abs;
    const double diff = std::fabs((rv - hi) - lo);
    // The full way measures diff from its long double sum, which may be off
    // the exact sum by ref_err * sum_abs: a result that close to the bound
    // is a near-tie for it, and goes the full way.
    if (!(diff * up + tie_slack * sum_abs <= bound * down)) return false;  // a failure or a near-tie
    units = bound > 0 ? diff / bound : 0;
    return true;
  }

#if defined(__x86_64__)
  // Four 32-bit lanes (the low or high half) widened to 64 bits; a mask stays a mask.
  __attribute__((target("avx2"), always_inline)) static __m256i half(__m256i v32, int h) {
    return _mm256_cvtepi32_epi64(h == 0 ? _mm256_castsi256_si128(v32) : _mm256_extracti128_si256(v32, 1));
  }
  // check<float> for the 8 elements from i, in AVX2 lanes: a bit per element
  // it decides right, with its kind (bit set in `bound`: Bound, else Bitwise)
  // and its units; every other element is check<float>'s. The arithmetic is
  // check()'s, operation for operation (the double-double sum in the same
  // order, the same margins), except that the overflow test uses the sum of
  // magnitudes for both signs, which is never below either: a lane it passes
  // check() passes too, with the same verdict, and the full way's. No FMA:
  // contracting a*b+c would change the roundings the margins allow for.
  __attribute__((target("avx2"))) unsigned check8(std::span<const void* const> inputs, const void* result, size_t i,
                                                  unsigned& bound_lanes, double units[8]) const {
    const __m256i exp_mask = _mm256_set1_epi32(0x7f800000);
    const __m256i frac_mask = _mm256_set1_epi32(0x7fffff);
    const __m256d abs_mask = _mm256_castsi256_pd(_mm256_set1_epi64x(0x7fffffffffffffff));
    __m256d hi[2] = {_mm256_setzero_pd(), _mm256_setzero_pd()}, lo[2] = {hi[0], hi[0]}, sum_abs[2] = {hi[0], hi[0]};
    __m256i bad = _mm256_setzero_si256();
    __m256i low = _mm256_set1_epi32(std::numeric_limits<int>::max());
    __m256 fold = _mm256_setzero_ps();
    for (int r = 0; r < p; ++r) {
      const float* in = static_cast<const float*>(inputs[static_cast<size_t>(r)]) + i;
      const __m256 x = _mm256_loadu_ps(in);
      const __m256i b = _mm256_castps_si256(x);
      const __m256i e = _mm256_and_si256(b, exp_mask);
      bad = _mm256_or_si256(bad, _mm256_cmpeq_epi32(e, exp_mask));  // Inf or NaN
      // lowest_bit_exponent, on the float's bits: the lowest set bit of the
      // significand (exact as a float: a power of two), plus the exponent of
      // the significand's unit; zero lanes leave `low` alone.
      const __m256i ex = _mm256_srli_epi32(e, 23);
      const __m256i normal = _mm256_cmpgt_epi32(ex, _mm256_setzero_si256());
      const __m256i m = _mm256_or_si256(_mm256_and_si256(b, frac_mask), _mm256_and_si256(normal, _mm256_set1_epi32(0x800000)));
      const __m256i bit = _mm256_and_si256(m, _mm256_sub_epi32(_mm256_setzero_si256(), m));
      const __m256i k = _mm256_srli_epi32(_mm256_castps_si256(_mm256_cvtepi32_ps(bit)), 23);  // log2(bit) + 127
      const __m256i le = _mm256_add_epi32(_mm256_max_epi32(ex, _mm256_set1_epi32(1)), _mm256_sub_epi32(k, _mm256_set1_epi32(150 + 127)));
      const __m256i zero = _mm256_cmpeq_epi32(m, _mm256_setzero_si256());
      low = _mm256_min_epi32(low, _mm256_blendv_epi8(le, _mm256_set1_epi32(std::numeric_limits<int>::max()), zero));
      fold = r == 0 ? x : _mm256_add_ps(fold, x);
      for (int h = 0; h < 2; ++h) {
        const __m256d v = _mm256_cvtps_pd(h == 0 ? _mm256_castps256_ps128(x) : _mm256_extractf128_ps(x, 1));
        const __m256d t = _mm256_add_pd(hi[h], v);  // TwoSum, as check() does it
        const __m256d vv = _mm256_sub_pd(t, hi[h]);
        lo[h] = _mm256_add_pd(lo[h], _mm256_add_pd(_mm256_sub_pd(hi[h], _mm256_sub_pd(t, vv)), _mm256_sub_pd(v, vv)));
        hi[h] = t;
        sum_abs[h] = _mm256_add_pd(sum_abs[h], _mm256_and_pd(v, abs_mask));
      }
    }
    const __m256 got = _mm256_loadu_ps(static_cast<const float*>(result) + i);
    const __m256i same_bits = _mm256_cmpeq_epi32(_mm256_castps_si256(got), _mm256_castps_si256(fold));
    const __m256i got_finite = _mm256_xor_si256(_mm256_cmpeq_epi32(_mm256_and_si256(_mm256_castps_si256(got), exp_mask), exp_mask),
                                                _mm256_set1_epi32(-1));
    const __m256i all_zero = _mm256_cmpeq_epi32(low, _mm256_set1_epi32(std::numeric_limits<int>::max()));
    const __m256d up = _mm256_set1_pd(1 + kMargin), down = _mm256_set1_pd(1 - kMargin);
    const __m256d overflow_scale = _mm256_set1_pd((1 + ref_err) * g * (1 + kMargin));
    const __m256d m_v = _mm256_set1_pd(M);
    unsigned ok = 0;
    bound_lanes = 0;
    for (int h = 0; h < 2; ++h) {
      const __m256d sa = _mm256_mul_pd(sum_abs[h], _mm256_set1_pd(1 + ref_err));
      // 2^(precision + low), by its exponent field (the all-zero lanes are exact whatever it is).
      const __m256i lim_bits = _mm256_slli_epi64(_mm256_add_epi64(half(low, h), _mm256_set1_epi64x(precision + 1023)), 52);
      const __m256d limit = _mm256_min_pd(_mm256_castsi256_pd(lim_bits), m_v);
      const __m256d exact = _mm256_or_pd(_mm256_castsi256_pd(half(all_zero, h)), _mm256_cmp_pd(_mm256_mul_pd(sa, up), limit, _CMP_LE_OQ));
      const __m256d inexact = _mm256_andnot_pd(exact, _mm256_cmp_pd(_mm256_mul_pd(sa, down), limit, _CMP_GT_OQ));
      const __m256d fine = _mm256_andnot_pd(
          _mm256_castsi256_pd(half(bad, h)),
          _mm256_cmp_pd(_mm256_mul_pd(sum_abs[h], overflow_scale), m_v, _CMP_LT_OQ));  // no Inf/NaN in, no overflow
      const __m256d rv = _mm256_cvtps_pd(h == 0 ? _mm256_castps256_ps128(got) : _mm256_extractf128_ps(got, 1));
      const __m256d bound = _mm256_mul_pd(_mm256_set1_pd(E + ref_err), sa);
      const __m256d diff = _mm256_and_pd(_mm256_sub_pd(_mm256_sub_pd(rv, hi[h]), lo[h]), abs_mask);
      const __m256d within = _mm256_cmp_pd(_mm256_add_pd(_mm256_mul_pd(diff, up), _mm256_mul_pd(_mm256_set1_pd(tie_slack), sa)),
                                           _mm256_mul_pd(bound, down), _CMP_LE_OQ);
      const __m256d bound_ok = _mm256_and_pd(_mm256_and_pd(inexact, within), _mm256_castsi256_pd(half(got_finite, h)));
      const __m256d exact_ok = _mm256_and_pd(exact, _mm256_castsi256_pd(half(same_bits, h)));
      const unsigned ok_h = static_cast<unsigned>(_mm256_movemask_pd(_mm256_and_pd(fine, _mm256_or_pd(exact_ok, bound_ok))));
      const unsigned bound_h = static_cast<unsigned>(_mm256_movemask_pd(bound_ok)) & ok_h;
      ok |= ok_h << (4 * h);
      bound_lanes |= bound_h << (4 * h);
      if (bound_h) {
        alignas(32) double d[4], bd[4];
        _mm256_store_pd(d, diff);
        _mm256_store_pd(bd, bound);
        for (int l = 0; l < 4; ++l)
          if (bound_h >> l & 1) units[4 * h + l] = bd[l] > 0 ? d[l] / bd[l] : 0;
      }
    }
    return ok;
  }
#endif
};

}  // namespace

namespace {

// One element the full way: its expectation from every rank's input, then the
// verdict, counted into s. `values` is scratch of inputs.size().
void judge_element(const Reduction& red, std::span<const void* const> inputs, const void* result, size_t i,
                   CheckSummary& s, std::vector<uint64_t>& values) {
  for (size_t r = 0; r < inputs.size(); ++r) values[r] = load_element(red.dtype, inputs[r], i);
  const Expectation e = expect_element(red, values);
  const uint64_t got = load_element(red.dtype, result, i);
  const Verdict v = judge(red, e, got);
  ++s.checked;
  ++s.by_kind[static_cast<size_t>(e.kind)];
  if (e.kind == CheckKind::Bound && std::isfinite(v.err_units)) s.max_err_units = std::max(s.max_err_units, v.err_units);
  if (!v.ok) {
    if (!std::isfinite(v.err_units)) s.max_err_units = v.err_units;
    if (!s.first_wrong) {
      s.first_wrong = i;
      std::string ins;
      for (size_t r = 0; r < values.size(); ++r)
        ins += fmt::format("{}rank {}: {}", r ? ", " : "", r, format_element(red.dtype, values[r]));
      s.first_wrong_detail = fmt::format("element {}: expected {}, got {}; inputs: {}", i, e.describe(red.dtype),
                                         format_element(red.dtype, got), ins);
    }
    ++s.wrong;
  }
}

}  // namespace

CheckSummary check_all_reduce_elementwise(const Reduction& red, std::span<const void* const> inputs,
                                          const void* result, size_t count) {
  CheckSummary s;
  std::vector<uint64_t> values(inputs.size());
  for (size_t i = 0; i < count; ++i) judge_element(red, inputs, result, i, s, values);
  return s;
}

CheckSummary check_all_reduce(const Reduction& red, std::span<const void* const> inputs, const void* result,
                              size_t count) {
  CheckSummary s;
  std::vector<uint64_t> values(inputs.size());
  const auto judge_one = [&](size_t i) { judge_element(red, inputs, result, i, s, values); };
  const bool plain_sum = red.combine == Combine::Sum && !red.premul && !red.postdiv &&
                         (red.dtype == DType::Float32 || red.dtype == DType::Float64);
  if (plain_sum && !inputs.empty()) {
    const FastSum fast(red.dtype, static_cast<int>(inputs.size()));
    size_t i = 0;
#if defined(__x86_64__)
    // float32 eight at a time where the CPU has AVX2; an element the vector
    // lanes do not decide goes on to check() and the full way, as below.
    // (p <= 4 takes the exact set of outcomes, which check() enumerates.)
    if (red.dtype == DType::Float32 && inputs.size() > static_cast<size_t>(std::max(kOneOfAlwaysRanks, one_of_ranks())) &&
        __builtin_cpu_supports("avx2")) {
      for (; i + 8 <= count; i += 8) {
        unsigned bound_lanes = 0;
        double units[8];
        const unsigned ok = fast.check8(inputs, result, i, bound_lanes, units);
        for (size_t l = 0; l < 8; ++l) {
          if (ok >> l & 1) {
            ++s.checked;
            if (bound_lanes >> l & 1) {
              ++s.by_kind[static_cast<size_t>(CheckKind::Bound)];
              s.max_err_units = std::max(s.max_err_units, units[l]);
            } else {
              ++s.by_kind[static_cast<size_t>(CheckKind::Bitwise)];
            }
            continue;
          }
          CheckKind kind = CheckKind::Bitwise;
          double u = 0;
          if (!fast.check<float>(inputs, result, i + l, kind, u)) {
            judge_one(i + l);
            continue;
          }
          ++s.checked;
          ++s.by_kind[static_cast<size_t>(kind)];
          if (kind == CheckKind::Bound) s.max_err_units = std::max(s.max_err_units, u);
        }
      }
    }
#endif
    for (; i < count; ++i) {
      CheckKind kind = CheckKind::Bitwise;
      double units = 0;
      const bool ok = red.dtype == DType::Float32 ? fast.check<float>(inputs, result, i, kind, units)
                                                  : fast.check<double>(inputs, result, i, kind, units);
      if (!ok) {
        judge_one(i);
        continue;
      }
      ++s.checked;
      ++s.by_kind[static_cast<size_t>(kind)];
      if (kind == CheckKind::Bound) s.max_err_units = std::max(s.max_err_units, units);
    }
    return s;
  }
  if (!order_free(red) || inputs.empty()) {
    for (size_t i = 0; i < count; ++i) judge_one(i);
    return s;
  }
  // Integers, max and min: the expectation is the rank-order fold, bit for
  // bit, whatever order the implementation used (expect_element's Bitwise
  // case). The fold runs a block at a time with the reduce kernels (bit-
  // identical to the element steps), and an element whose bits differ takes
  // the full way: a NaN matches any NaN, and a wrong one is reported as ever.
  const size_t sz = dtype_size(red.dtype);
  constexpr size_t kBlock = 8192;
  std::vector<std::byte> acc(kBlock * sz), next(red.premul ? kBlock * sz : 0);
  const auto at = [sz](const void* base, size_t i) { return static_cast<const std::byte*>(base) + i * sz; };
  for (size_t b0 = 0; b0 < count; b0 += kBlock) {
    const size_t n = std::min(kBlock, count - b0);
    apply_pre(red, acc.data(), at(inputs[0], b0), n);
    for (size_t r = 1; r < inputs.size(); ++r) {
      const void* y = at(inputs[r], b0);
      if (red.premul) {
        apply_pre(red, next.data(), y, n);
        y = next.data();
      }
      reduce(acc.data(), y, n, red.dtype, red.combine);
    }
    apply_post(red, acc.data(), n);
    const std::byte* got = at(result, b0);
    if (std::memcmp(acc.data(), got, n * sz) == 0) {
      s.checked += n;
      s.by_kind[static_cast<size_t>(CheckKind::Bitwise)] += n;
      continue;
    }
    for (size_t i = 0; i < n; ++i) {
      if (std::memcmp(acc.data() + i * sz, got + i * sz, sz) == 0) {
        ++s.checked;
        ++s.by_kind[static_cast<size_t>(CheckKind::Bitwise)];
      } else {
        judge_one(b0 + i);
      }
    }
  }
  return s;
}

}  // namespace collcheck
