// The oracle's positive magnitudes with their exponent kept apart (the model
// of a product, and of a sum's bounds). Not for use outside the oracle.
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <algorithm>

#include "harness/check/oracle_detail.h"

namespace collcheck::oracle_detail {

// A positive magnitude m * 2^e with its exponent kept apart.
struct Scaled {
  LD m = 0.5L;  // in [0.5, 1)
  int64_t e = 1;
  // x87's 80-bit long double: a 64-bit significand with its leading bit
  // explicit, then the sign and a 15-bit exponent (bias 16383) at byte 8.
  // frexp and ldexp of a positive normal value are then a swap of that
  // exponent field: exact, and without the libm calls, which were a tenth
  // of verify's time. Anything else takes the libm way.
  static constexpr bool kX87 = std::numeric_limits<LD>::digits == 64 && std::numeric_limits<LD>::max_exponent == 16384;
  static constexpr int kHalfExp = 16382;  // the field of a value in [0.5, 1)
  static uint16_t exp_field(const LD& v) {
    uint16_t se;
    std::memcpy(&se, reinterpret_cast<const char*>(&v) + 8, 2);
    return se;
  }
  static LD with_exp_field(LD v, uint16_t se) {
    std::memcpy(reinterpret_cast<char*>(&v) + 8, &se, 2);
    return v;
  }
  static Scaled of(LD v) {
    if constexpr (kX87) {
      const uint16_t se = exp_field(v);
      if (se != 0 && se < 0x7fff) return {with_exp_field(v, kHalfExp), static_cast<int64_t>(se) - kHalfExp};
    }
    int ex = 0;
    const LD f = std::frexp(v, &ex);
    return {f, ex};
  }
  friend Scaled operator*(Scaled a, Scaled b) {
    // a.m * b.m is in [0.25, 1) (its rounding cannot reach 1: the largest
    // m squared rounds to 1 - 2^-63), so frexp's normalization is at most
    // one doubling, which is exact: the same result without the libm call.
    LD f = a.m * b.m;
    int64_t e = a.e + b.e;
    if (f < 0.5L) {
      f *= 2;
      e -= 1;
    }
    return {f, e};
  }
  friend bool operator<(Scaled a, Scaled b) { return a.e != b.e ? a.e < b.e : a.m < b.m; }
  LD value() const {  // saturating at long double's range (far beyond every dtype's)
    if (e > 16000) return std::numeric_limits<LD>::infinity();
    if (e < -16000) return 0;
    if constexpr (kX87) {
      if (exp_field(m) == kHalfExp) return with_exp_field(m, static_cast<uint16_t>(kHalfExp + e));
    }
    return std::ldexp(m, static_cast<int>(e));
  }
};

// Three products of positive finite magnitudes side by side, factor by
// factor: of every factor, of those below 1, and of those above 1 (a factor
// a product does not take counts as 1, exactly). The exponents are summed
// apart and the significands (in [0.5, 1)) multiply in long double,
// renormalized once every kRun factors, not at each. Their product over kRun
// factors is at least 2^-kRun, far inside long double's range, and a rounding
// does not change when its operands are scaled by powers of two, so every
// step rounds as Scaled's operator* would: all(), below() and above() are the
// Scaled that multiplying the same factors in the same order gives, bit for
// bit, at a fraction of the cost (no exponent field is read or written per
// factor). The three share one count to the renormalization, and their
// significands are locals of times' caller's loop (in x87 registers), not
// members read and written through memory at each factor.
class ScaledProducts {
 public:
  static constexpr uint32_t kRun = 4096;
  // v = f * 2^e with f in [0.5, 1): from v's bits where it is a normal double.
  static void split(double v, double& f, int64_t& e) {
    uint64_t bits;
    std::memcpy(&bits, &v, 8);
    const auto field = static_cast<int64_t>((bits >> 52) & 0x7ff);
    if (field != 0 && field != 0x7ff) {
      bits = (bits & ((uint64_t{1} << 52) - 1)) | (uint64_t{1022} << 52);
      std::memcpy(&f, &bits, 8);
      e = field - 1022;
      return;
    }
    int ex = 0;
    f = std::frexp(v, &ex);
    e = ex;
  }
  // The products of `a`'s magnitudes (positive, finite), in a's order.
  static ScaledProducts of(std::span<const double> a) {
    LD all = 1, below = 1, above = 1;
    int64_t e_all = 0, e_below = 0, e_above = 0;
    // A block's factors are split first, each product's (f, or 1 where that
    // product does not take it) into an array of its own; then the products
    // multiply those, one product at a time. With two or three products in
    // one loop GCC kept all but one in memory, and an 80-bit store's reload
    // stalls at every factor: the loop of three took five times a multiply's
    // latency a factor, where one at a time takes three.
    constexpr size_t kBlock = 256;  // divides kRun
    double f_all[kBlock], f_below[kBlock], f_above[kBlock];
    for (size_t start = 0; start < a.size(); start += kBlock) {
      if (start > 0 && start % kRun == 0) {
        renormalize(all, e_all);
        renormalize(below, e_below);
        renormalize(above, e_above);
      }
      const size_t n = std::min(kBlock, a.size() - start);
      for (size_t k = 0; k < n; ++k) {
        const double v = a[start + k];
        double f;
        int64_t fe;
        split(v, f, fe);
        // A factor is taken or not by masks, not a branch (on random data
        // near 1, the branches on v < 1 and v > 1 were mispredicted half the
        // time: most of a p = 62 product case's model).
        const uint64_t mb = uint64_t{0} - static_cast<uint64_t>(v < 1), ma = uint64_t{0} - static_cast<uint64_t>(v > 1);
        f_all[k] = f;
        f_below[k] = pick(f, mb);
        f_above[k] = pick(f, ma);
        e_all += fe;
        e_below += static_cast<int64_t>(static_cast<uint64_t>(fe) & mb);
        e_above += static_cast<int64_t>(static_cast<uint64_t>(fe) & ma);
      }
      all = times(all, f_all, n);
      below = times(below, f_below, n);
      above = times(above, f_above, n);
    }
    ScaledProducts out;
    out.all_ = scaled(all, e_all);
    out.below_ = scaled(below, e_below);
    out.above_ = scaled(above, e_above);
    return out;
  }
  const Scaled& all() const { return all_; }
  const Scaled& below() const { return below_; }
  const Scaled& above() const { return above_; }

 private:
  // m times f[0], f[1], ..., f[n-1], in that order, in long double: a loop
  // of one product, which GCC keeps on the x87 stack.
  [[gnu::noinline]] static LD times(LD m, const double* f, size_t n) {
    for (size_t k = 0; k < n; ++k) m *= static_cast<LD>(f[k]);
    return m;
  }
  // f where the mask is all ones, else 1.
  static double pick(double f, uint64_t mask) {
    const double kOne = 1.0;
    uint64_t fb, one;
    std::memcpy(&fb, &f, 8);
    std::memcpy(&one, &kOne, 8);
    fb = (fb & mask) | (one & ~mask);
    double g;
    std::memcpy(&g, &fb, 8);
    return g;
  }
  static Scaled scaled(LD m, int64_t e) {
    Scaled s = Scaled::of(m);
    s.e += e;
    return s;
  }
  static void renormalize(LD& m, int64_t& e) {
    const Scaled s = scaled(m, e);
    m = s.m;
    e = s.e;
  }
  Scaled all_, below_, above_;
};

}  // namespace collcheck::oracle_detail
