// The oracle's enumeration of every reduction order's outcome (where the set
// is small, or where some order overflows, saturates or underflows): dynamic
// programming over the subsets of the ranks, a hash table per set for every
// dtype and 256-bit sets for the 1-byte ones; the per-call budget of
// combining steps (EnumerationBudget) and the one-of ranks.
#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <vector>

#include "harness/check/oracle.h"
#include "harness/check/oracle_detail.h"
#include "impl/element_ops.h"
#include "impl/kernels.h"

namespace collcheck {

namespace oracle_detail {

// Whether element bits of type T are a NaN (integers never are).
template <typename T>
bool is_nan_of(uint64_t b) {
  using Ops = ElementOps<T>;
  if constexpr (std::is_integral_v<T>) {
    return false;
  } else if constexpr (std::is_floating_point_v<T>) {
    return std::isnan(Ops::from_bits(b));
  } else {
    return std::isnan(Ops::w(Ops::from_bits(b)));  // float16, bfloat16, fp8: widened exactly
  }
}

// Every outcome of combining `ys` in any binary-tree order (dynamic programming
// over subsets). False if a set grows past `cap` or the work past `budget`
// combining steps: the caller then uses its interval, which is sound at any p.
// The combine is chosen once per call, not per step, and a new outcome is
// found in a hash table, not by a search of the set.
template <typename T, Combine C>
bool all_order_outcomes_of(std::span<const uint64_t> ys, uint64_t nan, std::vector<uint64_t>& out, size_t cap,
                           size_t budget, size_t& work) {
  using Ops = ElementOps<T>;
  const size_t p = ys.size();
  // The sets of every subset, flat: set `mask` holds size[mask] outcomes from
  // slot mask * (cap + 1) (one slot of room past the cap, to notice it).
  thread_local std::vector<uint64_t> bits;
  thread_local std::vector<uint32_t> size;
  const size_t stride = cap + 1, n = size_t{1} << p;
  if (bits.size() < n * stride) bits.resize(n * stride);
  size.assign(n, 0);
  // Membership in the set being built: an open-addressed table at least
  // twice the cap, whose slots count as empty unless stamped with the set's
  // generation (no clearing between sets).
  thread_local std::vector<uint64_t> keys;
  thread_local std::vector<uint32_t> stamp;
  thread_local uint32_t generation = 0;
  const int shift = 64 - static_cast<int>(std::bit_width(2 * stride));
  const size_t slots = size_t{1} << (64 - shift);
  if (stamp.size() < slots) {
    keys.resize(slots);
    stamp.assign(slots, 0);
    generation = 0;
  }
  const size_t slot_mask = slots - 1;
  auto canon = [&](uint64_t b) { return is_nan_of<T>(b) ? nan : b; };
  work = 0;
  for (size_t i = 0; i < p; ++i) {
    const size_t at = (size_t{1} << i) * stride;
    bits[at] = canon(ys[i]);
    size[size_t{1} << i] = 1;
  }
  for (size_t mask = 3; mask < n; ++mask) {
    if ((mask & (mask - 1)) == 0) continue;  // one rank: set above
    uint64_t* s = &bits[mask * stride];
    uint32_t len = 0;
    if (++generation == 0) {  // wrapped: every stamp is stale again
      std::fill(stamp.begin(), stamp.end(), 0);
      generation = 1;
    }
    const size_t low = mask & (~mask + 1), rest = mask ^ low;
    // Each unordered split once: A holds the lowest rank, B the others (not
    // empty): A = low + a proper submask of the rest.
    for (size_t sub = (rest - 1) & rest;; sub = (sub - 1) & rest) {
      const size_t a = sub | low, b = mask ^ a;
      work += size_t{size[a]} * size[b];
      if (work > budget) return false;
      const uint64_t* sa = &bits[a * stride];
      const uint64_t* sb = &bits[b * stride];
      for (uint32_t ia = 0; ia < size[a]; ++ia)
        for (uint32_t ib = 0; ib < size[b]; ++ib) {
          const uint64_t r = canon(Ops::to_bits(combine_elements(C, Ops::from_bits(sa[ia]), Ops::from_bits(sb[ib]))));
          size_t h = static_cast<size_t>((r * 0x9e3779b97f4a7c15ull) >> shift);
          while (stamp[h] == generation && keys[h] != r) h = (h + 1) & slot_mask;
          if (stamp[h] != generation) {  // new
            if (len == cap) return false;
            stamp[h] = generation;
            keys[h] = r;
            s[len++] = r;
          }
        }
      if (sub == 0) break;
    }
    size[mask] = len;
  }
  out.assign(&bits[(n - 1) * stride], &bits[(n - 1) * stride] + size[n - 1]);
  std::sort(out.begin(), out.end());
  return true;
}

// Every combining step of two fp8 values, canonicalised: one load. The
// reduce kernels' table of every pair's step (fp8_step_table), with each NaN
// made `nan`; made once per dtype and combine (64 KiB), on first use.
template <typename T, Combine C>
const std::array<uint8_t, 65536>& byte_steps(uint64_t nan) {
  static const auto table = [nan] {
    const uint8_t* steps = fp8_step_table(dtype_of<T>, C);
    std::array<uint8_t, 65536> t{};
    for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<uint8_t>(is_nan_of<T>(steps[i]) ? nan : steps[i]);
    return t;
  }();
  return table;
}

// all_order_outcomes_of for the 1-byte dtypes (fp8), with the same subsets,
// splits, work and cap, so the same answer and the same failures: a set is a
// 256-bit set of values, and a step a load from byte_steps. (The hash table
// of the general way spent more than the fp8 arithmetic it looked up.)
template <typename T, Combine C>
[[gnu::always_inline]] inline bool bytes_outcomes(std::span<const uint64_t> ys, uint64_t nan,
                                                  std::vector<uint64_t>& out, size_t cap, size_t budget,
                                                  size_t& work) {
  using Set = std::array<uint64_t, 4>;
  const auto set_size = [](const Set& s) {
    return static_cast<size_t>(std::popcount(s[0]) + std::popcount(s[1]) + std::popcount(s[2]) + std::popcount(s[3]));
  };
  const auto& step = byte_steps<T, C>(nan);
  const size_t p = ys.size(), n = size_t{1} << p;
  thread_local std::vector<Set> sets;
  thread_local std::vector<uint32_t> size;
  if (sets.size() < n) sets.resize(n);
  size.assign(n, 0);
  const auto canon = [&](uint64_t b) { return is_nan_of<T>(b) ? nan : b; };
  work = 0;
  for (size_t i = 0; i < p; ++i) {
    const uint64_t v = canon(ys[i]) & 0xff;
    Set& s = sets[size_t{1} << i];
    s = {};
    s[v >> 6] |= uint64_t{1} << (v & 63);
    size[size_t{1} << i] = 1;
  }
  for (size_t mask = 3; mask < n; ++mask) {
    if ((mask & (mask - 1)) == 0) continue;  // one rank: set above
    Set acc{};
    const size_t low = mask & (~mask + 1), rest = mask ^ low;
    for (size_t sub = (rest - 1) & rest;; sub = (sub - 1) & rest) {
      const size_t a = sub | low, b = mask ^ a;
      work += size_t{size[a]} * size[b];
      if (work > budget) return false;
      const Set& sa = sets[a];
      const Set& sb = sets[b];
      for (size_t wa = 0; wa < 4; ++wa)
        for (uint64_t ma = sa[wa]; ma != 0; ma &= ma - 1) {
          const uint8_t* row = &step[(wa * 64 + static_cast<size_t>(std::countr_zero(ma))) << 8];
          for (size_t wb = 0; wb < 4; ++wb)
            for (uint64_t mb = sb[wb]; mb != 0; mb &= mb - 1) {
              const uint8_t r = row[wb * 64 + static_cast<size_t>(std::countr_zero(mb))];
              acc[r >> 6] |= uint64_t{1} << (r & 63);
            }
        }
      // Where the general way finds its (cap + 1)-th outcome: in this split.
      // No set of 1-byte values outgrows a cap of 256 (the oracle's), so only
      // a smaller cap counts here, split by split.
      if (cap < 256 && set_size(acc) > cap) return false;
      if (sub == 0) break;
    }
    sets[mask] = acc;
    size[mask] = static_cast<uint32_t>(set_size(acc));
  }
  out.clear();
  const Set& all = sets[n - 1];
  for (size_t w = 0; w < 4; ++w)
    for (uint64_t m = all[w]; m != 0; m &= m - 1) out.push_back(w * 64 + static_cast<uint64_t>(std::countr_zero(m)));
  return true;  // in increasing order, as the general way sorts them
}

#if defined(__x86_64__)
// The same, compiled with the POPCNT instruction (a set's size is four
// popcounts, per subset): without it, each is a call into libgcc, which took
// a quarter of a 5-rank fp8 check's time.
template <typename T, Combine C>
[[gnu::target("popcnt")]] bool bytes_outcomes_popcnt(std::span<const uint64_t> ys, uint64_t nan,
                                                     std::vector<uint64_t>& out, size_t cap, size_t budget,
                                                     size_t& work) {
  return bytes_outcomes<T, C>(ys, nan, out, cap, budget, work);
}
#endif

template <typename T, Combine C>
bool all_order_outcomes_of_bytes(std::span<const uint64_t> ys, uint64_t nan, std::vector<uint64_t>& out, size_t cap,
                                 size_t budget, size_t& work) {
#if defined(__x86_64__)
  static const bool popcnt = __builtin_cpu_supports("popcnt");
  if (popcnt) return bytes_outcomes_popcnt<T, C>(ys, nan, out, cap, budget, work);
#endif
  return bytes_outcomes<T, C>(ys, nan, out, cap, budget, work);
}

// all_order_outcomes_of at p <= 2, without its tables: one outcome, after
// one step at p = 2 (the general way's work and budget test).
template <typename T>
bool one_or_two_outcomes(Combine c, std::span<const uint64_t> ys, uint64_t nan, std::vector<uint64_t>& out,
                         size_t cap, size_t budget, size_t& work) {
  using Ops = ElementOps<T>;
  const auto canon = [&](uint64_t b) { return is_nan_of<T>(b) ? nan : b; };
  work = ys.size() == 2 ? 1 : 0;
  if (work > budget || (work == 1 && cap == 0)) return false;
  out.assign(1, ys.size() == 2 ? canon(Ops::to_bits(combine_elements(c, Ops::from_bits(canon(ys[0])),
                                                                     Ops::from_bits(canon(ys[1])))))
                               : canon(ys[0]));
  return true;
}

namespace {
// `general`: the hash-table way for every dtype (for the tests that hold the
// 1-byte way to it).
bool outcomes_with_work(const Reduction& red, std::span<const uint64_t> ys, std::vector<uint64_t>& out, size_t cap,
                        size_t budget, size_t& work, bool general = false) {
  const uint64_t nan = canonical_nan(red.dtype);
  return visit_dtype(red.dtype, [&](auto tag) -> bool {
    using T = decltype(tag);
    if (ys.size() <= 2 && !general) return one_or_two_outcomes<T>(red.combine, ys, nan, out, cap, budget, work);
    if constexpr (std::is_same_v<T, e4m3_t> || std::is_same_v<T, e5m2_t>) {  // fp8_step_table's dtypes
      if (!general) {
        switch (red.combine) {
          case Combine::Sum: return all_order_outcomes_of_bytes<T, Combine::Sum>(ys, nan, out, cap, budget, work);
          case Combine::Prod: return all_order_outcomes_of_bytes<T, Combine::Prod>(ys, nan, out, cap, budget, work);
          case Combine::Max: return all_order_outcomes_of_bytes<T, Combine::Max>(ys, nan, out, cap, budget, work);
          case Combine::Min: return all_order_outcomes_of_bytes<T, Combine::Min>(ys, nan, out, cap, budget, work);
        }
      }
    }
    switch (red.combine) {
      case Combine::Sum: return all_order_outcomes_of<T, Combine::Sum>(ys, nan, out, cap, budget, work);
      case Combine::Prod: return all_order_outcomes_of<T, Combine::Prod>(ys, nan, out, cap, budget, work);
      case Combine::Max: return all_order_outcomes_of<T, Combine::Max>(ys, nan, out, cap, budget, work);
      case Combine::Min: return all_order_outcomes_of<T, Combine::Min>(ys, nan, out, cap, budget, work);
    }
    return false;
  });
}

// What is left of the thread's EnumerationBudget (null: none lives).
thread_local size_t* t_enumeration_left = nullptr;
thread_local size_t t_enumeration_consults = 0;  // enumeration_budget_consults()
}  // namespace

bool all_order_outcomes(const Reduction& red, std::span<const uint64_t> ys, std::vector<uint64_t>& out, size_t cap,
                        size_t budget) {
  size_t work = 0;
  return outcomes_with_work(red, ys, out, cap, budget, work);
}
bool all_order_outcomes_with_work(const Reduction& red, std::span<const uint64_t> ys, std::vector<uint64_t>& out,
                                  size_t cap, size_t budget, size_t& work, bool general) {
  return outcomes_with_work(red, ys, out, cap, budget, work, general);
}

bool special_value_outcomes(const Reduction& red, std::span<const uint64_t> ys, std::vector<uint64_t>& out) {
  constexpr size_t kCap = 64, kSteps = 60000;
  ++t_enumeration_consults;
  size_t* left = t_enumeration_left;
  if (left && *left == 0) return false;  // spent: the caller's interval, without setting up an enumeration
  size_t work = 0;
  const bool ok = outcomes_with_work(red, ys, out, kCap, left ? std::min(kSteps, *left) : kSteps, work);
  if (left) *left -= std::min(*left, work);
  return ok;
}

// Where the set of every order's outcome is small, the oracle accepts exactly
// that set (issue 31) instead of an error bound: at p = 2 the one right result
// round(y0 op y1), Bitwise; at p = 3 and 4 the 3 and 15 reduction trees (up to
// commutativity), OneOf. Above, up to one_of_ranks() (5 by default), the same
// wherever the set has at most 256 outcomes within 200,000 combining steps.
// Elsewhere nullopt: the Bound.
std::atomic<int> g_one_of_ranks{kOneOfDefaultRanks};
std::optional<std::vector<uint64_t>> small_outcome_set(const Reduction& red, std::span<const uint64_t> ys) {
  const size_t p = ys.size();
  if (p < 2 || p > static_cast<size_t>(std::max(kOneOfAlwaysRanks, one_of_ranks()))) return std::nullopt;
  std::vector<uint64_t> out;
  if (!all_order_outcomes(red, ys, out, 256, 200000)) return std::nullopt;
  return out;
}

}  // namespace oracle_detail

using namespace oracle_detail;

EnumerationBudget::EnumerationBudget(size_t steps) : left_(steps), outer_(t_enumeration_left) {
  t_enumeration_left = &left_;
}
EnumerationBudget::~EnumerationBudget() { t_enumeration_left = outer_; }
size_t enumeration_budget_consults() { return t_enumeration_consults; }

void set_one_of_ranks(int n) {
  if (n < kOneOfAlwaysRanks || n > kOneOfMaxRanks)
    throw std::invalid_argument(fmt::format("one-of ranks must be {} to {}, got {}", kOneOfAlwaysRanks, kOneOfMaxRanks, n));
  g_one_of_ranks = n;
}
int one_of_ranks() { return g_one_of_ranks.load(std::memory_order_relaxed); }

}  // namespace collcheck
