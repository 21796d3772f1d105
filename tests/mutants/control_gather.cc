#include "tests/mutants/mutant_kit.h"

// The control of the gather-and-fold mutants (f16_sum_ties_away,
// f16_wide_accumulate): every rank gathers every contribution and folds them
// in rank order with the harness's combine, one rounded step at a time. It
// declares no reduction order, as most plugins do not: it is checked against
// the oracle alone, and must pass.
MK_PLUGIN("control: gather every contribution, fold in rank order")
extern "C" int collcheck_all_reduce(const collcheck_call* c, const collcheck_links* l) {
  return mk::run(c, l, [&](const mk::Ctx& x) { mk::gather_fold(x, c->recv); });
}
