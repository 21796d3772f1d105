#include <bit>
#include <cmath>

#include "tests/mutants/mutant_kit.h"

// Gather and fold (control_gather) whose float16 addition rounds ties away
// from zero instead of to even: a hand-written float -> half conversion that
// adds half a unit and truncates. Each step is at most half a unit off, so
// every result fits the error bound; at p = 2 NCCL's result is one bit
// pattern, and a tie (about a quarter of random pairs) shows it (issue 31).
// It declares no reduction order, so the declared-order check cannot see it.
MK_PLUGIN("mutant: float16 sums round ties away from zero")

namespace {
// float -> half bits, ties away from zero (finite, normal range and below).
uint16_t to_half_ties_away(float f) {
  const _Float16 even = static_cast<_Float16>(f);  // round to nearest, ties to even
  const float e = static_cast<float>(even);
  if (e == f || !std::isfinite(e)) return std::bit_cast<uint16_t>(even);
  // The neighbour of `even` on f's side; a tie picks the larger magnitude.
  const uint16_t eb = std::bit_cast<uint16_t>(even);
  const bool up_in_magnitude = std::fabs(f) > std::fabs(e);
  const uint16_t ob = static_cast<uint16_t>(up_in_magnitude ? eb + 1 : eb - 1);
  const float o = static_cast<float>(std::bit_cast<_Float16>(ob));
  if (std::fabs(o - f) == std::fabs(e - f)) return std::fabs(o) > std::fabs(e) ? ob : eb;
  return eb;
}

void fold(const mk::Ctx& x, void* out, const std::vector<const void*>& all, size_t n) {
  const int op = x.c->op;
  const bool sum = op == COLLCHECK_SUM || op == COLLCHECK_AVG || op == COLLCHECK_PREMULSUM;
  if (x.c->dtype != COLLCHECK_FLOAT16 || !sum) return mk::fold_steps(x, out, all, n);
  auto* acc = static_cast<_Float16*>(out);
  std::memcpy(acc, all[0], n * 2);
  for (size_t k = 1; k < all.size(); ++k) {
    const auto* in = static_cast<const _Float16*>(all[k]);
    for (size_t i = 0; i < n; ++i) {
      const float s = static_cast<float>(acc[i]) + static_cast<float>(in[i]);  // exact in float
      acc[i] = std::bit_cast<_Float16>(to_half_ties_away(s));
    }
  }
}
}  // namespace

extern "C" int collcheck_all_reduce(const collcheck_call* c, const collcheck_links* l) {
  return mk::run(c, l, [&](const mk::Ctx& x) { mk::gather_fold(x, c->recv, fold); });
}
