#include "tests/mutants/mutant_kit.h"

// The all-gather loop runs p - 2 steps instead of p - 1: one chunk on every
// rank keeps a partial sum.
MK_PLUGIN("mutant: missing final all-gather step")
extern "C" int collcheck_all_reduce(const collcheck_call* c, const collcheck_links* l) {
  mk::RingBugs b;
  b.short_allgather = true;
  return mk::run(c, l, [&](const mk::Ctx& x) { mk::ring(x, c->recv, b); });
}
