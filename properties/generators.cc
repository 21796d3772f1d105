#include "properties/generators.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>

#include "harness/check/oracle.h"
#include "impl/float_formats.h"

namespace collcheck {

std::vector<size_t> edge_counts(int p, size_t max_count) {
  const size_t P = static_cast<size_t>(p);
  std::vector<size_t> v = {0, 1, 2};
  for (size_t k : {size_t{1}, size_t{2}, size_t{3}, size_t{8}, size_t{64}}) {
    const size_t m = k * P;
    v.insert(v.end(), {m - 1, m, m + 1});
  }
  if (P > 2) v.push_back(P - 2);
  // Powers of two and one either side: typical chunk and pipeline boundaries.
  for (size_t b = 4; b <= max_count; b *= 2) v.insert(v.end(), {b - 1, b, b + 1});
  std::erase_if(v, [&](size_t c) { return c > max_count; });
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

std::vector<size_t> large_counts(DType t, size_t large_bytes) {
  std::vector<size_t> v;
  const size_t es = dtype_size(t);
  for (size_t b = size_t{64} << 10; b <= large_bytes; b *= 2) v.insert(v.end(), {b / es - 1, b / es, b / es + 1});
  return v;
}

namespace {

const double kScalars[] = {3.0, -2.0, 0.5, 1.5, -0.25, 4.0, 1.0};

template <typename T>
const T& pick(const std::vector<T>& v, uint64_t r) {
  return v[r % v.size()];
}

std::vector<DataClass> classes_for(const CaseSpace& s, DType t) {
  std::vector<DataClass> out;
  if (!s.data.empty()) {
    for (DataClass c : s.data)
      if (dtype_is_float(t) || c != DataClass::Wrap) out.push_back(c);
    if (out.empty()) out.push_back(s.data.front());
    return out;
  }
  // Weighted by repetition.
  if (dtype_is_float(t)) {
    return {DataClass::Exact,   DataClass::Exact,   DataClass::Exact,   DataClass::Random,
            DataClass::Random,  DataClass::Random,  DataClass::Extreme, DataClass::Extreme,
            DataClass::Special, DataClass::Special};
  }
  return {DataClass::Random,  DataClass::Random,  DataClass::Random,  DataClass::Extreme, DataClass::Extreme,
          DataClass::Special, DataClass::Special, DataClass::Wrap,    DataClass::Wrap,    DataClass::Wrap};
}

class CaseGen {
 public:
  explicit CaseGen(CaseSpace s) : space_(std::move(s)) {}

  // The ops that may be drawn with dtype t.
  std::vector<RedOp> ops_for(DType t) const {
    std::vector<RedOp> ops;
    for (RedOp op : space_.ops)
      if (std::find(space_.excluded.begin(), space_.excluded.end(), std::pair{t, op}) == space_.excluded.end())
        ops.push_back(op);
    return ops;
  }

  // A further call of a sequence: `prev` with one thing changed (the dtype
  // at the same count or at the same byte size, the op, the count, or the
  // placement), sync or async, on fresh inputs. What stays the same is what
  // a cache keyed on part of the call would wrongly match on.
  template <typename Next>
  Case next_call(const Case& prev, size_t cmax, Next& next) const {
    Case n;
    n.p = prev.p;
    n.dtype = prev.dtype;
    n.op = prev.op;
    n.count = prev.count;
    n.inplace = prev.inplace;
    switch (next() % 5) {
      case 0: n.dtype = pick(space_.dtypes, next()); break;
      case 1: {  // the same bytes in another element size
        std::vector<DType> fit;
        const size_t bytes = prev.count * dtype_size(prev.dtype);
        for (DType t : space_.dtypes)
          if (dtype_size(t) != dtype_size(prev.dtype) && bytes % dtype_size(t) == 0) fit.push_back(t);
        if (!fit.empty()) {
          n.dtype = pick(fit, next());
          n.count = bytes / dtype_size(n.dtype);
        }
        break;
      }
      case 2: n.op = pick(ops_for(n.dtype), next()); break;
      case 3:
        n.count = next() % 2 ? pick(edge_counts(n.p, cmax), next())
                             : next() % (std::min(cmax, std::max<size_t>(2 * prev.count, 2)) + 1);
        break;
      default: n.inplace = !prev.inplace;
    }
    const auto ops = ops_for(n.dtype);
    if (std::find(ops.begin(), ops.end(), n.op) == ops.end()) n.op = pick(ops, next());
    n.scalar = n.op == RedOp::PreMulSum ? kScalars[next() % std::size(kScalars)] : 1.0;
    n.async = next() % 2 == 0;
    n.defer = n.async ? static_cast<int>(next() % 3) : 0;
    n.data = pick(classes_for(space_, n.dtype), next());
    n.seed = next();
    return n;
  }

  rc::Shrinkable<Case> operator()(const rc::Random& random, int size) const {
    rc::Random rnd = random;
    auto next = [&] { return rnd.next(); };
    const int sz = std::clamp(size, 0, rc::kNominalSize);
    Case c;
    // World size: grows with the size; 1 and 2 stay common.
    // Rounded up: with --max-ranks 2 (an MPI world of 2 processes) truncation
    // drew p = 2 only at the largest size, one case in 101.
    // Tiers: 82 % up to 8 ranks, grown by the size; 15 % from 9 to 16; 3 %
    // from 17 to max_ranks (each only where max_ranks reaches it).
    const uint64_t tier = next() % 100;
    if (tier >= 97 && space_.max_ranks > 16) {
      c.p = 17 + static_cast<int>(next() % static_cast<uint64_t>(space_.max_ranks - 16));
    } else if (tier >= 82 && space_.max_ranks > 8) {
      c.p = 9 + static_cast<int>(next() % static_cast<uint64_t>(std::min(space_.max_ranks, 16) - 8));
    } else {
      const int tier_max = std::min(space_.max_ranks, 8);
      const int pmax = 1 + ((tier_max - 1) * std::max(sz, 10) + rc::kNominalSize - 1) / rc::kNominalSize;
      c.p = 1 + static_cast<int>(next() % static_cast<uint64_t>(std::max(1, pmax)));
    }
    c.dtype = pick(space_.dtypes, next());
    c.op = pick(ops_for(c.dtype), next());
    const double scalar = kScalars[next() % std::size(kScalars)];
    c.scalar = c.op == RedOp::PreMulSum ? scalar : 1.0;  // only premulsum has one
    // Count: two in three from the edges, else uniform; both capped by the size.
    const size_t cap = std::max<size_t>(static_cast<size_t>(c.p) + 1,
                                        space_.max_count * static_cast<size_t>(sz) / rc::kNominalSize);
    const size_t cmax = std::min(space_.max_count, cap);
    const std::vector<size_t> large = large_counts(c.dtype, space_.large_bytes);
    if (!large.empty() && next() % 100 == 0) {
      c.count = pick(large, next());
    } else if (next() % 3 != 0) {
      c.count = pick(edge_counts(c.p, cmax), next());
    } else {
      c.count = next() % (cmax + 1);
    }
    c.inplace = next() % 2 == 0;
    c.data = pick(classes_for(space_, c.dtype), next());
    c.seed = next();
    // One case in six (up to 16 ranks) goes on with one to three more calls
    // on the same communicator, each the previous one with one thing changed.
    if (space_.sequences && c.p <= 16 && next() % 6 == 0) {
      const size_t more = 1 + next() % 3;
      for (size_t k = 0; k < more; ++k) c.then.push_back(next_call(k == 0 ? c : c.then.back(), cmax, next));
    }
    // One in ten (2 to 16 ranks) perturbs the schedule.
    if (space_.perturb && c.p >= 2 && c.p <= 16 && next() % 10 == 0) c.perturb = next() | 1;
    // 0: the world's own nodes (threads: one node; MPI: its hosts).
    if (space_.nodes && c.p >= 2) c.ranks_per_node = static_cast<int>(next() % static_cast<uint64_t>(c.p + 1));
    return shrinkable_case(std::move(c));
  }

 private:
  CaseSpace space_;
};

}  // namespace

rc::Gen<Case> gen_case(const CaseSpace& space) { return rc::Gen<Case>(CaseGen(space)); }

// How complicated element bits are: 0 for zero, 1 for one, then (floats) more
// significant bits or a larger exponent, or (integers) a larger magnitude.
// Shrinking only moves to a strictly smaller key, so it cannot cycle.
double simplicity_key(DType t, uint64_t v) {
  if (v == 0) return 0;
  if (v == to_element_bits(t, 1.0)) return 1;
  if (dtype_is_float(t)) {
    const double d = element_to_double(t, v);
    if (!std::isfinite(d)) return 1e9;
    int e = 0;
    double m = std::frexp(std::fabs(d), &e);
    int bits = 0;
    while (m != 0 && bits < 64) {
      m = m * 2 - std::floor(m * 2);
      ++bits;
    }
    return 2 + bits * 4096.0 + std::abs(e) + (d < 0 ? 0.5 : 0) + (d == 0 ? 0 : 1);
  }
  const unsigned nbits = 8 * static_cast<unsigned>(dtype_size(t));
  const uint64_t mask = nbits == 64 ? ~uint64_t{0} : (uint64_t{1} << nbits) - 1;
  if (dtype_is_signed_int(t) && (v >> (nbits - 1)) & 1) return 2 + static_cast<double>((~v + 1) & mask) + 0.5;
  return 2 + static_cast<double>(v);
}

// Simpler values for element bits of dtype t, simplest first.
std::vector<uint64_t> simpler_values(DType t, uint64_t v) {
  std::vector<uint64_t> out;
  const double key = simplicity_key(t, v);
  auto add = [&](uint64_t x) {
    if (simplicity_key(t, x) < key && std::find(out.begin(), out.end(), x) == out.end()) out.push_back(x);
  };
  add(0);
  add(to_element_bits(t, 1.0));
  if (dtype_is_float(t)) {
    const double d = element_to_double(t, v);
    if (std::isfinite(d) && d != 0) {
      add(to_element_bits(t, std::fabs(d)));
      add(to_element_bits(t, std::trunc(d)));
      // Keep the exponent, drop significand bits: the same magnitude, "rounder".
      int e = 0;
      (void)std::frexp(d, &e);
      add(to_element_bits(t, std::ldexp(d < 0 ? -0.5 : 0.5, e)));
    }
  } else if (v != 0) {
    // Halve toward zero (as the signed or unsigned value), and drop the sign.
    const unsigned bits = 8 * static_cast<unsigned>(dtype_size(t));
    const uint64_t mask = bits == 64 ? ~uint64_t{0} : (uint64_t{1} << bits) - 1;
    if (dtype_is_signed_int(t)) {
      const uint64_t sign = uint64_t{1} << (bits - 1);
      const int64_t sv = (v & sign) ? static_cast<int64_t>(v | ~mask) : static_cast<int64_t>(v);
      if (sv < 0 && sv != std::numeric_limits<int64_t>::min()) add(static_cast<uint64_t>(-sv) & mask);
      add(static_cast<uint64_t>(sv / 2) & mask);
    } else {
      add(v / 2);
    }
  }
  return out;
}

}  // namespace collcheck
