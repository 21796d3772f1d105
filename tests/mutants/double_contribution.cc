#include "tests/mutants/mutant_kit.h"

// The chunk received in the first reduce-scatter step is combined twice, so
// one rank's contribution counts double.
MK_PLUGIN("mutant: a contribution added twice")
extern "C" int collcheck_all_reduce(const collcheck_call* c, const collcheck_links* l) {
  mk::RingBugs b;
  b.add_twice = true;
  return mk::run(c, l, [&](const mk::Ctx& x) { mk::ring(x, c->recv, b); });
}
