#include "tests/mutants/mutant_kit.h"

// Gather and fold (control_gather) whose float16 addition rounds ties away
// from zero instead of to even: a hand-written float -> half conversion that
// adds half a unit and truncates. Each step is at most half a unit off, so
// every result fits the error bound; at p = 2 NCCL's result is one bit
// pattern, and a tie (about a quarter of random pairs) shows it (issue 31).
// It declares no reduction order, so the declared-order check cannot see it.
MK_PLUGIN("mutant: float16 sums round ties away from zero")

namespace {
void fold(const mk::Ctx& x, void* out, const std::vector<const void*>& all, size_t n) {
  const int op = x.c->op;
  const bool sum = op == COLLCHECK_SUM || op == COLLCHECK_AVG || op == COLLCHECK_PREMULSUM;
  if (x.c->dtype != COLLCHECK_FLOAT16 || !sum) return mk::fold_steps(x, out, all, n);
  auto* acc = static_cast<uint16_t*>(out);
  std::memcpy(acc, all[0], n * 2);
  for (size_t k = 1; k < all.size(); ++k) {
    const auto* in = static_cast<const uint16_t*>(all[k]);
    for (size_t i = 0; i < n; ++i) {
      const float s = mk::half_to_float(acc[i]) + mk::half_to_float(in[i]);  // exact in float
      acc[i] = mk::float_to_half(s, /*ties_away=*/true);
    }
  }
}
}  // namespace

extern "C" int collcheck_all_reduce(const collcheck_call* c, const collcheck_links* l) {
  return mk::run(c, l, [&](const mk::Ctx& x) { mk::gather_fold(x, c->recv, fold); });
}
