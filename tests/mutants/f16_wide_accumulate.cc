#include "tests/mutants/mutant_kit.h"

// Gather and fold (control_gather) that accumulates float16 sums and products
// in float32 and rounds once at the end, as a "more accurate" kernel would. At
// p = 2 the float32 sum or product of two halves is exact, so the result is
// NCCL's; from p = 3 on, about 1 % of random triples give a result that no
// reduction order of rounded half steps produces, yet it is closer to the
// exact value and fits the error bound. The set of every tree's outcome,
// checked at p <= 5, rejects it (issue 31). It declares no reduction order.
MK_PLUGIN("mutant: float16 sums and products accumulated in float32, rounded once")

namespace {
void fold(const mk::Ctx& x, void* out, const std::vector<const void*>& all, size_t n) {
  const int op = x.c->op;
  const bool sum = op == COLLCHECK_SUM || op == COLLCHECK_AVG || op == COLLCHECK_PREMULSUM;
  if (x.c->dtype != COLLCHECK_FLOAT16 || !(sum || op == COLLCHECK_PROD)) return mk::fold_steps(x, out, all, n);
  auto* res = static_cast<uint16_t*>(out);
  for (size_t i = 0; i < n; ++i) {
    float acc = mk::half_to_float(static_cast<const uint16_t*>(all[0])[i]);  // -0 stays -0
    for (size_t k = 1; k < all.size(); ++k) {
      const float v = mk::half_to_float(static_cast<const uint16_t*>(all[k])[i]);
      acc = sum ? acc + v : acc * v;
    }
    res[i] = mk::float_to_half(acc);
  }
}
}  // namespace

extern "C" int collcheck_all_reduce(const collcheck_call* c, const collcheck_links* l) {
  return mk::run(c, l, [&](const mk::Ctx& x) { mk::gather_fold(x, c->recv, fold); });
}
